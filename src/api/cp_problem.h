// Validated problems of context parallelism across GPUs (flash_kda.h, last section; docs/design.md
// §3.4): produced by validate_cp.cpp, consumed by api_cp.cpp and the launcher (src/launch/cp_sm90.cu).
#pragma once

#include <cstdint>

#include "src/api/problem.h"

namespace kda {

// A shard for kda_segment_transition: the forward problem plus which transitions to compute.
struct TransitionProblem {
  Problem shard;                // shard.params: the params of transition_params (caller-owned)
  int64_t num_transitions = 0;  // N_t: the last N_t sequences (0: the preparation only)
  kda_tensor D{}, M{};          // [N_t, HV, 128, 128] f32 (absent when N_t = 0)
};

// The params as kda_segment_transition reads them: initial_state and final_state cleared, out
// replaced by a stand-in with v's shape and strides (validated like out, never written).
// `params` must be non-null with the right struct_size.
kda_fwd_params transition_params(const kda_fwd_params& params);

// Validates `params` (from transition_params) like kda_fwd in `mode`, then D and M.
kda_status validate_transition(const kda_fwd_params* params, const kda_tensor& D, const kda_tensor& M,
                               ValidateMode mode, TransitionProblem* out);

struct CombineProblem {
  int64_t R = 0, N = 0, HV = 0;
  kda_tensor D{}, M{}, initial_state{}, start_states{}, end_state{};
};

// kda_combine_transitions' arguments; `for_device`: data pointers required and 16-byte aligned.
kda_status validate_combine(int64_t num_shards, const kda_tensor& D, const kda_tensor& M,
                            const kda_tensor& initial_state, const kda_tensor& start_states,
                            const kda_tensor& end_state, bool for_device, CombineProblem* out);

}  // namespace kda
