// prepare_chunk: everything of a chunk that does not depend on the state (docs/design.md §2.1),
// for one (virtual chunk, value head); chunk_prep_kernel.cuh schedules it.
//
// Block:  128 threads (4 warps; a CTA by default, see PrepCtaEnv), phases separated by barriers
//         (Env::sync, __syncthreads by default); warps 0-1 alone form A and M
//         (phase 4) and P (phase 6), every warp the rest. "Row map":
//         thread t owns columns [8·(t%16), +8) of rows t/16 and t/16 + 8; "column map": thread t
//         owns key column t.
// Prologue: the chunk's sequence and token range (locate_chunk_span: 32-bit arithmetic for fixed-length
//         batches) and the row offsets, in 32-bit arithmetic where PrepParams::off32 allows (every
//         launch whose q, k, g and beta span fewer than 2^31 elements; version 53: 5% fewer
//         instructions than the 64-bit forms, which stay for larger tensors)
// Phases: 1. (row map; prep_inputs.cuh) every global load first (one round trip), L2-normalise q
//            and k (16-lane shuffle reduction, rescaled where the sum of squares overflows; kept in
//            registers), gate -> per-element log2-decay into G (unbounded gates floored at -256); beta
//         2. (column map) G ← inclusive cumulative sum over the 16 rows; Γ = 2^G[15] to the record
//         3. (row map) Kd as one bf16 tile, Qd (and Ki for the bounded gate) as bf16 hi + lo tiles in
//            shared memory, Kr to the record; 16-byte stores, one swizzled chunk each
//         4. A (strictly lower) and M (lower): bounded gate, tensor cores (warps 0 and 1, one n-tile
//            of both over all 128 key columns; M from hi·hi + lo·hi + hi·lo, A from one hi·hi pass);
//            unbounded gates, float32 dot products with pairwise exponents (never overflow)
//         5. T = (I + A)^-1 by right-looking elimination over A stored transposed (warp 0, lane =
//            column; unit_lower_inverse.h), Tb = T·Diag(b)
//         6. P = M·Tb (tensor cores, warps 0-1, hi/lo operands); Tb and P to the record as bf16 hi/lo
//            pairs; Wd = Tb·Kd (tensor cores, warp w owns key columns [32w, 32w+32), one bf16 pass)
//         7. Qp = Qd − P·Kd (idem; Qd added exactly, as hi + lo)
//         kBounds only (the bounded warm-up's plans, docs/design.md §3.2): the chunk bound
//            log2(max_k Γ_k + Σ_i ‖Wd_i‖·‖Kr_i‖) from per-warp maxima of G[15] (phase 2), Kr's row
//            norms (phase 3) and Wd's (phase 6), written by warp 0 after phase 6
// Shared memory: PrepSmem (prep_smem.cuh), 30 KB for the bounded gate (six CTAs per SM).
// Precision: the products whose operands' precision shows in the results carry ~16 significant
// bits (hi/lo splits: M = Qd·Kiᵀ, which feeds the output, and Tb and P, which multiply V in the
// recurrence); A, Wd and Qp are products of one bf16 each, which the rounding emulation
// (tests/tools/rounding_study.cpp) finds changes neither out nor state measurably. The record's Wd,
// Qp and Kr are rounded to bf16 once, at the end.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "src/kernels/sm90/chunk_record.cuh"
#include "src/kernels/sm90/fast_div.h"
#include "src/kernels/sm90/gate_math.cuh"
#include "src/kernels/sm90/kernel_params.h"
#include "src/kernels/sm90/prep_fragments.cuh"
#include "src/kernels/sm90/prep_inputs.cuh"
#include "src/kernels/sm90/prep_smem.cuh"
#include "src/kernels/sm90/record_fragments.cuh"
#include "src/kernels/sm90/sequence_map.cuh"
#include "src/ptx/mma.cuh"

namespace kda::sm90 {

// kBounds: also record the bounded warm-up's chunk bounds (p.chunk_bounds, not null); the other
// plans use the kBounds = false instance, which does none of that work.

// Prepares virtual chunk `vc` of value head `hv` (its record, and with kBounds its chunk bound).
// Every thread of the 128-thread CTA calls it (block-wide barriers); returns at once, uniformly,
// for a virtual chunk no sequence owns. The caller separates two calls by a barrier. kOff32 = false
// compiles the 64-bit row offsets only (the single pass's fallback instance: with both forms its loop
// spilled 12 bytes).
template <GateKind kGate, bool kBounds, bool kOff32 = true, typename Env = PrepCtaEnv>
__device__ __forceinline__ void prepare_chunk(const PrepParams& p, PrepSmem<kGate>& sm, int64_t vc, int hv,
                                              const Env& env = Env{}) {
  using namespace prep_detail;
  using Smem = PrepSmem<kGate>;
  constexpr int kLd = Smem::kLd;
  constexpr bool kSwz = !Smem::kPairwise;  // G's row-map swizzle (bounded gate; see tile_col)
  constexpr int kSld = Smem::kSmallLd;
  const int tid = env.tid(), warp = tid >> 5, lane = tid & 31;
  int32_t seq, chunk;
  SequenceSpan span;
  if (!locate_chunk_span(p.seq, static_cast<int32_t>(vc), &seq, &chunk, &span)) return;  // (vc < 2^31)
  const int tok0 = span.t0 + chunk * 16;  // first token of the chunk within its batch row
  const int L = min(16, span.len - chunk * 16);
  const int hq = static_cast<int>(fast_div(static_cast<uint32_t>(hv), p.group_magic));  // hv / group
  // Kr's low part of a sequence's last chunks that the final split covers (PrepParams::kr_lo; slot
  // 0 the last chunk's, 1 the one before), else nullptr (CTA-uniform).
  const int from_end = (span.len - 1) / 16 - chunk;  // 0: the sequence's last chunk
  uint8_t* const kr_lo = p.kr_lo != nullptr && from_end < final_split_chunks(span.len)
                             ? p.kr_lo + ((static_cast<int64_t>(seq) * p.HV + hv) * kKrLoSlots + from_end) * kKrLoBytes
                             : nullptr;
  uint8_t* rec = p.records + (static_cast<int64_t>(hv) * p.seq.num_vchunks + vc) * ChunkRecord::kBytes;

  // ---- Phase 1 (row map): loads, L2 norm, gate ---------------------------------------------------
  const int vec = tid & 15;  // columns [8·vec, 8·vec + 8)
  float qn[2][8], kn[2][8];  // normalised q and k of the thread's two rows (kept until phase 3)
  prep_load_rows<kGate, kOff32>(p, sm, span, tok0, L, hq, hv, tid, vec, qn, kn);
  env.sync();

  // ---- Phase 2 (column map): cumulative sum, Γ --------------------------------------------------
  {
    const int c = tid;
    float Gc = 0.0f;
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      Gc += sm.G[i * kLd + tile_col<kSwz>(c)];
      sm.G[i * kLd + tile_col<kSwz>(c)] = Gc;
    }
    *env.at(rec, &reinterpret_cast<float*>(rec + ChunkRecord::kGammaOffset)[c]) = exp2_fast(Gc);
    if constexpr (kBounds) {
      // The bounded warm-up's chunk bound, first term (design.md §3.2): max over k of the chunk's
      // summed log2-decay; +inf where nothing is bounded (a growing or NaN decay; b outside [0, 2],
      // where I - b·k̂k̂ᵀ may expand).
      // Floats as order-preserving integers: one warp max reduction (redux.sync).
      int32_t key = Gc <= 0.0f ? float_order_key(Gc) : float_order_key(__int_as_float(0x7f800000));
      if (c < 16 && !(sm.b[c] >= 0.0f && sm.b[c] <= 2.0f)) key = float_order_key(__int_as_float(0x7f800000));
      key = __reduce_max_sync(0xffffffffu, key);
      if (lane == 0) sm.bound[warp] = key;
    }
  }
  env.sync();

  // ---- Phase 3 (row map): Kd, Qd, Ki tiles and Kr ------------------------------------------------
  {
    float g15[8];
    row8_load<kSwz>(&sm.G[15 * kLd], vec, g15);
    float gamma[8];  // bounded gate: 2^{G15 - G} = Γ · 2^{-G}, both factors finite (|G| <= 115.4)
#pragma unroll
    for (int e = 0; e < 8; ++e) gamma[e] = exp2_fast(g15[e]);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = (tid >> 4) + 8 * h;
      float kd[8], qd[8], kr[8], ki[8], Gr[8];
      float kr_sq = 0.0f;  // this thread's part of Kr's squared row norm (kBounds)
      row8_load<kSwz>(&sm.G[r * kLd], vec, Gr);
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const float G = Gr[e];
        const float d = exp2_fast(G);
        kd[e] = kn[h][e] * d;
        qd[e] = qn[h][e] * d;
        if constexpr (kGate == GateKind::kBounded) {
          const float inv = exp2_fast(-G);
          ki[e] = kn[h][e] * inv;
          kr[e] = kn[h][e] * (gamma[e] * inv);
        } else {
          ki[e] = 0.0f;
          kr[e] = kn[h][e] * exp2_fast(g15[e] - G);
        }
        if constexpr (kBounds) kr_sq = fmaf(kr[e], kr[e], kr_sq);
      }
      const uint32_t off = ChunkRecord::wide_chunk_byte(r, vec);
      uint4 hi, lo;
      *reinterpret_cast<uint4*>(reinterpret_cast<unsigned char*>(sm.kd_hi) + off) = pack8(kd);
      pack8_split(qd, hi, lo);
      *reinterpret_cast<uint4*>(reinterpret_cast<unsigned char*>(sm.qd_hi) + off) = hi;
      *reinterpret_cast<uint4*>(reinterpret_cast<unsigned char*>(sm.qd_lo) + off) = lo;
      if constexpr (kGate == GateKind::kBounded) {
        pack8_split(ki, hi, lo);
        *reinterpret_cast<uint4*>(reinterpret_cast<unsigned char*>(sm.ki_hi) + off) = hi;
        *reinterpret_cast<uint4*>(reinterpret_cast<unsigned char*>(sm.ki_lo) + off) = lo;
      }
      // Kr in the record's panel layout (and its low part in the same layout, at kr_lo). (Computed here:
      // hoisted out of the loop, it made the gate-0 instance spill at its 80 registers.)
      const uint32_t kr_off = ChunkRecord::chunk_byte<ChunkRecord::kKrPanelBytes>(r, vec);
      if (kr_lo != nullptr) {  // a chunk of the final split: Kr's low part too
        pack8_split(kr, hi, lo);
        *env.at(rec, reinterpret_cast<uint4*>(rec + ChunkRecord::kKrOffset + kr_off)) = hi;
        *reinterpret_cast<uint4*>(kr_lo + kr_off) = lo;
      } else {
        *env.at(rec, reinterpret_cast<uint4*>(rec + ChunkRecord::kKrOffset + kr_off)) = pack8(kr);
      }
      if constexpr (kBounds) sm.kr_sq[r][vec] = kr_sq;  // summed at the bound
    }
  }
  env.sync();

  // ---- Phase 4: A = Diag(b)·strict_lower(...), M = lower(...) -------------------------------------
  if constexpr (kGate == GateKind::kBounded) {
    // 2^{G_i - G_j} = 2^{G_i} · 2^{-G_j}: |G| <= 115.4 keeps both factors finite.
    // Warp w < 2 forms n-tile w (columns [8w, 8w + 8)) of A and M over all 128 key columns, so no
    // partial sums cross warps; M's hi·hi pass and its two lo passes accumulate apart (chains of 8).
    float a[4] = {}, mhh[4] = {}, mlo[4] = {};
    if (warp < 2) {
#pragma unroll
      for (int kp = 0; kp < 4; ++kp) {
        uint32_t kih[4], kil[4];  // the warp's n-tile for k-steps 2kp, 2kp + 1
        frag::load_b_nmajor_ntile(kih, reinterpret_cast<const unsigned char*>(sm.ki_hi), warp, kp, lane);
        frag::load_b_nmajor_ntile(kil, reinterpret_cast<const unsigned char*>(sm.ki_lo), warp, kp, lane);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int ks = 2 * kp + h;
          uint32_t kdh[4], qdh[4], qdl[4];
          frag::load_a_mmajor(kdh, reinterpret_cast<const unsigned char*>(sm.kd_hi), ks, lane);
          frag::load_a_mmajor(qdh, reinterpret_cast<const unsigned char*>(sm.qd_hi), ks, lane);
          frag::load_a_mmajor(qdl, reinterpret_cast<const unsigned char*>(sm.qd_lo), ks, lane);
          const uint32_t bh[2] = {kih[2 * h], kih[2 * h + 1]}, bl[2] = {kil[2 * h], kil[2 * h + 1]};
          ptx::mma_m16n8k16_bf16_f32(a, kdh, bh);  // A: one bf16 pass (no measurable effect)
          ptx::mma_m16n8k16_bf16_f32(mlo, qdl, bh);
          ptx::mma_m16n8k16_bf16_f32(mlo, qdh, bl);
          ptx::mma_m16n8k16_bf16_f32(mhh, qdh, bh);
        }
      }
    }
    env.sync();  // every read of Ki is done: A and M (aliasing it) may be written
    if (warp < 2) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int i = ptx::Frag::c_row(lane, r), j = 8 * warp + ptx::Frag::c_col(lane, r);
        sm.A[j * Smem::kAtLd + i] = j < i ? sm.b[i] * a[r] : 0.0f;  // transposed (phase 5)
        sm.M[i * kSld + j] = j <= i ? mhh[r] + mlo[r] : 0.0f;
      }
    }
  } else {
    // Unbounded decay: form each exponent G_i - G_j <= 0 directly (never overflows).
    const int i = tid >> 3;
    const int j0 = (tid & 7) * 2;
    float a[2] = {0.0f, 0.0f}, m[2] = {0.0f, 0.0f};
    if (j0 <= i) {
      for (int c = 0; c < 128; ++c) {
        const float gi = sm.G[i * kLd + c];
        const float ki_ = sm.khat[i * kLd + c];
        const float qi = sm.qhat[i * kLd + c];
#pragma unroll
        for (int jj = 0; jj < 2; ++jj) {
          const int j = j0 + jj;
          const float w = sm.khat[j * kLd + c] * exp2_fast(gi - sm.G[j * kLd + c]);
          a[jj] = fmaf(ki_, w, a[jj]);
          m[jj] = fmaf(qi, w, m[jj]);
        }
      }
    }
#pragma unroll
    for (int jj = 0; jj < 2; ++jj) {
      const int j = j0 + jj;
      sm.A[j * Smem::kAtLd + i] = j < i ? sm.b[i] * a[jj] : 0.0f;  // transposed (phase 5)
      sm.M[i * kSld + j] = j <= i ? m[jj] : 0.0f;  // q̂ carries the scale
    }
  }
  env.sync();

  // ---- Phase 5: T = (I + A)^-1, lane c of warp 0 owns column c (A read transposed, right-looking) --
  if (tid < 16) {
    const int c = tid;
    float col[16];
    unit_lower_inverse_column_t</*kOrderedLoads=*/true, Smem::kAtLd>(sm.A, c, col);
    const float bc = sm.b[c];
#pragma unroll
    for (int i = 0; i < 16; ++i) sm.Tb[i * kSld + c] = col[i] * bc;
  }
  env.sync();

  // ---- Phase 6: P = M·Tb, Tb and P as hi/lo pairs; Wd = Tb·Kd -----------------------------------
  // P on the tensor cores (warps 0 and 1, n-tile = warp): M and Tb as bf16 hi + lo pairs, all four
  // partial products, so P carries ~16 significant bits, as much as its hi/lo pair in the record.
  if (warp < 2) {
    const int g = ptx::Frag::grp(lane), q2 = 2 * ptx::Frag::qid(lane), n = 8 * warp + g;
    uint32_t mh[4], ml[4], bh[2], bl[2];
    frag::load_a_f32_split(sm.M, kSld, false, lane, mh, ml);
    ptx::split_bf16x2(sm.Tb[q2 * kSld + n], sm.Tb[(q2 + 1) * kSld + n], bh[0], bl[0]);  // B: k = row of Tb
    ptx::split_bf16x2(sm.Tb[(q2 + 8) * kSld + n], sm.Tb[(q2 + 9) * kSld + n], bh[1], bl[1]);
    float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    ptx::mma_m16n8k16_bf16_f32(c, ml, bl);  // small terms first
    ptx::mma_m16n8k16_bf16_f32(c, ml, bh);
    ptx::mma_m16n8k16_bf16_f32(c, mh, bl);
    ptx::mma_m16n8k16_bf16_f32(c, mh, bh);
    uint16_t* p_hi = reinterpret_cast<uint16_t*>(rec + ChunkRecord::kPHiOffset);
    uint16_t* p_lo = reinterpret_cast<uint16_t*>(rec + ChunkRecord::kPLoOffset);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = g + 8 * h, col = 8 * warp + q2;
      *reinterpret_cast<float2*>(&sm.P[row * kSld + col]) = make_float2(c[2 * h], c[2 * h + 1]);
      uint32_t hi, lo;
      ptx::split_bf16x2(c[2 * h], c[2 * h + 1], hi, lo);  // columns col, col + 1: adjacent in the record
      *env.at(rec, reinterpret_cast<uint32_t*>(p_hi + ChunkRecord::small_index(row, col))) = hi;
      *env.at(rec, reinterpret_cast<uint32_t*>(p_lo + ChunkRecord::small_index(row, col))) = lo;
    }
  }
  {
    const int i = tid >> 3;
    const int j0 = (tid & 7) * 2;
    uint16_t* tb_hi = reinterpret_cast<uint16_t*>(rec + ChunkRecord::kTbHiOffset);
    uint16_t* tb_lo = reinterpret_cast<uint16_t*>(rec + ChunkRecord::kTbLoOffset);
    // Columns j0, j0 + 1 are adjacent in the record's small layout: one 4-byte store per half.
    const uint32_t idx = ChunkRecord::small_index(i, j0);
    uint32_t hi, lo;
    ptx::split_bf16x2(sm.Tb[i * kSld + j0], sm.Tb[i * kSld + j0 + 1], hi, lo);
    *env.at(rec, reinterpret_cast<uint32_t*>(tb_hi + idx)) = hi;
    *env.at(rec, reinterpret_cast<uint32_t*>(tb_lo + idx)) = lo;
  }
  {
    uint32_t th[4];
    frag::load_a_f32(sm.Tb, kSld, false, lane, th);
    wide_product<false, kBounds>(th, sm, warp, lane, sm.wide_out[0], sm.wd_sq[warp]);
  }
  env.sync();

  // ---- Bounded warm-up: the chunk's bound (design.md §3.2) ---------------------------------------
  // The chunk maps a state S to S·A + B with A = Diag(Γ) − Wdᵀ·Kr, so what a warm-up drops shrinks
  // by ‖A‖₂ <= max_k Γ_k + Σ_i ‖Wd_i‖·‖Kr_i‖ per chunk (triangle inequality over the rank-one terms;
  // the first term alone, spec §10's bound, ignores the delta rule moving state between key
  // channels). Stored as log2, rounded up by 2^-10 relative.
  if (kBounds && warp == 0) {  // lanes 0..15: row i; hardware sqrt, exp2, log2
    const float g = float_from_order_key(max(max(sm.bound[0], sm.bound[1]), max(sm.bound[2], sm.bound[3])));
    float mix = 0.0f;
    if (lane < 16) {
      const float wd = (sm.wd_sq[0][lane] + sm.wd_sq[1][lane]) + (sm.wd_sq[2][lane] + sm.wd_sq[3][lane]);
      float kr = 0.0f;
#pragma unroll
      for (int j = 0; j < 16; ++j) kr += sm.kr_sq[lane][j];
      const float x = wd * kr;  // ‖Wd_i‖²·‖Kr_i‖²
      mix = x > 0.0f ? x * rsqrtf(x) : 0.0f;
    }
#pragma unroll
    for (int off = 8; off >= 1; off >>= 1) mix += __shfl_xor_sync(0xffffffffu, mix, off);
    if (lane == 0) {
      float bound = __int_as_float(0x7f800000);  // +inf: nothing bounded
      const float x = (exp2_fast(g) + mix) * (1.0f + 0x1p-10f);
      if (g <= 0.0f && x <= 3.0e38f) bound = __log2f(x);  // NaN fails both tests
      p.chunk_bounds[static_cast<int64_t>(hv) * p.seq.num_vchunks + vc] = bound;
    }
  }

  // ---- Phase 7: Qp = Qd − P·Kd -------------------------------------------------------------------
  {
    uint32_t ph[4];
    frag::load_a_f32(sm.P, kSld, true, lane, ph);
    wide_product<true>(ph, sm, warp, lane, sm.wide_out[1]);
  }
  env.sync();

  // ---- Wd and Qp to the record: 16-byte stores (the fragments' 4-byte pieces went to shared memory;
  // written straight to global memory they filled half of each 32-byte sector). Piece k of the wide
  // tiles [Wd][Qp] (tile k / 256, row (k / 16) % 16, stored chunk k % 16, already XORed with the
  // row % 8 that the panels use too) goes to its place in the record's [Wd; Qp] panels ----
  {
    static_assert(sizeof(sm.wide_out[0]) == 2 * Smem::kTile && 2 * Smem::kTile == 4096, "[Wd][Qp] wide tiles");
    // For tid < 128, piece tid + 128 i is row 16 (i / 2) + 8 (i % 2) + tid / 16 of [Wd; Qp] and stored
    // chunk tid % 16: a per-thread base and a constant per i.
    const uint4* src = reinterpret_cast<const uint4*>(sm.wide_out);
    const uint32_t base = ChunkRecord::kWdOffset + ((tid >> 3) & 1) * ChunkRecord::kWqPanelBytes + (tid >> 4) * 128 + (tid & 7) * 16;
#pragma unroll
    for (int i = 0; i < 4; ++i)
      *env.at(rec, reinterpret_cast<uint4*>(rec + base + (i >> 1) * 2048 + (i & 1) * 1024)) = src[tid + 128 * i];
  }
}

}  // namespace kda::sm90

