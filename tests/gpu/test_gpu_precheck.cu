// The single pass's precheck (src/kernels/sm90/single_pass_precheck.cuh) on the GPU, called directly by one
// warpgroup as the pieces instance's consumers call it: its per-chunk lower bounds (max over channels of the
// summed log2-decays, with the device's exp2 and reciprocal) against the same sums on the host, and its
// verdict against warmup_rule.h's rule applied on the host, on decaying, slowly decaying, weakly bounded and
// saturated gates, with and without A_log and dt_bias, and a chunk of NaN gates. It runs in every build: the
// function is compiled here whatever FLASH_KDA_SP_PRECHECK says (the knob decides only whether the kernel
// calls it); the soundness of the rule itself is tests/test_warmup_bound.cpp's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "reference/common.h"  // float_to_bf16, bf16_to_float
#include "src/kernels/sm90/gate_math.cuh"
#include "src/kernels/sm90/single_pass_precheck.cuh"
#include "src/kernels/sm90/warmup_rule.h"
#include "tests/gpu/gpu_harness.h"
#include "tests/precheck_model.h"

namespace kda::test {
namespace {

constexpr int kTok = 16 * 12;  // 12 chunks of one head
constexpr int kHeads = 2;      // g as [kTok][kHeads][128], the unit's head hv = 1

// One warpgroup: the verdict of every thread (out_fail[128]) and the consumer warps' maxima (out_max[4][cap]).
__global__ void probe_precheck(const uint16_t* g, const float* A_log, float lower_bound, const float* dt_bias, int c0,
                               int32_t* out_fail, float* out_max) {
  __shared__ float dtb[128];
  __shared__ float wmax[4 * sm90::kSinglePassWarmupCap];
  const int t = threadIdx.x;
  dtb[t] = dt_bias != nullptr ? dt_bias[128 + t] : 0.0f;  // head 1's
  __syncthreads();
  const bool fails = sm90::precheck_fails(g + 128 + t, static_cast<int64_t>(kHeads) * 128, A_log, lower_bound, 1, c0,
                                          dtb, wmax, t);
  out_fail[t] = fails ? 1 : 0;
  if (t < 4 * sm90::kSinglePassWarmupCap) out_max[t] = wmax[t];
}

struct Case {
  const char* name;
  float lower_bound, g_scale, dt_lo, dt_hi;
  bool slow_channels, with_a_log, with_dt, nan_chunk;
  int c0;
};

TEST(Precheck, DeviceBoundsAndVerdictMatchTheHost) {
  KDA_SKIP_WITHOUT_SM90();
  using sm90::kSinglePassWarmupCap;
  static_assert(kSinglePassWarmupCap == 2, "the cases below are written for two candidates");
  const Case cases[] = {
      {"decaying", -5.0f, 1.0f, 0.0f, 1.0f, false, true, true, false, 10},
      {"decaying, no A_log, no dt_bias", -5.0f, 1.0f, 0.0f, 0.0f, false, false, false, false, 10},
      {"slow channels", -5.0f, 1.0f, 0.0f, 1.0f, true, true, true, false, 10},
      {"weak", -0.1f, 1.0f, 0.0f, 1.0f, false, true, true, false, 7},
      {"saturated", -5.0f, 30.0f, 0.0f, 0.0f, false, true, true, false, 12},
      {"slow channels, piece near the start", -5.0f, 1.0f, 0.0f, 1.0f, true, true, true, false, 2},
      {"a chunk of NaN gates", -5.0f, 1.0f, 0.0f, 1.0f, false, true, true, true, 10},
  };
  std::mt19937_64 rng(46);
  std::normal_distribution<float> n01(0.0f, 1.0f);
  std::uniform_real_distribution<float> u01(0.0f, 1.0f);
  uint16_t* dg = nullptr;
  float *da = nullptr, *ddt = nullptr, *dmax = nullptr;
  int32_t* dfail = nullptr;
  ASSERT_EQ(cudaMalloc(&dg, kTok * kHeads * 128 * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&da, kHeads * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&ddt, kHeads * 128 * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dmax, 8 * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dfail, 128 * 4), cudaSuccess);
  int refused = 0, taken = 0;
  for (const Case& c : cases) {
    std::vector<uint16_t> g(kTok * kHeads * 128);
    for (int i = 0; i < kTok * kHeads * 128; ++i) g[i] = reference::float_to_bf16(c.g_scale * n01(rng));
    const int c_nan = c.c0 - 1;  // the nearer candidate
    if (c.nan_chunk)
      for (int tok = 16 * c_nan; tok < 16 * c_nan + 16; ++tok)
        for (int k = 0; k < 128; ++k) g[(tok * kHeads + 1) * 128 + k] = reference::float_to_bf16(NAN);
    std::vector<float> a_log(kHeads), dt(kHeads * 128);
    for (float& x : a_log) x = u01(rng) - 0.5f;
    for (int i = 0; i < kHeads * 128; ++i) {
      dt[i] = c.dt_lo + (c.dt_hi - c.dt_lo) * u01(rng);
      if (c.slow_channels && i % 8 == 7) dt[i] = -8.0f;
    }
    ASSERT_EQ(cudaMemcpy(dg, g.data(), g.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(da, a_log.data(), a_log.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(ddt, dt.data(), dt.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    probe_precheck<<<1, 128>>>(dg, c.with_a_log ? da : nullptr, c.lower_bound, c.with_dt ? ddt : nullptr, c.c0, dfail,
                               dmax);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<int32_t> fail(128);
    std::vector<float> wmax(8);
    ASSERT_EQ(cudaMemcpy(fail.data(), dfail, 128 * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(wmax.data(), dmax, 8 * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    for (int t = 1; t < 128; ++t) ASSERT_EQ(fail[t], fail[0]) << c.name << ": every thread the same verdict";

    // The host: chunk c0 - 2 + j's max over channels of the summed log2-decays (float32, libm's exp2).
    const float exp_a_log = c.with_a_log ? sm90::exp_a_log_capped(a_log[1]) : 1.0f;
    const sm90::BoundedGateConstants gk = sm90::bounded_gate_constants(exp_a_log, c.lower_bound);
    float lb[2];
    for (int j = 0; j < 2; ++j) {
      const int chunk = c.c0 - 2 + j;
      const float m = precheck_chunk_lower_bound(  // (tests/precheck_model.h: head 1's tokens of the chunk)
          [&](int t, int k) { return reference::bf16_to_float(g[((16 * chunk + t) * kHeads + 1) * 128 + k]); },
          [&](int k) { return c.with_dt ? dt[128 + k] : 0.0f; }, gk);
      lb[j] = m;
      const float dev = std::fmax(std::fmax(wmax[j], wmax[2 + j]), std::fmax(wmax[4 + j], wmax[6 + j]));
      if (std::isnan(m)) {
        EXPECT_TRUE(std::isnan(dev)) << c.name << ", chunk " << chunk;
      } else {
        EXPECT_NEAR(dev, m, 1e-4f * std::max(1.0f, std::fabs(m))) << c.name << ", chunk " << chunk;
      }
    }
    const bool host = sm90::warmup_certainly_fails<2>([&](int i) { return lb[1 - i]; }, c.c0);
    std::printf("[ precheck ] %-36s lower bounds %9.3f %9.3f (c0 %2d): %s\n", c.name, lb[0], lb[1], c.c0,
                fail[0] ? "refused" : "taken");
    EXPECT_EQ(fail[0] != 0, host) << c.name;
    refused += fail[0] != 0;
    taken += fail[0] == 0;
  }
  // The cases reach both verdicts, and the ones they are built for.
  EXPECT_GE(refused, 3);
  EXPECT_GE(taken, 3);
  cudaFree(dg);
  cudaFree(da);
  cudaFree(ddt);
  cudaFree(dmax);
  cudaFree(dfail);
}

}  // namespace
}  // namespace kda::test
