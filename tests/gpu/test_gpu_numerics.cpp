// The SM90 path on inputs at the edge of fp32 (issue 8 item 5), against the CPU float64
// recurrence: q and k rows near the largest bf16 (the preparation kernel's L2 norm overflowed fp32
// there and gave zeros), softplus gates of +inf and huge arguments and a preactivated gate of -inf
// (the per-token log-decay is floored, never inf - inf), and exp(A_log) past fp32 with a zero gate
// argument (the rate is capped, never inf · 0); degenerate chunks (identical keys with b = 1, gates
// and betas saturated chunk by chunk, softplus gates of +-100) under every method. Each case: finite outputs, within tolerance of the
// float64 result, bitwise identical on a second run. The CPU versions: tests/test_cpu_numerics.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "reference/common.h"
#include "tests/gpu/gpu_harness.h"
#include "tests/edge_inputs.h"
#include "tests/random_problem.h"

namespace kda::test {
namespace {

constexpr int64_t D = 128;

void check_case(const ProblemSpec& spec, const std::function<void(RandomProblem&)>& edit, const char* what) {
  RandomProblem p = make_random_problem(spec);
  edit(p);
  RandomProblem again = p;
  expect_close(what, gpu_vs_f64(p));
  ASSERT_EQ(run_on_gpu(again.params()).code, KDA_OK);
  expect_identical(p, again, what);
}

TEST(GpuNumerics, QueriesAndKeysNearTheLargestBf16) {
  KDA_SKIP_WITHOUT_SM90();
  for (kda_gate gate : {KDA_GATE_BOUNDED, KDA_GATE_SOFTPLUS}) {
    ProblemSpec s;
    s.B = 2, s.T = 90, s.H = 2, s.HV = 4, s.gate = gate, s.seed = 71;
    check_case(s, [](RandomProblem& p) { make_huge_rows(p, 5); },
               gate == KDA_GATE_BOUNDED ? "huge q, k (bounded)" : "huge q, k (softplus)");
  }
}

TEST(GpuNumerics, SoftplusGateOfInfinityIsAFullDecay) {
  KDA_SKIP_WITHOUT_SM90();
  for (int split : {1, 3}) {  // one pass and context parallelism
    ProblemSpec s;
    s.T = 200, s.H = 1, s.HV = 2, s.gate = KDA_GATE_SOFTPLUS, s.context_split = split, s.seed = 72;
    check_case(s, [](RandomProblem& p) {
      make_extreme_softplus_gates(p, {5, 16, 17, 40, 150});
    }, split == 1 ? "softplus +inf/-inf/3e38 gates" : "softplus +inf/-inf/3e38 gates, P = 3");
  }
}

TEST(GpuNumerics, PreactivatedGateOfMinusInfinity) {
  KDA_SKIP_WITHOUT_SM90();
  ProblemSpec s;
  s.T = 64, s.H = 1, s.HV = 1, s.gate = KDA_GATE_PREACTIVATED, s.seed = 73;
  check_case(s, [](RandomProblem& p) {
    make_extreme_preactivated_gates(p);
  }, "preactivated -inf and -3e38 gates");
}

TEST(GpuNumerics, RateBeyondFp32WithAZeroGateArgument) {
  KDA_SKIP_WITHOUT_SM90();
  for (kda_gate gate : {KDA_GATE_BOUNDED, KDA_GATE_SOFTPLUS}) {
    ProblemSpec s;
    s.T = 48, s.H = 1, s.HV = 2, s.gate = gate, s.seed = 74;
    check_case(s, [](RandomProblem& p) {
      p.A_log[0] = 100.0f;
      p.A_log[1] = 88.5f;
      for (size_t i = 0; i < p.dt_bias.size(); ++i) p.dt_bias[i] = i % 2 ? 0.0f : 40.0f;  // huge dt · rate too
      for (size_t i = 0; i < p.g.size(); i += 3) p.g[i] = 0;
      for (size_t i = 1; i < p.g.size(); i += 5) p.g[i] = reference::float_to_bf16(-200.0f);
    }, gate == KDA_GATE_BOUNDED ? "A_log 100, zero argument (bounded)" : "A_log 100, zero argument (softplus)");
  }
}

// The same degenerate inputs under each method of the plan: automatic, one pass, the exact combine
// (3 segments) and the bounded warm-up forced to 4 pieces (units whose bound fails fall back).
struct Method {
  int32_t split, method;
  const char* name;
};
constexpr Method kMethods[] = {{0, KDA_CONTEXT_AUTO, "auto"},
                               {1, KDA_CONTEXT_AUTO, "one pass"},
                               {3, KDA_CONTEXT_EXACT, "exact, P = 3"},
                               {4, KDA_CONTEXT_WARMUP, "warm-up, 4 pieces"}};

// Neither result may be all zeros (an edit that zeroed everything would make any comparison pass).
void expect_nonzero(const RandomProblem& p, const std::string& what) {
  double out = 0, state = 0;
  for (uint16_t x : p.out) out += std::fabs(reference::bf16_to_float(x));
  for (float x : p.final_f32) state += std::fabs(x);
  EXPECT_GT(out, 0.0) << what;
  EXPECT_GT(state, 0.0) << what;
}

void check_every_method(ProblemSpec s, const std::function<void(RandomProblem&)>& edit, const std::string& what) {
  for (const Method& m : kMethods) {
    s.context_split = m.split;
    s.context_method = m.method;
    const std::string name = what + " [" + m.name + "]";
    RandomProblem p = make_random_problem(s);
    edit(p);
    RandomProblem again = p;
    expect_close(name.c_str(), gpu_vs_f64(p));
    expect_nonzero(p, name);
    ASSERT_EQ(run_on_gpu(again.params()).code, KDA_OK) << name;
    expect_identical(p, again, name.c_str());
  }
}

TEST(GpuNumerics, IdenticalKeysInAChunk) {
  KDA_SKIP_WITHOUT_SM90();
  for (kda_gate gate : {KDA_GATE_BOUNDED, KDA_GATE_SOFTPLUS}) {
    const EdgeCase c = degenerate_chunks_case(DegenerateChunks::kIdenticalKeys, gate, 200, 75);
    check_every_method(c.spec, c.edit, c.name);
  }
}

TEST(GpuNumerics, SaturatedGatesAndBetas) {
  KDA_SKIP_WITHOUT_SM90();
  for (kda_gate gate : {KDA_GATE_BOUNDED, KDA_GATE_SOFTPLUS}) {
    const EdgeCase c = degenerate_chunks_case(DegenerateChunks::kSaturatedGates, gate, 200, 76);
    check_every_method(c.spec, c.edit, c.name);
  }
}

}  // namespace
}  // namespace kda::test
