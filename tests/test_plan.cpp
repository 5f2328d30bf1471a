// The recurrence plan (src/launch/plan.h): value-row slices, the exact combine and the bounded
// warm-up. Host-only: the choice is a pure function of the request.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

#include "src/kernels/sm90/kernel_params.h"  // segment_first_chunk, final_split_chunks
#include "src/launch/plan.h"

namespace kda::sm90 {
namespace {

constexpr int kH200 = 132;

RecurrencePlan plan(int64_t units, int64_t chunks, int forced = 0, int32_t method = KDA_CONTEXT_AUTO,
                    bool warmup_valid = true, int sms = kH200) {
  PlanRequest r;
  r.units = units;
  r.chunks = chunks;
  r.sms = sms;
  r.forced_segments = forced;
  r.method = method;
  r.warmup_valid = warmup_valid;
  return plan_recurrence(r);
}

bool valid_vsplit(int v) { return v == 1 || v == 2 || v == 4 || v == 8; }

// single_pass_auto for a case of `units` pairs and `chunks` chunks per sequence under the automatic plan.
bool auto_single(int64_t units, int64_t chunks, bool pieces_ok = true, int sms = kH200) {
  return single_pass_auto(units, sms, plan(units, chunks, 0, KDA_CONTEXT_AUTO, true, sms), chunks, pieces_ok);
}

TEST(SinglePassPlan, AutomaticFromSeventyPercentOfTheSmsWithoutSplitting) {
  // The benchmark's cases on the H200: the single pass where the pairs fill >= 70% of 132 SMs (93 on).
  EXPECT_TRUE(auto_single(512, 256));    // B16_T4096_H32
  EXPECT_TRUE(auto_single(2048, 32));    // B64_T512_H32
  EXPECT_TRUE(auto_single(128, 1024));   // T16384_H16_N8
  EXPECT_TRUE(auto_single(96, 512));     // T8192_H96
  EXPECT_TRUE(auto_single(93, 512));
  EXPECT_TRUE(auto_single(93, 512, false));  // (no pieces needed)
  // A forced split keeps the two kernels (an exact combine; the single pass has none).
  EXPECT_FALSE(single_pass_auto(512, kH200, plan(512, 256, 2, KDA_CONTEXT_EXACT), 256, true));
  // The fraction follows the GPU's SM count.
  EXPECT_TRUE(single_pass_auto(70, 100, plan(70, 512, 1, KDA_CONTEXT_AUTO, true, 100), 512, true));
  EXPECT_FALSE(single_pass_auto(69, 100, plan(69, 512, 1, KDA_CONTEXT_AUTO, true, 100), 512, true));
}

TEST(SinglePassPlan, AutomaticInTheWarmupPlansPiecesOfAtLeast40Chunks) {
  // Few pairs: the plan is a bounded warm-up, and the single pass takes its pieces where they are long
  // enough, in as many waves as they take (plan pieces as of 2026-12-02: T8192_H64 2, T8192_H8 16,
  // T32768_H32 4, T65536_H8 33, T8192_H12_N4 8, T8192_H16_N1 8, T8192_H24_N1 11, T4096_H12_N1 11).
  EXPECT_TRUE(auto_single(64, 512));    // T8192_H64: 128 pieces of 256 chunks
  EXPECT_TRUE(auto_single(32, 2048));   // T32768_H32: 128 of 512
  EXPECT_TRUE(auto_single(8, 4096));    // T65536_H8: 264 pieces of 125 chunks, two waves
  EXPECT_TRUE(auto_single(48, 512));    // T8192_H12_N4: 384 of 64, three waves
  EXPECT_TRUE(auto_single(16, 512));    // T8192_H16_N1: 128 of 64
  EXPECT_TRUE(auto_single(24, 512));    // T8192_H24_N1: 264 of 47
  EXPECT_FALSE(auto_single(8, 512));    // T8192_H8: 32
  EXPECT_FALSE(auto_single(12, 256));   // T4096_H12_N1: 24
  EXPECT_FALSE(auto_single(32, 32));    // T512_H32: pieces of 16 chunks
  EXPECT_FALSE(auto_single(12, 128));   // T2048_H12_N1
  EXPECT_FALSE(auto_single(4, 64));     // T1024_H4_N1
  // A forced plan stays on the two kernels (unless single_pass forces the single pass too).
  EXPECT_FALSE(single_pass_auto(64, kH200, plan(64, 512), 512, true, false));
  EXPECT_TRUE(single_pass_auto(96, kH200, plan(96, 512), 512, true, false));  // (no split: not a plan's matter)
  // Without pieces (packed, partial chunks, in place, no room for the flags) the few pairs stay on the
  // two kernels.
  EXPECT_FALSE(auto_single(64, 512, false));
  EXPECT_FALSE(auto_single(92, 512, false));
  // Exactly at the limit: the plan's pieces times kSinglePassMinPieceChunks chunks, with one wave or
  // several.
  const RecurrencePlan p = plan(8, 512);
  ASSERT_EQ(p.method, SplitMethod::kWarmup);
  const int64_t at = int64_t{kSinglePassMinPieceChunks} * p.pieces;
  EXPECT_TRUE(single_pass_auto(8, kH200, p, at, true));
  EXPECT_FALSE(single_pass_auto(8, kH200, p, at - p.pieces, true));
  EXPECT_TRUE(single_pass_auto(kH200 / p.pieces + 1, kH200, p, at, true));
  EXPECT_FALSE(single_pass_auto(kH200 / p.pieces + 1, kH200, p, at - p.pieces, true));
}

TEST(SinglePassPlan, PiecesOnWholeChunksOutOfPlaceWithFlagsOrAForcedWarmup) {
  // pieces_ok: whole chunks, not in place, and room for the flags unless the warm-up is forced.
  EXPECT_TRUE(single_pass_pieces_ok(true, false, 0, true));
  EXPECT_TRUE(single_pass_pieces_ok(true, false, 1, false));   // forced: no fallback, no flags
  EXPECT_FALSE(single_pass_pieces_ok(true, false, 0, false));  // bounded without room for flags
  EXPECT_FALSE(single_pass_pieces_ok(false, false, 1, true));  // a partial chunk or packed sequences
  EXPECT_FALSE(single_pass_pieces_ok(true, true, 1, true));    // in place
  const RecurrencePlan warm = plan(8, 512, 4, KDA_CONTEXT_WARMUP);
  ASSERT_EQ(warm.method, SplitMethod::kWarmup);
  ASSERT_EQ(warm.pieces, 4);
  EXPECT_EQ(single_pass_pieces(warm, true, 8), 4);
  EXPECT_EQ(single_pass_pieces(warm, false, 8), 1);
  EXPECT_EQ(single_pass_pieces(warm, true, int64_t{1} << 30), 1);  // grid beyond 2^31 - 1 CTAs
  EXPECT_EQ(single_pass_pieces(plan(8, 512, 4, KDA_CONTEXT_EXACT), true, 8), 1);
  EXPECT_EQ(single_pass_pieces(plan(512, 256), true, 512), 1);
}

TEST(SinglePassPlan, OwnPiecesWhereWholeSequencesLeaveAWaveHalfEmpty) {
  // The two kernels run these in one pass; the single pass, one CTA per pair, cuts the sequences itself
  // where its pieces in several waves beat whole sequences by 10% under the model (plan.h).
  EXPECT_EQ(plan(96, 512).method, SplitMethod::kNone);
  EXPECT_EQ(plan(96, 512).single_pass_pieces, 4);   // T8192_H96: 384 CTAs of 128 chunks in three waves
  EXPECT_EQ(plan(96, 256).single_pass_pieces, 4);   // T4096_H96 (the GPU test's shape)
  EXPECT_EQ(plan(96, 1024).single_pass_pieces, 4);  // T16384_H96
  EXPECT_EQ(plan(96, 128).single_pass_pieces, 1);   // T2048_H96: 32-chunk pieces are too short
  EXPECT_EQ(plan(128, 1024).single_pass_pieces, 1); // T16384_H16_N8: whole sequences fill the SMs
  EXPECT_EQ(plan(512, 256).single_pass_pieces, 1);  // B16_T4096_H32
  EXPECT_EQ(plan(2048, 32).single_pass_pieces, 1);  // B64_T512_H32
  EXPECT_EQ(plan(112, 512).single_pass_pieces, 1);  // 85% of the SMs busy: not worth the pieces
  // The model itself: four pieces of 128 chunks (plus the overhead) in three waves, the last 120 of 132
  // CTAs, against 512 steps at 96 of 132 SMs busy.
  const double four = (128 + kSinglePassPieceOverhead) * (2 + kSinglePassIdleStep + (1 - kSinglePassIdleStep) * 120.0 / 132);
  EXPECT_NEAR(single_pass_cost(96, 512, kH200, 4), four, 1e-9);
  EXPECT_NEAR(single_pass_cost(96, 512, kH200, 1), 512 * (kSinglePassIdleStep + (1 - kSinglePassIdleStep) * 96.0 / 132),
              1e-9);
  EXPECT_NEAR(single_pass_cost(132, 512, kH200, 1), 512.0, 1e-9);
  // Not where the single pass would not take whole sequences (< 70% of the SMs: the warm-up plans'
  // pieces), nor for forced or exact plans, nor without the decay bound.
  EXPECT_EQ(single_pass_split(92, 512, kH200), 1);
  EXPECT_EQ(plan(64, 512).single_pass_pieces, 1);
  EXPECT_EQ(plan(96, 512, 1).single_pass_pieces, 1);
  EXPECT_EQ(plan(96, 512, 0, KDA_CONTEXT_EXACT).single_pass_pieces, 1);
  EXPECT_EQ(plan(96, 512, 0, KDA_CONTEXT_WARMUP).single_pass_pieces, 1);
  EXPECT_EQ(plan(96, 512, 0, KDA_CONTEXT_AUTO, false).single_pass_pieces, 1);
  // Over many shapes: a split is always pieces of at least kSinglePassMinPieceChunks chunks, at most
  // kSinglePassMaxPieces of them, and 10% faster than whole sequences under the model.
  int splits = 0;
  for (int64_t units = 1; units <= 600; units += 7)
    for (int64_t chunks = 1; chunks <= 4096; chunks = chunks * 5 / 4 + 1) {
      const int P = single_pass_split(units, chunks, kH200);
      if (P == 1) continue;
      ++splits;
      EXPECT_GE(units * 10, int64_t{kH200} * 7) << units << " x " << chunks;
      EXPECT_LE(P, kSinglePassMaxPieces);
      EXPECT_GE((chunks + P - 1) / P, kSinglePassMinPieceChunks) << units << " x " << chunks;
      EXPECT_LT(single_pass_cost(units, chunks, kH200, P), kSinglePassPiecesGain * single_pass_cost(units, chunks, kH200, 1))
          << units << " x " << chunks;
    }
  EXPECT_GT(splits, 10);
  // Taken by the launcher only where pieces are allowed and the warm-up length is automatic.
  const RecurrencePlan p = plan(96, 512);
  EXPECT_TRUE(single_pass_auto(96, kH200, p, 512, true));
  EXPECT_EQ(single_pass_pieces(p, true, 96), 4);
  EXPECT_EQ(single_pass_pieces(p, false, 96), 1);
  EXPECT_EQ(single_pass_pieces(p, true, 96, false), 1);
}

TEST(SinglePassPlan, GarbageOfOneRepeatedByteIsNoFlagOfItsOwnEpoch) {
  // A workspace's first call (fresh or poisoned memory): the epoch word and the flag words hold the same
  // garbage; none may read as "fell back" in that epoch (single_pass_fallback.cuh), nor as any flag.
  for (int b = 0; b < 256; ++b) {
    uint64_t g = 0;
    for (int i = 0; i < 8; ++i) g = (g << 8) | static_cast<uint64_t>(b);
    EXPECT_NE(piece_word(g, true), g) << "byte " << b;
    EXPECT_NE(piece_word(g, false), g) << "byte " << b;
  }
  // The epoch advances by one per call: consecutive calls' words differ, and a flag is its low bit.
  EXPECT_NE(piece_word(7, true), piece_word(8, true));
  EXPECT_EQ(piece_word(7, true) & 1, 1u);
  EXPECT_EQ(piece_word(7, false) & 1, 0u);
}

// The exact plans' segments (kernel_params.h, segment_first_chunk): they tile [0, C) in order, the last
// one holds the chunks of the final split (final_split_chunks) whenever the sequence has them, so that
// the walk that stores the final state splits them, and elsewhere the boundaries are s · ceil(C / P).
TEST(Plan, LastSegmentHoldsTheFinalSplit) {
  int moved = 0;
  for (int64_t len = 0; len <= 16 * 40; ++len) {
    const int C = static_cast<int>((len + 15) / 16);
    for (int P = 1; P <= 64; ++P) {
      const int need = C == 0 ? 0 : final_split_chunks(len);
      EXPECT_EQ(segment_first_chunk(0, P, C, len), 0);
      EXPECT_EQ(segment_first_chunk(P, P, C, len), C);
      for (int s = 0; s < P; ++s)
        ASSERT_LE(segment_first_chunk(s, P, C, len), segment_first_chunk(s + 1, P, C, len)) << len << " " << P << " " << s;
      EXPECT_GE(C - segment_first_chunk(P - 1, P, C, len), std::min(need, C)) << "len " << len << ", P " << P;
      const int per = (C + P - 1) / P;
      for (int s = 1; s < P; ++s) {
        const int plain = std::min(s * per, C);
        if (C - std::min((P - 1) * per, C) >= need) {
          EXPECT_EQ(segment_first_chunk(s, P, C, len), plain) << len << " " << P << " " << s;
        } else {
          moved += segment_first_chunk(s, P, C, len) != plain;
        }
      }
    }
  }
  EXPECT_GT(moved, 0);  // (the cases the rule is for occur)
}

TEST(Plan, ManyHeadsKeepOnePass) {
  // From 67 units on (or 45 with the exact combine only), splitting never pays: the one-pass slices.
  for (int64_t units : {67, 96, 512, 4096}) {
    const RecurrencePlan p = plan(units, 512);
    EXPECT_EQ(p.method, SplitMethod::kNone) << units;
    EXPECT_EQ(p.vsplit_first, units <= 66 ? 2 : 1) << units;
  }
  for (int64_t units : {45, 64})
    EXPECT_EQ(plan(units, 512, 0, KDA_CONTEXT_EXACT).method, SplitMethod::kNone) << units;
  EXPECT_EQ(plan(8, 1).method, SplitMethod::kNone);  // one chunk: nothing to split
  EXPECT_EQ(plan(8, 0).method, SplitMethod::kNone);
}

TEST(Plan, OnePassSlicesFillTheSms) {
  EXPECT_EQ(plan(8, 4, 1).vsplit_first, 8);
  EXPECT_EQ(plan(24, 4, 1).vsplit_first, 4);
  EXPECT_EQ(plan(64, 4, 1).vsplit_first, 2);
  EXPECT_EQ(plan(160, 4, 1).vsplit_first, 1);
  EXPECT_EQ(plan(160, 4, 1).method, SplitMethod::kNone);
}

TEST(Plan, FewHeadsLongSequencesSplitExactly) {
  // T = 8192 (512 chunks), H = 8, exact combine: splits, and the modelled time is well below the
  // one-pass plan's.
  const RecurrencePlan whole = plan(8, 512, 1);
  const RecurrencePlan p = plan(8, 512, 0, KDA_CONTEXT_EXACT);
  EXPECT_EQ(p.method, SplitMethod::kExact);
  EXPECT_GE(p.segments, 3);
  EXPECT_LT(p.cost_us, 0.5 * whole.cost_us);
  EXPECT_GE(plan(8, 4096, 0, KDA_CONTEXT_EXACT).segments, p.segments);
}

TEST(Plan, FewHeadsLongSequencesWarmUp) {
  // The automatic plan takes the bounded warm-up where it may: more pieces than the exact plan has
  // segments, a modelled time well below it, and a fallback no slower than the best exact plan
  // (within the model's slack, 1.2).
  for (int64_t units : {4, 8, 12, 16, 24, 32})
    for (int64_t chunks : {64, 128, 512, 4096}) {
      if (units == 32 && chunks == 64) continue;  // T = 1024, H = 32: the one pass fills the SMs
      const RecurrencePlan exact = plan(units, chunks, 0, KDA_CONTEXT_EXACT);
      const RecurrencePlan p = plan(units, chunks);
      ASSERT_EQ(p.method, SplitMethod::kWarmup) << units << " " << chunks;
      EXPECT_GE(p.pieces, 2);
      EXPECT_LT(p.cost_us, 0.9 * exact.cost_us) << units << " " << chunks;
      EXPECT_LE(p.fallback_cost_us, 1.2 * exact.cost_us + 1e-9) << units << " " << chunks;
      EXPECT_GE(p.segments, 1);
    }
}

TEST(Plan, WarmUpFallbackRunsInPassOnesSlices) {
  // The fallback's pass 2 runs as tail jobs of pass 1's grid (one kernel instance): every warm-up
  // plan, automatic or forced, has pass 2 in pass 1's slices. Checked to fail when the plan takes
  // pass 2's fastest slices (the exact method's choice).
  int warm = 0;
  for (int64_t units : {1, 2, 3, 4, 8, 12, 16, 24, 48})
    for (int64_t chunks : {16, 64, 128, 512, 4096})
      for (int forced : {0, 2, 5, 16}) {
        const RecurrencePlan p = plan(units, chunks, forced, KDA_CONTEXT_WARMUP);
        if (p.method != SplitMethod::kWarmup) continue;
        ++warm;
        EXPECT_EQ(p.vsplit_second, p.vsplit_first) << units << " units, " << chunks << " chunks, forced " << forced;
      }
  EXPECT_GT(warm, 100);
}

TEST(Plan, AutomaticWarmUpGridsHaveNoQueuedIdleSlots) {
  // Pass 1's grid has max(pieces, 2 x segments - 3) slots per unit: the fallback's slots beyond the
  // pieces idle when nothing falls back. An automatic plan keeps them only where the whole grid fits
  // on the SMs (else they queue on the SMs the pieces leave free: T8192_H16_N1 6% slower with 8
  // pieces and 9 fallback segments than with 5, 2026-12-01). Checked to fail on the planner before
  // (16 units x 512 chunks: 8 pieces, 9 segments).
  int warm = 0;
  for (int64_t units = 1; units <= 64; ++units)
    for (int64_t chunks : {16, 64, 128, 192, 256, 512, 2048, 4096}) {
      const RecurrencePlan p = plan(units, chunks);
      if (p.method != SplitMethod::kWarmup) continue;
      ++warm;
      const int64_t slots = p.segments >= 2 ? 2 * p.segments - 3 : 1;
      EXPECT_TRUE(slots <= p.pieces || first_pass_ctas(units, p) <= kH200)
          << units << " units, " << chunks << " chunks: " << p.pieces << " pieces, " << p.segments
          << " fallback segments, " << first_pass_ctas(units, p) << " CTAs";
    }
  EXPECT_GT(warm, 100);
}

TEST(Plan, WarmUpOnlyWhereTheBoundHolds) {
  // allow_neg_eigval or keys without the L2 norm (warmup_valid = false), or the exact method asked
  // for: never the warm-up.
  for (int64_t chunks : {64, 512, 4096}) {
    EXPECT_NE(plan(8, chunks, 0, KDA_CONTEXT_AUTO, false).method, SplitMethod::kWarmup);
    EXPECT_NE(plan(8, chunks, 0, KDA_CONTEXT_WARMUP, false).method, SplitMethod::kWarmup);
    EXPECT_NE(plan(8, chunks, 0, KDA_CONTEXT_EXACT).method, SplitMethod::kWarmup);
    EXPECT_NE(plan(8, chunks, 7, KDA_CONTEXT_AUTO).method, SplitMethod::kWarmup);  // forced count: exact
  }
}

TEST(Plan, AutomaticPlansBeatOnePass) {
  for (int64_t units = 1; units <= 140; ++units)
    for (int64_t chunks : {1, 2, 7, 64, 513, 4096}) {
      const RecurrencePlan p = plan(units, chunks);
      const RecurrencePlan whole = plan(units, chunks, 1);
      ASSERT_GE(p.segments, 1);
      ASSERT_LE(p.segments, kMaxContextSegments);
      ASSERT_LE(p.pieces, kMaxContextSegments);
      if (p.method != SplitMethod::kNone) {
        EXPECT_LE(units * 2, kH200) << "sequence parallelism on a full grid: " << units;
        EXPECT_LT(p.cost_us, 0.9 * whole.cost_us) << units << " " << chunks;
      }
      if (p.method == SplitMethod::kWarmup) {
        EXPECT_LE(p.fallback_cost_us, 1.2 * whole.cost_us + 1e-9);
      }
      for (int v : {p.vsplit_first, p.vsplit_second}) EXPECT_TRUE(valid_vsplit(v));
    }
}

TEST(Plan, ForcedSegmentsAreHonoured) {
  for (int n = 1; n <= kMaxContextSegments; ++n) {
    EXPECT_EQ(plan(3, 100, n).segments, n);
    EXPECT_EQ(plan(500, 100, n).segments, n);  // several waves when it must
    const RecurrencePlan w = plan(3, 100, n, KDA_CONTEXT_WARMUP);
    if (n == 1) {
      EXPECT_EQ(w.method, SplitMethod::kNone);
    } else {
      EXPECT_EQ(w.method, SplitMethod::kWarmup);
      EXPECT_EQ(w.pieces, n);
      EXPECT_EQ(w.segments, n);  // the fallback splits as much
    }
  }
}

TEST(Plan, CtasAndWorkspace) {
  RecurrencePlan p;
  p.method = SplitMethod::kExact;
  p.segments = 5;
  p.vsplit_first = 2;
  p.vsplit_second = 4;
  EXPECT_EQ(first_pass_ctas(3, p), 3 * 2 * 7);   // segment 0 + 3 middle segments x (state + transition)
  EXPECT_EQ(second_pass_ctas(3, p), 3 * 4 * 4);  // segments 1..4
  EXPECT_TRUE(has_combine(p));
  EXPECT_EQ(context_workspace_bytes(3, p), 3u * 7u * 128u * 128u * 4u);  // 4 states + 3 transitions
  p.segments = 2;
  EXPECT_EQ(first_pass_ctas(3, p), 3 * 2);
  EXPECT_FALSE(has_combine(p));
  EXPECT_EQ(context_workspace_bytes(3, p), 3u * 128u * 128u * 4u);
  // Warm-up: pass 1 covers the pieces and the fallback's pass 1, whichever needs more slots.
  p.method = SplitMethod::kWarmup;
  p.pieces = 16;
  p.segments = 5;
  EXPECT_EQ(first_pass_ctas(3, p), 3 * 2 * 16);
  p.pieces = 4;
  EXPECT_EQ(first_pass_ctas(3, p), 3 * 2 * 7);
  EXPECT_EQ(second_pass_ctas(3, p), 3 * 4 * 4);
  p.segments = 1;  // the fallback is the one pass: no pass 2, no combine, no combine workspace
  EXPECT_EQ(first_pass_ctas(3, p), 3 * 2 * 4);
  EXPECT_EQ(second_pass_ctas(3, p), 0);
  EXPECT_FALSE(has_combine(p));
  EXPECT_EQ(context_workspace_bytes(3, p), 0u);
  p.method = SplitMethod::kNone;
  EXPECT_EQ(second_pass_ctas(3, p), 0);
  EXPECT_EQ(context_workspace_bytes(3, p), 0u);
}

// 2^46 units x 125 states of 64 KiB do not fit in 64 bits: SIZE_MAX ("too large"), not a wrapped size.
TEST(Plan, WorkspaceSaturatesInsteadOfWrapping) {
  RecurrencePlan p;
  p.method = SplitMethod::kExact;
  p.segments = 64;
  EXPECT_EQ(context_workspace_bytes(int64_t{1} << 46, p), SIZE_MAX);
  EXPECT_EQ(context_workspace_bytes(int64_t{1} << 30, p), (size_t{1} << 30) * 125u * 128u * 128u * 4u);
}

// The preparation's 32-bit row offsets (PrepParams::off32): every offset, 16 token strides past the
// end included, below 2^31, decided at the boundary and never by an overflowed sum.
TEST(Plan, OffsetsFitInt32AtTheBoundary) {
  auto tensor = [](int64_t B, int64_t T, int64_t H, int64_t sb, int64_t st, int64_t sh) {
    kda_tensor t{};
    t.dtype = KDA_DTYPE_BF16;
    t.ndim = 4;
    const int64_t shape[4] = {B, T, H, 128}, stride[4] = {sb, st, sh, 1};
    for (int d = 0; d < 4; ++d) {
      t.shape[d] = shape[d];
      t.stride[d] = stride[d];
    }
    return t;
  };
  // Contiguous [B, T, H, 128]: reach (B·T·H - 1)·128 + 127 plus 16 token strides.
  EXPECT_TRUE(offsets_fit_int32(tensor(4, 8192, 64, 8192 * 64 * 128, 64 * 128, 128)));
  const int64_t lim = int64_t{1} << 31, row = 128;  // one head: token stride 128
  // reach = (T - 1)·128 + 127 + 16·128 = 128·T + 2047: below 2^31 up to T = (2^31 - 2048) / 128.
  const int64_t t_max = (lim - 2048) / row;
  EXPECT_TRUE(offsets_fit_int32(tensor(1, t_max, 1, t_max * row, row, row)));
  EXPECT_FALSE(offsets_fit_int32(tensor(1, t_max + 1, 1, (t_max + 1) * row, row, row)));
  // A batch stride alone can cross it (q strided out of a larger buffer), and a stride of a dimension
  // of size 1 does not count, save the token stride's 16 rows.
  EXPECT_FALSE(offsets_fit_int32(tensor(2, 64, 1, lim, row, row)));
  EXPECT_TRUE(offsets_fit_int32(tensor(1, 64, 1, int64_t{1} << 62, row, row)));
  EXPECT_FALSE(offsets_fit_int32(tensor(1, 1, 1, row, lim / 16, row)));
  // Products and sums past int64 are "does not fit", not a wrapped small number.
  EXPECT_FALSE(offsets_fit_int32(tensor(3, 64, 1, int64_t{1} << 62, row, row)));
  EXPECT_FALSE(offsets_fit_int32(tensor(1, 1, 1, row, int64_t{1} << 62, row)));
  // beta: [B, T, HV].
  kda_tensor beta = tensor(1, 1024, 8, 1024 * 8, 8, 1);
  beta.ndim = 3;
  EXPECT_TRUE(offsets_fit_int32(beta));
}

}  // namespace
}  // namespace kda::sm90
