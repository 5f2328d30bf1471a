// The rounding emulation's operand-precision flags (reference::ChunkedRounding) on the standard
// random case of spec §3: each flag changes the result (a flag that does nothing would make the
// precision study, tests/tools/rounding_study.cpp, meaningless), and the facts the kernels rely on
// hold: the preparation's A, Wd and Qp products lose nothing measurable from one bf16 per operand
// (chunk_prep_kernel, version 21), M and the Tb/P-times-V products do, and the state error is set by
// the bf16 U and Kr of the update; and what the tf32 candidate for A and M would cost.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "reference/common.h"
#include "src/kernels/sm90/kernel_params.h"  // final_split_chunks
#include "src/api/problem.h"
#include "tests/golden_io.h"
#include "tests/host_reference.h"
#include "tests/kernel_rounding.h"
#include "tests/random_problem.h"

namespace kda::test {
namespace {

using reference::ChunkedRounding;

struct Errors {
  double out = 0, state = 0;
  std::vector<uint16_t> out_bits;
  std::vector<float> state_f32;
};

class RoundingFlags : public ::testing::Test {
 protected:
  void SetUp() override {
    ProblemSpec spec;
    spec.B = 1;
    spec.T = 300;
    spec.H = spec.HV = 4;
    spec.seed = 300;
    p_ = make_random_problem(spec);
    kda_fwd_params params = p_.params();
    Problem problem;
    ASSERT_EQ(validate(&params, ValidateMode::kHost, &problem).code, KDA_OK);
    eo_.resize(p_.out.size());
    es_.resize(p_.final_f32.size());
    ASSERT_EQ(reference::fwd_recurrence_f64_ex(problem, 0, eo_.data(), es_.data()).code, KDA_OK);
  }
  Errors run(const ChunkedRounding& r) {
    kda_fwd_params params = p_.params();
    Problem problem;
    EXPECT_EQ(validate(&params, ValidateMode::kHost, &problem).code, KDA_OK);
    EXPECT_EQ(reference::fwd_chunked_f32(problem, r, 0).code, KDA_OK);
    Errors e;
    e.out = rel_l2(bf16_to_f64(p_.out), eo_);
    e.state = rel_l2(f32_to_f64(p_.final_f32), es_);
    e.out_bits = p_.out;
    e.state_f32 = p_.final_f32;
    return e;
  }
  static ChunkedRounding kernel_before_v21() {
    ChunkedRounding r;
    r.round_record = r.round_state_operand = r.split_state_operand = r.round_u = true;
    return r;
  }
  RandomProblem p_;
  std::vector<double> eo_, es_;
};

bool same_result(const Errors& a, const Errors& b) {
  return a.out_bits == b.out_bits &&
         std::memcmp(a.state_f32.data(), b.state_f32.data(), a.state_f32.size() * sizeof(float)) == 0;
}

TEST_F(RoundingFlags, EveryFlagChangesTheResult) {
  const ChunkedRounding base = kernel_before_v21();
  const Errors e0 = run(base);
  bool ChunkedRounding::*flags[] = {&ChunkedRounding::round_a_operands, &ChunkedRounding::round_m_operands,
                                    &ChunkedRounding::round_wide_left,  &ChunkedRounding::round_wide_kd,
                                    &ChunkedRounding::split_u,          &ChunkedRounding::split_kr,
                                    &ChunkedRounding::round_small,      &ChunkedRounding::split_p_operands,
                                    &ChunkedRounding::tf32_am_operands};
  for (auto f : flags) {
    ChunkedRounding r = base;
    r.*f = true;
    EXPECT_FALSE(same_result(run(r), e0)) << "a rounding flag had no effect";
  }
  ChunkedRounding last = base;
  last.split_update_last_chunks = 1;
  EXPECT_FALSE(same_result(run(last), e0)) << "split_update_last_chunks had no effect";
  ChunkedRounding no_split = base;
  no_split.split_state_operand = false;
  EXPECT_FALSE(same_result(run(no_split), e0));
}

TEST_F(RoundingFlags, PreparationProductsNeedNoSplitExceptM) {
  const Errors before = run(kernel_before_v21());
  ChunkedRounding v21 = kernel_before_v21();
  v21.round_a_operands = v21.round_wide_left = v21.round_wide_kd = true;
  const Errors now = run(v21);
  std::printf("[ errors ] before v21 out %.3e state %.3e | v21 out %.3e state %.3e\n", before.out, before.state,
              now.out, now.state);
  EXPECT_LE(now.out, before.out * 1.02);
  EXPECT_LE(now.state, before.state * 1.02);
  ChunkedRounding m = v21;
  m.round_m_operands = true;  // M = Qd·Kiᵀ feeds the output: one bf16 per operand costs ~60% more error
  EXPECT_GT(run(m).out, before.out * 1.3);
  ChunkedRounding small = v21;
  small.round_small = true;  // Tb and P multiply V
  EXPECT_GT(run(small).out, before.out * 1.2);
}

// The candidate of docs/performance_notes.md "Where precision matters": A and M from tf32 operands
// (and Qd as that tf32 in Qp) instead of M's bf16 hi + lo pairs costs about 1% of out error and
// nothing of the state's; M from one bf16 per operand costs ~60%.
TEST_F(RoundingFlags, Tf32ForAAndMCostsAboutOnePercentOfOut) {
  ChunkedRounding kernel = kernel_before_v21();
  kernel.round_a_operands = kernel.round_wide_left = kernel.round_wide_kd = kernel.split_p_operands = true;
  const Errors now = run(kernel);
  ChunkedRounding tf32 = kernel;
  tf32.tf32_am_operands = true;
  const Errors t = run(tf32);
  std::printf("[ errors ] kernel out %.3e state %.3e | A, M, Qd from tf32 out %.3e state %.3e\n", now.out, now.state,
              t.out, t.state);
  EXPECT_FALSE(same_result(t, now));
  EXPECT_LE(t.out, now.out * 1.03);
  EXPECT_GE(t.out, now.out * 0.97);
  EXPECT_LE(t.state, now.state * 1.01);
}

TEST_F(RoundingFlags, StateErrorComesFromUAndKr) {
  const Errors before = run(kernel_before_v21());
  ChunkedRounding u = kernel_before_v21();
  u.split_u = true;
  const Errors eu = run(u);
  ChunkedRounding ukr = u;
  ukr.split_kr = true;
  const Errors eukr = run(ukr);
  std::printf("[ errors ] state: U, Kr one bf16 %.3e | U hi+lo %.3e | U, Kr hi+lo %.3e\n", before.state, eu.state,
              eukr.state);
  EXPECT_LT(eu.state, before.state * 0.85);
  EXPECT_LT(eukr.state, before.state * 0.01);
}

// The kernels since 2026-12-01: U and Kr as hi + lo pairs in each sequence's last update only
// (split_update_last_chunks = 1). On the standard case the gates erase the earlier chunks' rounding
// from the final state, so that one update buys what splitting every update buys (within 10%),
// and it leaves the outputs of the other chunks bit-identical.
TEST_F(RoundingFlags, TheLastUpdateAloneCarriesTheStateAccuracy) {
  ChunkedRounding kernel = kernel_before_v21();
  kernel.round_a_operands = kernel.round_wide_left = kernel.round_wide_kd = kernel.split_p_operands = true;
  const Errors now = run(kernel);
  ChunkedRounding last = kernel;
  last.split_update_last_chunks = 1;
  const Errors el = run(last);
  ChunkedRounding every = kernel;
  every.split_u = every.split_kr = true;
  const Errors ee = run(every);
  std::printf("[ errors ] state: kernel before %.3e | last update split %.3e | every update split %.3e\n",
              now.state, el.state, ee.state);
  EXPECT_LT(el.state, now.state * 0.02);
  EXPECT_LT(el.state, ee.state * 1.1);
  // The outputs: only the last chunk's tokens may differ (its U feeds no output; Kr_lo none either).
  EXPECT_TRUE(el.out_bits == now.out_bits) << "splitting the last update changed an output";
}

// The kernels since session 56 (kernel_params.h, final_split_chunks): the final split covers at least
// 8 tokens, the chunk before the last too where the last holds fewer. Split alone, a last chunk of 1 to
// 3 tokens left the final state the unsplit rounding of the chunk before (the gates have not decayed
// it away over so few tokens): 4.6e-4 against 3.1e-5 with the standard gates and one token, 1.2e-3
// against 9.8e-5 at lower bound -1. At 8 tokens and more the chunk before changes nothing: the rule's
// results are then bit-identical to the last chunk's split alone; below, only the last chunk's outputs
// may change.
TEST(FinalSplit, CoversAtLeastEightTokens) {
  for (float lb : {-5.0f, -1.0f}) {
    for (int tail = 1; tail <= 16; ++tail) {
      ProblemSpec spec = fixed_spec(2, 256 + tail, 2, 2, 2000 + tail);
      spec.lower_bound = lb;
      RandomProblem ref = make_random_problem(spec);
      const ExactReference exact = reference_f64(ref.params());  // (tests/host_reference.h)
      auto run = [&](int min_tokens) {
        ChunkedRounding r = kernel_rounding();
        r.split_update_min_tokens = min_tokens;
        RandomProblem p = make_random_problem(spec);
        run_chunked_f32(p.params(), r);
        Errors e;
        e.state = errors_against(p, exact).state;
        e.out_bits = p.out;
        e.state_f32 = p.final_f32;
        return e;
      };
      const Errors alone = run(0), eight = run(8);
      if (tail < 8) {
        std::printf("[ errors ] lb %4.1f, last chunk of %2d tokens: state %.3e split alone, %.3e over 8 tokens\n", lb,
                    tail, alone.state, eight.state);
        EXPECT_LT(eight.state, alone.state * 1.01) << "lb " << lb << ", " << tail << " tokens";
        if (tail <= 3) EXPECT_LT(eight.state, alone.state * 0.3) << "lb " << lb << ", " << tail << " tokens";
        // The outputs: only the last chunk's tokens may differ (they read the state the chunk before updated).
        const size_t row = static_cast<size_t>(spec.HV * 128), T = static_cast<size_t>(spec.T);
        size_t differ = 0;
        for (size_t b = 0; b < 2; ++b)
          for (size_t i = b * T * row; i < (b * T + T - tail) * row; ++i) differ += eight.out_bits[i] != alone.out_bits[i];
        EXPECT_EQ(differ, 0u) << "the split changed an output before the last chunk";
      } else {
        EXPECT_TRUE(same_result(alone, eight)) << "lb " << lb << ", " << tail << " tokens";
      }
    }
  }
}

// The emulation's rule and the kernels' are one rule: for every length, the chunks the emulation splits
// (reference::split_update_chunks with kernel_rounding()) are the kernels' final_split_chunks.
TEST(FinalSplit, TheEmulationSplitsTheKernelsChunks) {
  for (int64_t len = 0; len <= 16 * 30; ++len)
    EXPECT_EQ(reference::split_update_chunks(len, kernel_rounding()), len == 0 ? 0 : sm90::final_split_chunks(len))
        << "len " << len;
  EXPECT_EQ(sm90::final_split_chunks(17), 2);  // (the rule's edges)
  EXPECT_EQ(sm90::final_split_chunks(23), 2);
  EXPECT_EQ(sm90::final_split_chunks(24), 1);
  EXPECT_EQ(sm90::final_split_chunks(7), 1);
}

}  // namespace
}  // namespace kda::test
