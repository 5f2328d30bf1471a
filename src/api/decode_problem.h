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

}  // namespace kda
