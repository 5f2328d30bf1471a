// Golden-style cases against both CPU paths, from two sources:
//  - the repository's generated cases (tests/golden_gen.h, written by the build into
//    <build>/tests/golden, or $FLASH_KDA_REPO_GOLDEN_DIR): registered from a fixed list, so they
//    exist whatever the data; a case whose data is missing fails. Their expected values come from
//    the float64 recurrence, which is itself checked against an independent transcription
//    (tests/naive_oracle.h);
//  - the shared golden set (a copy: $FLASH_KDA_GOLDEN_DIR, else .gpu_data/golden), made independently of this project: one test per
//    check runs every case listed there; skipped, with a message, when the folder is absent (a
//    failure when FLASH_KDA_GOLDEN_DIR names a folder that is not there).
// Checks per case:
//  - float64 recurrence: the unrounded out and final state (test hook; the params carry scale and
//    lower_bound in float64, as the golden vectors were made) within 1e-10 of the golden values;
//    the public kda_fwd_cpu result equals the hook's, rounded once (bf16 out, fp32 state); the
//    independent transcription within 1e-10 too;
//  - float32 chunked algebra: the unrounded float32 out (test hook, before the bf16 rounding that
//    alone costs ~1e-3) and the fp32 final state within 1e-4; the public result equals the hook's;
//  - chunked algebra with the GPU kernel's operand roundings (ChunkedRounding: record, split state
//    operand, U; Tb and P are hi/lo pairs in the kernel): bf16 out and fp32 state within the
//    project's GPU tolerance (tolerances.json). Rounding Tb and P too is printed for information.
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
#include "tests/golden_gen.h"
#include "tests/kernel_rounding.h"
#include "tests/golden_io.h"
#include "tests/host_reference.h"
#include "tests/naive_oracle.h"

namespace kda::test {
namespace {

constexpr double kF64Tol = 1e-10;
constexpr double kF32Tol = 1e-4;
constexpr double kBf16OutBound = 0x1p-9 * 1.001;  // round-to-nearest of every element: <= 2^-9 relative
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

// Validates *p into *problem, which then points at *p: keep p alive while problem is used.
void validate_into(const kda_fwd_params* p, Problem* problem) {
  const kda_status s = validate(p, ValidateMode::kHost, problem);
  ASSERT_EQ(s.code, KDA_OK) << s.message;
}

// The oracle against the golden values, and the independent transcription.
void check_recurrence_f64(const GoldenCase& c) {
  const std::vector<double> expected_o = c.find("expected_o")->to_f64();
  const std::vector<double> expected_state = c.find("expected_final_state")->to_f64();
  HostOutputs outs = make_host_outputs(c);
  const kda_fwd_params params = make_host_params(c, &outs);
  Problem problem;
  ASSERT_NO_FATAL_FAILURE(validate_into(&params, &problem));
  std::vector<double> out_exact(expected_o.size(), 0.0), state_exact(expected_state.size(), 0.0);
  kda_status s = reference::fwd_recurrence_f64_ex(problem, 0, out_exact.data(), state_exact.data());
  ASSERT_EQ(s.code, KDA_OK) << s.message;
  double out_err = rel_l2(out_exact, expected_o), state_err = rel_l2(state_exact, expected_state);
  report(c.name, "f64 (unrounded)", out_err, state_err);
  EXPECT_LE(out_err, kF64Tol);
  EXPECT_LE(state_err, kF64Tol);

  // Public API: out rounded once to bf16, state once to fp32; identical to the hook's.
  HostOutputs api_outs = make_host_outputs(c);
  kda_fwd_params api = make_host_params(c, &api_outs);
  s = kda_fwd_cpu(&api, KDA_CPU_RECURRENCE_F64, 0);
  ASSERT_EQ(s.code, KDA_OK) << s.message;
  const double api_out_err = rel_l2(bf16_to_f64(api_outs.out), expected_o);
  const double api_state_err = rel_l2(f32_to_f64(api_outs.final_state), expected_state);
  report(c.name, "f64 (api: bf16 out)", api_out_err, api_state_err);
  EXPECT_LE(api_out_err, kBf16OutBound);
  EXPECT_LE(api_state_err, 1e-7);
  EXPECT_EQ(api_outs.out, outs.out);
  EXPECT_EQ(api_outs.final_state, outs.final_state);

  // The independent transcription (tests/naive_oracle.h).
  std::vector<double> naive_o, naive_state;
  naive_recurrence(c, &naive_o, &naive_state);
  out_err = rel_l2(naive_o, expected_o), state_err = rel_l2(naive_state, expected_state);
  report(c.name, "independent transcription", out_err, state_err);
  EXPECT_LE(out_err, kF64Tol);
  EXPECT_LE(state_err, kF64Tol);
}

void check_chunked_f32(const GoldenCase& c) {
  const std::vector<double> expected_o = c.find("expected_o")->to_f64();
  const std::vector<double> expected_state = c.find("expected_final_state")->to_f64();
  HostOutputs hook_outs = make_host_outputs(c), api_outs = make_host_outputs(c);
  const kda_fwd_params params = make_host_params(c, &hook_outs);
  Problem problem;
  ASSERT_NO_FATAL_FAILURE(validate_into(&params, &problem));
  std::vector<float> out_exact(expected_o.size(), 0.0f), state_exact(expected_state.size(), 0.0f);
  kda_status s = reference::fwd_chunked_f32_ex(problem, reference::ChunkedRounding{}, 0, out_exact.data(),
                                               state_exact.data());
  ASSERT_EQ(s.code, KDA_OK) << s.message;
  const double out_err = rel_l2(f32_to_f64(out_exact), expected_o);
  const double state_err = rel_l2(f32_to_f64(state_exact), expected_state);
  report(c.name, "chunked f32 (unrounded)", out_err, state_err);
  EXPECT_LE(out_err, kF32Tol);
  EXPECT_LE(state_err, kF32Tol);

  kda_fwd_params api = make_host_params(c, &api_outs);
  s = kda_fwd_cpu(&api, KDA_CPU_CHUNKED_F32, 0);
  ASSERT_EQ(s.code, KDA_OK) << s.message;
  const std::vector<double> api_out = bf16_to_f64(api_outs.out), api_state = f32_to_f64(api_outs.final_state);
  const double api_out_err = rel_l2(api_out, expected_o), api_state_err = rel_l2(api_state, expected_state);
  report(c.name, "chunked f32 (api: bf16 out)", api_out_err, api_state_err);
  EXPECT_LE(api_out_err, kBf16OutBound + kF32Tol);
  EXPECT_LE(api_state_err, kF32Tol);
  EXPECT_EQ(count_non_finite(api_out), 0u);
  EXPECT_EQ(count_non_finite(api_state), 0u);
  EXPECT_EQ(api_outs.out, hook_outs.out);
  EXPECT_EQ(0, std::memcmp(api_outs.final_state.data(), state_exact.data(), state_exact.size() * sizeof(float)));
}

// The chunked path with `rounding` against the golden values, printed as `what`; no value may be
// non-finite.
RunErrors run_rounded(const GoldenCase& c, const reference::ChunkedRounding& rounding, const char* what) {
  const RunErrors e = rounded_golden_errors(c, rounding);
  report(c.name, what, e.out, e.state);
  EXPECT_EQ(e.non_finite, 0u) << c.name << ": " << what;
  return e;
}

void check_rounding_emulation(const GoldenCase& c, const std::string& dir) {
  // The kernel's operand roundings (tests/kernel_rounding.h).
  const reference::ChunkedRounding kernel = kernel_rounding();
  const RunErrors e = run_rounded(c, kernel, "emulated kernel (no Tb/P rounding)");
  double out_tol = 0, state_tol = 0;
  golden_tolerance(dir, c.name, &out_tol, &state_tol);
  EXPECT_LE(e.out, out_tol);
  EXPECT_LE(e.state, state_tol);

  // For information: Tb and P rounded to bf16 as well (every flag), and the state operand rounded
  // to bf16 instead of split into hi + lo.
  reference::ChunkedRounding all = kernel;
  all.round_small = true;
  run_rounded(c, all, "emulated, all flags (Tb/P bf16)");
  reference::ChunkedRounding no_split = all;
  no_split.split_state_operand = false;
  run_rounded(c, no_split, "emulated (bf16 S, no split)");
}

// --- the repository's generated cases: always registered; missing data is a failure.
class RepoGoldenCpu : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = repo_golden_dir();
    std::string error;
    ASSERT_TRUE(golden_available(dir_)) << "in-repo golden vectors missing: no " << dir_
                                        << "/index.json (the build writes them: cmake --build <build>, target "
                                           "flash_kda_golden_data; or tests/flash_kda_make_golden DIR)";
    ASSERT_TRUE(load_golden_case(dir_, GetParam(), &c_, &error)) << error;
  }
  std::string dir_;
  GoldenCase c_;
};

TEST_P(RepoGoldenCpu, RecurrenceF64) { check_recurrence_f64(c_); }
TEST_P(RepoGoldenCpu, ChunkedF32) { check_chunked_f32(c_); }
TEST_P(RepoGoldenCpu, ChunkedRoundingEmulationWithinGpuTolerance) { check_rounding_emulation(c_, dir_); }

std::string case_test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(Repo, RepoGoldenCpu, ::testing::ValuesIn(repo_golden_case_names()), case_test_name);

// --- the shared golden set: every case it lists, found at run time.
#define KDA_FOR_EACH_SHARED_CASE(body)                                           \
  std::string dir, skip, failure;                                                \
  const std::vector<std::string> names = shared_golden_cases(&dir, &skip, &failure); \
  ASSERT_TRUE(failure.empty()) << failure;                                       \
  if (!skip.empty()) GTEST_SKIP() << skip;                                       \
  for (const std::string& name : names) {                                       \
    SCOPED_TRACE("shared golden case " + name);                                  \
    GoldenCase c;                                                                \
    std::string error;                                                           \
    if (!load_golden_case(dir, name, &c, &error)) {                              \
      ADD_FAILURE() << error;                                                    \
      continue;                                                                  \
    }                                                                            \
    body;                                                                        \
  }

TEST(SharedGoldenCpu, RecurrenceF64) { KDA_FOR_EACH_SHARED_CASE(check_recurrence_f64(c)); }
TEST(SharedGoldenCpu, ChunkedF32) { KDA_FOR_EACH_SHARED_CASE(check_chunked_f32(c)); }
TEST(SharedGoldenCpu, ChunkedRoundingEmulationWithinGpuTolerance) {
  KDA_FOR_EACH_SHARED_CASE(check_rounding_emulation(c, dir));
}

}  // namespace
}  // namespace kda::test
