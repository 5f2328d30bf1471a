// The SM90 kernels against the float64 golden vectors: the repository's generated cases
// (tests/golden_gen.h; registered from a fixed list, a failure when their data is missing) and,
// when a copy is present, the shared golden set (made independently; skipped with a message when absent, a
// failure when FLASH_KDA_GOLDEN_DIR names a missing folder). Each case must meet the pass rule of
// its tolerances.json (out <= max(4e-3, FLA), final_state <= max(3e-3, FLA); the generated cases
// have no FLA column), with no NaN or Inf and bitwise-identical results on a second run. Also the
// standard random case of spec §3 (B=1, T=300, H=4, lower_bound -5, fp32 initial state, N(0,1)
// inputs) against the CPU float64 recurrence, printed next to the anchors (FLA 4.1e-3 / 2.7e-3,
// FlashKDA 5.6e-3 / 4.7e-3). Every case is also held to the emulated kernel's prediction for its inputs
// (gpu_harness.h's emulated_bounds), much the sharper rule for final states. Prints "[ errors ]" lines
// with the measured errors.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <limits>

#include "tests/golden_gen.h"
#include "tests/golden_io.h"
#include "tests/gpu/gpu_harness.h"
#include "tests/random_problem.h"

namespace kda::test {
namespace {

// One GPU run into outputs poisoned with NaN.
HostOutputs run_case(const GoldenCase& c) {
  HostOutputs outs = make_host_outputs(c, 0xffff, std::numeric_limits<float>::quiet_NaN());
  const kda_fwd_params p = make_host_params(c, &outs);
  const kda_status st = run_on_gpu(p);
  EXPECT_EQ(st.code, KDA_OK) << st.message;
  return outs;
}

void check_case_on_gpu(const GoldenCase& c, const std::string& dir, const char* source) {
  const HostOutputs a = run_case(c);
  const RunErrors e = golden_errors(c, a), emu = emulated_golden_errors(c);
  double out_tol = 0, state_tol = 0;
  golden_tolerance(dir, c.name, &out_tol, &state_tol);
  std::printf("[ errors ] %-6s %-20s gpu  out %.3e (tol %.2e)  final_state %.3e (tol %.2e) | emulated kernel %.3e, "
              "%.3e\n",
              source, c.name.c_str(), e.out, out_tol, e.state, state_tol, emu.out, emu.state);
  ::testing::Test::RecordProperty(std::string(source) + "_" + c.name + "_out_err", std::to_string(e.out));
  ::testing::Test::RecordProperty(std::string(source) + "_" + c.name + "_final_state_err", std::to_string(e.state));
  EXPECT_EQ(e.non_finite, 0u);
  EXPECT_LE(e.out, out_tol);
  EXPECT_LE(e.state, state_tol);
  expect_as_emulated(std::string(source) + " " + c.name, e, emu);

  const HostOutputs b = run_case(c);
  EXPECT_EQ(std::memcmp(a.out.data(), b.out.data(), a.out.size() * 2), 0) << "out differs between two runs";
  EXPECT_EQ(std::memcmp(a.final_state.data(), b.final_state.data(), a.final_state.size() * 4), 0)
      << "final_state differs between two runs";
}

class RepoGoldenGpu : public ::testing::TestWithParam<std::string> {};

TEST_P(RepoGoldenGpu, WithinToleranceOfFloat64AndDeterministic) {
  KDA_SKIP_WITHOUT_SM90();
  const std::string dir = repo_golden_dir();
  ASSERT_TRUE(golden_available(dir)) << "in-repo golden vectors missing: no " << dir
                                     << "/index.json (the build writes them: target flash_kda_golden_data)";
  GoldenCase c;
  std::string error;
  ASSERT_TRUE(load_golden_case(dir, GetParam(), &c, &error)) << error;
  check_case_on_gpu(c, dir, "repo");
}

INSTANTIATE_TEST_SUITE_P(Repo, RepoGoldenGpu, ::testing::ValuesIn(repo_golden_case_names()),
                         [](const auto& info) { return info.param; });

TEST(SharedGoldenGpu, EveryCaseWithinToleranceOfFloat64AndDeterministic) {
  KDA_SKIP_WITHOUT_SM90();
  std::string dir, skip, failure, error;
  const std::vector<std::string> names = shared_golden_cases(&dir, &skip, &failure);
  ASSERT_TRUE(failure.empty()) << failure;
  if (!skip.empty()) GTEST_SKIP() << skip;
  for (const std::string& name : names) {
    SCOPED_TRACE("shared golden case " + name);
    GoldenCase c;
    if (!load_golden_case(dir, name, &c, &error)) {
      ADD_FAILURE() << error;
      continue;
    }
    check_case_on_gpu(c, dir, "shared");
  }
}

TEST(StandardRandomCase, ErrorsAgainstFloat64NextToAnchors) {
  KDA_SKIP_WITHOUT_SM90();
  ProblemSpec spec;
  spec.B = 1;
  spec.T = 300;
  spec.H = spec.HV = 4;
  spec.seed = 300;
  RandomProblem gpu = make_random_problem(spec);
  const GpuErrors e = gpu_vs_f64(gpu);
  const double out_err = e.out, state_err = e.state;
  EXPECT_EQ(e.non_finite, 0u);
  std::printf("[ errors ] standard case T=300 H=4: gpu out %.3e final_state %.3e | anchors: FLA 4.1e-3 / 2.7e-3, "
              "FlashKDA 5.6e-3 / 4.7e-3 | goal 2.5e-3 / 1.5e-3\n",
              out_err, state_err);
  RecordProperty("out_err", std::to_string(out_err));
  RecordProperty("final_state_err", std::to_string(state_err));
  EXPECT_LE(out_err, 4.1e-3);
  EXPECT_LE(state_err, 2.7e-3);
  // Issue 10's accuracy target on this case: out <= 2.0e-3 (1.71e-3 on the two kernels, 1.76e-3 on the
  // single pass, H200, 2026-12-04). The preparation's M = Qd·Kiᵀ without its lo terms gives 2.79e-3
  // and passed every other test (tests/mutants/18_prep_m_without_lo.patch): this bound is what holds
  // the precision design (docs/design.md §2.5) in place.
  EXPECT_LE(out_err, 2.0e-3) << "out above issue 10's accuracy target (a hi/lo split dropped?)";
  // The final state's last update carries U and Kr as hi + lo pairs (kernel_params.h, kr_lo): 1.75e-5
  // on the H200 (2026-12-01) against 2.18e-3 without; the spec's goal is 1.5e-3. A build with
  // FLASH_KDA_FINAL_SPLIT=0 fails here.
  EXPECT_LE(state_err, 1.5e-4) << "the final state's last update is not split (FLASH_KDA_FINAL_SPLIT?)";
  // And both within the emulated kernel's prediction for these inputs (gpu_harness.h's rule).
  expect_as_emulated("standard case T=300 H=4", e, e.emulated);
  // The case above runs a warm-up plan on mma.sync slices (4 units); 96 heads run the one-pass
  // plan on wgmma (one CTA per unit): the same accuracy there, out and final state.
  ProblemSpec full = spec;
  full.T = 200;
  full.H = full.HV = 96;
  RandomProblem gfull = make_random_problem(full);
  expect_close("T=200 H=96 (one pass, wgmma)", gpu_vs_f64(gfull), 2.0e-3, 1.5e-4);
}

}  // namespace
}  // namespace kda::test
