// single_pass_kernel's options per instance and its order of packed sequences (single_pass_kernel.cuh;
// docs/design.md §3.5): the two build knobs measured in docs/performance_notes.md (versions 47-48), what
// each instance (kPartial, kPieces, kWalk) takes of them, the bounded pieces' precheck (session 46, off:
// measured in session 49), and longest_first, the placement of packed
// sequences of different lengths. (Moved out of the kernel's file unchanged: scripts/same_code.py finds
// the kernels' sm_90a code identical.)
#pragma once

#include <cstdint>

#include "src/kernels/sm90/sequence_map.cuh"
#include "src/kernels/sm90/single_pass_layout.h"

namespace kda::sm90 {

// The pieces instance's consumers do not wait for the first 64-row half's state update before the
// second half's step (1, version 47): its update S += U·Kr runs on the tensor cores while the second
// half converts its state and issues its first batch, whose wait (wgmma groups complete in order) then
// covers both; the second half's wait ends the chunk as before. 0: each half waits for its own update
// (the other instances: the whole-sequence one spilled 52 bytes with it, the partial one measured 0.7%
// slower on varlen6_H64; docs/performance_notes.md, version 47). A build knob, for measuring; 2 below.
#ifndef FLASH_KDA_SP_HALF_OVERLAP
#define FLASH_KDA_SP_HALF_OVERLAP 1
#endif
inline constexpr bool kHalfOverlap = FLASH_KDA_SP_HALF_OVERLAP != 0;
// 2: also the whole-sequence and walk instances, on their steps but a stored final state's last one
// (compiled without extra spills; measured 2026-12-02, version 48: the prefill and small-head geometric
// means 0.6-1.0% and 1.4-3.6% slower in two rounds; not kept).
inline constexpr bool kHalfOverlapWhole = FLASH_KDA_SP_HALF_OVERLAP == 2;

// The register split: 136 / 232 in every instance (0), or SinglePassLayout's alternative 128 / 248 in the
// whole-sequence instance (1, version 48: spill-free there, 8 bytes at 136 / 232) or in the whole-sequence
// and pieces instances (2: at version 48 the pieces instance spilled 4 bytes instead of 12, grew by 32
// instructions and its cases ran 1-2% slower; since version 51 it spills nothing at 136 / 232 and still 4
// bytes at 128 / 248, ptxas -v). Measured 2026-12-02 (docs/performance_notes.md, version 48): the
// whole-sequence cases even within the noise both ways. A build knob, for measuring.
#ifndef FLASH_KDA_SP_REGS
#define FLASH_KDA_SP_REGS 1
#endif

// The bounded pieces' precheck (docs/design.md §3.5, "The precheck"; single_pass_precheck.cuh): 1, the
// consumers decide from the candidates' raw gate, before any chunk is prepared, whether the piece
// certainly falls back (piece 0: whether piece 1 does), and the preparation warps wait for that verdict
// before their first chunk; a piece so refused sets its flag and leaves at once, with nothing handed
// over. Built to make the failed attempt on slowly decaying gates (T8192_H8_LM: 28-31 us by ncu,
// docs/performance_notes.md, versions 48-49) cost a few us. 0, the default: not compiled, the kernels'
// code unchanged (scripts/same_code.py). Measured on the H200 in session 49 (docs/performance_notes.md,
// "The precheck on the GPU: faster where pieces fall back, slower where they do not"): 1 makes the
// pieces that fall back 2-10% faster and the decaying prefill cases, issue 10's targets, 2-5% slower.
#ifndef FLASH_KDA_SP_PRECHECK
#define FLASH_KDA_SP_PRECHECK 0
#endif
inline constexpr bool kPrecheck = FLASH_KDA_SP_PRECHECK != 0;

// The two knobs per instance (kPartial, kPieces, kWalk): whether half 0's state update stays in flight
// into half 1's step (final_update: a stored final state's last update, with its hi + lo pairs; the walk
// counts as the whole-sequence instance there), and whether the instance takes the alternative register
// split (the walk does not: it would spill 28-56 bytes).
constexpr bool half0_update_in_flight(bool partial, bool pieces, bool final_update) {
  return kHalfOverlap && (pieces || (kHalfOverlapWhole && !partial && !final_update));
}
constexpr bool alt_register_split(bool partial, bool pieces, bool walk) {
  return !partial && !walk && (pieces ? FLASH_KDA_SP_REGS == 2 : FLASH_KDA_SP_REGS >= 1);
}

// Packed batches of at most this many sequences run longest first (single_pass_kernel).
inline constexpr int kLongestFirstMax = SinglePassLayout::kThreads;

// Packed sequences of different lengths: the sequence of rank `rank` by length, longest first (ties by
// index). CTA b of single_pass_kernel runs rank b / HV, so that the longest chains start in the first
// wave instead of whenever their index comes (the GPU starts CTAs about in index order); every
// (sequence, head) is still run by exactly one CTA, with the same arithmetic: only the placement
// changes. Called by every thread of the CTA (two CTA barriers); N <= kLongestFirstMax. (Not inlined:
// inlined, its values stayed live into both roles and the kernel spilled ~800 bytes.)
__device__ __noinline__ int longest_first(const SequenceLayout& s, int rank) {
  __shared__ int32_t lens[kLongestFirstMax];
  __shared__ int32_t ranked;
  const int n = threadIdx.x;
  if (n < s.N) lens[n] = sequence_span(s, n).len;
  __syncthreads();
  if (n < s.N) {
    int r = 0;
    for (int m = 0; m < s.N; ++m) r += lens[m] > lens[n] || (lens[m] == lens[n] && m < n);
    if (r == rank) ranked = n;
  }
  __syncthreads();
  return ranked;
}

}  // namespace kda::sm90
