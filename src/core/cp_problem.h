// Validated problems of context parallelism across GPUs (flash_kda.h, last section; docs/design.md
// §3.4): produced by src/api/validate_cp.cpp, consumed by api_cp.cpp and the launcher
// (src/launch/cp_sm90.cu). Data only, host only.
#pragma once

#include <cstdint>

#include "src/core/problem.h"

namespace kda {

// A shard for kda_segment_transition: the forward problem plus which transitions to compute.
struct TransitionProblem {
  Problem shard;                // shard.params: the params of transition_params (caller-owned)
  int64_t num_transitions = 0;  // N_t: the last N_t sequences (0: the preparation only)
  kda_tensor D{}, M{};          // [N_t, HV, 128, 128] f32 (absent when N_t = 0)
};

struct CombineProblem {
  int64_t R = 0, N = 0, HV = 0;
  kda_tensor D{}, M{}, initial_state{}, start_states{}, end_state{};
};

}  // namespace kda
