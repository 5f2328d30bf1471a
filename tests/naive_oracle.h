// An independent transcription of the KDA recurrence of the shared contract (§1), used to check
// the project's float64 recurrence on the repository's generated golden cases (whose expected
// values that recurrence produced) and on the random configurations of test_random_matrix_cpu.cpp
// (all but allow_neg_eigval, which it does not take): its own decoding of the inputs
// (HostArray::to_f64), gates, L2 norm and loops, sharing no code with reference/. Plain float64,
// token by token.
#pragma once

#include <vector>

#include "tests/golden_io.h"

namespace kda::test {

// out as [B, T, HV, V] (rows outside every sequence 0) and the final state [N, HV, V, K] of case c.
void naive_recurrence(const GoldenCase& c, std::vector<double>* out, std::vector<double>* state);

}  // namespace kda::test
