// Random configurations of kda_fwd's option matrix on the GPU, each against the float64 recurrence.
// The hand-written GPU tests each hold one feature still and vary another; the bugs that survive them
// live where several meet (a partial chunk in a packed batch, under a forced warm-up plan, with a bf16
// initial state and grouped heads, on the single pass). This test draws whole configurations from a
// seed: shapes (batch rows or packed sequences with empty, one-token and partial-chunk members),
// grouped value heads, the three gate forms with and without A_log and dt_bias, slow key channels,
// state dtypes in and out, beta as logits or as probabilities, the in-kernel L2 norm or unit-norm
// inputs, allow_neg_eigval, the output scale, the path (single pass forced, two kernels forced or
// automatic), the context plan (automatic, or a forced count with each method), trusted pointers.
// Each configuration runs on the GPU, on the CPU float64 recurrence and on the CPU emulation of the
// kernels' arithmetic (tests/kernel_rounding.h: the float32 chunked algebra with the kernels' bf16
// operand roundings), and the GPU's relative L2 errors against float64 must be what that emulation
// predicts: out within 1.5x the emulated error + 2e-4, the final state within 2x + 1e-5, and neither
// above the ceiling of 1e-2; no NaN or Inf. (Over 1,240 configurations on an H100, 2026-12-05: GPU /
// emulated 0.99-1.25 for out; 0.80-1.28 for final states whose emulated error is at least 1e-5, up to
// 2.1 below it, where float32 summation order alone moves errors of 2-6e-6.) A fixed tolerance would
// be looser where the inputs are benign (a mutant that drops M's lo terms, 2.9e-3 against an emulated
// 1.7e-3, passes 5e-3) and fail where the arithmetic itself is at its limit (slow channels on every
// key, b up to 2: 5.1e-3 emulated, 5.6e-3 on the GPU).
// Then the configuration runs again on the GPU (bitwise identical: deterministic), and in one more
// way drawn with it, which must give the same result: a CUDA graph's replay (bitwise), the inputs as
// strided views into one fused projection row (bitwise), the state updated in place (errors by the
// same rule), int32 offsets for int64 ones (bitwise), g and beta as f32 tensors of the same values
// (bitwise, on the two kernels).
//
// Reproducible: FLASH_KDA_RANDOM_SEED (default 2026) and FLASH_KDA_RANDOM_CONFIGS (default 40) set
// the draw; every configuration prints its index and what was drawn, and FLASH_KDA_RANDOM_ONLY=i runs
// configuration i alone. scripts/gpu_verify.sh runs a longer draw (its `random` stage) and a short one
// under compute-sanitizer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "reference/common.h"
#include "src/api/problem.h"
#include "tests/golden_io.h"
#include "tests/gpu/gpu_harness.h"
#include "tests/kernel_rounding.h"
#include "tests/random_problem.h"

namespace kda::test {
namespace {

using reference::bf16_to_float;
using reference::float_to_bf16;

enum class Variant { kGraph, kStrided, kInPlace, kCuInt32, kNone, kF32GateBeta };

struct Config {
  ProblemSpec spec;
  bool beta_probs = false;  // beta_sigmoid = 0, beta holding sigmoid values
  bool unit_qk = false;     // qk_l2norm = 0, q and k given unit-norm
  bool neg = false;         // allow_neg_eigval
  double scale = 1.0 / std::sqrt(128.0);
  int32_t single_pass = KDA_SINGLE_PASS_AUTO;
  bool trusted = false;
  Variant variant = Variant::kNone;
  std::string text;
};

uint64_t env_u64(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const unsigned long long x = std::strtoull(v, &end, 10);
  if (end == v || *end != '\0') {
    std::fprintf(stderr, "%s: expected a non-negative integer, got %s\n", name, v);
    std::abort();
  }
  return x;
}

const char* dtype_name(kda_dtype d) {
  return d == KDA_DTYPE_NONE ? "none" : d == KDA_DTYPE_BF16 ? "bf16" : d == KDA_DTYPE_F32 ? "f32" : "?";
}

// One configuration from its own seed (so that any one can be drawn again alone).
Config draw_config(uint64_t seed) {
  std::mt19937_64 r(seed);
  auto pick = [&](int n) { return static_cast<int>(r() % static_cast<uint64_t>(n)); };
  auto chance = [&](int percent) { return pick(100) < percent; };
  Config c;
  ProblemSpec& s = c.spec;
  s.seed = seed;
  s.H = 1 + pick(3);
  static const int kRatios[] = {1, 1, 1, 2, 4};
  s.HV = std::min<int64_t>(8, s.H * kRatios[pick(5)]);
  if (s.HV % s.H != 0) s.HV = s.H;
  const int64_t budget = 8000 / s.HV;  // tokens: the float64 recurrence takes at most ~0.2 s
  if (chance(35)) {                    // packed sequences
    const int n = 1 + pick(6);
    std::vector<int64_t> cu{0};
    for (int i = 0; i < n; ++i) {
      static const int64_t kEdge[] = {0, 1, 15, 16, 17, 32};
      const int64_t len = chance(40) ? kEdge[pick(6)] : 1 + pick(static_cast<int>(std::max<int64_t>(1, 2 * budget / n)));
      cu.push_back(cu.back() + std::min<int64_t>(len, budget));
    }
    if (cu.back() > budget) {  // rescale into the budget, keeping the order
      for (int64_t& x : cu) x = x * budget / cu.back();
    }
    s.B = 1;
    s.T = cu.back();
    s.cu_seqlens = cu;
    s.cu_dtype = chance(50) ? KDA_DTYPE_I32 : KDA_DTYPE_I64;
  } else {
    static const int64_t kT[] = {1, 15, 16, 17, 33, 64, 100, 255, 256, 257, 400, 513, 700, 1000, 1500, 2048, 4000};
    s.B = 1 + pick(3);
    do s.T = kT[pick(17)];
    while (s.B * s.T > budget);
  }
  const int gate = pick(10);
  s.gate = gate < 6 ? KDA_GATE_BOUNDED : gate < 8 ? KDA_GATE_SOFTPLUS : KDA_GATE_PREACTIVATED;
  static const float kLower[] = {-5.0f, -5.0f, -3.0f, -1.0f, -0.25f};
  s.lower_bound = kLower[pick(5)];
  s.with_A_log = chance(80);
  s.with_dt_bias = chance(80);
  static const float kGScale[] = {1.0f, 1.0f, 2.0f, 4.0f};
  s.g_scale = kGScale[pick(4)];
  if (s.with_dt_bias && chance(20)) {  // slow key channels in some value heads (long memory)
    static const int kEvery[] = {1, 4, 8};
    s.slow_every = kEvery[pick(3)];
    s.slow_heads = chance(50) ? ~uint64_t{0} : r();
  }
  static const kda_dtype kStates[] = {KDA_DTYPE_NONE, KDA_DTYPE_BF16, KDA_DTYPE_F32};
  s.initial_state = kStates[pick(3)];
  s.final_state = kStates[pick(3)];
  c.beta_probs = chance(20);
  c.unit_qk = chance(20);
  c.neg = chance(20);
  if (chance(30)) c.scale *= chance(50) ? 0.5 : 2.0;
  c.trusted = chance(30);
  const int path = pick(10);
  c.single_pass = path < 4 ? KDA_SINGLE_PASS_AUTO : path < 7 ? KDA_SINGLE_PASS_NEVER : KDA_SINGLE_PASS_ALWAYS;
  if (s.gate != KDA_GATE_BOUNDED && c.single_pass == KDA_SINGLE_PASS_ALWAYS) c.single_pass = KDA_SINGLE_PASS_AUTO;
  if (chance(35)) {
    static const int kSplit[] = {1, 2, 3, 4, 6, 9};
    s.context_split = kSplit[pick(6)];
    static const int kMethod[] = {KDA_CONTEXT_AUTO, KDA_CONTEXT_EXACT, KDA_CONTEXT_WARMUP};
    s.context_method = kMethod[pick(3)];
  } else if (chance(15)) {
    s.context_method = KDA_CONTEXT_WARMUP;  // the planner's piece count under the bounded warm-up
  }
  const int v = pick(5);
  c.variant = static_cast<Variant>(v);
  if (c.variant == Variant::kCuInt32) {
    if (s.cu_seqlens.empty())
      c.variant = Variant::kNone;
    else
      s.cu_dtype = KDA_DTYPE_I64;  // the int32 run is the variant
  }
  if (c.variant == Variant::kInPlace) {
    if (s.initial_state == KDA_DTYPE_NONE) s.initial_state = chance(50) ? KDA_DTYPE_F32 : KDA_DTYPE_BF16;
    s.final_state = s.initial_state;
  }

  char text[512];
  std::string shape;
  if (s.cu_seqlens.empty()) {
    shape = "B" + std::to_string(s.B) + " T" + std::to_string(s.T);
  } else {
    shape = std::string("cu_seqlens ") + (s.cu_dtype == KDA_DTYPE_I32 ? "i32" : "i64") + " {";
    for (size_t i = 0; i < s.cu_seqlens.size(); ++i) shape += (i ? "," : "") + std::to_string(s.cu_seqlens[i]);
    shape += "}";
  }
  // g and beta as f32 tensors of the same values, on the two kernels (the single pass takes bf16 g only):
  // drawn last, so that the draws above stay those of the first form of this test.
  if (c.variant == Variant::kNone && c.single_pass == KDA_SINGLE_PASS_NEVER && chance(60))
    c.variant = Variant::kF32GateBeta;

  char slow[48] = "-";
  if (s.slow_every > 0)
    std::snprintf(slow, sizeof(slow), "every %d in heads %llx", s.slow_every, static_cast<unsigned long long>(s.slow_heads));
  static const char* kGate[] = {"bounded", "softplus", "preactivated"};
  static const char* kPath[] = {"auto", "two-kernels", "single-pass"};
  static const char* kCtx[] = {"auto", "exact", "warmup"};
  static const char* kVariant[] = {"graph", "strided", "in-place", "cu-int32", "-", "f32-g-beta"};
  std::snprintf(text, sizeof(text),
                "%s H%lld HV%lld gate %s lb %g A_log %d dt_bias %d g_scale %g slow %s state %s->%s beta %s "
                "qk %s neg %d scale x%g path %s split %d/%s trusted %d variant %s",
                shape.c_str(), static_cast<long long>(s.H), static_cast<long long>(s.HV), kGate[s.gate],
                static_cast<double>(s.lower_bound), s.with_A_log, s.with_dt_bias, static_cast<double>(s.g_scale),
                slow, dtype_name(s.initial_state),
                dtype_name(s.final_state), c.beta_probs ? "probs" : "logits", c.unit_qk ? "unit" : "l2norm", c.neg,
                c.scale * std::sqrt(128.0), kPath[c.single_pass], s.context_split, kCtx[s.context_method], c.trusted,
                kVariant[static_cast<int>(c.variant)]);
  c.text = text;
  return c;
}

// The problem of a configuration, its inputs adjusted to the flags (beta as probabilities, unit-norm
// q and k: the values the CPU and GPU both read), and the flags on its params.
RandomProblem make_problem(const Config& c) {
  RandomProblem p = make_random_problem(c.spec);
  if (c.beta_probs)
    for (uint16_t& b : p.beta) b = float_to_bf16(static_cast<float>(1.0 / (1.0 + std::exp(-double(bf16_to_float(b))))));
  if (c.unit_qk)
    for (auto* buf : {&p.q, &p.k})
      for (size_t row = 0; row < buf->size() / 128; ++row) {
        double ss = 0;
        for (int i = 0; i < 128; ++i) ss += double(bf16_to_float((*buf)[row * 128 + i])) * bf16_to_float((*buf)[row * 128 + i]);
        const double inv = ss > 0 ? 1.0 / std::sqrt(ss) : 0.0;
        for (int i = 0; i < 128; ++i)
          (*buf)[row * 128 + i] = float_to_bf16(static_cast<float>(bf16_to_float((*buf)[row * 128 + i]) * inv));
      }
  return p;
}

kda_fwd_params params_of(const Config& c, RandomProblem& p) {
  kda_fwd_params prm = p.params();
  prm.beta_sigmoid = !c.beta_probs;
  prm.qk_l2norm = !c.unit_qk;
  prm.allow_neg_eigval = c.neg;
  prm.scale = c.scale;
  prm.single_pass = c.single_pass;
  prm.trusted_pointers = c.trusted;
  return prm;
}

// Errors of a run's out and final state (in the initial-state buffers after an in-place run).
GpuErrors errors_of(const RandomProblem& p, const ExactReference& exact, bool in_place) {
  GpuErrors e;
  const std::vector<double> out = bf16_to_f64(p.out);
  e.out = rel_l2(out, exact.out);
  e.non_finite = count_non_finite(out);
  const kda_dtype d = p.spec.final_state;
  if (d != KDA_DTYPE_NONE) {
    const std::vector<double> state = d == KDA_DTYPE_F32 ? f32_to_f64(in_place ? p.initial_f32 : p.final_f32)
                                                         : bf16_to_f64(in_place ? p.initial_bf16 : p.final_bf16);
    e.state = rel_l2(state, exact.final_state);
    e.non_finite += count_non_finite(state);
  }
  return e;
}

void run_or_fail(const kda_fwd_params& prm, const std::string& what) {
  const kda_status st = run_on_gpu(prm);
  ASSERT_EQ(st.code, KDA_OK) << what << ": " << st.message;
}

// What a run's errors against float64 may be: the emulated kernel's (`emu`) by the rule above.
struct Bounds {
  double out = 0, state = 0;
};
constexpr double kCeiling = 1e-2;
Bounds bounds_from(const GpuErrors& emu) {
  return {std::min(kCeiling, 1.5 * emu.out + 2e-4), std::min(kCeiling, 2.0 * emu.state + 1e-5)};
}

void expect_within(const GpuErrors& e, const Bounds& b, const std::string& what) {
  EXPECT_EQ(e.non_finite, 0u) << what;
  EXPECT_LE(e.out, b.out) << what << " (out, against the emulated kernel's bound)";
  EXPECT_LE(e.state, b.state) << what << " (final state, against the emulated kernel's bound)";
}

void check_config(int index, const Config& c) {
  const std::string what = "#" + std::to_string(index) + " " + c.text;
  std::printf("[ random ] %s\n", what.c_str());
  const RandomProblem base = make_problem(c);

  RandomProblem ref = base;
  const ExactReference exact = reference_f64(params_of(c, ref));
  // The emulated kernel (on the CPU, every core), its errors against the same float64 run.
  RandomProblem emu = base;
  const kda_fwd_params ep = params_of(c, emu);
  Problem pr;
  const kda_status vs = validate(&ep, ValidateMode::kHost, &pr);
  ASSERT_EQ(vs.code, KDA_OK) << what << ": " << vs.message;
  const kda_status es = reference::fwd_chunked_f32_ex(pr, kernel_rounding(), 0, nullptr, nullptr);
  ASSERT_EQ(es.code, KDA_OK) << what << ": " << es.message;
  const GpuErrors em = errors_of(emu, exact, false);
  const Bounds b = bounds_from(em);

  RandomProblem a = base;
  ASSERT_NO_FATAL_FAILURE(run_or_fail(params_of(c, a), what));
  const GpuErrors e = errors_of(a, exact, false);
  std::printf("[ random ]   out %.3e final_state %.3e (emulated kernel %.3e, %.3e)\n", e.out, e.state, em.out, em.state);
  expect_within(e, b, what);

  RandomProblem again = base;
  ASSERT_NO_FATAL_FAILURE(run_or_fail(params_of(c, again), what));
  expect_identical(a, again, (what + ": a second run, bitwise").c_str());

  switch (c.variant) {
    case Variant::kGraph: {
      RandomProblem g = base;
      DeviceProblem dp(params_of(c, g));
      dp.poison_workspace(0xff);
      CapturedFwd graph(dp);
      ASSERT_EQ(graph.error(), "") << what;
      ASSERT_EQ(graph.status().code, KDA_OK) << what << ": " << graph.status().message;
      ASSERT_EQ(graph.replay(2), cudaSuccess) << what;
      dp.download_outputs();
      expect_identical(a, g, (what + ": graph replay vs eager").c_str());
      break;
    }
    case Variant::kStrided: {
      // q, k, v, g of each token in one fused row [q (H) | k (H) | v (HV) | g (HV)] x 128.
      RandomProblem st = base;
      const int64_t H = c.spec.H, HV = c.spec.HV, rows = c.spec.B * c.spec.T, row = (2 * H + 2 * HV) * 128;
      std::vector<uint16_t> fused(static_cast<size_t>(std::max<int64_t>(1, rows * row)));
      const int64_t off[4] = {0, H * 128, 2 * H * 128, (2 * H + HV) * 128}, width[4] = {H * 128, H * 128, HV * 128, HV * 128};
      const std::vector<uint16_t>* src[4] = {&st.q, &st.k, &st.v, &st.g};
      for (int t = 0; t < 4; ++t)
        for (int64_t i = 0; i < rows; ++i)
          std::memcpy(&fused[static_cast<size_t>(i * row + off[t])], src[t]->data() + i * width[t],
                      static_cast<size_t>(width[t]) * 2);
      kda_fwd_params prm = params_of(c, st);
      kda_tensor* views[4] = {&prm.q, &prm.k, &prm.v, &prm.g};
      for (int t = 0; t < 4; ++t) {
        views[t]->data = fused.data() + off[t];
        views[t]->stride[0] = c.spec.T * row;
        views[t]->stride[1] = row;
        views[t]->stride[2] = 128;
      }
      ASSERT_NO_FATAL_FAILURE(run_or_fail(prm, what + " (strided)"));
      expect_identical(a, st, (what + ": strided views vs contiguous").c_str());
      break;
    }
    case Variant::kInPlace: {
      RandomProblem ip = base;
      kda_fwd_params prm = params_of(c, ip);
      prm.final_state.data = prm.initial_state.data;
      ASSERT_NO_FATAL_FAILURE(run_or_fail(prm, what + " (in place)"));
      const GpuErrors ei = errors_of(ip, exact, true);
      std::printf("[ random ]   in place: out %.3e final_state %.3e\n", ei.out, ei.state);
      expect_within(ei, b, what + " (in place)");
      break;
    }
    case Variant::kCuInt32: {
      Config c32 = c;
      c32.spec.cu_dtype = KDA_DTYPE_I32;
      RandomProblem p32 = make_problem(c32);
      ASSERT_NO_FATAL_FAILURE(run_or_fail(params_of(c32, p32), what + " (int32 offsets)"));
      expect_identical(a, p32, (what + ": int32 vs int64 cu_seqlens").c_str());
      break;
    }
    case Variant::kF32GateBeta: {
      RandomProblem f = base;
      std::vector<float> g32(f.g.size()), beta32(f.beta.size());
      for (size_t i = 0; i < g32.size(); ++i) g32[i] = bf16_to_float(f.g[i]);
      for (size_t i = 0; i < beta32.size(); ++i) beta32[i] = bf16_to_float(f.beta[i]);
      kda_fwd_params prm = params_of(c, f);
      prm.g.data = g32.data();
      prm.g.dtype = KDA_DTYPE_F32;
      prm.beta.data = beta32.data();
      prm.beta.dtype = KDA_DTYPE_F32;
      ASSERT_NO_FATAL_FAILURE(run_or_fail(prm, what + " (f32 g and beta)"));
      expect_identical(a, f, (what + ": f32 g and beta vs bf16").c_str());
      break;
    }
    case Variant::kNone:
      break;
  }
}

TEST(GpuRandomMatrix, ConfigurationsAgainstFloat64) {
  KDA_SKIP_WITHOUT_SM90();
  const uint64_t seed = env_u64("FLASH_KDA_RANDOM_SEED", 2026);
  const uint64_t count = env_u64("FLASH_KDA_RANDOM_CONFIGS", 40);
  const char* only = std::getenv("FLASH_KDA_RANDOM_ONLY");
  const int64_t one = only != nullptr ? static_cast<int64_t>(env_u64("FLASH_KDA_RANDOM_ONLY", 0)) : -1;
  std::printf("[ random ] seed %llu, %llu configurations%s\n", static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(count), one >= 0 ? " (one of them)" : "");
  int ran = 0;
  for (uint64_t i = 0; i < count; ++i) {
    if (one >= 0 && static_cast<uint64_t>(one) != i) continue;
    const Config c = draw_config(seed * 1000003u + i);
    check_config(static_cast<int>(i), c);  // (a failed configuration does not stop the others)
    ++ran;
  }
  ASSERT_GT(ran, 0) << "no configuration ran (FLASH_KDA_RANDOM_ONLY beyond FLASH_KDA_RANDOM_CONFIGS?)";
}

}  // namespace
}  // namespace kda::test
