// The single pass's pieces (single_pass_kernel.cuh's kPieces; docs/design.md §3.5): sequences cut as the
// two kernels' warm-up plan cuts them, forced onto the single pass (KDA_SINGLE_PASS_ALWAYS with a forced
// warm-up plan). With a forced warm-up length they agree with the two kernels to rounding; with the
// length from the decay bound each unit either runs on the single pass (decaying gates: rounding away from
// the two kernels, never bitwise equal to them) or, where the bound asks for more warm-up than the single
// pass takes, falls back to the two kernels (slowly decaying channels: then bitwise equal to a run on the
// two kernels), unit by unit, eager and under CUDA-graph replay; and under the automatic choice
// (KDA_SINGLE_PASS_AUTO and the planner's plan): a warm-up plan's pieces in two waves, and a one-pass
// plan's own pieces and a 2-piece warm-up plan's, whose units fall back to the single pass on whole
// sequences (their workspace without records).
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "src/api/problem.h"
#include "src/launch/launch.h"
#include "tests/golden_io.h"
#include "tests/gpu/gpu_harness.h"
#include "tests/gpu/single_pass_checks.h"
#include "tests/random_problem.h"

namespace kda::test {
namespace {

// A problem of B x T tokens, H query and HV value heads, under a forced warm-up plan of `pieces` pieces
// (context_warmup_chunks = warmup: 0 the bound decides, else forced).
ProblemSpec pieces_spec(int64_t B, int64_t T, int64_t H, int64_t HV, int32_t pieces, int32_t warmup, uint64_t seed) {
  ProblemSpec s = fixed_spec(B, T, H, HV, seed);
  s.context_split = pieces;
  s.context_method = KDA_CONTEXT_WARMUP;
  s.context_warmup_chunks = warmup;
  return s;
}

TEST(GpuSinglePass, ForcedWarmupPiecesMatchTheTwoKernels) {
  KDA_SKIP_WITHOUT_SM90();
  // Pieces with a forced warm-up length (context_warmup_chunks: testing only, approximate by design): the
  // single pass cuts the sequences as the two kernels' warm-up plan does and warms up as many chunks, so
  // the two agree to rounding, while both differ from the exact result by what the warm-up drops.
  struct Case {
    int64_t B, T, H, HV;
    int32_t pieces, warmup;
  };
  const Case cases[] = {{1, 2048, 1, 2, 4, 1}, {2, 1024, 2, 2, 3, 2}, {1, 512, 1, 1, 9, 1}, {1, 96, 1, 1, 8, 3}};
  uint64_t seed = 900;
  for (const Case& c : cases) {
    const ProblemSpec s = pieces_spec(c.B, c.T, c.H, c.HV, c.pieces, c.warmup, ++seed);
    char name[96];
    std::snprintf(name, sizeof(name), "single pass, %d pieces warming up %d, B%lld T%lld HV%lld", c.pieces, c.warmup,
                  static_cast<long long>(c.B), static_cast<long long>(c.T), static_cast<long long>(c.HV));
    // Random gates decay fast: one chunk of warm-up is already below float32 rounding (design.md §3.2).
    const RandomProblem one = check_both_paths(s, name);
    // Deterministic.
    RandomProblem again = one;
    kda_fwd_params pa = again.params();
    always(pa);
    ASSERT_EQ(run_on_gpu(pa).code, KDA_OK);
    expect_identical(one, again, name);
  }
  // A slowly decaying channel: one chunk of warm-up drops a visible part of the state, on both paths
  // alike (the pieces are really there: the single pass does not silently run whole sequences).
  ProblemSpec s = pieces_spec(1, 1024, 2, 2, 4, 1, 950);
  s.slow_every = 8;
  RandomProblem one = make_random_problem(s);
  RandomProblem two = one;
  const GpuErrors e1 = gpu_vs_f64(one, always), e2 = gpu_vs_f64(two, never);
  std::printf("[ single  ] slow channels, 4 pieces warming up 1: out %.3e (two kernels %.3e) from float64\n", e1.out, e2.out);
  EXPECT_GT(e1.out, 1e-2) << "the warm-up's error must show with slow channels";
  EXPECT_LT(std::fabs(e1.out - e2.out), 0.05 * e2.out) << "both paths drop the same part";
}

// Whether unit (b, hv)'s outputs and f32 final state are bitwise the same in a and b.
bool unit_identical(const RandomProblem& a, const RandomProblem& b, int64_t batch, int64_t hv) {
  const ProblemSpec& s = a.spec;
  for (int64_t t = 0; t < s.T; ++t) {
    const size_t at = static_cast<size_t>(((batch * s.T + t) * s.HV + hv) * 128);
    if (std::memcmp(&a.out[at], &b.out[at], 128 * 2) != 0) return false;
  }
  const size_t st = static_cast<size_t>((batch * s.HV + hv) * 128 * 128);
  return std::memcmp(&a.final_f32[st], &b.final_f32[st], 128 * 128 * 4) == 0;
}

TEST(GpuSinglePass, BoundedPiecesFallBackUnitByUnit) {
  KDA_SKIP_WITHOUT_SM90();
  // The warm-up length from the single pass's own chunk bounds (context_warmup_chunks = 0). slow_heads:
  // value heads with slowly decaying channels (every 8th dt_bias -8: no warm-up of two chunks suffices),
  // whose units fall back to the two kernels.
  struct Case {
    int64_t B, T, H, HV;
    int32_t pieces;
    uint64_t slow_heads;
  };
  const Case cases[] = {
      {1, 2048, 1, 2, 4, 0},   {2, 1024, 2, 2, 3, 0},
      {1, 512, 1, 1, 9, 0},    // pieces of 3-4 chunks
      {1, 128, 1, 2, 8, 0},    // pieces of one chunk (piece 1's candidates are chunks 0 and 1), an empty last piece
      {1, 1024, 2, 2, 4, 3},   // every unit falls back
      {1, 1024, 2, 4, 4, 5},   // heads 0 and 2
      {2, 768, 1, 2, 5, 1},    // head 0 of both batch rows
      // 576 units, more than the fallback preparation lists (kFallbackListMax, single_pass_fallback.cuh):
      // its grid of (columns, HV) instead; heads 0, 10 and 63 of every batch row fall back
      {9, 128, 1, 64, 8, 0x8000000000000401ull},
  };
  uint64_t seed = 960;
  for (const Case& c : cases) {
    ProblemSpec s = pieces_spec(c.B, c.T, c.H, c.HV, c.pieces, 0, ++seed);
    s.slow_every = c.slow_heads != 0 ? 8 : 0;
    s.slow_heads = c.slow_heads;
    char name[128];
    std::snprintf(name, sizeof(name), "single pass, %d bounded pieces, B%lld T%lld HV%lld, slow heads %llx", c.pieces,
                  static_cast<long long>(c.B), static_cast<long long>(c.T), static_cast<long long>(c.HV),
                  static_cast<unsigned long long>(c.slow_heads));
    RandomProblem one = make_random_problem(s);
    RandomProblem two = one;
    const GpuErrors e1 = gpu_vs_f64(one, always), e2 = gpu_vs_f64(two, never);
    expect_close(name, e1, 5e-3, 4e-3);
    expect_close("  the same on the two kernels", e2, 5e-3, 4e-3);
    const auto [dout, dstate] = distance(one, two);
    std::printf("[ single  ] %s: out %.3e, state %.3e from the two kernels\n", name, dout, dstate);
    EXPECT_LT(dout, 5e-3) << name;
    EXPECT_LT(dstate, kPathsStateDistance) << name;
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t hv = 0; hv < c.HV; ++hv) {
        const bool slow = (c.slow_heads >> hv) & 1;
        EXPECT_EQ(unit_identical(one, two, b, hv), slow)
            << name << ": unit (" << b << ", " << hv << ") "
            << (slow ? "must fall back to the two kernels" : "must run on the single pass");
      }
    RandomProblem again = one;  // deterministic
    kda_fwd_params pa = again.params();
    always(pa);
    ASSERT_EQ(run_on_gpu(pa).code, KDA_OK);
    expect_identical(one, again, name);
  }
}

// KDA_SINGLE_PASS_AUTO with the planner's own plan where its pieces take two waves (T65536_H8: 8 units x
// 33 pieces of 125 chunks, 264 CTAs; plan.h's rule since version 41), two of the eight heads with slowly
// decaying channels: the other heads' units run on the single pass (within rounding of the two kernels,
// never bitwise equal to them), the slow ones fall back (bitwise the two kernels); deterministic.
TEST(GpuSinglePass, AutomaticPiecesInTwoWavesMatchTheTwoKernels) {
  KDA_SKIP_WITHOUT_SM90();
  ProblemSpec s;
  s.B = 1;
  s.T = 65536;
  s.H = s.HV = 8;
  s.seed = 1200;
  s.slow_every = 8;
  s.slow_heads = 0x12;  // heads 1 and 4
  RandomProblem one = make_random_problem(s);
  RandomProblem two = one;
  const RandomProblem inputs = one;  // (the oracles')
  kda_fwd_params pa = one.params();
  ASSERT_EQ(pa.single_pass, KDA_SINGLE_PASS_AUTO);
  ASSERT_EQ(pa.context_split, 0);
  ASSERT_EQ(pa.context_method, KDA_CONTEXT_AUTO);
  ASSERT_EQ(run_on_gpu(pa).code, KDA_OK);
  kda_fwd_params pn = two.params();
  never(pn);
  ASSERT_EQ(run_on_gpu(pn).code, KDA_OK);
  const char* name = "automatic pieces in two waves, T65536 HV8, heads 1 and 4 slow";
  const auto [dout, dstate] = distance(one, two);
  std::printf("[ single  ] %s: out %.3e, state %.3e from the two kernels\n", name, dout, dstate);
  EXPECT_LT(dout, 5e-3) << name;
  EXPECT_LT(dstate, kPathsStateDistance) << name;
  expect_close(name, errors_with_emulation(one, inputs), 5e-3, 4e-3);
  for (int64_t hv = 0; hv < s.HV; ++hv) {
    const bool slow = (s.slow_heads >> hv) & 1;
    EXPECT_EQ(unit_identical(one, two, 0, hv), slow)
        << name << ": head " << hv << (slow ? " must fall back to the two kernels" : " must run on the single pass");
  }
  RandomProblem again = two;  // (the inputs; outputs overwritten)
  kda_fwd_params pg = again.params();
  ASSERT_EQ(run_on_gpu(pg).code, KDA_OK);
  expect_identical(one, again, name);
}

// Pieces in two waves on slowly decaying gates, many calls: every unit falls back, so piece 0 and the
// pieces of the second wave stop part-way while other pieces raise their flags. A preparation warp
// whose lanes read the stop word apart once split (some lanes preparing the chunk alone) and hung in
// an ldmatrix, in 3 of 6 processes of ~130 calls on 96 heads x 4 pieces (2026-12-02). Each call is
// waited for with a deadline: a hang fails the test (and ends the process, the kernel being stuck)
// instead of stopping the suite; then the outputs must equal the two kernels' bitwise (they ran there).
TEST(GpuSinglePass, BoundedPiecesStopInStepOverManyCalls) {
  KDA_SKIP_WITHOUT_SM90();
  ProblemSpec s = pieces_spec(1, 4096, 64, 64, 4, 0, 1010);  // 256 pieces: two waves on 132 SMs
  s.slow_every = 8;                                          // every head slow: every unit falls back
  RandomProblem one = make_random_problem(s);
  RandomProblem two = one;
  kda_fwd_params params = one.params();
  always(params);
  DeviceProblem dp(params);
  dp.poison_workspace(0xff);
  constexpr int kCalls = 300;
  for (int call = 0; call < kCalls; ++call) {
    const kda_status st = kda_fwd(&dp.params(), dp.workspace(), dp.workspace_bytes(), nullptr);
    ASSERT_EQ(st.code, KDA_OK) << st.message;
    const auto start = std::chrono::steady_clock::now();
    cudaError_t q;
    while ((q = cudaStreamQuery(nullptr)) == cudaErrorNotReady) {
      if (std::chrono::steady_clock::now() - start > std::chrono::seconds(20)) {
        ADD_FAILURE() << "call " << call << " of " << kCalls << " did not finish within 20 s: a hung CTA";
        std::fprintf(stderr, "[ FAILED ] GpuSinglePass.BoundedPiecesStopInStepOverManyCalls: hung at call %d\n", call);
        std::fflush(stdout);
        std::_Exit(3);  // (the stuck kernel cannot be recovered in this process)
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    ASSERT_EQ(q, cudaSuccess) << cudaGetErrorString(q);
  }
  dp.download_outputs();
  kda_fwd_params pn = two.params();
  pn.single_pass = KDA_SINGLE_PASS_NEVER;
  ASSERT_EQ(run_on_gpu(pn).code, KDA_OK);
  expect_identical(one, two, "300 calls of two-wave pieces on slow gates against the two kernels");
}

// A graph captured on decaying gates and replayed on slowly decaying ones (and back): the single pass's
// pieces decide at every replay, and the fallback launches find their units; each replay equals an
// eager run on its inputs.
TEST(GpuSinglePass, BoundedPiecesUnderGraphReplay) {
  KDA_SKIP_WITHOUT_SM90();
  ProblemSpec fast = pieces_spec(1, 1536, 2, 2, 3, 0, 990);
  ProblemSpec slow = fast;
  slow.slow_every = 8;
  slow.slow_heads = 2;  // head 1
  slow.seed = 991;

  RandomProblem p = make_random_problem(fast);
  kda_fwd_params params = p.params();
  always(params);
  DeviceProblem dp(params);
  dp.poison_workspace(0xff);
  CapturedFwd graph(dp);
  ASSERT_EQ(graph.error(), "");
  ASSERT_EQ(graph.status().code, KDA_OK) << graph.status().message;
  for (const ProblemSpec* spec : {&fast, &slow, &fast}) {
    RandomProblem eager = replay_on_fresh_inputs(p, dp, graph, *spec);
    const GpuErrors e = gpu_vs_f64(eager, always);
    const char* what = spec == &slow ? "single pass graph replay, slow head 1" : "single pass graph replay, fast gates";
    expect_close(what, e, 5e-3, 4e-3);
    expect_identical(p, eager, what);
  }
}

// The single pass's pieces under KDA_SINGLE_PASS_AUTO and the planner's plan, where their fallback is the
// whole-sequence single pass (a second launch), on `slow` (heads with slowly decaying channels, `is_slow`)
// and `fast` (decaying gates) inputs of one shape; `expected`: whether this GPU's planner gives the plan
// the test is about (else skipped). The pieces' flags in the workspace show what ran: every piece of the
// other heads' units decided with this call's epoch and ran, and a piece of each slow unit fell back;
// the slow units' outputs are then bitwise those of a forced whole-sequence single-pass run (their
// fallback), not the two kernels'. (The pieces that ran agree with whole sequences to rounding; on these
// gates, whose dropped part is below float32 rounding, they were bitwise equal too, so only the flags
// tell the pieces apart.) The workspace holds no records: at most 1/8 of the two kernels'. Deterministic;
// and a graph captured from a poisoned workspace, replayed on slow and then fast gates, equals eager runs
// (the fallback's launch finds its units and advances the epoch).
// The problems: B = 1, T tokens, `heads` query and value heads; `fast` from `seed`, `slow` from seed + 1
// with every 8th key channel slow in the heads of `slow_heads` (bit hv % 64).
void expect_pieces_fall_back_to_whole_sequences(int64_t T, int64_t heads, uint64_t seed, uint64_t slow_heads,
                                                const char* name, bool (*expected)(const sm90::RecurrencePlan&)) {
  ProblemSpec fast;
  fast.B = 1;
  fast.T = T;
  fast.H = fast.HV = heads;
  fast.seed = seed;
  ProblemSpec slow = fast;
  slow.slow_every = 8;
  slow.slow_heads = slow_heads;
  slow.seed = seed + 1;
  auto is_slow = [&](int64_t hv) { return ((slow.slow_heads >> (hv % 64)) & 1) != 0; };
  RandomProblem one = make_random_problem(slow);
  RandomProblem whole = one, two = one;
  const RandomProblem inputs = one;  // (the oracles')
  kda_fwd_params pa = one.params();
  ASSERT_EQ(pa.single_pass, KDA_SINGLE_PASS_AUTO);
  Problem pr;
  ASSERT_EQ(validate(&pa, ValidateMode::kHost, &pr).code, KDA_OK);
  const sm90::RecurrencePlan plan = sm90::fwd_plan(pr);
  if (!expected(plan)) GTEST_SKIP() << name << ": this GPU's planner gives another plan";
  const int pieces = sm90::plan_single_pass_pieces(plan);
  std::printf("[ single  ] %s: the single pass in %d pieces\n", name, pieces);
  {
    DeviceProblem dp(pa);
    dp.params().single_pass = KDA_SINGLE_PASS_AUTO;  // (whatever FLASH_KDA_TEST_SINGLE_PASS says)
    kda_fwd_params pn = dp.params();
    never(pn);
    size_t two_kernels = 0;
    ASSERT_EQ(kda_fwd_workspace_size(&pn, &two_kernels).code, KDA_OK);
    std::printf("[ single  ] %s: workspace %zu bytes, the two kernels' %zu\n", name, dp.workspace_bytes(), two_kernels);
    EXPECT_LE(dp.workspace_bytes() * 8, two_kernels) << name << ": the workspace of the single pass alone";
    dp.poison_workspace(0xff);
    const kda_status st = kda_fwd(&dp.params(), dp.workspace(), dp.workspace_bytes(), nullptr);
    ASSERT_EQ(st.code, KDA_OK) << st.message;
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    dp.download_outputs();
    const uint64_t* at = sm90::single_pass_flags(pr, plan, dp.workspace());
    ASSERT_NE(at, nullptr);
    std::vector<uint64_t> words(1 + static_cast<size_t>(pieces * slow.HV));
    ASSERT_EQ(cudaMemcpy(words.data(), at, words.size() * 8, cudaMemcpyDeviceToHost), cudaSuccess);
    const uint64_t epoch = words[0] - 1;  // (the call's: its fallback launch advanced it once)
    for (int64_t hv = 0; hv < slow.HV; ++hv) {
      int fell = 0, ran = 0;
      for (int piece = 0; piece < pieces; ++piece) {
        const uint64_t w = words[1 + piece * slow.HV + hv];
        fell += w == sm90::piece_word(epoch, true);
        ran += w == sm90::piece_word(epoch, false);
      }
      if (is_slow(hv))
        EXPECT_GE(fell, 1) << name << ": head " << hv << " must fall back";
      else
        EXPECT_EQ(ran, pieces) << name << ": every piece of head " << hv << " must run";
    }
  }
  kda_fwd_params pw = whole.params();
  always(pw);
  pw.context_split = 1;  // whole sequences
  ASSERT_EQ(run_on_gpu(pw).code, KDA_OK);
  kda_fwd_params pn = two.params();
  never(pn);
  ASSERT_EQ(run_on_gpu(pn).code, KDA_OK);
  const auto [dout, dstate] = distance(one, whole);
  const auto [nout, nstate] = distance(one, two);
  std::printf("[ single  ] %s: out %.3e, state %.3e from whole sequences; %.3e, %.3e from the two kernels\n", name,
              dout, dstate, nout, nstate);
  // From whole sequences: rounding only (bitwise equal on these gates, measured 0); from the two kernels,
  // whose long-memory units carry their own rounding: 5.5e-4 (H200, 2026-12-05). And against float64,
  // by the emulated kernel's prediction.
  EXPECT_LT(dout, 5e-3) << name;
  EXPECT_LT(dstate, kPathsStateDistance) << name;
  EXPECT_LT(nout, 5e-3) << name;
  EXPECT_LT(nstate, 2e-3) << name;
  expect_close(name, errors_with_emulation(one, inputs), 5e-3, 4e-3);
  for (int64_t hv = 0; hv < slow.HV; ++hv)
    if (is_slow(hv)) {
      EXPECT_TRUE(unit_identical(one, whole, 0, hv)) << name << ": head " << hv << " must run whole";
      EXPECT_FALSE(unit_identical(one, two, 0, hv)) << name << ": head " << hv << " ran on the two kernels";
    }
  RandomProblem again = whole;  // (the inputs; outputs overwritten)
  kda_fwd_params pg = again.params();
  pg.single_pass = KDA_SINGLE_PASS_AUTO;
  ASSERT_EQ(run_on_gpu(pg).code, KDA_OK);
  expect_identical(one, again, name);

  // Under graph replay: captured on decaying gates from a poisoned workspace, replayed on the slow
  // inputs and back on decaying ones.
  RandomProblem p = make_random_problem(fast);
  DeviceProblem dp(p.params());
  dp.poison_workspace(0xff);
  CapturedFwd graph(dp);
  ASSERT_EQ(graph.error(), "");
  ASSERT_EQ(graph.status().code, KDA_OK) << graph.status().message;
  for (const ProblemSpec* spec : {&slow, &fast}) {
    RandomProblem eager = replay_on_fresh_inputs(p, dp, graph, *spec);
    ASSERT_EQ(run_on_gpu(eager.params()).code, KDA_OK);
    expect_identical(p, eager, spec == &slow ? "graph replay on slow heads vs eager"
                                             : "graph replay on decaying gates vs eager");
  }
}

// A problem the two kernels' planner runs in one pass while the single pass cuts it itself (plan.h's
// single_pass_split: T4096 with 96 value heads, 4 pieces of 64 chunks, 384 CTAs in three waves on 132
// SMs), heads 3, 40 and 67 slow.
TEST(GpuSinglePass, OwnPiecesFallBackToWholeSequencesOnTheSinglePass) {
  KDA_SKIP_WITHOUT_SM90();
  const uint64_t slow_heads = (uint64_t{1} << 3) | (uint64_t{1} << 40);  // heads 3, 40 and 67 (bit hv % 64)
  expect_pieces_fall_back_to_whole_sequences(4096, 96, 1300, slow_heads, "own pieces, T4096 HV96, heads 3, 40, 67 slow",
                                             [](const sm90::RecurrencePlan& plan) {
                                               return plan.method == sm90::SplitMethod::kNone &&
                                                      plan.single_pass_pieces >= 2;
                                             });
}

// A bounded warm-up plan of 2 pieces whose two-kernel fallback would be one pass (T4096 with 64 value
// heads: 128 CTAs of 128 chunks; RecurrencePlan::single_pass_redo, version 43), heads 5 and 50 slow: the
// same fallback to whole sequences on the single pass, and no records in the workspace.
TEST(GpuSinglePass, WarmPiecesFallBackToWholeSequencesInASmallWorkspace) {
  KDA_SKIP_WITHOUT_SM90();
  const uint64_t slow_heads = (uint64_t{1} << 5) | (uint64_t{1} << 50);
  expect_pieces_fall_back_to_whole_sequences(4096, 64, 1400, slow_heads, "warm-up pieces, T4096 HV64, heads 5, 50 slow",
                                             [](const sm90::RecurrencePlan& plan) {
                                               return plan.method == sm90::SplitMethod::kWarmup &&
                                                      plan.single_pass_redo && plan.pieces >= 2;
                                             });
}

}  // namespace
}  // namespace kda::test
