// Inputs at the edge of fp32 (issue 8 item 5) on the float32 chunked path against the float64
// recurrence: q and k near the largest bf16 (their sum of squares overflows fp32), softplus gates
// of +inf and huge arguments, a preactivated gate of -inf, and a rate exp(A_log) past fp32 with a
// zero gate argument; and degenerate chunks (identical keys with b = 1, gates and betas saturated
// chunk by chunk, softplus gates of +-100). The float64 path stays finite on all of them; the chunked path (the GPU
// kernel's algebra and guards) must agree with it and stay finite. The guards' building blocks are
// in tests/test_kernel_math.cpp; the GPU versions of these cases in tests/gpu/test_gpu_numerics.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "reference/common.h"
#include "tests/golden_io.h"
#include "tests/edge_inputs.h"
#include "tests/random_problem.h"

namespace kda::test {
namespace {

constexpr int64_t D = 128;

// Runs both CPU paths on `spec` with inputs changed by `edit`; expects finite results and the
// chunked path within out_tol (bf16 out) and state_tol (fp32 state) of the float64 path.
void expect_paths_agree(const ProblemSpec& spec, const std::function<void(RandomProblem&)>& edit, const char* what,
                        double out_tol = 0x1p-8, double state_tol = 1e-4) {
  RandomProblem f64 = make_random_problem(spec);
  edit(f64);
  RandomProblem f32 = f64;
  kda_fwd_params p64 = f64.params(), p32 = f32.params();
  ASSERT_EQ(kda_fwd_cpu(&p64, KDA_CPU_RECURRENCE_F64, 0).code, KDA_OK) << what;
  ASSERT_EQ(kda_fwd_cpu(&p32, KDA_CPU_CHUNKED_F32, 0).code, KDA_OK) << what;
  const std::vector<double> o64 = bf16_to_f64(f64.out), o32 = bf16_to_f64(f32.out);
  const std::vector<double> s64 = f32_to_f64(f64.final_f32), s32 = f32_to_f64(f32.final_f32);
  ASSERT_EQ(count_non_finite(o64), 0u) << what << ": the float64 path itself";
  ASSERT_EQ(count_non_finite(s64), 0u) << what << ": the float64 path itself";
  double norm = 0.0;  // an edit that zeroed every output would make the comparison pass
  for (double x : o64) norm += x * x;
  ASSERT_GT(norm, 0.0) << what << ": every output of the float64 path is zero";
  EXPECT_EQ(count_non_finite(o32), 0u) << what;
  EXPECT_EQ(count_non_finite(s32), 0u) << what;
  const double out_err = rel_l2(o32, o64), state_err = rel_l2(s32, s64);
  std::printf("[ errors ] %-44s chunked vs f64: out %.3e final_state %.3e\n", what, out_err, state_err);
  EXPECT_LE(out_err, out_tol) << what;
  EXPECT_LE(state_err, state_tol) << what;
}

TEST(CpuNumerics, QueriesAndKeysNearTheLargestBf16) {
  for (kda_gate gate : {KDA_GATE_BOUNDED, KDA_GATE_SOFTPLUS}) {
    ProblemSpec spec;
    spec.T = 50, spec.H = 1, spec.HV = 2, spec.gate = gate, spec.seed = 11;
    expect_paths_agree(spec, [](RandomProblem& p) { make_huge_rows(p, 5); },
                       gate == KDA_GATE_BOUNDED ? "huge q, k (bounded gate)" : "huge q, k (softplus gate)");
  }
}

TEST(CpuNumerics, L2NormOfHugeVectorsIsAUnitVector) {
  std::vector<float> x(D);
  for (int64_t i = 0; i < D; ++i) x[i] = (i % 2 ? -3.0e38f : 2.5e38f) * (1.0f + 0.001f * i);
  std::vector<float> y(D);
  reference::l2_normalize(x.data(), y.data(), D);
  double norm = 0.0;
  for (float v : y) norm += static_cast<double>(v) * v;
  EXPECT_NEAR(std::sqrt(norm), 1.0, 1e-5);
  for (int64_t i = 0; i < D; ++i) EXPECT_EQ(std::signbit(y[i]), std::signbit(x[i]));
}

TEST(CpuNumerics, SoftplusGateOfInfinityIsAFullDecay) {
  ProblemSpec spec;
  spec.T = 70, spec.H = 1, spec.HV = 2, spec.gate = KDA_GATE_SOFTPLUS, spec.seed = 12;
  // A few whole tokens and scattered channels of +inf and of huge finite gates; -inf is a no-decay.
  expect_paths_agree(spec, [](RandomProblem& p) {
    make_extreme_softplus_gates(p, {5, 16, 17, 40});
  }, "softplus gate with +inf, -inf and 3e38");
}

TEST(CpuNumerics, PreactivatedGateOfMinusInfinity) {
  ProblemSpec spec;
  spec.T = 40, spec.H = 1, spec.HV = 1, spec.gate = KDA_GATE_PREACTIVATED, spec.seed = 13;
  expect_paths_agree(spec, [](RandomProblem& p) {
    make_extreme_preactivated_gates(p);
  }, "preactivated gate with -inf and -3e38");
}

TEST(CpuNumerics, RateBeyondFp32WithAZeroGateArgument) {
  // exp(100) does not fit in fp32: an uncapped rate gave inf · 0 = NaN where g + dt_bias = 0.
  for (kda_gate gate : {KDA_GATE_BOUNDED, KDA_GATE_SOFTPLUS}) {
    ProblemSpec spec;
    spec.T = 40, spec.H = 1, spec.HV = 2, spec.gate = gate, spec.seed = 14;
    expect_paths_agree(spec, [](RandomProblem& p) {
      p.A_log[0] = 100.0f;
      p.A_log[1] = 88.5f;
      for (float& d : p.dt_bias) d = 0.0f;
      for (size_t i = 0; i < p.g.size(); i += 3) p.g[i] = 0;  // g + dt_bias = 0 exactly
      for (size_t i = 1; i < p.g.size(); i += 5) p.g[i] = reference::float_to_bf16(-200.0f);  // softplus = 0 in fp32
    }, gate == KDA_GATE_BOUNDED ? "A_log 100, zero argument (bounded)" : "A_log 100, zero argument (softplus)");
  }
}

TEST(CpuNumerics, IdenticalKeysInAChunk) {
  for (kda_gate gate : {KDA_GATE_BOUNDED, KDA_GATE_SOFTPLUS}) {
    const EdgeCase c = degenerate_chunks_case(DegenerateChunks::kIdenticalKeys, gate, 70, 15);
    expect_paths_agree(c.spec, c.edit, c.name.c_str());
  }
}

TEST(CpuNumerics, SaturatedGatesAndBetas) {
  for (kda_gate gate : {KDA_GATE_BOUNDED, KDA_GATE_SOFTPLUS}) {
    const EdgeCase c = degenerate_chunks_case(DegenerateChunks::kSaturatedGates, gate, 70, 16);
    expect_paths_agree(c.spec, c.edit, c.name.c_str());
  }
}

}  // namespace
}  // namespace kda::test
