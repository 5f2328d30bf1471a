// The kernels' per-element math (src/kernels/sm90/gate_math.cuh), compiled for the host: the three
// gate forms and beta against float64 closed forms, including arguments where a naive formula
// overflows (the device build swaps in hardware exp2 / reciprocal; the GPU golden tests cover that).
// Also the preparations' columns of T = (I + A)^-1 (unit_lower_inverse.h), both forms, against the
// float64 inverse.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "reference/common.h"
#include "src/kernels/sm90/fast_div.h"
#include "src/kernels/sm90/gate_math.cuh"
#include "src/kernels/sm90/kernel_params.h"
#include "src/kernels/sm90/unit_lower_inverse.h"
#include "src/launch/launch.h"

namespace kda::test {
namespace {

using sm90::GateKind;

double sigmoid64(double x) { return x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x)); }
double softplus64(double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }

TEST(KernelMath, BoundedGateMatchesFloat64) {
  for (double lb : {-5.0, -1.0, -0.1})
    for (double ea : {1.0, 0.37, 2.7})
      for (double x = -60.0; x <= 60.0; x += 0.73) {
        const double ref = lb * sigmoid64(ea * x);
        const float got = sm90::gate_log_decay<GateKind::kBounded>(static_cast<float>(x), static_cast<float>(ea),
                                                                   static_cast<float>(lb));
        ASSERT_TRUE(std::isfinite(got)) << x;
        EXPECT_NEAR(got, ref, 1e-6 * std::fabs(lb) + 1e-6 * std::fabs(ref)) << "lb " << lb << " x " << x;
        EXPECT_LE(got, 0.0f);
        EXPECT_GE(got, static_cast<float>(lb));
      }
}

TEST(KernelMath, FoldedBoundedGateMatchesFloat64) {
  // The preparation kernel's folded form (log2 units) against the float64 closed form.
  for (double lb : {-5.0, -1.0, -0.1})
    for (double ea : {1.0, 0.37, 2.7})
      for (double dt : {0.0, 0.6, -1.3})
        for (double g = -60.0; g <= 60.0; g += 0.73) {
          const double ref = lb * sigmoid64(ea * (g + dt)) / std::log(2.0);
          const sm90::BoundedGateConstants k =
              sm90::bounded_gate_constants(static_cast<float>(ea), static_cast<float>(lb));
          const float got = sm90::bounded_log2_decay(static_cast<float>(g), static_cast<float>(dt), k);
          ASSERT_TRUE(std::isfinite(got)) << g;
          EXPECT_NEAR(got, ref, 2e-6 * std::fabs(lb) / std::log(2.0) + 2e-6 * std::fabs(ref)) << "lb " << lb << " g " << g;
          EXPECT_LE(got, 0.0f);
          EXPECT_GE(got, static_cast<float>(lb / std::log(2.0)) * (1.0f + 1e-6f));
        }
}

TEST(KernelMath, SoftplusGateHasNoOverflow) {
  for (double ea : {1.0, 0.5, 3.0})
    for (double x = -100.0; x <= 100.0; x += 0.91) {
      const double ref = -ea * softplus64(x);
      const float got = sm90::gate_log_decay<GateKind::kSoftplus>(static_cast<float>(x), static_cast<float>(ea), 0.0f);
      ASSERT_TRUE(std::isfinite(got)) << x;
      EXPECT_NEAR(got, ref, 2e-6 * std::fabs(ref) + 1e-7) << "x " << x;
      EXPECT_LE(got, 0.0f);
    }
  // Far beyond fp32's exp range: still finite and ~ -x.
  const float big = sm90::gate_log_decay<GateKind::kSoftplus>(1e30f, 1.0f, 0.0f);
  EXPECT_TRUE(std::isfinite(big));
  EXPECT_FLOAT_EQ(big, -1e30f);
}

TEST(KernelMath, PreactivatedGateIsTheIdentity) {
  for (float x : {0.0f, -0.5f, -30.0f, -1e4f})
    EXPECT_EQ(sm90::gate_log_decay<GateKind::kPreactivated>(x, 123.0f, -5.0f), x);
}

TEST(KernelMath, BetaActivation) {
  for (double x = -50.0; x <= 50.0; x += 0.37) {
    const float xf = static_cast<float>(x);
    EXPECT_NEAR(sm90::beta_activation(xf, true, false), sigmoid64(x), 1e-7);
    EXPECT_NEAR(sm90::beta_activation(xf, true, true), 2.0 * sigmoid64(x), 2e-7);
    EXPECT_EQ(sm90::beta_activation(xf, false, false), xf);
    EXPECT_EQ(sm90::beta_activation(xf, false, true), 2.0f * xf);
  }
  EXPECT_EQ(sm90::beta_activation(-std::numeric_limits<float>::infinity(), true, false), 0.0f);
  EXPECT_EQ(sm90::beta_activation(std::numeric_limits<float>::infinity(), true, false), 1.0f);
}

TEST(KernelMath, Exp2OfDecaysStaysInRange) {
  // The bounded-gate factorisation needs 2^{±G} finite for |G| <= 16 * 5 * log2(e).
  const float g = 16.0f * 5.0f * sm90::kLog2e;
  EXPECT_TRUE(std::isfinite(sm90::exp2_fast(g)));
  EXPECT_GT(sm90::exp2_fast(-g), 0.0f);
  EXPECT_NEAR(sm90::exp2_fast(-g) * sm90::exp2_fast(g), 1.0f, 1e-6f);
}


// The overflow guards (gate_math.cuh): the kernel's constants are the CPU chunked path's, the
// floor gives a decay of exactly 0 and finite cumulative sums, the capped rate is finite, the
// folded offset never makes g · nc1 + nd an inf - inf, and NaN stays NaN everywhere.
TEST(KernelMath, OverflowGuardsMatchTheReferenceAndStayFinite) {
  EXPECT_EQ(sm90::kMinLog2Decay, reference::kMinLog2Decay);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(sm90::clamp_log2_decay(-inf), sm90::kMinLog2Decay);
  EXPECT_EQ(sm90::clamp_log2_decay(-3e38f), sm90::kMinLog2Decay);
  EXPECT_EQ(sm90::clamp_log2_decay(-7.5f), -7.5f);
  EXPECT_TRUE(std::isnan(sm90::clamp_log2_decay(std::nanf(""))));
  EXPECT_EQ(sm90::exp2_fast(sm90::kMinLog2Decay), 0.0f);
  const float sum16 = 16.0f * sm90::kMinLog2Decay;
  EXPECT_TRUE(std::isfinite(sum16 - sum16));
  // A softplus gate of +inf, floored: a decay of exactly 0, never NaN.
  const float a2 = sm90::clamp_log2_decay(sm90::gate_log_decay<GateKind::kSoftplus>(inf, 1.0f, 0.0f) * sm90::kLog2e);
  EXPECT_EQ(a2, sm90::kMinLog2Decay);

  for (float a_log : {100.0f, 1e30f, inf}) {
    const float ea = sm90::exp_a_log_capped(a_log);
    EXPECT_TRUE(std::isfinite(ea)) << a_log;
    EXPECT_EQ(ea, reference::exp_a_log_capped(a_log)) << a_log;
    EXPECT_EQ(sm90::gate_log_decay<GateKind::kBounded>(0.0f, ea, -5.0f), -2.5f);  // inf · 0 used to be NaN
    EXPECT_FALSE(std::isnan(sm90::gate_log_decay<GateKind::kSoftplus>(-200.0f, ea, 0.0f)));
  }
  EXPECT_TRUE(std::isnan(sm90::exp_a_log_capped(std::nanf(""))));
  EXPECT_FLOAT_EQ(sm90::exp_a_log_capped(0.5f), std::exp(0.5f));

  // Folded bounded gate with a huge rate: the sign of g + dt_bias decides, whatever the magnitudes
  // (g·nc1 = +inf against dt_bias·nc1 = -inf gave NaN; clamping one of them flipped the sign).
  const sm90::BoundedGateConstants k = sm90::bounded_gate_constants(sm90::exp_a_log_capped(100.0f), -5.0f);
  const float lb2 = -5.0f * sm90::kLog2e;
  struct {
    float g, dt, want;
  } cases[] = {{-3.0f, 2.0f, 0.0f}, {-200.0f, 40.0f, 0.0f}, {-1.0f, 40.0f, lb2}, {-1.5f, 0.0f, 0.0f},
               {2.0f, -1.0f, lb2},  {0.0f, 0.0f, lb2 / 2},  {-3e38f, 3e38f, lb2 / 2}};
  for (const auto& c : cases) {
    const float got = sm90::bounded_log2_decay(c.g, c.dt, k);
    EXPECT_FALSE(std::isnan(got)) << c.g << " " << c.dt;
    EXPECT_NEAR(got, c.want, 1e-5f) << "g " << c.g << " dt_bias " << c.dt;
  }

  // The L2 rescale factor: rows of the largest bf16 have finite scaled sums of squares, and the
  // smallest row that overflows keeps its largest element normal.
  const float big = 0x1.fep127f * sm90::kL2RescaleFactor;
  EXPECT_TRUE(std::isfinite(128.0f * big * big));
  const float small = 0x1p60f * sm90::kL2RescaleFactor;
  EXPECT_GT(small * small, std::numeric_limits<float>::min());
}


// T = (I + A)^-1 by columns as both preparations form it (A transposed, right-looking:
// unit_lower_inverse_column_t) against the float64 inverse, column by column: exactly unit lower
// triangular, and within float rounding of float64 on random A of the kernels' magnitudes
// (A = b_i · (Kd·Kiᵀ)_ij with unit-norm keys: |A_ij| <= b <= 2), on all-equal keys (every entry below
// the diagonal b) and on A = 0 (the identity, exactly).
TEST(KernelMath, UnitLowerInverseColumnsMatchFloat64) {
  std::mt19937 rng(16);
  auto check = [](const std::vector<float>& A, double tol, const char* what) {
    std::vector<double> Ad(A.begin(), A.end()), Td(256);
    reference::unit_lower_inverse(Ad.data(), Td.data(), 16);
    std::vector<float> At(256);
    for (int i = 0; i < 16; ++i)
      for (int j = 0; j < 16; ++j) At[j * 16 + i] = A[i * 16 + j];
    for (int c = 0; c < 16; ++c) {
      float col[16];
      sm90::prep_detail::unit_lower_inverse_column_t(At.data(), c, col);
      double num = 0, den = 0;
      for (int i = 0; i < 16; ++i) {
        if (i <= c) {
          EXPECT_EQ(col[i], i == c ? 1.0f : 0.0f) << what << " row " << i << " column " << c;
        }
        const double t = Td[i * 16 + c];
        num += (col[i] - t) * (col[i] - t);
        den += t * t;
      }
      EXPECT_LE(std::sqrt(num / den), tol) << what << " column " << c;
    }
  };
  std::vector<float> A(256, 0.0f);
  check(A, 0.0, "A = 0");
  for (float b : {0.5f, 1.0f, 2.0f}) {
    for (int i = 0; i < 16; ++i)
      for (int j = 0; j < i; ++j) A[i * 16 + j] = b;
    check(A, 1e-5, "all-equal keys");
  }
  for (int trial = 0; trial < 200; ++trial) {
    const float b = std::uniform_real_distribution<float>(0.0f, trial % 4 == 0 ? 2.0f : 1.0f)(rng);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (int i = 0; i < 16; ++i)
      for (int j = 0; j < 16; ++j) A[i * 16 + j] = j < i ? b * u(rng) * (trial % 2 ? 1.0f : 0.25f) : 0.0f;
    check(A, 1e-5, "random A");
  }
}

// The padded row stride chunk_prep_kernel stores A with (PrepSmem::kAtLd = 20, version 54): the same
// columns bit for bit as rows of 16, and nothing read from the padding (filled with NaN).
TEST(KernelMath, UnitLowerInverseColumnsIgnoreTheRowPadding) {
  constexpr int kLd = 20;  // PrepSmem::kAtLd (prep_smem.cuh, a device-only header)
  std::mt19937 rng(54);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<float> At16(256, 0.0f), AtLd(16 * kLd, std::numeric_limits<float>::quiet_NaN());
    for (int j = 0; j < 16; ++j)
      for (int i = 0; i < 16; ++i) {
        const float a = i > j ? u(rng) : 0.0f;  // At[j][i] = A[i][j], strictly lower A
        At16[j * 16 + i] = a;
        AtLd[j * kLd + i] = a;
      }
    for (int c = 0; c < 16; ++c) {
      float col16[16], colLd[16];
      sm90::prep_detail::unit_lower_inverse_column_t(At16.data(), c, col16);
      sm90::prep_detail::unit_lower_inverse_column_t<false, kLd>(AtLd.data(), c, colLd);
      for (int i = 0; i < 16; ++i) EXPECT_EQ(std::memcmp(&col16[i], &colLd[i], 4), 0) << "row " << i << " column " << c;
    }
  }
}

// fast_div.h: the preparation's query head hv / group by a multiply-high. Every n < 65536 (the
// grid's y limit) with n·d < 2^32, for every divisor below 300 and a geometric sweep (d -> 2d + 1)
// up to 65535; a division by zero-magic (d = 1) returns n.
TEST(KernelMath, FastDivisionIsExactOnTheKernelsRange) {
  int64_t checked = 0;
  for (uint32_t d = 1; d < 65536; d = d < 300 ? d + 1 : d * 2 + 1) {
    const uint32_t magic = sm90::fast_div_magic(d);
    if (d == 1) {
      EXPECT_EQ(magic, 0u);
    }
    for (uint32_t n = 0; n < 65536 && static_cast<uint64_t>(n) * d < (uint64_t{1} << 32); ++n) {
      ASSERT_EQ(sm90::fast_div(n, magic), n / d) << n << " / " << d;
      ++checked;
    }
  }
  EXPECT_GT(checked, 10000000);
  // The largest operands the grid allows.
  for (uint32_t d : {2u, 3u, 7u, 255u, 4097u, 65535u}) {
    EXPECT_EQ(sm90::fast_div(65535u, sm90::fast_div_magic(d)), 65535u / d);
  }
}


// make_sequence_layout turns the fast division of the preparation's chunk lookup (vc / chunks per
// row) on only where it is exact: num_vchunks · chunks-per-row < 2^32 (SequenceLayout::per_fast).
// The largest shapes sit on both sides of that line (T = 65536: 4096 chunks per row, B = 255 and 256).
TEST(KernelMath, SequenceLayoutFastDivisionOnlyWhereExact) {
  kda_fwd_params params{};
  struct Shape {
    int64_t B, T;
    bool fast;
  };
  for (const Shape& sh : {Shape{1, 1, true}, Shape{1, 16, true}, Shape{1, 17, true}, Shape{4, 1000, true},
                          Shape{3, 8192, true}, Shape{255, 65536, true}, Shape{256, 65536, false},
                          Shape{4096, 16384, false}}) {
    Problem pr;
    pr.params = &params;
    pr.B = pr.N = sh.B;
    pr.T = sh.T;
    pr.T_total = sh.B * sh.T;
    const sm90::SequenceLayout s = sm90::make_sequence_layout(pr);
    const int64_t per = (sh.T + 15) / 16;
    ASSERT_EQ(s.num_vchunks, sh.B * per);
    EXPECT_EQ(s.per_fast != 0, sh.fast) << sh.B << " x " << sh.T;
    if (!s.per_fast) continue;
    std::vector<int64_t> vcs = {0, 1, per - 1, per, per + 1, s.num_vchunks - 1};
    for (int64_t i = 0; i < 2000; ++i) vcs.push_back((i * 2654435761LL) % s.num_vchunks);
    for (int64_t vc : vcs) {
      if (vc < 0 || vc >= s.num_vchunks) continue;
      ASSERT_EQ(sm90::fast_div(static_cast<uint32_t>(vc), s.per_magic), static_cast<uint32_t>(vc / per))
          << vc << " / " << per;
    }
  }
}

}  // namespace
}  // namespace kda::test
