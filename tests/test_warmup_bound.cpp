// The bounded warm-up's per-chunk bound (docs/design.md §3.2), checked in float64 on the chunk's
// exact transition. A chunk maps a state S to S·A + B; what a warm-up drops is the true start state
// carried through the warm-up's chunks, so it shrinks by at most the product of their ‖A‖₂. The
// preparation kernel records log2(max_k Γ_k + Σ_i ‖Wd_i‖·‖Kr_i‖) per chunk: this test shows that it
// bounds ‖A‖₂ on random chunks (gate scales 0.5 to 2), and that spec §10's max_k Γ_k alone does not
// (the delta rule moves state between key channels), so a test that used it would fail. And the
// single pass's precheck (src/kernels/sm90/warmup_rule.h, single_pass_precheck.cuh), which uses that
// formula the other way round, as a lower bound: it never refuses a piece the recorded bound takes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "reference/common.h"  // round_bf16
#include "src/kernels/sm90/gate_math.cuh"
#include "src/kernels/sm90/warmup_rule.h"
#include "tests/precheck_model.h"

namespace {

constexpr int kC = 16, kK = 128;
using Mat = std::vector<double>;  // row-major

struct Chunk {
  std::vector<double> k, a, b;  // k [16][128] unit rows, a [16][128] log-decay, b [16]
};

Chunk random_chunk(std::mt19937_64& rng, double g_scale) {
  std::normal_distribution<double> n01(0.0, 1.0);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  Chunk c;
  c.k.resize(kC * kK);
  c.a.resize(kC * kK);
  c.b.resize(kC);
  const double exp_a_log = std::exp(u01(rng));
  std::vector<double> dt(kK);
  for (double& x : dt) x = u01(rng);
  for (int t = 0; t < kC; ++t) {
    double ss = 0;
    for (int j = 0; j < kK; ++j) {
      c.k[t * kK + j] = n01(rng);
      ss += c.k[t * kK + j] * c.k[t * kK + j];
      const double x = exp_a_log * (g_scale * n01(rng) + dt[j]);
      c.a[t * kK + j] = -5.0 / (1.0 + std::exp(-x));  // bounded gate, lower_bound -5
    }
    for (int j = 0; j < kK; ++j) c.k[t * kK + j] /= std::sqrt(ss);
    c.b[t] = 1.0 / (1.0 + std::exp(-n01(rng)));
  }
  return c;
}

// The chunk's transition A (S -> S·A on zero values): token by token, rows of the identity.
Mat transition(const Chunk& c) {
  Mat A(kK * kK, 0.0);
  for (int i = 0; i < kK; ++i) A[i * kK + i] = 1.0;
  for (int t = 0; t < kC; ++t) {
    for (int i = 0; i < kK; ++i) {
      double* row = &A[i * kK];
      double dot = 0;
      for (int j = 0; j < kK; ++j) {
        row[j] *= std::exp(c.a[t * kK + j]);
        dot += row[j] * c.k[t * kK + j];
      }
      for (int j = 0; j < kK; ++j) row[j] -= c.b[t] * dot * c.k[t * kK + j];
    }
  }
  return A;
}

// Spectral norm by power iteration on AᵀA (converged far beyond what the comparison needs).
double spectral_norm(const Mat& A) {
  std::vector<double> x(kK, 1.0), y(kK);
  double lambda = 0;
  for (int it = 0; it < 300; ++it) {
    std::vector<double> z(kK, 0.0);
    for (int i = 0; i < kK; ++i) {
      double s = 0;
      for (int j = 0; j < kK; ++j) s += A[i * kK + j] * x[j];
      y[i] = s;
    }
    for (int i = 0; i < kK; ++i)
      for (int j = 0; j < kK; ++j) z[j] += A[i * kK + j] * y[i];
    double n = 0;
    for (double v : z) n += v * v;
    n = std::sqrt(n);
    if (n == 0) return 0;
    lambda = n;
    for (int j = 0; j < kK; ++j) x[j] = z[j] / n;
  }
  return std::sqrt(lambda);
}

// The two bounds, in log2: spec §10's max_k (summed log2-decay), and the recorded one.
void bounds(const Chunk& c, double* spec_log2, double* sound_log2) {
  std::vector<double> G(kC * kK);  // inclusive cumulative log-decay
  for (int j = 0; j < kK; ++j) {
    double s = 0;
    for (int t = 0; t < kC; ++t) G[t * kK + j] = s += c.a[t * kK + j];
  }
  double gmax = -INFINITY;
  for (int j = 0; j < kK; ++j) gmax = std::max(gmax, G[(kC - 1) * kK + j]);
  // T = (I + A)^-1 with A[i][j] = b_i Σ_k k_i k_j e^{G_i - G_j} (i > j); Wd = T·Diag(b)·Kd.
  double Am[kC][kC] = {}, T[kC][kC] = {};
  for (int i = 0; i < kC; ++i)
    for (int j = 0; j < i; ++j) {
      double s = 0;
      for (int k = 0; k < kK; ++k) s += c.k[i * kK + k] * c.k[j * kK + k] * std::exp(G[i * kK + k] - G[j * kK + k]);
      Am[i][j] = c.b[i] * s;
    }
  for (int col = 0; col < kC; ++col)
    for (int i = 0; i < kC; ++i) {
      double s = i == col ? 1.0 : 0.0;
      for (int j = 0; j < i; ++j) s -= Am[i][j] * T[j][col];
      T[i][col] = s;
    }
  double mix = 0;
  for (int i = 0; i < kC; ++i) {
    double wd2 = 0, kr2 = 0;
    for (int k = 0; k < kK; ++k) {
      double wd = 0;
      for (int j = 0; j <= i; ++j) wd += T[i][j] * c.b[j] * c.k[j * kK + k] * std::exp(G[j * kK + k]);
      const double kr = c.k[i * kK + k] * std::exp(G[(kC - 1) * kK + k] - G[i * kK + k]);
      wd2 += wd * wd;
      kr2 += kr * kr;
    }
    mix += std::sqrt(wd2) * std::sqrt(kr2);
  }
  *spec_log2 = gmax / std::log(2.0);
  *sound_log2 = std::log2(std::exp(gmax) + mix);
}

TEST(WarmupBound, RecordedBoundHoldsWhereTheSpecFormulaDoesNot) {
  std::mt19937_64 rng(20261130);
  int spec_violations = 0, cases = 0;
  double worst_spec = -INFINITY, loosest = 0;
  for (double g_scale : {0.5, 1.0, 2.0})
    for (int trial = 0; trial < 12; ++trial) {
      const Chunk c = random_chunk(rng, g_scale);
      const double exact = std::log2(spectral_norm(transition(c)));
      double spec = 0, sound = 0;
      bounds(c, &spec, &sound);
      ++cases;
      EXPECT_GE(sound, exact - 1e-9) << "the recorded bound must hold: g scale " << g_scale << " trial " << trial;
      loosest = std::max(loosest, sound - exact);
      worst_spec = std::max(worst_spec, exact - spec);
      spec_violations += exact > spec + 1e-9;
    }
  std::printf("[ bound ] %d random chunks: recorded bound holds on all, at most %.2f bits above ‖A‖₂; spec §10's "
              "formula is below ‖A‖₂ on %d of them, by up to %.1f bits\n",
              cases, loosest, spec_violations, worst_spec);
  EXPECT_LE(loosest, 4.0) << "the recorded bound should stay tight (a loose one lengthens every warm-up)";
  EXPECT_GT(spec_violations, 0) << "the spec formula held everywhere: this test no longer shows why it is not used";
}

// The precheck's rule on given lower bounds: refused only when the summed lower bounds stay above the
// limit by more than the margin for every warm-up within the cap, never where the piece can warm up back
// to chunk 0 (c0 <= cap: exact).
TEST(WarmupBound, PrecheckRuleAndItsMargin) {
  using kda::sm90::kPrecheckMargin;
  using kda::sm90::kWarmupLog2Bound;
  auto refused = [](float nearer, float farther, int c0) {  // chunk c0 - 1's and c0 - 2's lower bounds
    const float lb[2] = {nearer, farther};
    return kda::sm90::warmup_certainly_fails<2>([&](int i) { return lb[i]; }, c0);
  };
  EXPECT_TRUE(refused(-11.0f, -11.0f, 10));
  EXPECT_TRUE(refused(0.0f, 0.0f, 10));
  EXPECT_FALSE(refused(-30.0f, 0.0f, 10));  // one chunk suffices
  EXPECT_FALSE(refused(-12.0f, -12.0f, 10));
  // Above the rule's limit but within the margin: the recorded bounds, a little higher, decide.
  EXPECT_FALSE(refused(-12.0f, kWarmupLog2Bound + 12.0f + 0.5f * kPrecheckMargin, 10));
  EXPECT_TRUE(refused(-12.0f, kWarmupLog2Bound + 12.0f + 2.0f * kPrecheckMargin, 10));
  EXPECT_FALSE(refused(0.0f, 0.0f, 2));  // back to chunk 0: exact
  EXPECT_FALSE(refused(0.0f, 0.0f, 1));
  EXPECT_TRUE(refused(0.0f, 0.0f, 3));
  EXPECT_TRUE(refused(NAN, NAN, 10));  // (a NaN gate fails the recorded bound too: +inf)
}

// A chunk of the bounded gate from its raw inputs: g (bf16 values), dt_bias, exp(A_log), lower_bound.
struct RawChunk {
  std::vector<float> g;  // [16][128]
  Chunk c;               // the float64 chunk (a = lower_bound · sigmoid(exp_a_log · (g + dt)))
};

RawChunk raw_chunk(std::mt19937_64& rng, double g_scale, float lower_bound, float exp_a_log, const std::vector<float>& dt) {
  std::normal_distribution<double> n01(0.0, 1.0);
  RawChunk r;
  r.g.resize(kC * kK);
  r.c.k.resize(kC * kK);
  r.c.a.resize(kC * kK);
  r.c.b.resize(kC);
  for (int t = 0; t < kC; ++t) {
    double ss = 0;
    for (int j = 0; j < kK; ++j) {
      r.c.k[t * kK + j] = n01(rng);
      ss += r.c.k[t * kK + j] * r.c.k[t * kK + j];
      const float g = kda::reference::round_bf16(static_cast<float>(g_scale * n01(rng)));
      r.g[t * kK + j] = g;
      const double x = static_cast<double>(exp_a_log) * (static_cast<double>(g) + dt[j]);
      r.c.a[t * kK + j] = static_cast<double>(lower_bound) / (1.0 + std::exp(-x));
    }
    for (int j = 0; j < kK; ++j) r.c.k[t * kK + j] /= std::sqrt(ss);
    r.c.b[t] = 1.0 / (1.0 + std::exp(-n01(rng)));
  }
  return r;
}

// The precheck's lower bound of one chunk, in the kernel's float32 arithmetic (tests/precheck_model.h).
float precheck_lower_bound(const RawChunk& r, float lower_bound, float exp_a_log, const std::vector<float>& dt) {
  return kda::test::precheck_chunk_lower_bound([&](int t, int j) { return r.g[t * kK + j]; }, [&](int j) { return dt[j]; },
                                               kda::sm90::bounded_gate_constants(exp_a_log, lower_bound));
}

// On chunks of decaying, slowly decaying (every 8th channel's dt_bias -8, the benchmark's long-memory
// gates) and weakly bounded gates, some with their two-chunk sums near the rule's limit: every chunk's
// float32 lower bound lies below its float64 recorded bound (and within 1e-3 of spec §10's max_k, which
// is what the margin must cover), and every piece the precheck refuses is refused by the recorded bounds
// too. Not vacuous: the slow gates are refused, the decaying ones taken by both.
TEST(WarmupBound, PrecheckNeverRefusesWhatTheRecordedBoundTakes) {
  using kda::sm90::kWarmupLog2Bound;
  std::mt19937_64 rng(20261204);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  struct Gates {
    const char* name;
    float lower_bound;
    double g_scale;
    bool slow_channels;
    double dt_lo, dt_hi;
  };
  // "near the limit": the largest channel's 32 tokens sum to about -24 in log2 (lower_bound x 32 x log2 e).
  const Gates kinds[] = {{"decaying", -5.0f, 1.0, false, 0.0, 1.0},
                         {"slow channels", -5.0f, 1.0, true, 0.0, 1.0},
                         {"weak", -0.1f, 1.0, false, 0.0, 1.0},
                         {"near the limit", -0.52f, 0.3, false, 6.0, 8.0},
                         {"near the limit, wider", -0.55f, 0.5, false, 3.0, 8.0}};
  int refused_pre = 0, refused_full = 0, pieces = 0;
  double worst_above_sound = -INFINITY, worst_gap = 0, nearest_limit = INFINITY;
  for (const Gates& kind : kinds) {
    int kind_refused = 0, kind_full = 0;
    for (int trial = 0; trial < 6; ++trial) {
      const float exp_a_log = static_cast<float>(std::exp(u01(rng) - 0.5));
      std::vector<float> dt(kK);
      for (int j = 0; j < kK; ++j) {
        dt[j] = static_cast<float>(kind.dt_lo + (kind.dt_hi - kind.dt_lo) * u01(rng));
        if (kind.slow_channels && j % 8 == 7) dt[j] = -8.0f;
      }
      float lb[2];
      double sound[2];
      for (int i = 0; i < 2; ++i) {  // chunks c0 - 2, c0 - 1
        const RawChunk r = raw_chunk(rng, kind.g_scale, kind.lower_bound, exp_a_log, dt);
        double spec = 0;
        bounds(r.c, &spec, &sound[i]);
        lb[i] = precheck_lower_bound(r, kind.lower_bound, exp_a_log, dt);
        worst_above_sound = std::max(worst_above_sound, lb[i] - sound[i]);
        worst_gap = std::max(worst_gap, std::fabs(lb[i] - spec));
        EXPECT_LE(lb[i], sound[i] + 1e-3) << kind.name << " trial " << trial;
        EXPECT_NEAR(lb[i], spec, 1e-3) << kind.name << " trial " << trial;
      }
      const int c0 = 10;
      const bool pre = kda::sm90::warmup_certainly_fails<2>([&](int i) { return lb[1 - i]; }, c0);
      int32_t w = 0;
      const bool full = !kda::sm90::warmup_chunks<2>([&](int i) { return static_cast<float>(sound[1 - i]); }, c0,
                                                      kWarmupLog2Bound, &w);
      EXPECT_TRUE(!pre || full) << "the precheck refused a piece the recorded bound takes: " << kind.name << " trial "
                                << trial << ", lower bounds " << lb[0] << " " << lb[1] << ", recorded " << sound[0]
                                << " " << sound[1];
      nearest_limit = std::min(nearest_limit, std::fabs(static_cast<double>(lb[0]) + lb[1] - kWarmupLog2Bound));
      kind_refused += pre;
      kind_full += full;
      ++pieces;
    }
    std::printf("[ precheck ] %-22s 6 pieces: refused %d by the precheck, %d by the recorded bounds\n", kind.name,
                kind_refused, kind_full);
    if (std::strcmp(kind.name, "decaying") == 0) {
      EXPECT_EQ(kind_full, 0) << "decaying gates warm up in one chunk";
    }
    if (std::strcmp(kind.name, "slow channels") == 0) {
      EXPECT_EQ(kind_refused, 6) << "slow channels are refused early";
    }
    refused_pre += kind_refused;
    refused_full += kind_full;
  }
  std::printf("[ precheck ] %d pieces: %d refused early, %d by the recorded bounds; lower bound - recorded <= %.3g, "
              "|float32 lower bound - float64 max_k| <= %.3g (margin %.4f), nearest two-chunk sum %.3f from the limit\n",
              pieces, refused_pre, refused_full, worst_above_sound, worst_gap, kda::sm90::kPrecheckMargin, nearest_limit);
  EXPECT_LT(worst_gap, kda::sm90::kPrecheckMargin / 8) << "the margin must cover the float32 lower bound's error";
  EXPECT_LT(nearest_limit, 1.0) << "no piece came near the limit: the margin went untested";
}

}  // namespace
