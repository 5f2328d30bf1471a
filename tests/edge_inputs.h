// Inputs at the edge of fp32 for the numerics tests of both paths (tests/test_cpu_numerics.cpp,
// tests/gpu/test_gpu_numerics.cpp): edits of a RandomProblem's bf16 tensors.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>

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

// Degenerate chunks: in every even 16-token chunk of every batch row, each head's 16 keys are
// that chunk's first key and beta is +100 (b = 1 after the sigmoid), so A's rows are multiples of
// one another and every token of the chunk overwrites the same direction of the state. Needs the
// fixed-length layout (no cu_seqlens).
void make_identical_chunk_keys(RandomProblem& p);

// Gates saturated chunk by chunk (fixed-length layout): in chunks c % 3 == 0 every g is +big, in
// chunks c % 3 == 1 every g is -big, the rest keep their random values; beta is +100 or -100 (b = 1
// or 0) on alternate tokens. Bounded gate, big = 1e4: the sigmoid is exactly 1 (the strongest
// decay, lower_bound per token) or 0 (no decay at all, which the bounded warm-up cannot bound);
// softplus gate, big = 100: a decay of e^-100 per token or one of about e^-43 (a denormal).
void make_saturated_gates(RandomProblem& p, float big);

// The degenerate-chunk cases of tests/test_cpu_numerics.cpp and tests/gpu/test_gpu_numerics.cpp,
// per gate: B = 2 sequences of T tokens, H = 1, HV = 2 (grouped value heads), the edit above
// (saturated: +-1e4 for the bounded gate, +-100 for softplus) and the case's name.
enum class DegenerateChunks { kIdenticalKeys, kSaturatedGates };
struct EdgeCase {
  ProblemSpec spec;
  std::function<void(RandomProblem&)> edit;
  std::string name;
};
EdgeCase degenerate_chunks_case(DegenerateChunks kind, kda_gate gate, int64_t T, uint64_t seed);

}  // namespace kda::test
