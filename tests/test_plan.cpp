// The recurrence plan (src/launch/plan.h): value-row slices and intra-card context parallelism.
// Host-only: the choice is a pure function of (units, chunks, SMs, forced segments).
#include <gtest/gtest.h>

#include <cstdint>

#include "src/launch/plan.h"

namespace kda::sm90 {
namespace {

constexpr int kH200 = 132;

TEST(Plan, ManyHeadsKeepOnePass) {
  // From 45 units on, three segments would need more than 132 CTAs in pass 1 (and two never pay):
  // no context parallelism, the one-pass slices as before.
  for (int64_t units : {45, 64, 96, 512, 4096}) {
    const RecurrencePlan p = plan_recurrence(units, 512, kH200, 0);
    EXPECT_EQ(p.segments, 1) << units;
    EXPECT_EQ(p.vsplit_first, units <= 66 ? 2 : 1) << units;
  }
  EXPECT_EQ(plan_recurrence(8, 1, kH200, 0).segments, 1);  // one chunk: nothing to split
  EXPECT_EQ(plan_recurrence(8, 0, kH200, 0).segments, 1);
}

TEST(Plan, OnePassSlicesFillTheSms) {
  EXPECT_EQ(plan_recurrence(8, 4, kH200, 1).vsplit_first, 8);
  EXPECT_EQ(plan_recurrence(24, 4, kH200, 1).vsplit_first, 4);
  EXPECT_EQ(plan_recurrence(64, 4, kH200, 1).vsplit_first, 2);
  EXPECT_EQ(plan_recurrence(160, 4, kH200, 1).vsplit_first, 1);
}

TEST(Plan, FewHeadsLongSequencesSplit) {
  // T = 8192 (512 chunks), H = 8: the automatic plan splits, both passes fit in one wave, and the
  // modelled time is well below the one-pass plan's.
  const RecurrencePlan whole = plan_recurrence(8, 512, kH200, 1);
  const RecurrencePlan p = plan_recurrence(8, 512, kH200, 0);
  EXPECT_GE(p.segments, 3);
  EXPECT_LT(p.cost_us, 0.5 * whole.cost_us);
  // Longer sequences with the same heads: at least as many segments.
  EXPECT_GE(plan_recurrence(8, 4096, kH200, 0).segments, p.segments);
}

TEST(Plan, AutomaticPlansBeatOnePass) {
  for (int64_t units = 1; units <= 140; ++units)
    for (int64_t chunks : {1, 2, 7, 64, 513, 4096}) {
      const RecurrencePlan p = plan_recurrence(units, chunks, kH200, 0);
      ASSERT_GE(p.segments, 1);
      ASSERT_LE(p.segments, kMaxContextSegments);
      if (p.segments > 1) {
        EXPECT_LE(units * 2, kH200) << "context parallelism on a full grid: " << units;
        EXPECT_LT(p.cost_us, 0.9 * plan_recurrence(units, chunks, kH200, 1).cost_us) << units << " " << chunks;
      }
      for (int v : {p.vsplit_first, p.vsplit_second}) EXPECT_TRUE(v == 1 || v == 2 || v == 4 || v == 8);
    }
}

TEST(Plan, ForcedSegmentsAreHonoured) {
  for (int n = 1; n <= kMaxContextSegments; ++n) {
    EXPECT_EQ(plan_recurrence(3, 100, kH200, n).segments, n);
    EXPECT_EQ(plan_recurrence(500, 100, kH200, n).segments, n);  // several waves when it must
  }
}

TEST(Plan, CtasAndWorkspace) {
  RecurrencePlan p;
  p.segments = 5;
  p.vsplit_first = 2;
  p.vsplit_second = 4;
  EXPECT_EQ(first_pass_ctas(3, p), 3 * 2 * 7);   // segment 0 + 3 middle segments x (state + transition)
  EXPECT_EQ(second_pass_ctas(3, p), 3 * 4 * 4);  // segments 1..4
  EXPECT_EQ(context_workspace_bytes(3, p), 3u * 7u * 128u * 128u * 4u);  // 4 states + 3 transitions
  p.segments = 2;
  EXPECT_EQ(first_pass_ctas(3, p), 3 * 2);
  EXPECT_EQ(context_workspace_bytes(3, p), 3u * 128u * 128u * 4u);
  p.segments = 1;
  EXPECT_EQ(second_pass_ctas(3, p), 0);
  EXPECT_EQ(context_workspace_bytes(3, p), 0u);
}

// 2^46 units x 125 states of 64 KiB do not fit in 64 bits: SIZE_MAX ("too large"), not a wrapped size.
TEST(Plan, WorkspaceSaturatesInsteadOfWrapping) {
  RecurrencePlan p;
  p.segments = 64;
  EXPECT_EQ(context_workspace_bytes(int64_t{1} << 46, p), SIZE_MAX);
  EXPECT_EQ(context_workspace_bytes(int64_t{1} << 30, p), (size_t{1} << 30) * 125u * 128u * 128u * 4u);
}

}  // namespace
}  // namespace kda::sm90
