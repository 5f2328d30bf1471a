// The correct-rounding rule of the decode tests (tests/random_decode_config.h) and the random decode
// configurations on the CPU (in CI; the GPU's: tests/gpu/test_gpu_decode_random.cpp).
// - DecodeRoundingRule: the rule passes values rounded once to nearest (with float32-sized noise before
//   the rounding) and fails truncated values, values one unit off, an intermediate rounded to bf16 and a
//   relative error of 1e-3 in a float32 state: the check can fail, and fails what it is meant to.
// - CpuDecodeRandomMatrix: every drawn configuration validates; kda_decode_cpu's stored results are the
//   float64 results rounded once to nearest (the oracle's own stores): within the rule with no float32
//   slack at all, the slots it does not write bitwise unchanged; one thread gives the same bits as many;
//   the float32 transcription of the same recurrence (the kernels' arithmetic, with longer sums) is
//   within the rule, so the GPU test's slacks admit float32 arithmetic.
//   FLASH_KDA_RANDOM_SEED / FLASH_KDA_RANDOM_CONFIGS / FLASH_KDA_RANDOM_ONLY as for GpuDecodeRandomMatrix.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "reference/common.h"
#include "tests/random_decode_config.h"

namespace kda::test {
namespace {

using reference::bf16_to_float;
using reference::float_to_bf16;

constexpr int64_t kRow = 128;

// Rows of exact values with magnitudes spread over many binades, zeros and sign changes, like states
// and outputs.
std::vector<double> exact_rows(uint64_t seed, int rows) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0.0, 1.0);
  std::vector<double> x(static_cast<size_t>(rows * kRow));
  for (int r = 0; r < rows; ++r) {
    const double scale = std::ldexp(1.0, r % 40 - 20);
    for (int64_t i = 0; i < kRow; ++i) x[static_cast<size_t>(r * kRow + i)] = i == 5 ? 0.0 : scale * nd(rng);
  }
  return x;
}

uint16_t truncate_bf16(float f) {
  uint32_t u = 0;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>(u >> 16);
}

TEST(DecodeRoundingRule, HoldsCorrectRoundingAndCatchesTheWrongOnes) {
  const std::vector<double> x = exact_rows(3, 80);
  std::mt19937_64 rng(4);
  std::uniform_real_distribution<double> noise(-1.0, 1.0);
  std::vector<uint16_t> rn(x.size()), rn_noisy(x.size()), rz(x.size()), nudged(x.size()), via_bf16(x.size());
  std::vector<float> f32(x.size()), f32_noisy(x.size()), f32_off(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    rn[i] = reference::double_to_bf16(x[i]);
    // float32-sized error before the rounding: 1e-7 of the value.
    const float y = static_cast<float>(x[i] * (1.0 + 1e-7 * noise(rng)));
    rn_noisy[i] = float_to_bf16(y);
    rz[i] = truncate_bf16(static_cast<float>(x[i]));
    nudged[i] = rn[i];
    // A product whose factor was rounded to bf16 first (the decay, say): relative error up to 2^-9.
    const double factor = 0.3 + 0.01 * static_cast<double>(i % 50);
    via_bf16[i] = reference::double_to_bf16(x[i] / factor * static_cast<double>(bf16_to_float(float_to_bf16(
                                                                  static_cast<float>(factor)))));
    f32[i] = static_cast<float>(x[i]);
    f32_noisy[i] = static_cast<float>(x[i] * (1.0 + 1e-7 * noise(rng)));
    f32_off[i] = static_cast<float>(x[i] * (1.0 + 1e-3));
  }
  // One value one unit off, away from the exact value (so at least a unit from it): the largest of row 2.
  size_t big = 2 * kRow;
  for (size_t i = 2 * kRow; i < 3 * kRow; ++i)
    if (std::fabs(x[i]) > std::fabs(x[big])) big = i;
  const bool grew = std::fabs(double(bf16_to_float(rn[big]))) >= std::fabs(x[big]);
  nudged[big] = static_cast<uint16_t>(grew ? rn[big] + 1 : rn[big] - 1);

  const RoundingExcess a = rounding_excess_bf16(rn, x, kRow, kDecodeOutSlack);
  EXPECT_LE(a.worst, 1.0);  // (a tie rounded either way is half a unit off: the rule's limit)
  EXPECT_LE(a.residual, 1e-12);
  EXPECT_EQ(a.non_finite, 0u);
  const RoundingExcess b = rounding_excess_bf16(rn_noisy, x, kRow, kDecodeOutSlack);
  EXPECT_LE(b.worst, 1.0);
  std::printf("[ rule ] bf16: rounded %.3f, with float32 noise %.3f (residual %.2e), truncated %.1f, one unit off "
              "%.1f, factor via bf16 %.1f\n",
              a.worst, b.worst, b.residual, rounding_excess_bf16(rz, x, kRow, kDecodeOutSlack).worst,
              rounding_excess_bf16(nudged, x, kRow, kDecodeOutSlack).worst,
              rounding_excess_bf16(via_bf16, x, kRow, kDecodeOutSlack).worst);
  EXPECT_GT(rounding_excess_bf16(rz, x, kRow, kDecodeOutSlack).worst, 1.5);
  const RoundingExcess n = rounding_excess_bf16(nudged, x, kRow, kDecodeOutSlack);
  EXPECT_GT(n.worst, 1.5);
  EXPECT_EQ(n.at, static_cast<int64_t>(big));
  EXPECT_GT(rounding_excess_bf16(via_bf16, x, kRow, kDecodeOutSlack).worst, 1.2);

  EXPECT_LE(rounding_excess_f32(f32, x, kRow, kDecodeStateSlack).worst, 1.0);
  EXPECT_LE(rounding_excess_f32(f32_noisy, x, kRow, kDecodeStateSlack).worst, 1.0);
  std::printf("[ rule ] f32: rounded %.3f, with float32 noise %.3f, 1e-3 relative error %.1f\n",
              rounding_excess_f32(f32, x, kRow, kDecodeStateSlack).worst,
              rounding_excess_f32(f32_noisy, x, kRow, kDecodeStateSlack).worst,
              rounding_excess_f32(f32_off, x, kRow, kDecodeStateSlack).worst);
  EXPECT_GT(rounding_excess_f32(f32_off, x, kRow, kDecodeStateSlack).worst, 2.0);

  // A row of exact zeros (padding's output) allows nothing; rows the call does not write (NaN) are
  // skipped; non-finite results are counted.
  std::vector<double> zeros(kRow, 0.0);
  std::vector<uint16_t> z(kRow, 0);
  EXPECT_EQ(rounding_excess_bf16(z, zeros, kRow, kDecodeOutSlack).worst, 0.0);
  z[7] = float_to_bf16(1e-30f);
  EXPECT_TRUE(std::isinf(rounding_excess_bf16(z, zeros, kRow, kDecodeOutSlack).worst));
  std::vector<double> unwritten(kRow, std::nan(""));
  EXPECT_EQ(rounding_excess_bf16(z, unwritten, kRow, kDecodeOutSlack).worst, 0.0);
  std::vector<float> inf_row(f32.begin(), f32.begin() + kRow);
  inf_row[3] = INFINITY;
  const std::vector<double> first_row(x.begin(), x.begin() + kRow);
  EXPECT_EQ(rounding_excess_f32(inf_row, first_row, kRow, kDecodeStateSlack).non_finite, 1u);
}

TEST(CpuDecodeRandomMatrix, EveryConfigurationAgainstItsFloat64) {
  const RandomDraw draw = random_draw(2026, 200);
  double worst_out = 0, worst_pool = 0, f32_out = 0, f32_pool = 0, f32_out_res = -1, f32_pool_res = -1;
  size_t written = 0;
  const int ran = for_each_decode_config(draw, [&](int index, const DecodeConfig& c) {
    const std::string what = "#" + std::to_string(index) + " " + c.text;
    const RandomDecode base = make_decode(c);
    RandomDecode cpu = base;
    kda_decode_params p = decode_params_of(c, cpu);
    const kda_status st = kda_decode_cpu(&p, 0);
    ASSERT_EQ(st.code, KDA_OK) << what << ": " << st.message;
    RandomDecode ref = base;
    const DecodeExact exact = decode_exact(decode_params_of(c, ref));
    const DecodeCheck k = check_decode(cpu, base, exact, /*slack_scale=*/0.0);  // rounded once, no float32 error
    EXPECT_LE(k.out.worst, 1.0) << what << " (out)";
    EXPECT_LE(k.pool.worst, 1.0) << what << " (pool)";
    EXPECT_EQ(k.out.non_finite + k.pool.non_finite, 0u) << what;
    EXPECT_EQ(k.untouched_changed, 0u) << what;
    worst_out = std::max(worst_out, k.out.worst);
    worst_pool = std::max(worst_pool, k.pool.worst);
    written += k.written;
    // The float32 transcription is within the rule: its slacks admit float32 arithmetic.
    const DecodeCheck f = check_decode(run_decode_f32(c, base), base, exact);
    EXPECT_LE(f.out.worst, 1.0) << what << " (float32 transcription, out: element " << f.out.at << ")";
    EXPECT_LE(f.pool.worst, 1.0) << what << " (float32 transcription, pool: element " << f.pool.at << ")";
    EXPECT_EQ(f.untouched_changed, 0u) << what;
    f32_out = std::max(f32_out, f.out.worst);
    f32_pool = std::max(f32_pool, f.pool.worst);
    f32_out_res = std::max(f32_out_res, f.out.residual);
    f32_pool_res = std::max(f32_pool_res, f.pool.residual);
    RandomDecode one = base;
    kda_decode_params p1 = decode_params_of(c, one);
    ASSERT_EQ(kda_decode_cpu(&p1, 1).code, KDA_OK) << what;
    EXPECT_EQ(one.out, cpu.out) << what << " (one thread)";
    EXPECT_EQ(one.pool_f32, cpu.pool_f32) << what << " (one thread)";
    EXPECT_EQ(one.pool_bf16, cpu.pool_bf16) << what << " (one thread)";
  });
  std::printf("[ decode-random ] %d configurations: the CPU's stores at %.3f (out) and %.3f (pool) of half a unit; "
              "%zu state values written; the float32 transcription at %.3f (out) and %.3f (pool) of the rule's "
              "allowance, residual %.1e and %.1e of the row rms\n",
              ran, worst_out, worst_pool, written, f32_out, f32_pool, f32_out_res, f32_pool_res);
  EXPECT_GT(ran, 0);
  EXPECT_GT(written, 0u);
}

}  // namespace
}  // namespace kda::test
