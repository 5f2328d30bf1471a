// How the recurrence is laid out on the GPU: value-row slices per (sequence, head) and, for long
// sequences with few heads, intra-card context parallelism (docs/design.md §4). Host code only
// (no CUDA), so the choice is unit-tested on the CPU (tests/test_plan.cpp).
//
// Context parallelism with P segments splits every sequence's chunks into P equal ranges:
//   pass 1  segment 0 runs from the true initial state (writing its outputs and its end state E0);
//           each middle segment p = 1..P-2 runs from a zero state (its end state Lp) and, on
//           separate CTAs, its transition Mp (the same recurrence on the identity with zero values:
//           a row r of the state maps to r·Mp over the segment);
//   combine the start states S1 = E0, S(p+1) = Sp·Mp + Lp (float32, sequential over p);
//   pass 2  segments 1..P-1 run from their start states, writing outputs (and the final state).
// The chain each CTA walks shrinks from C chunks to about 2·C/P, at the price of the transition
// rows (twice the work on middle segments) and the combine.
#pragma once

#include <cstddef>
#include <cstdint>

#include "flash_kda/flash_kda.h"

namespace kda::sm90 {

inline constexpr int kMaxContextSegments = KDA_MAX_CONTEXT_SPLIT;  // what validation accepts

struct RecurrencePlan {
  int segments = 1;       // P: 1 = whole sequences (one pass)
  int vsplit_first = 1;   // value-row slices (1, 2, 4, 8) of the whole-sequence pass or of pass 1
  int vsplit_second = 1;  // slices of pass 2 (P > 1)
  double cost_us = 0;     // the model's estimate of the recurrence time
};

// CTAs of each pass for `units` = sequences x value heads.
inline int64_t first_pass_ctas(int64_t units, const RecurrencePlan& p) {
  return units * p.vsplit_first * (p.segments == 1 ? 1 : 2 * p.segments - 3);
}
inline int64_t second_pass_ctas(int64_t units, const RecurrencePlan& p) {
  return p.segments == 1 ? 0 : units * p.vsplit_second * (p.segments - 1);
}

// Chooses the plan for `units` (sequences x value heads), `chunks` (16-token chunks of the longest
// sequence, or an upper bound) and `sms` streaming multiprocessors: the fastest under a latency
// model of the recurrence (one CTA per SM, a per-chunk step time that shrinks with the slice).
// forced_segments: 0 = automatic; n >= 1 = exactly n segments (1 = no context parallelism).
RecurrencePlan plan_recurrence(int64_t units, int64_t chunks, int sms, int forced_segments);

// Float32 workspace of the context-parallel passes: (P-1) states and max(P-2, 0) transitions of
// 128 x 128 per unit (0 for P = 1); SIZE_MAX when the product does not fit in size_t.
size_t context_workspace_bytes(int64_t units, const RecurrencePlan& plan);

}  // namespace kda::sm90
