// Validation of kda_fwd_params into a Problem (src/core/problem.h): the API layer's entry to it.
#pragma once

#include "src/core/problem.h"
#include "src/core/status.h"

namespace kda {

// What validate() checks besides shapes, dtypes and strides.
enum class ValidateMode {
  kShapesOnly,  // workspace-size query: required tensors may have NULL data
  kHost,        // CPU reference: data pointers required (NULL allowed for tensors with no elements)
  kDevice       // GPU path: kHost plus row alignment for 16-byte vector loads
};

// Checks every rule that needs no device memory access. Returns KDA_OK and fills `out`, or an error
// whose message names the argument, the expectation and what was given.
// `writes_out` = false: out is a stand-in that nothing writes (kda_segment_transition): the memory
// rules on out (its rows distinct, disjoint from the inputs) are not applied.
kda_status validate(const kda_fwd_params* params, ValidateMode mode, Problem* out, bool writes_out = true);

}  // namespace kda
