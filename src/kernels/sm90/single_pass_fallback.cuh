// The single pass's fallback (docs/design.md §3.5). With bounded pieces, a piece whose warm-up the
// decay bound does not allow within kSinglePassWarmupCap chunks computes nothing and sets its flag; the
// launcher then runs, on the units with a flag set and on no other, either the two-kernel path (a
// warm-up plan's pieces: the preparation and that plan's recurrence, with its own exact fallback;
// PrepParams::sp_fail, RecurrenceParams::sp_fail) or the single pass on whole sequences (a one-pass
// plan's single_pass_pieces, plan.h: SinglePassParams::redo_fail, whose CTA 0 advances the epoch).
//
// The flags (SinglePassParams::piece_fail, [pieces][units] 64-bit words) need no zeroing: every
// piece's CTA writes its own on every call, piece_word(epoch, fell back) (kernel_params.h): piece 0 and
// empty pieces, which never fall back, at their start, the others once decided. The epoch is a word of
// the workspace that the fallback's first kernel (launched after every such grid) advances, so that each
// call, eager or a graph replay, has its own. The fallback's kernels run after the single pass's grid is
// complete and read the low bits. While the grid runs, the other pieces of a unit poll the words
// (poll_piece_word, polled_fell_back) and stop computing once one says, with this call's epoch, that the
// unit falls back; a piece that stops so sets its own flag too, so that a word from garbage (a
// workspace's first call) can cost time but never a unit left uncomputed. (The launch's %gridid is no
// such tag: it was measured to repeat between launches, 2026-12-01.)
#pragma once

#include <cstdint>

#include "src/kernels/sm90/kernel_params.h"  // piece_word, RecurrenceParams
#include "src/ptx/gpu_sync.cuh"
#include "src/ptx/grid_dependency.cuh"

namespace kda::sm90 {

// After the single pass's grid (the fallback's kernels): whether unit `unit` (of `units`) was left to
// the two-kernel path, i.e. one of its pieces set its flag.
__device__ __forceinline__ bool single_pass_fell_back(const uint64_t* piece_fail, int32_t pieces, int64_t units,
                                                      int64_t unit) {
  uint64_t any = 0;
  for (int32_t piece = 0; piece < pieces; ++piece) any |= piece_fail[piece * units + unit];
  return (any & 1) != 0;
}

// The fallback preparation's listed mode (chunk_prep_kernel.cuh): where the units are few (a warm-up
// plan's, at most half the SMs' count unless a forced plan) and the batch fixed-length (the pieces'
// only kind), each CTA lists the units that fell back, in unit order, and the grid, one dimension of
// at most one resident wave, strides over their chunks: so that no CTA waits on a head that did not
// fall back, and on decaying gates the launch is one wave of CTAs reading the flags once. Otherwise
// (forced plans of many units) a grid of (columns, HV) strides over each head's chunks. The launcher
// (prep_sm90.cu) shapes the grid by the same rule.
inline constexpr int kFallbackListMax = 512;
inline constexpr int kFallbackListWarps = 4;  // the preparation's 128 threads (chunk_prep_kernel.cuh)
__host__ __device__ constexpr bool fallback_prep_listed(int64_t units, bool varlen) {
  return !varlen && units >= 1 && units <= kFallbackListMax;
}

// The listed mode's list: the units (of `units` <= kFallbackListMax) with a flag set, in increasing
// order, into list[0, count), identical in every CTA (an ordered compaction by warp ballots, not by
// atomics); returns count. Every thread of the CTA (kFallbackListWarps warps) calls it: CTA barriers.
__device__ __forceinline__ int fallback_units(const uint64_t* piece_fail, int32_t pieces, int32_t units,
                                              int32_t* list, int32_t* warp_counts) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  int total = 0;
#pragma unroll 1
  for (int32_t base = 0; base < units; base += 32 * kFallbackListWarps) {
    const int32_t u = base + static_cast<int32_t>(threadIdx.x);
    const bool fell = u < units && single_pass_fell_back(piece_fail, pieces, units, u);
    const unsigned mask = __ballot_sync(0xffffffffu, fell);
    if (lane == 0) warp_counts[warp] = __popc(mask);
    __syncthreads();
    int before = total, round = 0;
#pragma unroll
    for (int w = 0; w < kFallbackListWarps; ++w) {
      before += w < warp ? warp_counts[w] : 0;
      round += warp_counts[w];
    }
    if (fell) list[before + __popc(mask & ((1u << lane) - 1u))] = u;
    total += round;
    __syncthreads();  // (warp_counts again next round; the list complete for every thread)
  }
  return total;
}

// After the single pass's grid: whether none of its pieces set a flag (every word of [pieces][units],
// the CTA's threads in parallel; every thread of the CTA calls it: a CTA barrier). On decaying gates the
// fallback's kernels then leave after this one round trip (chunk_prep_kernel.cuh's filtered instance,
// the warm-up recurrence's pass 1: skip_after_single_pass).
__device__ __forceinline__ bool single_pass_left_nothing(const uint64_t* piece_fail, int64_t words) {
  int any = 0;
  for (int64_t i = threadIdx.x; i < words; i += blockDim.x) any |= static_cast<int>(piece_fail[i] & 1);
  return !__syncthreads_or(any);
}

// Pass 1 of a warm-up plan behind the single pass's bounded pieces (RecurrenceParams::sp_fail), when
// the single pass left no unit (decaying gates): the whole grid returns at once, before its prologue
// (the initial state's preload, the tail's counters: no tail job would find work), each unit's
// fallback word cleared as warm_recurrence_task would (its first CTA), for the kernels after it. Every
// thread of the CTA calls it (a CTA barrier); every CTA decides the same from the same flags (the
// single pass's grid is complete: the filtered preparation before this kernel waited for it).
// (Out of line, its arguments by value: inlined, the two-warpgroup wgmma instance spilled 96 bytes.)
static __device__ __noinline__ bool single_pass_left_all(const uint64_t* sp_fail, int64_t words, int32_t* unit_fallback,
                                                         int32_t units) {
  ptx::wait_primary();
  if (!single_pass_left_nothing(sp_fail, words)) return false;
  if (threadIdx.x == 0 && blockIdx.x < static_cast<unsigned>(units)) unit_fallback[blockIdx.x] = 0;
  return true;
}
__device__ __forceinline__ bool skip_after_single_pass(const RecurrenceParams& p) {
  return p.sp_fail != nullptr && p.pass == RecurrencePass::kFirst &&
         single_pass_left_all(p.sp_fail, static_cast<int64_t>(p.units) * p.sp_pieces, p.unit_fallback, p.units);
}

// During the grid, the preparation warps' polling (single_pass_kernel.cuh): each chunk, lane q reads
// piece q's word of the unit (q + 32 k in turn, k = the warp's chunk count, where more than 32 pieces),
// keeping its low half only (one register while the chunk's boxes fly) ...
__device__ __forceinline__ uint32_t poll_piece_word(const uint64_t* piece_fail, int32_t pieces, int32_t units,
                                                    int32_t unit, uint32_t round, int lane) {
  const int q = lane + 32 * static_cast<int>(round % static_cast<uint32_t>((pieces + 31) / 32));
  return q < pieces ? static_cast<uint32_t>(ptx::ld_relaxed(piece_fail + static_cast<int64_t>(q) * units + unit)) : 0u;
}

// ... and, once they have landed, whether some lane read "fell back" with this call's epoch (the same in
// every lane). Low halves compared: a false match, 2^-32, only stops the piece, which then sets its own
// flag (time lost, nothing wrong).
__device__ __forceinline__ bool polled_fell_back(uint32_t polled, uint64_t epoch) {
  return __any_sync(0xffffffffu, polled == static_cast<uint32_t>(piece_word(epoch, true)));
}

}  // namespace kda::sm90
