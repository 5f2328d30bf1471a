// The bounded warm-up's rule (docs/design.md §3.2, spec §10), host and device, so that the tests check
// it on the CPU: how many chunks of warm-up a piece takes from its candidates' decay bounds
// (warmup_chunks, used by the two kernels' recurrence and the single pass alike), and the single pass's
// precheck (design.md §3.5, "The precheck"): a piece refused from its raw gate alone, before any
// preparation, where even the per-channel decays (spec §10's formula, a lower bound of the bound the
// preparation records) do not reach the rule's limit.
#pragma once

#include <cstdint>

#include "src/kernels/sm90/gate_math.cuh"    // KDA_HD
#include "src/kernels/sm90/kernel_params.h"  // kWarmupLog2Bound

#if defined(__CUDACC__)
#define KDA_RULE_UNROLL _Pragma("unroll")
#else
#define KDA_RULE_UNROLL  // (g++ does not know the pragma; the loops are a few iterations)
#endif

namespace kda::sm90 {

// Chunks of warm-up a piece starting at chunk c0 must take: the smallest w whose chunks' bounds
// (c0 - 1, c0 - 2, ...: bound_before(i) is chunk c0 - 1 - i's, called for i < min(kCap, c0)) sum to
// <= log2_bound, or w = c0 (back to the start: exact), at most kCap. Returns false when neither
// happens within the cap (the unit falls back to the exact path). The bounds are read at once (one
// memory round trip) and summed in a fixed order, so every CTA of the unit computes the same w (and
// the single pass's roles too, single_pass_kernel.cuh).
template <int kCap, class BoundBefore>
KDA_HD bool warmup_chunks(BoundBefore bound_before, int32_t c0, float log2_bound, int32_t* w_out) {
  float b[kCap];
KDA_RULE_UNROLL
  for (int i = 0; i < kCap; ++i) b[i] = i < c0 ? bound_before(i) : 0.0f;
  float s = 0.0f;
  int32_t w = 0;
KDA_RULE_UNROLL
  for (int i = 0; i < kCap; ++i) {
    if (w < c0 && !(s <= log2_bound)) {
      s += b[i];
      ++w;
    }
  }
  *w_out = w;
  return s <= log2_bound || w == c0;
}

// The precheck's rule. The bound a chunk's preparation records is log2((max_k Γ_k + Σ_i ‖Wd_i‖·‖Kr_i‖)
// · (1 + 2^-10)) (chunk_decay_bound, warp_prep_parts.cuh), and the sum is >= 0, so log2 max_k Γ_k =
// max_k Σ_t a_t,k (the chunk's summed log2-decays, in the largest channel) is at most that bound. A
// piece whose candidates' lower bounds fail warmup_chunks' rule at the limit raised by kPrecheckMargin
// fails it with the recorded bounds too: the margin covers the difference between the two float32
// computations of max_k Σ_t a_t,k (summation order, exp2 and log2 approximations: ~1e-5, tested in
// tests/test_warmup_bound.cpp against float64) for each of the kCap chunks, many times over. So the
// precheck never refuses a piece that the full rule would take; where it passes, the full rule decides.
inline constexpr float kPrecheckMargin = 1.0f / 64.0f;

// Whether a piece starting at chunk c0 certainly falls back: lb_before(i), chunk c0 - 1 - i's
// max_k Σ_t a_t,k (log2), for i < min(kCap, c0).
template <int kCap, class LowerBefore>
KDA_HD bool warmup_certainly_fails(LowerBefore lb_before, int32_t c0) {
  int32_t w = 0;
  return !warmup_chunks<kCap>(lb_before, c0, kWarmupLog2Bound + kPrecheckMargin, &w);
}

}  // namespace kda::sm90
