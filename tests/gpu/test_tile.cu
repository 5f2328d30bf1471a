// The wgmma PTX wrappers and the tile layer (src/ptx/wgmma.cuh, warpgroup.cuh, src/tile) on the
// hardware, against the CPU (test_tile_tma.cu: the TMA and producer / consumer tests):
//   Wgmma.*  m64nNk16 products over K = 64 (4 k-steps) with operands in swizzled shared memory
//            written by plain stores at the host-tested swizzle offsets (K-major and MN-major
//            operands, 128B / 64B / 32B swizzles), the first k-step overwriting NaN accumulators
//            (scale-d = 0); and the chained product (accumulator -> register A of the next wgmma).
// Inputs are multiples of 1/64 in [-1, 1] (exact in bf16; every fp32 sum of 64 such products exact,
// so the first products match the CPU whatever the summation order); the check is |got - want| <=
// 1e-5 sum |a b| element-wise (tile_test_util.h). Skips without an SM90 GPU.
#include <cuda.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "src/launch/tensor_map.h"
#include "src/ptx/barrier.cuh"
#include "src/ptx/bulk_copy.cuh"
#include "src/ptx/register_budget.h"
#include "src/ptx/tma.cuh"
#include "src/ptx/warpgroup.cuh"
#include "src/ptx/wgmma.cuh"
#include "src/tile/fragments.cuh"
#include "src/tile/operand.h"
#include "src/tile/smem_layout.h"
#include "src/tile/swizzle.h"
#include "reference/common.h"
#include "tests/gpu/gpu_harness.h"
#include "tests/gpu/tile_test_util.h"

namespace kda::test {
namespace {

// ---- (a) wgmma with both operands in shared memory ----------------------------------------------

// A is 64 x 64 (m, k), B is 64 x N (k, n), both row-major bf16 in global memory. kTransA / kTransB:
// 0 = K-major tile in shared memory, 1 = MN-major. C: 64 x N floats, row-major.
template <int N, int kTransA, int kTransB, Swizzle S>
struct SsCase {
  using ATile = tile::SwizzledTile<S, 64, 64>;  // (m, k) K-major or (k, m) MN-major: 64 x 64 either way
  using BTile = std::conditional_t<kTransB == 0, tile::SwizzledTile<S, N, 64>, tile::SwizzledTile<S, 64, N>>;
  struct Storage {
    tile::TileBuffer<ATile> a;
    tile::TileBuffer<BTile> b;
  };
};

template <int N, int kTransA, int kTransB, Swizzle S>
__global__ void __launch_bounds__(128) probe_wgmma_ss(const uint16_t* a, const uint16_t* b, float* c) {
  using Case = SsCase<N, kTransA, kTransB, S>;
  using ATile = typename Case::ATile;
  using BTile = typename Case::BTile;
  extern __shared__ unsigned char smem_raw[];
  auto& st = *tile::smem_storage<typename Case::Storage>(smem_raw);
  const int t = threadIdx.x;
  uint16_t* sa = reinterpret_cast<uint16_t*>(st.a.bytes);
  uint16_t* sb = reinterpret_cast<uint16_t*>(st.b.bytes);
  for (int i = t; i < 64 * 64; i += 128) {
    const int m = i / 64, k = i % 64;
    sa[kTransA == 0 ? ATile::index(m, k) : ATile::index(k, m)] = a[i];
  }
  for (int i = t; i < 64 * N; i += 128) {
    const int k = i / N, n = i % N;
    sb[kTransB == 0 ? BTile::index(n, k) : BTile::index(k, n)] = b[i];
  }
  ptx::fence_proxy_async_shared();
  __syncthreads();
  const uint32_t a_addr = static_cast<uint32_t>(__cvta_generic_to_shared(st.a.bytes));
  const uint32_t b_addr = static_cast<uint32_t>(__cvta_generic_to_shared(st.b.bytes));
  tile::Acc<N> acc;
  acc.fill(__int_as_float(0x7FC00000));  // NaN: the first k-step must overwrite it (scale-d = 0)
  acc.fence_operand();
  ptx::wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) {
    const uint64_t da = (kTransA == 0 ? tile::kmajor_operand<ATile>(ks) : tile::mnmajor_operand<ATile>(ks)).at(a_addr);
    const uint64_t db = (kTransB == 0 ? tile::kmajor_operand<BTile>(ks) : tile::mnmajor_operand<BTile>(ks)).at(b_addr);
    acc.template mma_ss<kTransA, kTransB>(da, db, ks > 0);
  }
  ptx::wgmma_commit_group();
  ptx::wgmma_wait_group<0>();
  acc.fence_operand();
#pragma unroll
  for (int i = 0; i < tile::Acc<N>::kCount; ++i) c[tile::Acc<N>::row(t, i) * N + tile::Acc<N>::col(t, i)] = acc.v[i];
}

template <int N, int kTransA, int kTransB, Swizzle S>
void run_wgmma_ss(uint32_t seed) {
  const std::vector<uint16_t> a = random_bf16(64 * 64, seed), b = random_bf16(64 * N, seed + 1);
  std::vector<float> af(a.size()), bf(b.size());
  for (size_t i = 0; i < a.size(); ++i) af[i] = bf16_to_float(a[i]);
  for (size_t i = 0; i < b.size(); ++i) bf[i] = bf16_to_float(b[i]);
  DeviceBuffer<uint16_t> da(a.size()), db(b.size());
  DeviceBuffer<float> dc(64 * N);
  upload(da, a);
  upload(db, b);
  auto kernel = probe_wgmma_ss<N, kTransA, kTransB, S>;
  const int smem = static_cast<int>(tile::smem_bytes<typename SsCase<N, kTransA, kTransB, S>::Storage>());
  ASSERT_EQ(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem), cudaSuccess);
  kernel<<<1, 128, smem>>>(da.p, db.p, dc.p);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<double> want, mag;
  cpu_product(af, bf, 64, 64, N, want, mag);
  expect_close(download(dc, 64 * N), want, mag, N,
               "m64n" + std::to_string(N) + " transA " + std::to_string(kTransA) + " transB " +
                   std::to_string(kTransB) + " swizzle " + std::to_string(static_cast<int>(S)));
}

TEST(Wgmma, SmemOperandsKMajor128BAllN) {
  KDA_SKIP_WITHOUT_SM90();
  run_wgmma_ss<16, 0, 0, Swizzle::k128B>(11);
  run_wgmma_ss<32, 0, 0, Swizzle::k128B>(12);
  run_wgmma_ss<64, 0, 0, Swizzle::k128B>(13);
  run_wgmma_ss<128, 0, 0, Swizzle::k128B>(14);
}

TEST(Wgmma, SmemOperandsMnMajorB128B) {
  KDA_SKIP_WITHOUT_SM90();
  run_wgmma_ss<64, 0, 1, Swizzle::k128B>(21);
  run_wgmma_ss<128, 0, 1, Swizzle::k128B>(22);
}

TEST(Wgmma, SmemOperandsMnMajorA128B) {
  KDA_SKIP_WITHOUT_SM90();
  run_wgmma_ss<64, 1, 0, Swizzle::k128B>(31);
  run_wgmma_ss<128, 1, 1, Swizzle::k128B>(32);
}

TEST(Wgmma, SmemOperandsKMajor64BAnd32B) {
  KDA_SKIP_WITHOUT_SM90();
  run_wgmma_ss<64, 0, 0, Swizzle::k64B>(41);
  run_wgmma_ss<64, 0, 0, Swizzle::k32B>(42);
}

// ---- (b) chained: accumulator -> register A ------------------------------------------------------

// P = A1 B1 (64 x 64, K-major operands), O = bf16(P) B2 (64 x 128) with P as register A.
template <int kTransB2>
struct ChainCase {
  using ATile = tile::SwizzledTile<Swizzle::k128B, 64, 64>;
  using B1Tile = tile::SwizzledTile<Swizzle::k128B, 64, 64>;
  using B2Tile = std::conditional_t<kTransB2 == 0, tile::SwizzledTile<Swizzle::k128B, 128, 64>,
                                    tile::SwizzledTile<Swizzle::k128B, 64, 128>>;
  struct Storage {
    tile::TileBuffer<ATile> a;
    tile::TileBuffer<B1Tile> b1;
    tile::TileBuffer<B2Tile> b2;
  };
};

template <int kTransB2, bool kSplit>
__global__ void __launch_bounds__(128) probe_wgmma_chain(const uint16_t* a1, const uint16_t* b1, const uint16_t* b2,
                                                         float* o) {
  using Case = ChainCase<kTransB2>;
  extern __shared__ unsigned char smem_raw[];
  auto& st = *tile::smem_storage<typename Case::Storage>(smem_raw);
  const int t = threadIdx.x;
  uint16_t* sa = reinterpret_cast<uint16_t*>(st.a.bytes);
  uint16_t* sb1 = reinterpret_cast<uint16_t*>(st.b1.bytes);
  uint16_t* sb2 = reinterpret_cast<uint16_t*>(st.b2.bytes);
  for (int i = t; i < 64 * 64; i += 128) {
    const int r = i / 64, c = i % 64;
    sa[Case::ATile::index(r, c)] = a1[i];    // A1 (m, k)
    sb1[Case::B1Tile::index(c, r)] = b1[i];  // B1 (k = r, n = c) stored K-major: row n
  }
  for (int i = t; i < 64 * 128; i += 128) {
    const int k = i / 128, n = i % 128;
    sb2[kTransB2 == 0 ? Case::B2Tile::index(n, k) : Case::B2Tile::index(k, n)] = b2[i];
  }
  ptx::fence_proxy_async_shared();
  __syncthreads();
  const uint32_t a_addr = static_cast<uint32_t>(__cvta_generic_to_shared(st.a.bytes));
  const uint32_t b1_addr = static_cast<uint32_t>(__cvta_generic_to_shared(st.b1.bytes));
  const uint32_t b2_addr = static_cast<uint32_t>(__cvta_generic_to_shared(st.b2.bytes));
  tile::Acc<64> p;
  p.fence_operand();
  ptx::wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < 4; ++ks)
    p.mma_ss<0, 0>(tile::kmajor_operand<typename Case::ATile>(ks).at(a_addr),
                   tile::kmajor_operand<typename Case::B1Tile>(ks).at(b1_addr), ks > 0);
  ptx::wgmma_commit_group();
  ptx::wgmma_wait_group<0>();
  p.fence_operand();
  uint32_t pa[4][4], pl[4][4];
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    if constexpr (kSplit)
      p.to_a_split(s, pa[s], pl[s]);
    else
      p.to_a(s, pa[s]);
  }
  tile::Acc<128> out;
  out.fence_operand();
  ptx::wgmma_fence();  // the A registers were just written
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    const uint64_t db = (kTransB2 == 0 ? tile::kmajor_operand<typename Case::B2Tile>(s)
                                       : tile::mnmajor_operand<typename Case::B2Tile>(s))
                            .at(b2_addr);
    if constexpr (kSplit) out.mma_rs<kTransB2>(pl[s], db, s > 0);
    out.mma_rs<kTransB2>(pa[s], db, kSplit || s > 0);
  }
  ptx::wgmma_commit_group();
  ptx::wgmma_wait_group<0>();
  out.fence_operand();
#pragma unroll
  for (int i = 0; i < tile::Acc<128>::kCount; ++i)
    o[tile::Acc<128>::row(t, i) * 128 + tile::Acc<128>::col(t, i)] = out.v[i];
}

template <int kTransB2, bool kSplit = false>
void run_chain(uint32_t seed) {
  const std::vector<uint16_t> a1 = random_bf16(64 * 64, seed), b1 = random_bf16(64 * 64, seed + 1),
                              b2 = random_bf16(64 * 128, seed + 2);
  std::vector<float> a1f(a1.size()), b1f(b1.size()), b2f(b2.size());
  for (size_t i = 0; i < a1.size(); ++i) a1f[i] = bf16_to_float(a1[i]);
  for (size_t i = 0; i < b1.size(); ++i) b1f[i] = bf16_to_float(b1[i]);
  for (size_t i = 0; i < b2.size(); ++i) b2f[i] = bf16_to_float(b2[i]);
  DeviceBuffer<uint16_t> da1(a1.size()), db1(b1.size()), db2(b2.size());
  DeviceBuffer<float> dout(64 * 128);
  upload(da1, a1);
  upload(db1, b1);
  upload(db2, b2);
  auto kernel = probe_wgmma_chain<kTransB2, kSplit>;
  const int smem = static_cast<int>(tile::smem_bytes<typename ChainCase<kTransB2>::Storage>());
  ASSERT_EQ(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem), cudaSuccess);
  kernel<<<1, 128, smem>>>(da1.p, db1.p, db2.p, dout.p);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  // P is exact in fp32 (multiples of 1/4096 below 64); the kernel rounds it to bf16 (nearest even),
  // or (kSplit) carries it as hi = bf16(P) plus lo = bf16(P - hi), two products summed in fp32.
  std::vector<double> p, pmag, want, mag;
  cpu_product(a1f, b1f, 64, 64, 64, p, pmag);
  std::vector<float> pb(p.size()), plo(p.size());
  for (size_t i = 0; i < p.size(); ++i) {
    pb[i] = bf16_to_float(float_to_bf16(static_cast<float>(p[i])));
    plo[i] = bf16_to_float(float_to_bf16(static_cast<float>(p[i]) - pb[i]));
  }
  cpu_product(pb, b2f, 64, 64, 128, want, mag);
  if (kSplit) {
    std::vector<double> want_lo, mag_lo;
    cpu_product(plo, b2f, 64, 64, 128, want_lo, mag_lo);
    for (size_t i = 0; i < want.size(); ++i) {
      want[i] += want_lo[i];
      mag[i] += mag_lo[i];
    }
  }
  // The rounding matters: bf16(P) differs from P in many elements (else the check would not see it;
  // with the split, the lo terms move the result by far more than the tolerance).
  int rounded = 0;
  for (size_t i = 0; i < p.size(); ++i) rounded += static_cast<double>(pb[i]) != p[i];
  EXPECT_GT(rounded, 100);
  expect_close(download(dout, 64 * 128), want, mag, 128,
               std::string(kSplit ? "chained hi + lo" : "chained") + ", transB2 " + std::to_string(kTransB2));
}

TEST(Wgmma, ChainedAccumulatorAsRegisterA) {
  KDA_SKIP_WITHOUT_SM90();
  run_chain<0>(51);
  run_chain<1>(52);
}

TEST(Wgmma, ChainedAccumulatorAsHiLoRegisterA) {
  KDA_SKIP_WITHOUT_SM90();
  run_chain<0, true>(53);
  run_chain<1, true>(54);
}

}  // namespace
}  // namespace kda::test
