// Host interface of the decode launcher (decode_sm90.cu). Plain C++: no kernel code.
#pragma once

#include "src/core/decode_problem.h"

namespace kda::sm90 {

// Enqueues the decode / verify step on `stream`: one kernel launch, no workspace, no allocation,
// no synchronisation. Preconditions: `problem` validated for the device, the current device is SM90.
kda_status decode(const DecodeProblem& problem, kda_stream_t stream);

// The opt-in content check (check_indices): synchronises `stream` (refused while it is being
// captured into a CUDA graph), fills `result` (src/core/decode_problem.h) from the device.
kda_status decode_check(const DecodeProblem& problem, kda_stream_t stream, DecodeCheckResult* result);

}  // namespace kda::sm90
