// Validation of kda_decode_params into a DecodeProblem (src/core/decode_problem.h) and the messages
// of the opt-in content check: the API layer's part of decode.
#pragma once

#include "src/api/problem.h"
#include "src/core/decode_problem.h"

namespace kda {

// Checks every rule of kda_decode_params that needs no device memory access and fills `out`, or
// returns an error naming the argument, the expectation and what was given. kShapesOnly is not
// used; kHost for the CPU path, kDevice adds the 16-byte alignment rules of the kernels.
kda_status validate_decode(const kda_decode_params* params, ValidateMode mode, DecodeProblem* out);

// The same check on host memory (kda_decode_cpu).
DecodeCheckResult check_decode_contents_host(const DecodeProblem& dp);
// KDA_OK, or the error naming the first bad entry (priority: range, accepted, cu_seqlens, length,
// duplicate).
kda_status decode_check_status(const DecodeProblem& dp, const DecodeCheckResult& r);
// kda_decode_cpu, always (host memory: cu_seqlens is read at no cost): no two non-empty sequences of a
// packed batch cover the same token once the entries are clamped to [0, B*T] as the kernels clamp them
// (their output rows would be written by two threads, in an order of the schedule). Contents that the
// opt-in check refuses but that overlap nothing (an entry past B*T, a sequence that ends before it
// starts: empty) still run, as on the GPU.
kda_status check_decode_sequences_disjoint_host(const DecodeProblem& dp);

}  // namespace kda
