// Sequence parallelism by bounded warm-up (docs/design.md §3.2, spec §10): pieces of a sequence
// start a few chunks early from a zero state, as many as the gates need (decided on the device);
// units whose gates decay too slowly fall back to the exact combine. Every method and forced piece
// count must meet the golden pass rule against float64, including inputs with slowly decaying
// channels; ignoring the bound there must not (so the test can tell); results are deterministic,
// also under CUDA-graph replay where the device's decision changes with the inputs.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <limits>
#include <string>

#include "tests/golden_io.h"
#include "tests/gpu/gpu_harness.h"
#include "tests/random_problem.h"

namespace kda::test {
namespace {

void expect_pass_rule(const char* what, const GpuErrors& e) { expect_close(what, e, 4e-3, 3e-3); }

struct Config {
  const char* name;
  int32_t method, split, warmup_chunks;
};
// Every method, automatic and forced piece counts {1, 2, 4, 16}.
const Config kConfigs[] = {
    {"auto", KDA_CONTEXT_AUTO, 0, 0},         {"exact", KDA_CONTEXT_EXACT, 0, 0},
    {"warm-up", KDA_CONTEXT_WARMUP, 0, 0},    {"split 1", KDA_CONTEXT_AUTO, 1, 0},
    {"exact 2", KDA_CONTEXT_EXACT, 2, 0},     {"warm-up 2", KDA_CONTEXT_WARMUP, 2, 0},
    {"exact 4", KDA_CONTEXT_EXACT, 4, 0},     {"warm-up 4", KDA_CONTEXT_WARMUP, 4, 0},
    {"exact 16", KDA_CONTEXT_EXACT, 16, 0},   {"warm-up 16", KDA_CONTEXT_WARMUP, 16, 0},
};

void apply(const Config& c, kda_fwd_params& p) {
  p.context_method = c.method;
  p.context_split = c.split;
  p.context_warmup_chunks = c.warmup_chunks;
}

struct GoldenErrors {
  double out = 0, state = 0;
  size_t non_finite = 0;
  double out_tol = 0, state_tol = 0;
  HostOutputs outs;
};

GoldenErrors run_golden(const std::string& dir, const GoldenCase& gc, const Config& c) {
  GoldenErrors e;
  e.outs = make_host_outputs(gc, 0xffff, std::numeric_limits<float>::quiet_NaN());
  kda_fwd_params p = make_host_params(gc, &e.outs);
  apply(c, p);
  const kda_status st = run_on_gpu(p);
  EXPECT_EQ(st.code, KDA_OK) << st.message;
  const std::vector<double> out = bf16_to_f64(e.outs.out), state = f32_to_f64(e.outs.final_state);
  e.out = rel_l2(out, gc.find("expected_o")->to_f64());
  e.state = rel_l2(state, gc.find("expected_final_state")->to_f64());
  e.non_finite = count_non_finite(out) + count_non_finite(state);
  golden_tolerance(dir, gc.name, &e.out_tol, &e.state_tol);
  return e;
}

TEST(GpuWarmup, GoldenCasesUnderEveryMethodAndPieceCount) {
  KDA_SKIP_WITHOUT_SM90();
  const std::string dir = golden_dir();
  std::string error;
  const std::vector<std::string> names = golden_case_names(dir, &error);
  ASSERT_FALSE(names.empty()) << "no golden cases in " << dir << ": " << error;
  for (const std::string& name : names) {
    GoldenCase gc;
    ASSERT_TRUE(load_golden_case(dir, name, &gc, &error)) << error;
    for (const Config& c : kConfigs) {
      const GoldenErrors e = run_golden(dir, gc, c);
      std::printf("[ errors ] %-20s %-10s out %.3e (tol %.2e) final_state %.3e (tol %.2e)\n", name.c_str(), c.name,
                  e.out, e.out_tol, e.state, e.state_tol);
      EXPECT_EQ(e.non_finite, 0u) << name << " " << c.name;
      EXPECT_LE(e.out, e.out_tol) << name << " " << c.name;
      EXPECT_LE(e.state, e.state_tol) << name << " " << c.name;
    }
  }
}

// Long memory (every 8th key channel decays by ~1e-3 per token): the guarded warm-up passes (its
// units fall back to the exact combine), a warm-up forced to one chunk does not.
TEST(GpuWarmup, IgnoringTheBoundFailsOnLongMemory) {
  KDA_SKIP_WITHOUT_SM90();
  ProblemSpec s;
  s.T = 1024;
  s.H = s.HV = 2;
  s.slow_every = 8;
  s.seed = 1100;
  s.context_method = KDA_CONTEXT_WARMUP;
  s.context_split = 16;
  RandomProblem guarded = make_random_problem(s);
  const GpuErrors ok = gpu_vs_f64(guarded);
  expect_pass_rule("long memory, warm-up 16 pieces (guarded)", ok);
  s.context_warmup_chunks = 1;
  RandomProblem forced = make_random_problem(s);
  const GpuErrors bad = gpu_vs_f64(forced);
  std::printf("[ errors ] %-44s out %.3e final_state %.3e (must exceed 4e-3 or 3e-3)\n",
              "long memory, warm-up forced to 1 chunk", bad.out, bad.state);
  EXPECT_TRUE(bad.out > 4e-3 || bad.state > 3e-3) << "a warm-up that ignores the bound went unnoticed";
}

// The same check on the golden long_memory case, when the golden folder has it.
TEST(GpuWarmup, IgnoringTheBoundFailsOnGoldenLongMemory) {
  KDA_SKIP_WITHOUT_SM90();
  const std::string dir = golden_dir();
  GoldenCase gc;
  std::string error;
  ASSERT_TRUE(load_golden_case(dir, "long_memory", &gc, &error)) << error;
  const GoldenErrors ok = run_golden(dir, gc, {"warm-up 16", KDA_CONTEXT_WARMUP, 16, 0});
  EXPECT_LE(ok.out, ok.out_tol);
  EXPECT_LE(ok.state, ok.state_tol);
  const GoldenErrors bad = run_golden(dir, gc, {"forced w=1", KDA_CONTEXT_WARMUP, 16, 1});
  std::printf("[ errors ] long_memory guarded out %.3e / %.3e; forced w = 1: out %.3e final_state %.3e\n", ok.out,
              ok.state, bad.out, bad.state);
  EXPECT_TRUE(bad.out > bad.out_tol || bad.state > bad.state_tol) << "a warm-up that ignores the bound went unnoticed";
}

TEST(GpuWarmup, EveryPieceCount) {
  KDA_SKIP_WITHOUT_SM90();
  // 44 chunks per sequence (the last one partial): 2, 3, 7, 16, 44 and 64 pieces (many empty).
  for (int P : {2, 3, 7, 16, 44, 64}) {
    ProblemSpec s;
    s.B = 2;
    s.T = 700;
    s.H = s.HV = 2;
    s.context_method = KDA_CONTEXT_WARMUP;
    s.context_split = P;
    s.seed = 1200 + P;
    RandomProblem p = make_random_problem(s);
    char name[64];
    std::snprintf(name, sizeof(name), "warm-up P = %d, B = 2, T = 700, H = 2", P);
    expect_pass_rule(name, gpu_vs_f64(p));
  }
}

TEST(GpuWarmup, SlicesStatesVarlenGatesAndGroupedHeads) {
  KDA_SKIP_WITHOUT_SM90();
  // Units 1, 4, 24 give different value-row slices.
  for (int64_t h : {1, 4, 24}) {
    ProblemSpec s;
    s.T = 900;
    s.H = s.HV = h;
    s.context_method = KDA_CONTEXT_WARMUP;
    s.seed = 1300 + h;
    RandomProblem p = make_random_problem(s);
    char name[64];
    std::snprintf(name, sizeof(name), "warm-up auto, T = 900, H = %lld", static_cast<long long>(h));
    expect_pass_rule(name, gpu_vs_f64(p));
  }
  ProblemSpec s;
  s.T = 520;
  s.H = s.HV = 2;
  s.context_method = KDA_CONTEXT_WARMUP;
  s.context_split = 5;
  check_state_dtype_matrix(s, "warm-up P = 5, ", 1400, 4e-3, 3e-3);

  ProblemSpec v;
  v.T = 900;
  v.H = v.HV = 3;
  v.cu_seqlens = {0, 0, 5, 300, 301, 333, 900};  // empty, shorter than a chunk, longer than a piece
  v.context_method = KDA_CONTEXT_WARMUP;
  v.context_split = 6;
  v.seed = 1500;
  check_varlen_int32_matches_int64(v, "warm-up P = 6, varlen", 4e-3, 3e-3);

  const kda_gate gates[3] = {KDA_GATE_BOUNDED, KDA_GATE_SOFTPLUS, KDA_GATE_PREACTIVATED};
  for (kda_gate gate : gates) {
    ProblemSpec g;
    g.T = 600;
    g.H = 1;
    g.HV = 4;
    g.gate = gate;
    if (gate == KDA_GATE_PREACTIVATED) g.g_scale = 0.05f;  // slow decay: these units fall back
    g.context_method = KDA_CONTEXT_WARMUP;
    g.context_split = 8;
    g.seed = 1600 + gate;
    RandomProblem p = make_random_problem(g);
    char name[64];
    std::snprintf(name, sizeof(name), "warm-up P = 8, gate %d, H = 1, HV = 4", static_cast<int>(gate));
    expect_pass_rule(name, gpu_vs_f64(p));
  }
}

TEST(GpuWarmup, MixedFallbackIsExactAndDeterministic) {
  KDA_SKIP_WITHOUT_SM90();
  // Head 1 of 3 has slow channels (its units fall back to the exact combine), heads 0 and 2 do not:
  // both kinds of unit in one call, automatic and forced piece counts.
  for (int split : {0, 8}) {
    ProblemSpec s;
    s.B = 2;
    s.T = 2048;
    s.H = s.HV = 3;
    s.slow_every = 8;
    s.slow_heads = 0x2;
    s.context_method = KDA_CONTEXT_WARMUP;
    s.context_split = split;
    s.seed = 1700 + split;
    RandomProblem a = make_random_problem(s);
    char name[64];
    std::snprintf(name, sizeof(name), "warm-up, head 1 slow, split %d", split);
    expect_pass_rule(name, gpu_vs_f64(a));
    RandomProblem b = make_random_problem(s);
    ASSERT_EQ(run_on_gpu(b.params(), 3).code, KDA_OK);
    expect_identical(a, b, name);
  }
}

// A graph captured on fast-decaying inputs and replayed on slowly decaying ones (and back): the
// device re-decides per unit at every replay; each replay equals an eager run on its inputs.
TEST(GpuWarmup, GraphReplaySwitchesBetweenWarmupAndFallback) {
  KDA_SKIP_WITHOUT_SM90();
  ProblemSpec fast;
  fast.T = 1500;
  fast.H = fast.HV = 2;
  fast.context_method = KDA_CONTEXT_WARMUP;
  fast.context_split = 12;
  fast.seed = 1800;
  ProblemSpec slow = fast;
  slow.slow_every = 8;
  slow.seed = 1801;

  RandomProblem p = make_random_problem(fast);
  DeviceProblem dp(p.params());
  dp.poison_workspace(0xff);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  const kda_status st = kda_fwd(&dp.params(), dp.workspace(), dp.workspace_bytes(), stream);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_EQ(st.code, KDA_OK) << st.message;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (const ProblemSpec* spec : {&fast, &slow, &fast}) {
    RandomProblem fresh = make_random_problem(*spec);
    p.q = fresh.q; p.k = fresh.k; p.v = fresh.v; p.g = fresh.g; p.beta = fresh.beta;
    p.initial_f32 = fresh.initial_f32; p.A_log = fresh.A_log; p.dt_bias = fresh.dt_bias;
    dp.upload_inputs();
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    dp.download_outputs();
    RandomProblem eager = fresh;
    const GpuErrors e = gpu_vs_f64(eager);
    const char* what = spec == &slow ? "graph replay on slow gates" : "graph replay on fast gates";
    expect_pass_rule(what, e);
    expect_identical(p, eager, what);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace kda::test
