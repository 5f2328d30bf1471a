// Host interface of the launcher of context parallelism across GPUs (cp_sm90.cu; docs/design.md
// §3.4). Plain C++: no kernel code, no CUDA headers beyond the stream type.
#pragma once

#include <cstddef>

#include "src/core/cp_problem.h"
#include "src/launch/plan.h"

namespace kda::sm90 {

// The transition plan (plan.h) of a validated shard on the current device.
TransitionPlan transition_plan(const TransitionProblem& problem);

// Workspace for kda_segment_transition and the kda_fwd_prepared call that follows it (the larger).
size_t transition_workspace_bytes(const TransitionProblem& problem, const TransitionPlan& plan);

// Enqueues the preparation and, when N_t > 0, the transition pass and the fold on `stream`.
// Preconditions: validated for the device, SM90, the workspace of transition_workspace_bytes.
kda_status segment_transition(const TransitionProblem& problem, const TransitionPlan& plan, void* workspace,
                              kda_stream_t stream);

// Enqueues combine_transitions_kernel on `stream` (validated for the device).
kda_status combine_transitions(const CombineProblem& problem, kda_stream_t stream);

}  // namespace kda::sm90
