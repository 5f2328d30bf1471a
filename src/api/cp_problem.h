// Validation of the context-parallel entry points into the problems of src/core/cp_problem.h.
#pragma once

#include "src/api/problem.h"
#include "src/core/cp_problem.h"

namespace kda {

// The params as kda_segment_transition reads them: initial_state and final_state cleared, out
// replaced by a stand-in with v's shape and strides (validated like out, never written).
// `params` must be non-null with the right struct_size.
kda_fwd_params transition_params(const kda_fwd_params& params);

// Validates `params` (from transition_params) like kda_fwd in `mode`, then D and M.
kda_status validate_transition(const kda_fwd_params* params, const kda_tensor& D, const kda_tensor& M,
                               ValidateMode mode, TransitionProblem* out);

// kda_combine_transitions' arguments; `for_device`: data pointers required and 16-byte aligned.
kda_status validate_combine(int64_t num_shards, const kda_tensor& D, const kda_tensor& M,
                            const kda_tensor& initial_state, const kda_tensor& start_states,
                            const kda_tensor& end_state, bool for_device, CombineProblem* out);

}  // namespace kda
