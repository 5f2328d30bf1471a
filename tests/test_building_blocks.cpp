// The building blocks of the CPU reference (reference/common.h) against float64 / long double
// closed forms: the three gate forms (incl. extreme arguments: no overflow, no NaN), the L2 norm
// (incl. the zero vector), the unit-lower-triangular inverse by forward substitution (random
// well-conditioned and ill-conditioned 16x16 systems: T·(I+A) ≈ I), and bf16 rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "benchmarks/case_filter.h"
#include "reference/common.h"

namespace kda::test {
namespace {

using reference::gate_value;

long double sigmoid_ld(long double z) { return 1.0L / (1.0L + std::exp(-z)); }
long double softplus_ld(long double x) { return x > 30 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }

double rel(long double x, long double ref) {
  const long double d = std::fabs(x - ref);
  return static_cast<double>(ref == 0 ? d : d / std::fabs(ref));
}

TEST(Gate, BoundedMatchesClosedForm) {
  for (double lb : {-5.0, -1.0, -0.1}) {
    for (double ea : {0.3, 1.0, 2.718281828459045}) {
      for (double g = -60.0; g <= 60.0; g += 0.37) {
        // exp(z) turns the rounding of z into a relative error |z|·eps: the bound scales with |z|.
        const double db = 0.25, cond = 4.0 + std::fabs(ea * (g + db));
        const long double ref = lb * sigmoid_ld(ea * (static_cast<long double>(g) + db));
        EXPECT_LE(rel(gate_value<double>(KDA_GATE_BOUNDED, g, db, ea, lb), ref), 2.3e-16 * cond) << g;
        const float f = gate_value<float>(KDA_GATE_BOUNDED, float(g), float(db), float(ea), float(lb));
        const long double ref_f = float(lb) * sigmoid_ld(float(ea) * (static_cast<long double>(float(g)) + float(db)));
        EXPECT_LE(std::fabs(f - ref_f), 1.2e-7 * cond * std::fabs(ref_f) + 1e-37) << g;  // may underflow to 0
      }
    }
  }
}

TEST(Gate, BoundedExtremeArguments) {
  for (double g : {-1e30, -1e4, 1e4, 1e30}) {
    const double a = gate_value<double>(KDA_GATE_BOUNDED, g, 0.0, 1.0, -5.0);
    const float af = gate_value<float>(KDA_GATE_BOUNDED, float(g), 0.0f, 1.0f, -5.0f);
    EXPECT_TRUE(std::isfinite(a) && a <= 0.0 && a >= -5.0) << g << " -> " << a;
    EXPECT_TRUE(std::isfinite(af) && af <= 0.0f && af >= -5.0f) << g << " -> " << af;
  }
  EXPECT_EQ(gate_value<double>(KDA_GATE_BOUNDED, 1e4, 0.0, 1.0, -5.0), -5.0);
  EXPECT_EQ(gate_value<float>(KDA_GATE_BOUNDED, -1e4f, 0.0f, 1.0f, -5.0f), -0.0f);
}

TEST(Gate, SoftplusMatchesClosedForm) {
  for (double ea : {0.5, 1.0, 7.0}) {
    for (double x = -80.0; x <= 80.0; x += 0.29) {
      const long double ref = -ea * softplus_ld(x);
      EXPECT_LE(rel(gate_value<double>(KDA_GATE_SOFTPLUS, x, 0.0, ea, 0.0), ref), 4e-16) << x;
      const float f = gate_value<float>(KDA_GATE_SOFTPLUS, float(x), 0.0f, float(ea), 0.0f);
      EXPECT_LE(rel(f, -static_cast<long double>(float(ea)) * softplus_ld(float(x))), 2e-6) << x;
    }
  }
}

TEST(Gate, SoftplusExtremeArgumentsDoNotOverflow) {
  // float exp overflows above ~88.7 and double exp above ~709: the stable form never calls them there.
  EXPECT_EQ(reference::softplus<float>(100.0f), 100.0f);
  EXPECT_EQ(reference::softplus<float>(1e30f), 1e30f);
  EXPECT_EQ(reference::softplus<double>(1000.0), 1000.0);
  EXPECT_EQ(reference::softplus<double>(-1000.0), 0.0);
  EXPECT_EQ(reference::softplus<float>(-200.0f), 0.0f);
  EXPECT_LE(rel(reference::softplus<float>(-30.0f), softplus_ld(-30.0L)), 2e-6);  // tiny, still accurate
  const float a = gate_value<float>(KDA_GATE_SOFTPLUS, 1e30f, 0.0f, 3.0f, 0.0f);
  EXPECT_TRUE(std::isinf(a) || std::isfinite(a));
  EXPECT_FALSE(std::isnan(a));
  EXPECT_LT(a, 0.0f);
}

TEST(Gate, PreactivatedIsIdentity) {
  for (double g : {-1e4, -3.5, -0.0, 0.0})
    EXPECT_EQ(gate_value<double>(KDA_GATE_PREACTIVATED, g, 10.0, 5.0, -5.0), g);
  EXPECT_EQ(gate_value<float>(KDA_GATE_PREACTIVATED, -2.5f, 1.0f, 2.0f, -1.0f), -2.5f);
}

TEST(Beta, SigmoidStableAtExtremes) {
  EXPECT_EQ(reference::sigmoid<float>(-1000.0f), 0.0f);
  EXPECT_EQ(reference::sigmoid<float>(1000.0f), 1.0f);
  EXPECT_LE(rel(reference::sigmoid<double>(-40.0), sigmoid_ld(-40.0L)), 4e-16);
}

TEST(L2Norm, MatchesClosedForm) {
  std::mt19937 rng(3);
  std::normal_distribution<double> n(0.0, 1.0);
  std::vector<double> x(128), y(128);
  std::vector<float> xf(128), yf(128);
  for (int i = 0; i < 128; ++i) xf[i] = static_cast<float>(x[i] = n(rng));
  long double ss = 0;
  for (double v : x) ss += static_cast<long double>(v) * v;
  const long double inv = 1.0L / std::sqrt(ss + 1e-6L);
  reference::l2_normalize(x.data(), y.data(), 128);
  reference::l2_normalize(xf.data(), yf.data(), 128);
  for (int i = 0; i < 128; ++i) {
    EXPECT_LE(rel(y[i], x[i] * inv), 1e-15);
    EXPECT_NEAR(yf[i], static_cast<double>(x[i] * inv), 2e-6);
  }
}

TEST(L2Norm, ZeroAndTinyVectorsStayFinite) {
  std::vector<float> z(128, 0.0f), out(128, 1.0f);
  reference::l2_normalize(z.data(), out.data(), 128);
  for (float v : out) EXPECT_EQ(v, 0.0f);
  std::vector<double> tiny(128, 1e-20), out2(128);
  reference::l2_normalize(tiny.data(), out2.data(), 128);
  for (double v : out2) EXPECT_NEAR(v, 1e-17, 1e-22);  // eps dominates: x / sqrt(1e-6)
}

// ---------------------------------------------------------------------------------------------
constexpr int C = 16;

// max |T·(I+A) − I| / ||T|| (the backward error) and the relative Frobenius difference between
// the float and double inverses.
void check_inverse(const std::vector<double>& A, double identity_tol, double vs_f64_tol) {
  std::vector<float> Af(A.begin(), A.end()), Tf(C * C);
  std::vector<double> Td(C * C);
  reference::unit_lower_inverse(Af.data(), Tf.data(), C);
  reference::unit_lower_inverse(A.data(), Td.data(), C);
  double worst = 0, num = 0, den = 0;
  for (int i = 0; i < C; ++i) {
    for (int j = 0; j < C; ++j) {
      if (j >= i) {
        EXPECT_EQ(Tf[i * C + j], i == j ? 1.0f : 0.0f) << i << "," << j;
      }
      long double acc = 0;  // (T·(I+A))[i][j] with the float inverse and the float-rounded A
      for (int m = 0; m < C; ++m) {
        const long double ia = (m == j) ? 1.0L : (m > j ? static_cast<long double>(Af[m * C + j]) : 0.0L);
        acc += static_cast<long double>(Tf[i * C + m]) * ia;
      }
      worst = std::max(worst, static_cast<double>(std::fabs(acc - (i == j ? 1.0L : 0.0L))));
      num += (Tf[i * C + j] - Td[i * C + j]) * (Tf[i * C + j] - Td[i * C + j]);
      den += Td[i * C + j] * Td[i * C + j];
      EXPECT_TRUE(std::isfinite(Tf[i * C + j]));
    }
  }
  worst /= std::sqrt(den);
  std::printf("[ inverse ] max|T(I+A)-I|/||T|| = %.3e, ||T_f32 - T_f64|| / ||T_f64|| = %.3e, ||T_f64|| = %.3e\n",
              worst, std::sqrt(num / den), std::sqrt(den));
  EXPECT_LE(worst, identity_tol);
  EXPECT_LE(std::sqrt(num / den), vs_f64_tol);
}

TEST(UnitLowerInverse, RandomWellConditioned) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(-0.3, 0.3);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<double> A(C * C, 0.0);
    for (int i = 0; i < C; ++i)
      for (int j = 0; j < i; ++j) A[i * C + j] = u(rng);
    check_inverse(A, 1e-6, 1e-5);
  }
}

// The intra-chunk system of nearly identical unit keys with beta near 1 (golden
// near_duplicate_keys, where upstream's fp16 Neumann product gave NaN): A[i][j] = b k_i·k_j ≈ 1
// below the diagonal.
TEST(UnitLowerInverse, NearDuplicateKeys) {
  std::mt19937 rng(9);
  std::normal_distribution<double> n(0.0, 1.0);
  for (double spread : {1e-2, 1e-3}) {
    std::vector<double> base(128), keys(C * 128);
    for (double& b : base) b = n(rng);
    for (int i = 0; i < C; ++i) {
      for (int k = 0; k < 128; ++k) keys[i * 128 + k] = base[k] + spread * n(rng);
      reference::l2_normalize(&keys[i * 128], &keys[i * 128], 128);
    }
    std::vector<double> A(C * C, 0.0);
    for (int i = 0; i < C; ++i) {
      for (int j = 0; j < i; ++j) {
        double dot = 0;
        for (int k = 0; k < 128; ++k) dot += keys[i * 128 + k] * keys[j * 128 + k];
        A[i * C + j] = 0.99 * dot;
      }
    }
    check_inverse(A, 1e-6, 1e-5);
  }
}

// Ill-conditioned: anti-aligned consecutive keys with b near 2 (allow_neg_eigval) give
// A[i][i-1] ≈ -1.9, so T grows like 1.9^(i-j) (||T|| ~ 1e4).
TEST(UnitLowerInverse, IllConditionedGrowth) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(-0.1, 0.1);
  for (int trial = 0; trial < 5; ++trial) {
    std::vector<double> A(C * C, 0.0);
    for (int i = 0; i < C; ++i)
      for (int j = 0; j < i; ++j) A[i * C + j] = j == i - 1 ? -1.9 + u(rng) : u(rng);
    check_inverse(A, 1e-6, 1e-5);
  }
}

// ---------------------------------------------------------------------------------------------
TEST(Bf16, RoundToNearestEven) {
  EXPECT_EQ(reference::float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(reference::float_to_bf16(1.0f + 0x1p-8f), 0x3f80);            // tie -> even
  EXPECT_EQ(reference::float_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);        // tie -> even (up)
  EXPECT_EQ(reference::float_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);  // above the tie
  EXPECT_EQ(reference::float_to_bf16(NAN) & 0x7fc0, 0x7fc0);
  EXPECT_EQ(reference::float_to_bf16(3.4e38f), 0x7f80);                   // overflow to inf
  // From double: one rounding, no double rounding through float.
  const double just_above_tie = 1.0 + 0x1p-8 + 0x1p-40;  // (float) would round it to the tie
  EXPECT_EQ(reference::float_to_bf16(static_cast<float>(just_above_tie)), 0x3f80);
  EXPECT_EQ(reference::double_to_bf16(just_above_tie), 0x3f81);
  EXPECT_EQ(reference::double_to_bf16(-(1.0 + 0x1p-8)), 0xbf80);
  EXPECT_EQ(reference::double_to_bf16(1e300), 0x7f80);
  EXPECT_EQ(reference::double_to_bf16(-0.0), 0x8000);
  EXPECT_EQ(reference::double_to_bf16(0x1p-133), 0x0001);  // smallest bf16 subnormal
  EXPECT_EQ(reference::double_to_bf16(0x1p-135), 0x0000);  // below half of it
  for (double x : {0.1, -3.14159, 1e-30, 6.5e4, 1e-39})
    EXPECT_EQ(reference::double_to_bf16(x), reference::float_to_bf16(static_cast<float>(x))) << x;
}

// The benchmarks' --filter (benchmarks/case_filter.h): substrings, or "=NAME" for one name exactly (a
// profile of T512_H32 by substring ran B64_T512_H32 instead, 2026-12-02).
TEST(BenchFilter, SubstringsAndExactNames) {
  struct Case {
    const char* filter;
    const char* name;
    bool selected;
  };
  const Case cases[] = {
      {"", "T512_H32", true},
      {"T512_H32", "T512_H32", true},
      {"T512_H32", "B64_T512_H32", true},
      {"=T512_H32", "T512_H32", true},
      {"=T512_H32", "B64_T512_H32", false},
      {"=T8192_H8", "T8192_H8_LM", false},
      {"T8192_H8", "T8192_H8_LM", true},
      {"=T8192_H8,=T8192_H8_LM", "T8192_H8_LM", true},
      {"B64,=T8192_H8", "B64_T512_H32", true},
      {"=", "T512_H32", false},
      {",,", "T512_H32", false},
      {"H96", "T8192_H64", false},
  };
  for (const Case& c : cases)
    EXPECT_EQ(bench::matches(c.filter, c.name), c.selected) << "filter \"" << c.filter << "\", name " << c.name;
}

}  // namespace
}  // namespace kda::test
