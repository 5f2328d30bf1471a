// Golden cases (../shared/golden) against both CPU paths:
//  - float64 recurrence: the unrounded out and final state (test hook; the params carry scale and
//    lower_bound in float64, as the golden vectors were made) within 1e-10 of the golden values;
//    the public kda_fwd_cpu result equals the hook's, rounded once (bf16 out, fp32 state).
//  - float32 chunked algebra: the unrounded float32 out (test hook, before the bf16 rounding that
//    alone costs ~1e-3) and the fp32 final state within 1e-4; the public result equals the hook's.
//  - chunked algebra with every ChunkedRounding flag on (the GPU kernel's operand roundings): bf16
//    out and fp32 state within the project's GPU tolerance (tolerances.json).
// Each test prints the errors it measures ("[ errors ]" lines): run the binary to see the table.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "reference/common.h"
#include "src/api/problem.h"
#include "tests/golden_io.h"

namespace kda::test {
namespace {

constexpr double kF64Tol = 1e-10;
constexpr double kF32Tol = 1e-4;
constexpr double kBf16OutBound = 0x1p-9 * 1.001;  // round-to-nearest of every element: <= 2^-9 relative
constexpr const char* kMissing = "golden_folder_missing";

std::vector<std::string> case_names() {
  const std::string dir = golden_dir();
  std::string error;
  std::vector<std::string> names = golden_case_names(dir, &error);
  if (names.empty()) names.push_back(kMissing);
  return names;
}

void report(const std::string& name, const char* path, double out_err, double state_err) {
  std::printf("[ errors ] %-20s %-31s out %.4e  final_state %.4e\n", name.c_str(), path, out_err, state_err);
  std::fflush(stdout);
  std::string key = path;  // a property name: letters, digits and '_'
  for (char& ch : key)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  char value[64];
  std::snprintf(value, sizeof(value), "%.6e", out_err);
  ::testing::Test::RecordProperty(key + "_out", value);
  std::snprintf(value, sizeof(value), "%.6e", state_err);
  ::testing::Test::RecordProperty(key + "_final_state", value);
}

class GoldenCpu : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = golden_dir();
    if (GetParam() == kMissing || !golden_available(dir_))
      GTEST_SKIP() << "golden folder not found: looked for " << dir_
                   << "/index.json (set FLASH_KDA_GOLDEN_DIR to the shared/golden folder)";
    std::string error;
    ASSERT_TRUE(load_golden_case(dir_, GetParam(), &c_, &error)) << error;
    expected_o_ = c_.find("expected_o")->to_f64();
    expected_state_ = c_.find("expected_final_state")->to_f64();
  }

  // Validates *p into *problem, which then points at *p: keep p alive while problem is used.
  static void validate_into(const kda_fwd_params* p, Problem* problem) {
    const kda_status s = validate(p, ValidateMode::kHost, problem);
    ASSERT_EQ(s.code, KDA_OK) << s.message;
  }

  std::string dir_;
  GoldenCase c_;
  std::vector<double> expected_o_, expected_state_;
};

TEST_P(GoldenCpu, RecurrenceF64) {
  // The oracle against the golden oracle.
  HostOutputs outs = make_host_outputs(c_);
  const kda_fwd_params params = make_host_params(c_, &outs);
  Problem problem;
  ASSERT_NO_FATAL_FAILURE(validate_into(&params, &problem));
  std::vector<double> out_exact(expected_o_.size(), 0.0), state_exact(expected_state_.size(), 0.0);
  kda_status s = reference::fwd_recurrence_f64_ex(problem, 0, out_exact.data(), state_exact.data());
  ASSERT_EQ(s.code, KDA_OK) << s.message;
  const double out_err = rel_l2(out_exact, expected_o_), state_err = rel_l2(state_exact, expected_state_);
  report(c_.name, "f64 (unrounded)", out_err, state_err);
  EXPECT_LE(out_err, kF64Tol);
  EXPECT_LE(state_err, kF64Tol);

  // Public API: out rounded once to bf16, state once to fp32; identical to the hook's.
  HostOutputs api_outs = make_host_outputs(c_);
  kda_fwd_params api = make_host_params(c_, &api_outs);
  s = kda_fwd_cpu(&api, KDA_CPU_RECURRENCE_F64, 0);
  ASSERT_EQ(s.code, KDA_OK) << s.message;
  const double api_out_err = rel_l2(bf16_to_f64(api_outs.out), expected_o_);
  const double api_state_err = rel_l2(f32_to_f64(api_outs.final_state), expected_state_);
  report(c_.name, "f64 (api: bf16 out)", api_out_err, api_state_err);
  EXPECT_LE(api_out_err, kBf16OutBound);
  EXPECT_LE(api_state_err, 1e-7);
  EXPECT_EQ(api_outs.out, outs.out);
  EXPECT_EQ(api_outs.final_state, outs.final_state);
}

TEST_P(GoldenCpu, ChunkedF32) {
  HostOutputs hook_outs = make_host_outputs(c_), api_outs = make_host_outputs(c_);
  const kda_fwd_params params = make_host_params(c_, &hook_outs);
  Problem problem;
  ASSERT_NO_FATAL_FAILURE(validate_into(&params, &problem));
  std::vector<float> out_exact(expected_o_.size(), 0.0f), state_exact(expected_state_.size(), 0.0f);
  kda_status s = reference::fwd_chunked_f32_ex(problem, reference::ChunkedRounding{}, 0, out_exact.data(),
                                               state_exact.data());
  ASSERT_EQ(s.code, KDA_OK) << s.message;
  const double out_err = rel_l2(f32_to_f64(out_exact), expected_o_);
  const double state_err = rel_l2(f32_to_f64(state_exact), expected_state_);
  report(c_.name, "chunked f32 (unrounded)", out_err, state_err);
  EXPECT_LE(out_err, kF32Tol);
  EXPECT_LE(state_err, kF32Tol);

  kda_fwd_params api = make_host_params(c_, &api_outs);
  s = kda_fwd_cpu(&api, KDA_CPU_CHUNKED_F32, 0);
  ASSERT_EQ(s.code, KDA_OK) << s.message;
  const std::vector<double> api_out = bf16_to_f64(api_outs.out), api_state = f32_to_f64(api_outs.final_state);
  const double api_out_err = rel_l2(api_out, expected_o_), api_state_err = rel_l2(api_state, expected_state_);
  report(c_.name, "chunked f32 (api: bf16 out)", api_out_err, api_state_err);
  EXPECT_LE(api_out_err, kBf16OutBound + kF32Tol);
  EXPECT_LE(api_state_err, kF32Tol);
  EXPECT_EQ(count_non_finite(api_out), 0u);
  EXPECT_EQ(count_non_finite(api_state), 0u);
  EXPECT_EQ(api_outs.out, hook_outs.out);
  EXPECT_EQ(0, std::memcmp(api_outs.final_state.data(), state_exact.data(), state_exact.size() * sizeof(float)));
}

// Runs the chunked path with `rounding`; returns bf16-out and fp32-state errors.
void run_rounded(const GoldenCase& c, const reference::ChunkedRounding& rounding, const std::vector<double>& eo,
                 const std::vector<double>& es, double* out_err, double* state_err) {
  HostOutputs outs = make_host_outputs(c);
  kda_fwd_params p = make_host_params(c, &outs);
  Problem problem;
  kda_status s = validate(&p, ValidateMode::kHost, &problem);
  ASSERT_EQ(s.code, KDA_OK) << s.message;
  s = reference::fwd_chunked_f32(problem, rounding, 0);
  ASSERT_EQ(s.code, KDA_OK) << s.message;
  const std::vector<double> out = bf16_to_f64(outs.out), state = f32_to_f64(outs.final_state);
  EXPECT_EQ(count_non_finite(out), 0u);
  EXPECT_EQ(count_non_finite(state), 0u);
  *out_err = rel_l2(out, eo);
  *state_err = rel_l2(state, es);
}

TEST_P(GoldenCpu, ChunkedRoundingEmulationWithinGpuTolerance) {
  reference::ChunkedRounding all;
  all.round_record = all.round_state_operand = all.split_state_operand = all.round_u = all.round_small = true;
  double out_err = 0, state_err = 0;
  run_rounded(c_, all, expected_o_, expected_state_, &out_err, &state_err);
  report(c_.name, "emulated GPU (all flags)", out_err, state_err);
  double out_tol = 0, state_tol = 0;
  golden_tolerance(dir_, c_.name, &out_tol, &state_tol);
  EXPECT_LE(out_err, out_tol);
  EXPECT_LE(state_err, state_tol);

  // For information: the kernel's precision as docs/design.md §2.5 describes it (Tb and P not
  // rounded), and the state operand rounded to bf16 instead of split into hi + lo.
  reference::ChunkedRounding design = all;
  design.round_small = false;
  run_rounded(c_, design, expected_o_, expected_state_, &out_err, &state_err);
  report(c_.name, "emulated design 2.5 (no Tb/P)", out_err, state_err);
  reference::ChunkedRounding no_split = all;
  no_split.split_state_operand = false;
  run_rounded(c_, no_split, expected_o_, expected_state_, &out_err, &state_err);
  report(c_.name, "emulated (bf16 S, no split)", out_err, state_err);
}

std::string case_test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(Golden, GoldenCpu, ::testing::ValuesIn(case_names()), case_test_name);

}  // namespace
}  // namespace kda::test
