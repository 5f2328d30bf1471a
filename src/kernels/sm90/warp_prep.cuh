// The warp preparation: the single pass's (single_pass_kernel.cuh; docs/design.md §3.5). It computes
// the chunk record of chunk_prep_kernel (chunk_record.cuh) for the bounded gate, one warp per 16-token
// chunk and nothing shared between warps, with what lives in a lane changed rather than the same
// 16 x 128 chunk re-divided (docs/design.md §6):
//
// - q, k, g arrive by tensor copies (one lane issues six 16 x 64 boxes, 128B swizzle, on one mbarrier):
//   no per-thread address arithmetic, no load registers;
// - the L2 norms come from the diagonal of q·qᵀ and k·kᵀ on the tensor cores (the A fragment of a
//   16 x 16 tile is also the B fragment of its transpose), before the elementwise pass;
// - the elementwise pass reads its operands with ldmatrix.trans, so that a lane holds tokens
//   (2·qid, 2·qid + 1) and (+8) of one key column per register: the gate's cumulative sum over the 16
//   tokens is in-lane plus a scan over the four lanes of a quad, and the packed Kd, Qd pairs are already
//   the B fragments of Wd = Tb·Kd and Qp = Qd − P·Kd (k = token);
// - A = Kd·Kiᵀ and M = Qd·Kiᵀ (k = key) take their fragments from the same registers by movmatrix.trans,
//   accumulated key step by key step: no operand tile in shared memory;
// - Kd and Qd (hi, lo) wait for T in the q, k, g boxes' own bytes (stmatrix.trans to the addresses
//   ldmatrix.trans read them from), and Wd, Qp are written over them in the record's panel layout (the
//   boxes' 128B swizzle is the record's), so that bulk copies write them; Qp's accumulators start from
//   Qd hi + lo read without .trans (the C fragment's layout); Kr by stmatrix.trans as Kd into shared
//   memory (its panels have the boxes' layout; by 4-byte stores into a global record), Tb / P and Γ by
//   4-byte stores;
// - T = (I + A)^-1 by lanes 0..15, a column each, right-looking over A stored transposed.
//
// Parts: prep_warp_issue (the tensor copies of a chunk into a warp's boxes, warp_prep_parts.cuh with the
// helpers) and prep_warp_chunk (the rest, its two longest stages in warp_prep_steps.cuh: the L2 norms and
// the elementwise pass's key step; its record to global memory, or into a ring stage taken at the chunk's start or late, as the
// single pass does; benchmarks/prep_warp_kernel.cuh runs it as a kernel of its own and
// benchmarks/fused_warp_kernel.cuh in the layouts measured before the single pass). The warp's shared
// memory and the boxes' layout: warp_prep_layout.cuh. Measured: docs/performance_notes.md, "The
// preparation by one warp per chunk" and "The preparation taking its stage late".
//
// Limits (the single pass's launcher checks them): bounded gate, bf16 q / k / g whose tensor maps the
// caller made (boxes of 64 columns x 1 head x 16 tokens x 1 row, 128B swizzle, over [B, T, heads, 128]
// or a packed [1, B*T, heads, 128]; a chunk with fewer than 16 valid tokens with kPartial, its padding
// rows masked in the boxes); the bounded warm-up's chunk bound is warp_prep_parts.cuh's
// chunk_decay_bound. Grouped heads: q and k are copied from query head hq. Kr's low part for a
// final state's last updates: prep_warp_chunk's kr_lo (and kr_lo_slot).
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>
#include <cuda/ptx>
#include <type_traits>

#include "src/kernels/sm90/warp_prep_layout.cuh"
#include "src/kernels/sm90/warp_prep_parts.cuh"
#include "src/kernels/sm90/warp_prep_steps.cuh"
#include "src/kernels/sm90/chunk_record.cuh"
#include "src/kernels/sm90/gate_math.cuh"
#include "src/kernels/sm90/kernel_params.h"
#include "src/kernels/sm90/prep_fragments.cuh"
#include "src/kernels/sm90/record_fragments.cuh"
#include "src/ptx/barrier.cuh"
#include "src/ptx/bulk_copy.cuh"
#include "src/ptx/fast_math.cuh"
#include "src/ptx/ldmatrix.cuh"
#include "src/ptx/mma.cuh"
#include "src/ptx/tma.cuh"

namespace kda::sm90::warp_prep {

using sm90::ChunkRecord;

// One chunk (cc, of value head hv; a partial last chunk only with kPartial, whose padding rows are
// masked: design.md §2.4) by one warp,
// its q, k, g arriving in `in` on `bar` with phase parity `parity` (prep_warp_issue), its record where
// kTo says; into a stage (kStage, kLate) every store a shared one, and the caller publishes the stage
// (its proxy fence and arrival). A ([16][kAld]) and tb ([16][kTld]) are the warp's float tiles.
// kKeyUnroll < 8 (the single pass: code size): the key loops unrolled that far, dt_bias of the head read
// from `dt_s` (128 floats in shared memory, zeros without dt_bias) instead of registers.
// kMayDrop (kLate only, the single pass's pieces): `acquire()` may return null; the chunk is then not
// handed over (a warm-up candidate the piece does not need, or a piece that falls back), and the call
// returns. (When acquire() runs after the preparation, Kd is in the q boxes, Tb in tb, Kr and Γ in the
// park: what chunk_decay_bound reads.) And once the boxes have landed, `skip()` may say the chunk is not
// to be prepared at all: acquire() is then called at once (its caller knows why) and the call returns.
template <RecordTo kTo, int kKeyUnroll = 8, bool kPartial = false, class Acquire = NoAcquire, bool kMayDrop = false,
          class Skip = NoSkip>
__device__ __forceinline__ void prep_warp_chunk(const sm90::PrepParams& p, unsigned char (&in)[6][2048], float* A,
                                                float* tb, uint64_t* bar, ChunkCoords cc, int hv, uint8_t* rec,
                                                uint32_t parity, WarpSmemLate* park = nullptr, Acquire acquire = {},
                                                const float* dt_s = nullptr, uint8_t* kr_lo_ptr = nullptr,
                                                Skip skip = {}, int kr_lo_slot = 0) {
  // (A 32-bit shared address: a 64-bit pointer live through the key loops cost the single pass spills.)
  const uint32_t kr_lo = kr_lo_ptr != nullptr ? ptx::smem_addr(kr_lo_ptr) : 0u;
  static_assert(kKeyUnroll == 8 || kKeyUnroll == 4 || kKeyUnroll == 2 || kKeyUnroll == 1, "key loop unroll");
  constexpr bool kToStage = kTo != RecordTo::kGlobal;
  using namespace sm90;
  using namespace sm90::prep_detail;
  const int lane = threadIdx.x & 31;
  const int seq = cc.seq, tok0 = cc.tok0;
  // Valid tokens of the chunk (design.md §2.4: rows L.. are padding with q̂ = k̂ = 0, a = 0, b = 0; the
  // tensor copies fill them with zeros beyond a fixed batch's T, with the next sequence's tokens in a
  // packed batch: they are masked here).
  const int L = kPartial ? cc.len : 16;
  // While the boxes fly: the loads of beta, A_log and the lane's 16 dt_bias values (used after the
  // wait: a use before it stalls the warp on the load, 17% of the stall samples when dt_bias was read
  // in the key loop).
  const int g8 = ptx::Frag::grp(lane), qd = ptx::Frag::qid(lane);
  uint32_t beta_bits = 0;  // lane < L: token lane's beta (raw bits: converted after the wait)
  if (lane < L) {
    const int64_t off = seq * p.beta_st.b + static_cast<int64_t>(tok0 + lane) * p.beta_st.t + hv * p.beta_st.h;
    beta_bits = p.beta_is_f32 ? static_cast<const uint32_t*>(p.beta)[off] : static_cast<const uint16_t*>(p.beta)[off];
  }
  float a_log_raw = p.A_log != nullptr ? p.A_log[hv] : 0.0f;
  float dtbv[kKeyUnroll == 8 ? 16 : 1];  // key 16 ks + 8 o + grp at [2 ks + o]
  if constexpr (kKeyUnroll == 8) {
#pragma unroll
    for (int i = 0; i < 16; ++i) dtbv[i] = p.dt_bias != nullptr ? p.dt_bias[hv * 128 + 8 * i + g8] : 0.0f;
  }
  auto off = [&](int ks) -> uint32_t { return box_row_offset(lane, ks); };  // in the box of panel ks / 4
  __syncwarp();
  ptx::mbar_wait(bar, parity);
  if constexpr (kMayDrop) {
    static_assert(kTo == RecordTo::kLate, "only a late stage may be declined");
    if (skip()) {
      acquire();
      return;
    }
  }
  // The loads' first uses after the wait (not hoisted above it).
  ptx::keep_after(beta_bits);
  ptx::keep_after(a_log_raw);
  const float exp_a_log = p.A_log != nullptr ? exp_a_log_capped(a_log_raw) : 1.0f;
  const BoundedGateConstants gk = bounded_gate_constants(exp_a_log, p.lower_bound);
  // b of token lane (lane < L; padding rows: b = 0): with partial chunks here, so that L dies early.
  auto beta_of_lane = [&] {
    return lane < L ? beta_activation(__uint_as_float(p.beta_is_f32 ? beta_bits : beta_bits << 16), p.beta_sigmoid != 0,
                                      p.allow_neg_eigval != 0)
                    : 0.0f;
  };
  float b_own = 0.0f;
  if constexpr (kPartial) b_own = beta_of_lane();

  // The lane's tokens 2qd, 2qd + 1, 2qd + 8, 2qd + 9 valid (padding rows: q̂ = k̂ = 0 by their zeroed
  // boxes and qinv = kinv = 0 below). Their gate: a partial chunk's padding rows of g become bf16 -inf in the g boxes, for which
  // bounded_log2_decay gives exactly 0 (c2 / (1 + 2^inf)), so G stays constant after the last valid
  // row without a select per element (a select cost the single pass 6-8%).
  bool tok_valid[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) tok_valid[e] = !kPartial || 2 * qd + (e & 1) + 8 * (e >> 1) < L;
  if constexpr (kPartial) {
    if (L < 16) {  // warp-uniform; rows L..15 of the six boxes (a row is 8 whole 16-byte chunks: no swizzle):
      // g's -inf, q's and k's zeros (in a packed batch they hold the next sequence's tokens, which must not
      // reach this one's even as an Inf times zero)
      for (int i = lane; i < 6 * (16 - L) * 8; i += 32) {
        const int box = i / ((16 - L) * 8), rem = i % ((16 - L) * 8), row = L + rem / 8, c16 = rem % 8;
        const uint32_t x = box >= kInG ? 0xff80ff80u : 0u;
        *reinterpret_cast<uint4*>(in[box] + row * 128 + 16 * c16) = make_uint4(x, x, x, x);
      }
      __syncwarp();
    }
  }

  // ---- L2 norms (warp_row_norms, warp_prep_steps.cuh) -------------------------------------------
  float qinv[4], kinv[4];  // tokens 2qd, 2qd + 1, 2qd + 8, 2qd + 9
  warp_row_norms<kPartial>(p, in, lane, qd, tok_valid, qinv, kinv);

  // The key steps 0..7 of a pass, step(ks, pofs, roff, cb) each: fully unrolled (kKeyUnroll 8, every
  // argument a constant), in pairs with their row offsets selected from four registers (kKeyUnroll 2:
  // a pair's two steps have (2 ks) % 8 = 4 h and 4 h + 2, h = pair % 2), else a loop over ks.
  static_assert(ChunkRecord::kKrPanelBytes == 2048 && ChunkRecord::kWqPanelBytes == 2 * 2048, "panels of a box's size");
  unsigned char* const in0 = &in[0][0];  // the six boxes, contiguous
  // Rolled: off(ks) = off(0) ^ ((2 ks) % 8) << 4 ((2 ks) % 8 is even and the matrix's column half m / 2
  // is bit 0, so their sum is their xor; the row's 128 bytes lie above the 16-byte chunk's bits), from
  // one register kept opaque: recomputed from threadIdx in every iteration, it cost 2-3% of the
  // preparation's samples.
  uint32_t obase = off(0);
  ptx::keep_after(obase);
  auto offk = [&](int ks) -> uint32_t { return obase ^ (static_cast<uint32_t>((2 * ks) & 7) << 4); };
  auto for_key_steps = [&](auto&& step) {
    if constexpr (kKeyUnroll == 8) {
#pragma unroll
      for (int ks = 0; ks < 8; ++ks) step(ks, (ks >> 2) * 2048u, off(ks), (2 * ks) & 7);
    } else if constexpr (kKeyUnroll == 2) {
#pragma unroll 1
      for (int j = 0; j < 4; ++j) {
        const bool h = (j & 1) != 0;
        const uint32_t pofs = (j >> 1) * 2048u;
        step(2 * j, pofs, obase ^ (h ? 0x40u : 0u), h ? 4 : 0);
        step(2 * j + 1, pofs, obase ^ (h ? 0x60u : 0x20u), h ? 6 : 2);
      }
    } else {
#pragma unroll kKeyUnroll
      for (int ks = 0; ks < 8; ++ks) step(ks, (ks >> 2) * 2048u, offk(ks), (2 * ks) & 7);
    }
  };

  // ---- Elementwise pass by key steps; A and M accumulated ----------------------------------------
  float accA[2][4] = {}, mhh[2][4] = {}, mlo[2][4] = {};
  float* gamma = kTo == RecordTo::kLate ? park->gamma : reinterpret_cast<float*>(rec + ChunkRecord::kGammaOffset);
  uint8_t* kr_base = kTo == RecordTo::kLate ? park->kr : rec + ChunkRecord::kKrOffset;
  // Key step ks (elem_key_step, warp_prep_steps.cuh), with Kr's low part too where split_kr says.
  auto elem_step = [&](auto split_kr, int ks, uint32_t pofs, uint32_t roff, int cb, uint32_t lo) {
    elem_key_step<decltype(split_kr)::value, kKeyUnroll, kToStage>(in0, ks, pofs, roff, cb, dtbv, dt_s, g8, qd, gk, obase,
                                                                 gamma, qinv, kinv, accA, mhh, mlo, kr_base, lo);
  };
  // Kr's low part at kr_lo + kr_lo_slot · kKrLoBytes (the slots of kernel_params.h's kKrLoSlots): a loop
  // per slot, so that each address stays a constant (one computed address live through the loop
  // spilled the single pass's partial instance, 4 bytes).
  auto split_steps = [&](uint32_t lo) {
    if constexpr (kKeyUnroll == 8) {
      for_key_steps([&](int ks, uint32_t pofs, uint32_t roff, int cb) { elem_step(std::true_type{}, ks, pofs, roff, cb, lo); });
    } else {
#pragma unroll 1
      for (int ks = 0; ks < 8; ++ks) elem_step(std::true_type{}, ks, (ks >> 2) * 2048u, offk(ks), (2 * ks) & 7, lo);
    }
  };
  if (kr_lo != 0u) {  // (warp-uniform; once per sequence: rolled but where dt_bias is in registers)
    if (kr_lo_slot != 0)
      split_steps(kr_lo + static_cast<uint32_t>(sm90::kKrLoBytes));
    else
      split_steps(kr_lo);
  } else
    for_key_steps([&](int ks, uint32_t pofs, uint32_t roff, int cb) { elem_step(std::false_type{}, ks, pofs, roff, cb, 0u); });

  // ---- A to shared memory, T = (I + A)^-1 (lanes 0..15, column = lane), Tb = T·Diag(b) -----------
  constexpr int kSld = WarpSmem::kTld, kAld = WarpSmem::kAld;
  if constexpr (!kPartial) b_own = beta_of_lane();
  const float b_row[2] = {__shfl_sync(0xffffffffu, b_own, g8), __shfl_sync(0xffffffffu, b_own, g8 + 8)};
  float* At = A;
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int i = ptx::Frag::c_row(lane, r), j = 8 * nt + ptx::Frag::c_col(lane, r);
      At[j * kAld + i] = j < i ? b_row[r >> 1] * accA[nt][r] : 0.0f;  // transposed: column j of A in row j
    }
  __syncwarp();
  if (lane < 16) {
    float col[16];
    unit_lower_inverse_column_t(At, lane, col);
#pragma unroll
    for (int i = 0; i < 16; ++i) tb[i * kSld + lane] = col[i] * b_own;
  }
  __syncwarp();

  // ---- P = M·Tb (hi/lo, four products), its A fragment for Qp; Tb's for Wd ----------------------
  float pc[2][4];
  uint32_t th[4], ph[4];
  {
    float mc[2][4];
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int i = ptx::Frag::c_row(lane, r), j = 8 * nt + ptx::Frag::c_col(lane, r);
        mc[nt][r] = j <= i ? mhh[nt][r] + mlo[nt][r] : 0.0f;
      }
    uint32_t mh[4], ml[4];
    ptx::c_pair_to_a_split(mc[0], mc[1], mh, ml);
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {  // as prepare_chunk's phase 6 (its n-tile = warp there)
      const int n = 8 * nt + g8, q2 = 2 * qd;
      uint32_t bh[2], bl[2];
      ptx::split_bf16x2_bits(tb[q2 * kSld + n], tb[(q2 + 1) * kSld + n], bh[0], bl[0]);
      ptx::split_bf16x2_bits(tb[(q2 + 8) * kSld + n], tb[(q2 + 9) * kSld + n], bh[1], bl[1]);
      float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      ptx::mma_m16n8k16_bf16_f32(c, ml, bl);
      ptx::mma_m16n8k16_bf16_f32(c, ml, bh);
      ptx::mma_m16n8k16_bf16_f32(c, mh, bl);
      ptx::mma_m16n8k16_bf16_f32(c, mh, bh);
#pragma unroll
      for (int r = 0; r < 4; ++r) pc[nt][r] = c[r];
    }
    const float np0[4] = {-pc[0][0], -pc[0][1], -pc[0][2], -pc[0][3]};
    const float np1[4] = {-pc[1][0], -pc[1][1], -pc[1][2], -pc[1][3]};
    ptx::c_pair_to_a(np0, np1, ph);
    frag::load_a_f32(tb, kSld, false, lane, th);
  }
  if constexpr (kTo == RecordTo::kLate) rec = acquire();  // the stage, from here on
  if constexpr (kMayDrop) {
    if (rec == nullptr) return;
  }
  {
    uint16_t* tb_hi = reinterpret_cast<uint16_t*>(rec + ChunkRecord::kTbHiOffset);
    uint16_t* tb_lo = reinterpret_cast<uint16_t*>(rec + ChunkRecord::kTbLoOffset);
    uint16_t* p_hi = reinterpret_cast<uint16_t*>(rec + ChunkRecord::kPHiOffset);
    uint16_t* p_lo = reinterpret_cast<uint16_t*>(rec + ChunkRecord::kPLoOffset);
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = g8 + 8 * h, col = 8 * nt + 2 * qd;
        uint32_t hi, lo;
        ptx::split_bf16x2_bits(pc[nt][2 * h], pc[nt][2 * h + 1], hi, lo);
        *reinterpret_cast<uint32_t*>(p_hi + ChunkRecord::small_index(row, col)) = hi;
        *reinterpret_cast<uint32_t*>(p_lo + ChunkRecord::small_index(row, col)) = lo;
      }
#pragma unroll
    for (int rr2 = 0; rr2 < 4; ++rr2) {
      const int idx = lane + 32 * rr2, i = idx >> 3, j0 = (idx & 7) * 2;
      uint32_t hi, lo;
      ptx::split_bf16x2_bits(tb[i * kSld + j0], tb[i * kSld + j0 + 1], hi, lo);
      *reinterpret_cast<uint32_t*>(tb_hi + ChunkRecord::small_index(i, j0)) = hi;
      *reinterpret_cast<uint32_t*>(tb_lo + ChunkRecord::small_index(i, j0)) = lo;
    }
  }

  // ---- Wd = Tb·Kd, Qp = Qd − P·Kd, by key steps, over the Kd / Qd they read ------------------------
  // The next key step's Kd and Qd (hi, lo) loaded while this one multiplies (registers are free here).
  // Qd in the accumulators' layout (token grp (+8), keys 2 qid, +1): ldmatrix without .trans.
  uint32_t nkdb[4], nqhb[4], nqlb[4];
  auto wd_load = [&](uint32_t pofs, uint32_t roff) {
    ptx::ldmatrix_x4_trans(nkdb, in0 + kIn * 2048 + pofs + roff);
    ptx::ldmatrix_x4(nqhb, in0 + kInK * 2048 + pofs + roff);
    ptx::ldmatrix_x4(nqlb, in0 + kInG * 2048 + pofs + roff);
  };
  auto wd_step = [&](int ks, uint32_t pofs, uint32_t roff, int) {
    unsigned char* qa = in0 + kIn * 2048 + pofs + roff;
    unsigned char* ka = in0 + kInK * 2048 + pofs + roff;
    uint32_t kdb[4], qhb[4], qlb[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) kdb[i] = nkdb[i], qhb[i] = nqhb[i], qlb[i] = nqlb[i];
    if (ks + 1 < 8) wd_load(((ks + 1) >> 2) * 2048u, kKeyUnroll == 8 ? off(ks + 1) : offk(ks + 1));
    uint32_t wd_o[4], qp_o[4];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t kb[2] = {kdb[2 * h], kdb[2 * h + 1]};
      float w[4] = {0.0f, 0.0f, 0.0f, 0.0f}, c[4];
      ptx::mma_m16n8k16_bf16_f32(w, th, kb);
      {
        float l[4];
        unpack2(qhb[2 * h], c[0], c[1]);
        unpack2(qhb[2 * h + 1], c[2], c[3]);
        unpack2(qlb[2 * h], l[0], l[1]);
        unpack2(qlb[2 * h + 1], l[2], l[3]);
#pragma unroll
        for (int e = 0; e < 4; ++e) c[e] += l[e];  // exact: lo is hi's remainder
      }
      ptx::mma_m16n8k16_bf16_f32(c, ph, kb);
      wd_o[2 * h] = ptx::pack_bf16x2(w[0], w[1]);
      wd_o[2 * h + 1] = ptx::pack_bf16x2(w[2], w[3]);
      qp_o[2 * h] = ptx::pack_bf16x2(c[0], c[1]);
      qp_o[2 * h + 1] = ptx::pack_bf16x2(c[2], c[3]);
    }
    if constexpr (kToStage) {
      unsigned char* wq = rec + 2 * pofs + roff;  // panel ks / 4 of [Wd; Qp]: 2 x 2048 bytes
      ptx::stmatrix_x4(wq, wd_o);
      ptx::stmatrix_x4(wq + 2048, qp_o);
    } else {
      __syncwarp();
      ptx::stmatrix_x4(qa, wd_o);
      ptx::stmatrix_x4(ka, qp_o);
    }
  };
  wd_load(0u, kKeyUnroll == 8 ? off(0) : offk(0));
  if constexpr (kKeyUnroll == 8) {
    for_key_steps(wd_step);
  } else {
#pragma unroll kKeyUnroll
    for (int ks = 0; ks < 8; ++ks) wd_step(ks, (ks >> 2) * 2048u, offk(ks), 0);
  }

  // ---- Kr and Γ from the park into the stage (the same bytes) -----------------------------------
  if constexpr (kTo == RecordTo::kLate) {
    uint4 x[9];
#pragma unroll
    for (int it = 0; it < 8; ++it) x[it] = reinterpret_cast<const uint4*>(park->kr)[lane + 32 * it];
    x[8] = reinterpret_cast<const uint4*>(park->gamma)[lane];
#pragma unroll
    for (int it = 0; it < 8; ++it) reinterpret_cast<uint4*>(rec + ChunkRecord::kKrOffset)[lane + 32 * it] = x[it];
    reinterpret_cast<uint4*>(rec + ChunkRecord::kGammaOffset)[lane] = x[8];
  }

  // ---- [Wd; Qp] by bulk copies from the boxes ----------------------------------------------------
  if constexpr (!kToStage) {
    ptx::fence_proxy_async_shared();
    __syncwarp();
    if (lane == 0) {
#pragma unroll
      for (int pn = 0; pn < 2; ++pn) {
        cuda::ptx::cp_async_bulk(cuda::ptx::space_global, cuda::ptx::space_shared, rec + pn * ChunkRecord::kWqPanelBytes,
                                 in[kIn + pn], 2048u);
        cuda::ptx::cp_async_bulk(cuda::ptx::space_global, cuda::ptx::space_shared,
                                 rec + pn * ChunkRecord::kWqPanelBytes + 2048, in[kInK + pn], 2048u);
      }
      ptx::tma_store_commit();
      ptx::tma_store_wait_read<0>();
    }
    __syncwarp();
  }
}

}  // namespace kda::sm90::warp_prep
