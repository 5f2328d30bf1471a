// Inputs at the edge of fp32 for the numerics tests of both paths (tests/test_cpu_numerics.cpp,
// tests/gpu/test_gpu_numerics.cpp): edits of a RandomProblem's bf16 tensors.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "tests/random_problem.h"

namespace kda::test {

inline constexpr uint16_t kBf16PlusInf = 0x7f80, kBf16MinusInf = 0xff80;

// Scales a random two thirds of the q and k rows (chosen with `seed`) to magnitudes near the
// largest bf16 (1e19 .. 3.3e38): their squares overflow fp32.
void make_huge_rows(RandomProblem& p, uint64_t seed);

// Softplus gates: about 1/64 of the elements each +inf, 3e38 and -inf (a fixed pattern), and every
// channel of value head 1 at the given tokens +inf (needs HV = 2).
void make_extreme_softplus_gates(RandomProblem& p, std::initializer_list<int64_t> whole_tokens);

// Pre-activated gates: every 7th element -inf, every 11th from the 3rd -3e38.
void make_extreme_preactivated_gates(RandomProblem& p);

}  // namespace kda::test
