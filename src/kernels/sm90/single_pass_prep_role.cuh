// The preparation role of single_pass_kernel (single_pass_kernel.cuh; docs/design.md §3.5): its eight
// preparation warps (single_pass_prepare), given the CTA's walk (SinglePassWalk) by the kernel's setup,
// and the warm-up decision that both roles take for bounded pieces (decide_warmup). The consumer
// warpgroup stays in the kernel's file. (Moved out of it unchanged: the kernel's sm_90a code is
// byte-identical; the consumers' role moved the same way was not, 8 instructions more in the pieces
// instance, so it stayed.)
#pragma once

#include <cuda.h>

#include <cstdint>

#include "src/kernels/sm90/kernel_params.h"
#include "src/kernels/sm90/sequence_map.cuh"
#include "src/kernels/sm90/single_pass_fallback.cuh"
#include "src/kernels/sm90/single_pass_layout.h"
#include "src/kernels/sm90/single_pass_options.cuh"  // kPrecheck
#include "src/kernels/sm90/warmup_rule.h"  // warmup_chunks
#include "src/kernels/sm90/warp_prep.cuh"
#include "src/ptx/barrier.cuh"
#include "src/ptx/cp_async.cuh"
#include "src/ptx/register_budget.h"
#include "src/ptx/tma.cuh"

namespace kda::sm90 {

// A CTA's walk over its sequence (single_pass_kernel's setup decides it; see there): the preparation
// warps prepare chunks [c_first, c_first + steps); the consumers walk them from c_first + skip, with
// outputs from c_out on and the final state when `fin`; nc warm-up candidates before c_out (bounded
// pieces: `bounded`); split_steps: the last updates with U and Kr as hi + lo pairs (final_split_chunks
// of the prepared steps, or 0: none).
struct SinglePassWalk {
  SequenceSpan span;
  int unit0, hv, c_first, c_out, steps, nc;
  bool fin, bounded;
  int split_steps;
  int walk_units;  // whole sequences of a fixed-length batch (kWalk): this CTA's units, steps chunks each
};

// A bounded piece's warm-up, decided by every role alike once the candidates' bounds have arrived on
// st.decide (nc = st.nc > 0 of them, chunk c0 - nc + j's in st.wbound[j]): the candidates to skip
// (nc - w, warmup_chunks), or -1 where no warm-up within kSinglePassWarmupCap chunks suffices. (Its
// inputs from shared memory: the preparation warps call it where their registers are shortest; kept in
// registers, or called out of line, they spilled 36 bytes, against 8-12 this way.)
__device__ __forceinline__ int decide_warmup(SinglePassLayout::Storage& st) {
  ptx::mbar_wait(&st.decide, 0);
  const int nc = *static_cast<volatile int32_t*>(&st.nc), c0 = *static_cast<volatile int32_t*>(&st.c0);
  int32_t w = 0;
  const bool ok = warmup_chunks<kSinglePassWarmupCap>([&](int i) { return st.wbound[nc - 1 - i]; }, c0, kWarmupLog2Bound, &w);
  return ok ? nc - w : -1;
}

// The preparation warps (warp < kPrepWarps): warp w prepares chunks c_first + w, + 8, ... and hands each
// over in its ring stage (RecordTo::kLate).
template <bool kPartial, bool kPieces, bool kWalk = false>
__device__ __forceinline__ void single_pass_prepare(const SinglePassParams& p, SinglePassLayout::Storage& st,
                                                    const CUtensorMap* qmap, const CUtensorMap* kmap,
                                                    const CUtensorMap* gmap, const CUtensorMap* vmap,
                                                    const SinglePassWalk& w, int warp, int lane) {
  using Lay = SinglePassLayout;
  using L = Lay::L;
  constexpr int kRing = Lay::kRing, kSlots = Lay::kSlots;
  // The preparation's key loops: in pairs (kKeyUnroll 2), but rolled in the pieces instance, whose
  // polling and bound code made the two roles' hot code too large for the instruction cache (ncu,
  // forced pieces on T8192_H64, 2026-12-02: `no_instruction` stalls from 5% to 13% of the consumers'
  // samples, the kernel 10% slower; rolled, T8192_H64 -4.5% and T32768_H32 -7% bounded, while the
  // whole-sequence instances lose 2-4% rolled: docs/performance_notes.md, version 40).
  constexpr int kPrepKeyUnroll = kPieces ? 1 : 2;
  const int unit0 = w.unit0, c_first = w.c_first, steps = w.steps;
  const bool bounded = w.bounded;
  // kWalk (single_pass_kernel.cuh): the CTA's units one after another, ring step j = chunk j % steps of
  // the walk's unit j / steps; the unit's head and sequence change at each boundary, and with them this
  // warp's copy of the head's dt_bias (its own: the warps cross a boundary at different times).
  int hv = w.hv;
  const SequenceSpan& span = w.span;
  auto& ps = st.prep[warp];
  int hq = hv / p.pp.group;
  const float* dt_s = kWalk ? st.dtb_w[warp] : st.dtb;
  int walk_k = -1, walk_seq = 0, walk_c = warp, walk_next = 0;
  uint32_t i = 0;  // this warp's chunks so far
  // Bounded pieces: once this warp has found the piece given up (below), every later chunk of the warp
  // is handed over marked without its boxes: none issued, none waited for (the box barrier's phase is
  // never waited on again), so a given-up piece no longer reads its chunks' q, k and g.
  bool gone = false;
  // The precheck (single_pass_precheck.cuh): this warp's first chunk's boxes issued, then the consumers'
  // verdict awaited before anything else; refused, the warp leaves once the boxes have landed (no copy
  // into the CTA's memory after it leaves), with nothing prepared or handed over. Before the loop, so that
  // the chunks' loop carries none of it (the pieces instance's hot code and the instruction cache:
  // design.md §3.5); the loop then skips that first issue.
  bool first_issued = false;
  if constexpr (kPieces && kPrecheck) {
    if (warp < steps && *static_cast<volatile int32_t*>(&st.pre_c0) > 0) {
      const int c = c_first + warp;  // (the pieces instance: whole chunks of one sequence, not a walk)
      warp_prep::prep_warp_issue<kPartial>(ps.in, &ps.bar, p.pp, qmap, kmap, gmap,
                                           warp_prep::ChunkCoords{span.batch, span.t0 + 16 * c, min(16, span.len - 16 * c)},
                                           hv, hq);
      ptx::mbar_wait(&st.pre_bar, 0);
      if (*static_cast<volatile int32_t*>(&st.pre_fail) != 0) {
        ptx::mbar_wait(&ps.bar, 0);
        return;
      }
      first_issued = true;
    }
  }
  for (int j = warp; j < (kWalk ? w.walk_units * steps : steps); j += Lay::kPrepWarps, ++i) {  // chunk c_first + j
    int c = kPieces ? c_first + j : j;
    if constexpr (kWalk) {  // (a fixed-length batch: sequence = batch row, from token 0, whole chunks)
      // chunk c of the walk's unit k (j = k · steps + c; steps >= kPrepWarps, one wrap at most per advance)
      c = walk_c;
      const int k = walk_next;
      walk_advance_chunk(walk_c, walk_next, Lay::kPrepWarps, steps);  // (single_pass_layout.h)
      if (k != walk_k) {  // a new unit: its head's dt_bias (this warp's previous chunk is done with the copy)
        walk_k = k;
        const int u = unit0 + k * static_cast<int>(gridDim.x);
        hv = u % p.HV;
        hq = hv / p.pp.group;
        walk_seq = u / p.HV;
        float* d = st.dtb_w[warp];
#pragma unroll
        for (int e = lane; e < 128; e += 32) d[e] = p.pp.dt_bias != nullptr ? p.pp.dt_bias[hv * 128 + e] : 0.0f;
        __syncwarp();
      }
    }
    const warp_prep::ChunkCoords cc = kWalk ? warp_prep::ChunkCoords{walk_seq, 16 * c, 16}
                                            : warp_prep::ChunkCoords{span.batch, span.t0 + 16 * c, min(16, span.len - 16 * c)};
    if (!gone && !first_issued) warp_prep::prep_warp_issue<kPartial>(ps.in, &ps.bar, p.pp, qmap, kmap, gmap, cc, hv, hq);
    first_issued = false;
    // Bounded pieces: once another piece of this call has flagged the unit (it runs again after this
    // grid: on the single pass's whole sequences or on the two kernels), the chunk is not prepared, only
    // handed over marked (st.skip), so that the ring stays in step while the consumers stop too. Each
    // chunk the warp reads the unit's flags while its boxes fly and compares them once they have landed
    // (`skip`, in prep_warp_chunk; single_pass_fallback.cuh); a warp that finds one raises st.abort for all.
    bool dead = gone;
    uint32_t polled = 0;
    if (bounded && !gone) polled = poll_piece_word(p.piece_fail, p.pieces, p.units, unit0, i, lane);
    auto skip = [&]() -> bool {
      if (!bounded) return false;
      const bool fell = polled_fell_back(polled, *static_cast<volatile uint64_t*>(&st.epoch));
      // Lane 0 raises and reads abort (an atomic: other warps raise it) and the warp takes its answer:
      // each lane reading it, another warp's raise could land between the lanes' reads, and the
      // warp split with some lanes preparing the chunk alone, hanging in its first ldmatrix (seen on
      // multi-wave long-memory pieces, 2026-12-02: lanes 0-7 at warp_prep.cuh's norms, the rest
      // handing the chunk over marked).
      int raised = 0;
      if (lane == 0) raised = fell ? (atomicOr(&st.abort, 1), 1) : atomicOr(&st.abort, 0);
      dead = __shfl_sync(0xffffffffu, raised, 0) != 0;
      return dead;
    };
    // The chunk's ring step r (r = j but for bounded pieces: j - the dropped candidates), or < 0: not
    // handed over; `stop`: the piece falls back.
    int r = j;
    bool stop = false;
    auto acquire = [&]() -> uint8_t* {
      if (bounded && *static_cast<volatile int32_t*>(&st.nc) > 0) {
        if (j < *static_cast<volatile int32_t*>(&st.nc)) {  // a candidate: its decay bound arrives
          const float bound = dead ? __int_as_float(0x7f800000)
                                   : warp_prep::chunk_decay_bound(ps.in[warp_prep::kIn], ps.tb, ps.kr, ps.gamma);
          if (lane == 0) st.wbound[j] = bound;
          __syncwarp();
          if (lane == 0) ptx::mbar_arrive(&st.decide);
        }
        const int dropped = decide_warmup(st);  // candidates not needed (-1: the piece falls back)
        stop = dropped < 0;
        r = j - dropped;
        if (stop || r < 0) return nullptr;
      }
      const int s = r % kRing, slot = r % kSlots;
      if (r >= kRing) {  // the stage's previous step consumed
        const int prev = r - kRing;
        ptx::mbar_wait(&st.empty[prev % kSlots], (prev / kSlots) & 1);
      }
      if (bounded && lane == 0) st.skip[s] = dead;
      if (bounded && dead) {
        if (lane == 0) ptx::mbar_arrive(&st.full[slot]);  // (no values)
      } else if (!kPartial || cc.len == 16) {
        if (lane == 0) {  // the chunk's values: one 16 x 64 box per half
          ptx::mbar_arrive_expect_tx(&st.full[slot], 2 * L::VtTile::kBytes);
          ptx::tma_load_4d(st.stage[s].vt[0].bytes, vmap, 0, hv, cc.tok0, cc.seq, &st.full[slot]);
          ptx::tma_load_4d(st.stage[s].vt[1].bytes, vmap, 64, hv, cc.tok0, cc.seq, &st.full[slot]);
        }
      } else {
        // A partial chunk: the values by cp.async, zero-filled past the sequence (a tensor copy would
        // bring the next sequence's tokens in a packed batch), landed before lane 0's arrival. Rolled:
        // once per sequence, and unrolled its eight 64-bit addresses cost the partial instance 8 of its
        // 12 bytes of spills and 192 instructions (ptxas -v, docs/performance_notes.md, version 50).
#pragma unroll 1
        for (int m = 0; m < 8; ++m) {
          const int k = lane + 32 * m, half = k / 128, tok = (k / 8) % 16, r8 = k % 8;  // half, token, 8 rows
          const bool valid = tok < cc.len;
          const uint16_t* src = p.v + cc.seq * p.v_st.b + static_cast<int64_t>(cc.tok0 + (valid ? tok : 0)) * p.v_st.t +
                                hv * p.v_st.h + 64 * half + 8 * r8;
          ptx::cp_async_16_zfill(st.stage[s].vt[half].bytes + L::VtTile::offset(tok, 8 * r8), src, valid);
        }
        ptx::cp_async_commit();
        ptx::cp_async_wait_group<0>();
        __syncwarp();
        if (lane == 0) ptx::mbar_arrive(&st.full[slot]);
      }
      return reinterpret_cast<uint8_t*>(&st.stage[s]);
    };
    // Kr's low part for a chunk of the final split: slot steps - 1 - j of st.kr_lo (0: the walk's or
    // unit's last chunk), given to prep_warp_chunk as the first slot's address and the slot (kr_lo_slot:
    // a computed address spilled the preparation, 4 bytes). Whole chunks, and so every walk, split the
    // last chunk alone: slot 0.
    const int from_end = steps - 1 - (kWalk ? c : j);
    uint8_t* kr_lo = from_end < w.split_steps ? st.kr_lo[0].bytes : nullptr;
    // (A dead chunk: acquire() at once, from prep_warp_chunk once its boxes have landed or, the warp
    // gone, here without boxes; a candidate's bound +inf, the stage marked.)
    if (gone)
      acquire();
    else
      warp_prep::prep_warp_chunk<warp_prep::RecordTo::kLate, kPrepKeyUnroll, kPartial, decltype(acquire), kPieces,
                                 decltype(skip)>(p.pp, ps.in, ps.A, ps.tb, &ps.bar, cc, hv, nullptr, i & 1, &ps,
                                                 acquire, dt_s, kr_lo, skip, kPartial ? from_end : 0);
    gone = dead;
    if (stop) break;
    if (r < 0) continue;
    ptx::fence_proxy_async_shared();  // the stage's generic-proxy writes, before wgmma reads them
    ptx::mbar_arrive(&st.full[r % kSlots]);
  }
}

}  // namespace kda::sm90
