// The forward pass's workspace (kda_fwd and kda_fwd_prepared; docs/design.md §3.2-§3.5): its layout,
// computed from the problem and the plan by host arithmetic, for fwd_sm90.cu's launches and the size
// queries (launch.h: fwd_workspace_bytes, fwd_prepared_workspace_bytes, single_pass_flags, the
// preparation's regions). Plain C++, for the launchers only (not the API layer, which sees launch.h);
// its definitions are in fwd_workspace.cu, compiled with the kernels' build knobs (kFinalSplit,
// FLASH_KDA_WARMUP_TAIL) so that the layout and the launches always agree.
//
// In order: [HV][num_vchunks] chunk records (chunk_record.cuh), kCheckBytes for the opt-in cu_seqlens
// check, the bounded warm-up's chunk bounds, the final states' Kr low parts, the warm-up's fallback
// flags and deferred final states (in place), the single pass's pieces' epoch and flags, the warm-up
// tail's counters, then (sequence parallelism only) the exact combine's float32 states and transitions.
// A call that the single pass covers whole has only the check word and the pieces' flags.
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/core/problem.h"
#include "src/launch/launch.h"
#include "src/launch/plan.h"

namespace kda::sm90 {

inline constexpr size_t kCheckBytes = 256;

// 16-token chunks of the problem (a packed batch: one more per sequence, for their partial chunks).
int64_t num_vchunks(const Problem& pr);

// The preparation kda_segment_transition leaves for kda_fwd_prepared: records and check word, the
// chunk bounds, then (kFinalSplit) the Kr low parts. workspace_layout places the bounds and a
// prepared call's Kr low parts at these same offsets.
struct PreparationLayout {
  size_t bounds = 0, bounds_end = 0, kr_lo = 0, total = 0;
};
PreparationLayout preparation_layout(const Problem& pr);

// Byte offsets in the workspace (the order above); 0 where a region is absent. Sizes saturate at
// SIZE_MAX. A call that the single pass covers whole (single.covers_call(), launch.h: whole sequences,
// or pieces whose fallback is the whole-sequence single pass) has no records and none of the two
// kernels' regions: the check word, then the pieces' flags.
struct WorkspaceLayout {
  size_t context = 0, bounds = 0, fallback = 0, deferred = 0, kr_lo = 0, tail = 0, piece_fail = 0, total = 0;
  size_t check = 0;  // the check word (check_cu_seqlens)
  SinglePassChoice single;  // what the single pass does with the call (not computed with `prepared`)
};
WorkspaceLayout workspace_layout(const Problem& pr, const RecurrencePlan& plan, bool prepared);

// Whether a warm-up plan's fallback runs as tail jobs of pass 1's grid (recurrence_tail.cuh): through
// kda_fwd (whose preparation zeroes the counters), when the fallback has a pass 2 in pass 1's slices.
// Build knob FLASH_KDA_WARMUP_TAIL=0: the separate launches always (for measuring what the tail saves).
bool uses_tail(const RecurrencePlan& plan, bool prepared);

// Bytes of one unit's [128][128] final state in the call's dtype.
size_t final_state_bytes(const Problem& pr);

}  // namespace kda::sm90
