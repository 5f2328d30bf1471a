// Random configurations of kda_fwd's option matrix (random_config.h).
#include "tests/random_config.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "reference/common.h"

namespace kda::test {

using reference::bf16_to_float;
using reference::float_to_bf16;

namespace {

const char* dtype_name(kda_dtype d) {
  return d == KDA_DTYPE_NONE ? "none" : d == KDA_DTYPE_BF16 ? "bf16" : d == KDA_DTYPE_F32 ? "f32" : "?";
}

// One configuration from its own seed (so that any one can be drawn again alone).
Config draw_one(uint64_t seed) {
  Dice dice(seed);
  auto pick = [&](int n) { return dice.pick(n); };
  auto chance = [&](int percent) { return dice.chance(percent); };
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
  draw_gate(dice, s);
  static const float kGScale[] = {1.0f, 1.0f, 2.0f, 4.0f};
  s.g_scale = kGScale[pick(4)];
  if (s.with_dt_bias && chance(20)) {  // slow key channels in some value heads (long memory)
    static const int kEvery[] = {1, 4, 8};
    s.slow_every = kEvery[pick(3)];
    s.slow_heads = chance(50) ? ~uint64_t{0} : dice.next();
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

  // g and beta as f32 tensors of the same values, on the two kernels (the single pass takes bf16 g only):
  // drawn last, so that the draws above stay those of the first form of this test.
  if (c.variant == Variant::kNone && c.single_pass == KDA_SINGLE_PASS_NEVER && chance(60))
    c.variant = Variant::kF32GateBeta;

  std::string shape;
  if (s.cu_seqlens.empty()) {
    shape = "B" + std::to_string(s.B) + " T" + std::to_string(s.T);
  } else {
    shape = std::string("cu_seqlens ") + (s.cu_dtype == KDA_DTYPE_I32 ? "i32" : "i64") + " {";
    for (size_t i = 0; i < s.cu_seqlens.size(); ++i) shape += (i ? "," : "") + std::to_string(s.cu_seqlens[i]);
    shape += "}";
  }
  char slow[48] = "-";
  if (s.slow_every > 0)
    std::snprintf(slow, sizeof(slow), "every %d in heads %llx", s.slow_every, static_cast<unsigned long long>(s.slow_heads));
  static const char* kGate[] = {"bounded", "softplus", "preactivated"};
  static const char* kPath[] = {"auto", "two-kernels", "single-pass"};
  static const char* kCtx[] = {"auto", "exact", "warmup"};
  static const char* kVariant[] = {"graph", "strided", "in-place", "cu-int32", "-", "f32-g-beta"};
  char text[512];
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

}  // namespace

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

RandomDraw random_draw(uint64_t seed, uint64_t count) {
  RandomDraw d;
  d.seed = env_u64("FLASH_KDA_RANDOM_SEED", seed);
  d.count = env_u64("FLASH_KDA_RANDOM_CONFIGS", count);
  const char* only = std::getenv("FLASH_KDA_RANDOM_ONLY");
  d.only = only != nullptr && *only != '\0' ? static_cast<int64_t>(env_u64("FLASH_KDA_RANDOM_ONLY", 0)) : -1;
  return d;
}

Config draw_config(uint64_t seed, uint64_t index) { return draw_one(seed * 1000003u + index); }

int for_each_index(const RandomDraw& d, const char* tag, const std::function<void(uint64_t index)>& run) {
  std::printf("[ %s ] seed %llu, %llu configurations%s\n", tag, static_cast<unsigned long long>(d.seed),
              static_cast<unsigned long long>(d.count), d.only >= 0 ? " (one of them)" : "");
  int ran = 0;
  for (uint64_t i = 0; i < d.count; ++i) {
    if (d.only >= 0 && static_cast<uint64_t>(d.only) != i) continue;
    run(i);  // (a failed configuration does not stop the others)
    ++ran;
  }
  return ran;
}

int for_each_config(const RandomDraw& d, const std::function<void(int index, const Config& c)>& check) {
  return for_each_index(d, "random", [&](uint64_t i) { check(static_cast<int>(i), draw_config(d.seed, i)); });
}

void adjust_token_inputs(bool beta_probs, bool unit_qk, std::vector<uint16_t>* beta, std::vector<uint16_t>* q,
                         std::vector<uint16_t>* k) {
  if (beta_probs)
    for (uint16_t& b : *beta) b = float_to_bf16(static_cast<float>(1.0 / (1.0 + std::exp(-double(bf16_to_float(b))))));
  if (unit_qk) {
    unit_norm_bf16_rows(q);
    unit_norm_bf16_rows(k);
  }
}

// The problem of a configuration, its inputs adjusted to the flags (beta as probabilities, unit-norm
// q and k: the values the CPU and GPU both read), and the flags on its params.
RandomProblem make_problem(const Config& c) {
  RandomProblem p = make_random_problem(c.spec);
  adjust_token_inputs(c.beta_probs, c.unit_qk, &p.beta, &p.q, &p.k);
  return p;
}

kda_fwd_params params_of(const Config& c, RandomProblem& p) {
  kda_fwd_params prm = p.params();
  set_shared_flags(prm, c.beta_probs, c.unit_qk, c.neg, c.scale, c.trusted);
  prm.single_pass = c.single_pass;
  return prm;
}

}  // namespace kda::test
