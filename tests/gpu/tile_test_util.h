// Host helpers of the tile-layer GPU tests (test_tile.cu: Wgmma.*; test_tile_tma.cu: Tma.*,
// TileTensorMap.*, Tile.*): random bf16 inputs exact in every fp32 sum, device buffers, the float64
// product and the element-wise check |got - want| <= 1e-5 sum |a b|. Internal to each file that
// includes it (an unnamed namespace: each test file gets its own copy, as when they were one file).
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "src/tile/swizzle.h"
#include "reference/common.h"

namespace kda::test {
namespace {

using tile::Swizzle;

// ---- host helpers -------------------------------------------------------------------------------

// bf16 <-> float: the reference's (round to nearest even).
using reference::bf16_to_float;
using reference::float_to_bf16;

// n values k / 64, k uniform in [-64, 64], as bf16 bits.
std::vector<uint16_t> random_bf16(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> d(-64, 64);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = float_to_bf16(static_cast<float>(d(gen)) / 64.0f);
  return v;
}

template <typename T>
struct DeviceBuffer {
  T* p = nullptr;
  explicit DeviceBuffer(size_t n) { EXPECT_EQ(cudaMalloc(&p, n * sizeof(T)), cudaSuccess); }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

template <typename T>
void upload(DeviceBuffer<T>& d, const std::vector<T>& h) {
  ASSERT_EQ(cudaMemcpy(d.p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
}
template <typename T>
std::vector<T> download(const DeviceBuffer<T>& d, size_t n) {
  std::vector<T> h(n);
  EXPECT_EQ(cudaMemcpy(h.data(), d.p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

// C[m][n] = sum_k A[m][k] B[k][n] (A: M x K row-major, B: K x N row-major), float64; also sum |a b|.
void cpu_product(const std::vector<float>& a, const std::vector<float>& b, int m_count, int k_count, int n_count,
                 std::vector<double>& c, std::vector<double>& mag) {
  c.assign(static_cast<size_t>(m_count) * n_count, 0.0);
  mag.assign(c.size(), 0.0);
  for (int m = 0; m < m_count; ++m)
    for (int n = 0; n < n_count; ++n) {
      double s = 0, t = 0;
      for (int k = 0; k < k_count; ++k) {
        const double p = static_cast<double>(a[m * k_count + k]) * b[k * n_count + n];
        s += p;
        t += std::fabs(p);
      }
      c[m * n_count + n] = s;
      mag[m * n_count + n] = t;
    }
}

// Element-wise: |got - want| <= 1e-5 * (sum |a b| + tiny); counts mismatches and reports the first.
void expect_close(const std::vector<float>& got, const std::vector<double>& want, const std::vector<double>& mag,
                  int cols, const std::string& what) {
  int bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double tol = 1e-5 * (mag[i] + 1e-30);
    if (!(std::fabs(got[i] - want[i]) <= tol)) {
      if (bad == 0)
        ADD_FAILURE() << what << ": first mismatch at (" << i / cols << ", " << i % cols << "): got " << got[i]
                      << ", want " << want[i];
      ++bad;
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << want.size() << " elements differ";
}

}  // namespace
}  // namespace kda::test
