// Intra-card context parallelism (src/launch/plan.h): sequences split into P segments, run in two
// passes around a float32 combine. Every plan must meet the golden pass rule against the CPU
// float64 recurrence, for every segment count (including more segments than chunks), state dtype,
// gate form, varlen layout and slice configuration; the automatic plan must be deterministic and
// capturable in a CUDA graph.
#include <gtest/gtest.h>

#include <cstdio>

#include "tests/gpu/gpu_harness.h"
#include "tests/random_problem.h"

namespace kda::test {
namespace {

// The golden pass rule's tolerances.
void expect_pass_rule(const char* what, const GpuErrors& e) { expect_close(what, e, 4e-3, 3e-3); }

TEST(GpuContext, EverySegmentCount) {
  KDA_SKIP_WITHOUT_SM90();
  // 44 chunks per sequence (the last one partial): P = 2 (no combine), 3, 4, 7, 16, and 64 (most
  // segments empty).
  for (int P : {2, 3, 4, 7, 16, 64}) {
    ProblemSpec s;
    s.B = 2;
    s.T = 700;
    s.H = s.HV = 2;
    s.context_split = P;
    s.seed = 300 + P;
    RandomProblem p = make_random_problem(s);
    char name[64];
    std::snprintf(name, sizeof(name), "P = %d, B = 2, T = 700, H = 2", P);
    expect_pass_rule(name, gpu_vs_f64(p));
  }
}

TEST(GpuContext, EverySliceConfiguration) {
  KDA_SKIP_WITHOUT_SM90();
  // Units 1, 4, 24 and 160 give the forced plans different value-row slices in each pass (and
  // several waves of CTAs for 160).
  for (int64_t h : {1, 4, 24, 160}) {
    ProblemSpec s;
    s.T = 260;
    s.H = s.HV = h;
    s.context_split = 3;
    s.seed = 400 + h;
    RandomProblem p = make_random_problem(s);
    char name[64];
    std::snprintf(name, sizeof(name), "P = 3, T = 260, H = %lld", static_cast<long long>(h));
    expect_pass_rule(name, gpu_vs_f64(p));
  }
}

TEST(GpuContext, StateDtypeMatrix) {
  KDA_SKIP_WITHOUT_SM90();
  ProblemSpec s;
  s.T = 333;
  s.H = s.HV = 2;
  s.context_split = 4;
  check_state_dtype_matrix(s, "P = 4, ", 500, 4e-3, 3e-3);
}

TEST(GpuContext, VarlenInt32AndInt64Agree) {
  KDA_SKIP_WITHOUT_SM90();
  ProblemSpec s;
  s.T = 900;
  s.H = s.HV = 3;
  s.cu_seqlens = {0, 0, 5, 300, 301, 333, 900};  // empty, shorter than a chunk, longer than P chunks
  s.context_split = 5;
  s.seed = 600;
  check_varlen_int32_matches_int64(s, "P = 5, varlen", 4e-3, 3e-3);
}

TEST(GpuContext, GateFormsAndGroupedHeads) {
  KDA_SKIP_WITHOUT_SM90();
  const kda_gate gates[3] = {KDA_GATE_BOUNDED, KDA_GATE_SOFTPLUS, KDA_GATE_PREACTIVATED};
  for (kda_gate gate : gates) {
    ProblemSpec s;
    s.T = 500;
    s.H = 1;
    s.HV = 4;
    s.gate = gate;
    if (gate == KDA_GATE_PREACTIVATED) s.g_scale = 0.05f;
    s.context_split = 6;
    s.seed = 700 + gate;
    RandomProblem p = make_random_problem(s);
    char name[64];
    std::snprintf(name, sizeof(name), "P = 6, gate %d, H = 1, HV = 4", static_cast<int>(gate));
    expect_pass_rule(name, gpu_vs_f64(p));
  }
}

TEST(GpuContext, AutomaticPlanIsDeterministicAndMatchesOnePass) {
  KDA_SKIP_WITHOUT_SM90();
  // T = 4096, H = 2: the automatic plan splits (tests/test_plan.cpp); its results are repeatable
  // bit for bit and as accurate as the one-pass plan's.
  ProblemSpec s;
  s.T = 4096;
  s.H = s.HV = 2;
  s.seed = 800;
  RandomProblem a = make_random_problem(s);
  const GpuErrors auto_err = gpu_vs_f64(a);
  expect_pass_rule("automatic plan, T = 4096, H = 2", auto_err);
  RandomProblem b = make_random_problem(s);
  ASSERT_EQ(run_on_gpu(b.params(), 3).code, KDA_OK);
  expect_identical(a, b, "automatic plan: one run vs three");
  s.context_split = 1;
  RandomProblem one = make_random_problem(s);
  expect_pass_rule("one-pass plan, T = 4096, H = 2", gpu_vs_f64(one));
}

TEST(GpuContext, CudaGraphCaptureAndReplay) {
  KDA_SKIP_WITHOUT_SM90();
  ProblemSpec s;
  s.T = 600;
  s.H = s.HV = 2;
  s.cu_seqlens = {0, 250, 600};
  s.context_split = 4;
  check_graph_replay(s, "P = 4");
}

TEST(GpuContext, WorkspaceGrowsWithTheSplit) {
  KDA_SKIP_WITHOUT_SM90();
  ProblemSpec s;
  s.T = 700;
  s.H = s.HV = 2;
  RandomProblem p = make_random_problem(s);
  kda_fwd_params a = p.params();
  size_t one = 0, four = 0;
  a.context_split = 1;
  ASSERT_EQ(kda_fwd_workspace_size(&a, &one).code, KDA_OK);
  a.context_split = 4;
  ASSERT_EQ(kda_fwd_workspace_size(&a, &four).code, KDA_OK);
  // 2 units x (3 states + 2 transitions) x 64 KiB of float32, after the records.
  EXPECT_GE(four, one + 2u * 5u * 128u * 128u * 4u);
  // A workspace sized for the one-pass plan is refused by the split plan, with the size it needs.
  DeviceProblem dp(a);
  const kda_status st = kda_fwd(&dp.params(), dp.workspace(), one, nullptr);
  EXPECT_EQ(st.code, KDA_ERROR_WORKSPACE_TOO_SMALL) << st.message;
}

}  // namespace
}  // namespace kda::test
