// The PTX layer's replacements for what the compiler would emit, checked bit for bit against it:
// split_bf16x2_bits (mma.cuh) and rsqrt_approx_ftz (fast_math.cuh) against the conversions and rsqrtf they replace
// in the single pass's preparation; ld_shared_f32x4_ordered (ldmatrix.cuh) through T's columns as
// chunk_prep_kernel forms them (unit_lower_inverse.h), against the plain loads and the host.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "src/kernels/sm90/unit_lower_inverse.h"
#include "src/ptx/fast_math.cuh"
#include "src/ptx/mma.cuh"
#include "tests/gpu/gpu_harness.h"

namespace kda::test {
namespace {

// T's 16 columns of each of `n` matrices At (transposed, [n][256]) from shared memory, lanes 0..15 of a
// warp per matrix: out[2][n][c][16], [0] by the ordered loads (chunk_prep_kernel's form), [1] by plain ones.
__global__ void probe_inverse_columns(const float* At, int n, float* out) {
  __shared__ alignas(16) float sAt[256];
  for (int m = 0; m < n; ++m) {
    for (int i = threadIdx.x; i < 256; i += 32) sAt[i] = At[256 * m + i];
    __syncwarp();
    if (threadIdx.x < 16) {
      const int c = threadIdx.x;
      float col[16], colp[16];
      sm90::prep_detail::unit_lower_inverse_column_t<true>(sAt, c, col);
      sm90::prep_detail::unit_lower_inverse_column_t<false>(sAt, c, colp);
      for (int i = 0; i < 16; ++i) {
        out[(static_cast<int64_t>(m) * 16 + c) * 16 + i] = col[i];
        out[(static_cast<int64_t>(n + m) * 16 + c) * 16 + i] = colp[i];
      }
    }
    __syncwarp();
  }
}

// Per input pair i: both bf16 splits (hi, lo) and, for x0, rsqrtf and rsqrt_approx_ftz.
__global__ void probe_splits(const float* x, int n, uint32_t* out, float* rs) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const float x0 = x[2 * i], x1 = x[2 * i + 1];
    ptx::split_bf16x2(x0, x1, out[4 * i], out[4 * i + 1]);
    ptx::split_bf16x2_bits(x0, x1, out[4 * i + 2], out[4 * i + 3]);
    rs[2 * i] = rsqrtf(x0);
    rs[2 * i + 1] = ptx::rsqrt_approx_ftz(x0);
  }
}

// bf16 round to nearest even of a finite float (host).
uint16_t bf16_rne(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

TEST(Ptx, SplitBitsAndRsqrtFtzAreTheValuesTheyReplace) {
  KDA_SKIP_WITHOUT_SM90();
  std::vector<float> x;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> m(1.0f, 2.0f);
  std::uniform_int_distribution<int> e(-126, 126);
  for (int i = 0; i < 40000; ++i) x.push_back((i & 1 ? -1.0f : 1.0f) * std::ldexp(m(rng), e(rng)));
  for (int i = 0; i < 2000; ++i) {  // bf16 ties (low 16 bits 0x8000) and their neighbours
    uint32_t u = (static_cast<uint32_t>(rng()) & 0x7f7f0000u) | 0x00800000u | (0x7fffu + static_cast<uint32_t>(i % 3));
    float f;
    std::memcpy(&f, &u, 4);
    x.push_back(f);
  }
  const float special[] = {0.0f, -0.0f, 1e-40f, -1e-40f, 3.0e38f, -3.0e38f, INFINITY, -INFINITY, NAN, 1.0f, 0x1.fffffep127f, 1e-6f};
  for (float f : special) x.push_back(f);
  if (x.size() % 2) x.push_back(1.0f);
  const int n = static_cast<int>(x.size() / 2);
  float *dx = nullptr, *drs = nullptr;
  uint32_t* dout = nullptr;
  ASSERT_EQ(cudaMalloc(&dx, x.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dout, 4 * n * sizeof(uint32_t)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&drs, 2 * n * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  probe_splits<<<64, 128>>>(dx, n, dout, drs);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  std::vector<uint32_t> out(4 * n);
  std::vector<float> rs(2 * n);
  ASSERT_EQ(cudaMemcpy(out.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(rs.data(), drs, rs.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  int split_diff = 0, hi_wrong = 0, rs_diff = 0, rs_far = 0, checked_rs = 0;
  for (int i = 0; i < n; ++i) {
    if (out[4 * i] != out[4 * i + 2] || out[4 * i + 1] != out[4 * i + 3]) ++split_diff;
    for (int h = 0; h < 2; ++h) {  // hi against the host's rounding; lo = bf16(x - hi)
      const float xf = x[2 * i + h];
      if (!std::isfinite(xf) || std::fabs(xf) > 3.0e38f) continue;
      const uint16_t hi = static_cast<uint16_t>(out[4 * i + 2] >> (16 * h));
      const uint16_t lo = static_cast<uint16_t>(out[4 * i + 3] >> (16 * h));
      const uint32_t hib = static_cast<uint32_t>(hi) << 16;
      float hf;
      std::memcpy(&hf, &hib, 4);
      if (hi != bf16_rne(xf) || lo != bf16_rne(xf - hf)) ++hi_wrong;
    }
    const float x0 = x[2 * i];
    if (x0 > 0.0f && std::isnormal(x0)) {
      ++checked_rs;
      if (std::memcmp(&rs[2 * i], &rs[2 * i + 1], 4) != 0) ++rs_diff;
      const double want = 1.0 / std::sqrt(static_cast<double>(x0));
      if (std::fabs(rs[2 * i + 1] - want) > 0x1p-22 * want) ++rs_far;
    }
  }
  EXPECT_EQ(split_diff, 0) << "split_bf16x2_bits differs from split_bf16x2 on " << split_diff << " of " << n << " pairs";
  EXPECT_EQ(hi_wrong, 0) << "hi / lo not the round-to-nearest-even split";
  EXPECT_GT(checked_rs, 20000);
  EXPECT_EQ(rs_diff, 0) << "rsqrt_approx_ftz differs from rsqrtf on a positive normal argument";
  EXPECT_EQ(rs_far, 0);
  cudaFree(dx);
  cudaFree(dout);
  cudaFree(drs);
}

// ld_shared_f32x4_ordered reads what a plain load reads: T's columns (unit_lower_inverse.h) on the device
// by the ordered loads, by plain ones and on the host are the same floats, bit for bit (one fmaf
// sequence), on random A of the kernels' magnitudes (|A_ij| <= 2).
TEST(Ptx, OrderedSharedLoadsGiveTheInverseColumnsOfPlainLoads) {
  KDA_SKIP_WITHOUT_SM90();
  constexpr int n = 64;
  std::mt19937 rng(52);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> At(256 * n, 0.0f);
  for (int m = 0; m < n; ++m) {
    const float b = m % 4 == 0 ? 2.0f : 0.5f;
    for (int i = 0; i < 16; ++i)
      for (int j = 0; j < i; ++j) At[256 * m + 16 * j + i] = b * u(rng);
  }
  float *dAt = nullptr, *dout = nullptr;
  ASSERT_EQ(cudaMalloc(&dAt, At.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dout, 2 * At.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dAt, At.data(), At.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  probe_inverse_columns<<<1, 32>>>(dAt, n, dout);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  std::vector<float> out(2 * At.size());
  ASSERT_EQ(cudaMemcpy(out.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  int ordered_vs_plain = 0, device_vs_host = 0, nonzero = 0;
  for (int m = 0; m < n; ++m)
    for (int c = 0; c < 16; ++c) {
      float host[16];
      sm90::prep_detail::unit_lower_inverse_column_t(&At[256 * m], c, host);
      for (int i = 0; i < 16; ++i) {
        const float o = out[(m * 16 + c) * 16 + i], pl = out[((n + m) * 16 + c) * 16 + i];
        if (std::memcmp(&o, &pl, 4) != 0) ++ordered_vs_plain;
        if (std::memcmp(&o, &host[i], 4) != 0) ++device_vs_host;
        if (i > c && o != 0.0f) ++nonzero;
      }
    }
  EXPECT_EQ(ordered_vs_plain, 0);
  EXPECT_EQ(device_vs_host, 0);
  EXPECT_GT(nonzero, n * 100);  // the columns below the diagonal were computed, not left zero
  cudaFree(dAt);
  cudaFree(dout);
}

}  // namespace
}  // namespace kda::test
