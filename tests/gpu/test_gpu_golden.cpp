// The SM90 kernels against the float64 golden vectors (../shared/golden): each case must meet the
// pass rule of golden/tolerances.json (out <= max(4e-3, FLA), final_state <= max(3e-3, FLA)),
// with no NaN or Inf and bitwise-identical results on a second run. Also the standard random case
// of spec §3 (B=1, T=300, H=4, lower_bound -5, fp32 initial state, N(0,1) inputs) against the CPU
// float64 recurrence, printed next to the anchors (FLA 4.1e-3 / 2.7e-3, FlashKDA 5.6e-3 / 4.7e-3).
// Prints "[ errors ]" lines with the measured errors.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <limits>

#include "tests/golden_io.h"
#include "tests/gpu/gpu_harness.h"
#include "tests/random_problem.h"

namespace kda::test {
namespace {

std::vector<std::string> case_names() {
  std::string error;
  std::vector<std::string> names = golden_case_names(golden_dir(), &error);
  if (names.empty()) names.push_back("golden_folder_missing");
  return names;
}

class GoldenGpu : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    KDA_SKIP_WITHOUT_SM90();
    dir_ = golden_dir();
    if (!golden_available(dir_))
      GTEST_SKIP() << "golden folder not found: looked for " << dir_ << "/index.json (set FLASH_KDA_GOLDEN_DIR)";
    std::string error;
    ASSERT_TRUE(load_golden_case(dir_, GetParam(), &c_, &error)) << error;
  }
  // One GPU run into outputs poisoned with NaN.
  HostOutputs run() {
    HostOutputs outs = make_host_outputs(c_, 0xffff, std::numeric_limits<float>::quiet_NaN());
    const kda_fwd_params p = make_host_params(c_, &outs);
    const kda_status st = run_on_gpu(p);
    EXPECT_EQ(st.code, KDA_OK) << st.message;
    return outs;
  }
  std::string dir_;
  GoldenCase c_;
};

TEST_P(GoldenGpu, WithinToleranceOfFloat64AndDeterministic) {
  const HostOutputs a = run();
  const std::vector<double> out = bf16_to_f64(a.out), state = f32_to_f64(a.final_state);
  const double out_err = rel_l2(out, c_.find("expected_o")->to_f64());
  const double state_err = rel_l2(state, c_.find("expected_final_state")->to_f64());
  double out_tol = 0, state_tol = 0;
  golden_tolerance(dir_, GetParam(), &out_tol, &state_tol);
  std::printf("[ errors ] %-20s gpu  out %.3e (tol %.2e)  final_state %.3e (tol %.2e)\n", GetParam().c_str(), out_err,
              out_tol, state_err, state_tol);
  RecordProperty("out_err", std::to_string(out_err));
  RecordProperty("final_state_err", std::to_string(state_err));
  EXPECT_EQ(count_non_finite(out), 0u);
  EXPECT_EQ(count_non_finite(state), 0u);
  EXPECT_LE(out_err, out_tol);
  EXPECT_LE(state_err, state_tol);

  const HostOutputs b = run();
  EXPECT_EQ(std::memcmp(a.out.data(), b.out.data(), a.out.size() * 2), 0) << "out differs between two runs";
  EXPECT_EQ(std::memcmp(a.final_state.data(), b.final_state.data(), a.final_state.size() * 4), 0)
      << "final_state differs between two runs";
}

INSTANTIATE_TEST_SUITE_P(Golden, GoldenGpu, ::testing::ValuesIn(case_names()),
                         [](const auto& info) { return info.param; });

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
}

}  // namespace
}  // namespace kda::test
