// The wgmma / TMA / warpgroup PTX wrappers and the tile layer (src/ptx/wgmma.cuh, tma.cuh,
// warpgroup.cuh, src/tile) on the hardware, each against the CPU:
//   Wgmma.*  m64nNk16 products over K = 64 (4 k-steps) with operands in swizzled shared memory
//            written by plain stores at the host-tested swizzle offsets (K-major and MN-major
//            operands, 128B / 64B / 32B swizzles), the first k-step overwriting NaN accumulators
//            (scale-d = 0); and the chained product (accumulator -> register A of the next wgmma);
//   Tma.*    a 2D box loaded into swizzled shared memory lands exactly at the swizzle function's
//            offsets; stored back bitwise; a store after generic writes + proxy fence;
//   Tile.*   a 3-warpgroup kernel: a producer (setmaxnreg.dec) loads tiles by TMA on an mbarrier,
//            two consumers (setmaxnreg.inc) multiply them with wgmma, exchange halves through a
//            named barrier and read a scale the producer published with bar.arrive.
// Inputs are multiples of 1/64 in [-1, 1] (exact in bf16; every fp32 sum of 64 such products exact,
// so the first products match the CPU whatever the summation order); the check is |got - want| <=
// 1e-5 sum |a b| element-wise. Skips without an SM90 GPU.
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

// ---- (c) TMA load into swizzled shared memory, store back ---------------------------------------

constexpr int kTmaRows = 128, kTmaCols = 192, kTmaStride = 200, kBoxRows = 64;

struct TmaStorage {
  alignas(1024) unsigned char tile[kBoxRows * 128];
  alignas(8) uint64_t bar;
};

__global__ void probe_tma(const __grid_constant__ CUtensorMap src, const __grid_constant__ CUtensorMap dst1,
                          const __grid_constant__ CUtensorMap dst2, int col0, int row0, int box_bytes,
                          uint16_t* raw) {
  extern __shared__ unsigned char smem_raw[];
  auto& st = *tile::smem_storage<TmaStorage>(smem_raw);
  const int t = threadIdx.x;
  if (t == 0) {
    ptx::prefetch_tensor_map(&src);
    ptx::mbar_init(&st.bar, 1);
    ptx::fence_barrier_init();
  }
  __syncthreads();
  if (t == 0) {
    ptx::mbar_arrive_expect_tx(&st.bar, static_cast<uint32_t>(box_bytes));
    ptx::tma_load_2d(st.tile, &src, col0, row0, &st.bar);
  }
  ptx::mbar_wait(&st.bar, 0);
  uint16_t* tile16 = reinterpret_cast<uint16_t*>(st.tile);
  for (int i = t; i < box_bytes / 2; i += blockDim.x) raw[i] = tile16[i];  // the bytes as TMA placed them
  __syncthreads();
  if (t == 0) {
    ptx::tma_store_2d(&dst1, col0, row0, st.tile);
    ptx::tma_store_commit();
    ptx::tma_store_wait_read<0>();  // the tile may be overwritten now
  }
  __syncthreads();
  for (int i = t; i < box_bytes / 2; i += blockDim.x) tile16[i] ^= 0x8000;  // negate through generic stores
  ptx::fence_proxy_async_shared();
  __syncthreads();
  if (t == 0) {
    ptx::tma_store_2d(&dst2, col0, row0, st.tile);
    ptx::tma_store_commit();
    ptx::tma_store_wait<0>();
  }
}

void run_tma(Swizzle s) {
  const int box_cols = s == Swizzle::kNone ? 64 : tile::swizzle_bytes(s) / 2;
  const int box_bytes = kBoxRows * box_cols * 2;
  const int col0 = box_cols, row0 = 32;  // an interior box: neither edge of the tensor
  const std::vector<uint16_t> h = random_bf16(static_cast<size_t>(kTmaRows) * kTmaStride, 61 + static_cast<int>(s));
  DeviceBuffer<uint16_t> src(h.size()), dst1(h.size()), dst2(h.size()), raw(box_bytes / 2);
  upload(src, h);
  ASSERT_EQ(cudaMemset(dst1.p, 0, h.size() * 2), cudaSuccess);
  ASSERT_EQ(cudaMemset(dst2.p, 0, h.size() * 2), cudaSuccess);
  CUtensorMap msrc, mdst1, mdst2;
  for (auto [map, ptr] : {std::pair{&msrc, src.p}, std::pair{&mdst1, dst1.p}, std::pair{&mdst2, dst2.p}}) {
    const kda_status st = sm90::make_tensor_map_2d_bf16(map, ptr, kTmaRows, kTmaCols, kTmaStride, kBoxRows,
                                                        static_cast<uint32_t>(box_cols), s);
    ASSERT_EQ(st.code, KDA_OK) << st.message;
  }
  const int smem = static_cast<int>(tile::smem_bytes<TmaStorage>());
  ASSERT_EQ(cudaFuncSetAttribute(probe_tma, cudaFuncAttributeMaxDynamicSharedMemorySize, smem), cudaSuccess);
  probe_tma<<<1, 128, smem>>>(msrc, mdst1, mdst2, col0, row0, box_bytes, raw.p);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<uint16_t> got_raw = download(raw, box_bytes / 2);
  const std::vector<uint16_t> got1 = download(dst1, h.size()), got2 = download(dst2, h.size());
  int bad_raw = 0, bad1 = 0, bad2 = 0;
  for (int r = 0; r < kBoxRows; ++r)
    for (int c = 0; c < box_cols; ++c) {
      const uint16_t want = h[(row0 + r) * kTmaStride + col0 + c];
      const uint32_t at = tile::swizzled_offset(s, kBoxRows, box_cols, r, c) / 2;
      if (got_raw[at] != want && bad_raw++ == 0)
        ADD_FAILURE() << "swizzle " << static_cast<int>(s) << ": box element (" << r << ", " << c
                      << ") not at the swizzle function's offset " << 2 * at;
    }
  for (int r = 0; r < kTmaRows; ++r)
    for (int c = 0; c < kTmaStride; ++c) {
      const size_t i = static_cast<size_t>(r) * kTmaStride + c;
      const bool in_box = r >= row0 && r < row0 + kBoxRows && c >= col0 && c < col0 + box_cols;
      bad1 += got1[i] != (in_box ? h[i] : 0);
      bad2 += got2[i] != (in_box ? static_cast<uint16_t>(h[i] ^ 0x8000) : 0);
    }
  EXPECT_EQ(bad_raw, 0) << "swizzle " << static_cast<int>(s) << ": elements of the loaded box misplaced";
  EXPECT_EQ(bad1, 0) << "swizzle " << static_cast<int>(s) << ": TMA store of the loaded box not bitwise equal";
  EXPECT_EQ(bad2, 0) << "swizzle " << static_cast<int>(s) << ": TMA store after generic writes wrong";
}

TEST(Tma, LoadSwizzledBoxAndStoreBack) {
  KDA_SKIP_WITHOUT_SM90();
  run_tma(Swizzle::k128B);
  run_tma(Swizzle::k64B);
  run_tma(Swizzle::k32B);
  run_tma(Swizzle::kNone);
}

// The head-box maps of make_head_box_map come from a per-thread cache (tensor_map_cache.h): the first
// call, a repeated call (a hit) and a call after the cache was flooded with other keys all give the
// bytes of a fresh encode by the driver; another base gives other bytes (the key is not ignored).
TEST(TileTensorMap, HeadBoxMapsFromTheCacheAreTheEncodersBytes) {
  KDA_SKIP_WITHOUT_SM90();
  DeviceBuffer<uint16_t> buf(size_t{1} << 22);
  struct Shape {
    uint64_t dims[4];
    int64_t given[3];
  };
  const Shape shapes[] = {{{128, 8, 512, 2}, {128, 1024, 1024 * 512}},
                          {{128, 96, 256, 1}, {384, 96 * 384, 0}},  // strided heads (a fused projection)
                          {{128, 1, 300, 3}, {0, 128, 128 * 300}}};
  auto fresh = [&](const void* base, const Shape& sh, CUtensorMap* m) {
    uint64_t strides[3];
    ASSERT_TRUE(sm90::head_box_strides(sh.dims, sh.given, strides));
    const kda_status st = sm90::make_tensor_map_bf16(m, base, 4, sh.dims, strides, sm90::kHeadBox, Swizzle::k128B);
    ASSERT_EQ(st.code, KDA_OK) << st.message;
  };
  for (int round = 0; round < 2; ++round) {
    for (const Shape& sh : shapes) {
      for (int offset : {0, 64}) {
        const void* base = buf.p + 8 * offset;
        CUtensorMap want, first, again;
        fresh(base, sh, &want);
        ASSERT_TRUE(sm90::make_head_box_map(&first, base, sh.dims, sh.given));
        ASSERT_TRUE(sm90::make_head_box_map(&again, base, sh.dims, sh.given));
        EXPECT_EQ(std::memcmp(&first, &want, sizeof(want)), 0) << "round " << round;
        EXPECT_EQ(std::memcmp(&again, &want, sizeof(want)), 0) << "round " << round;
        CUtensorMap other;
        ASSERT_TRUE(sm90::make_head_box_map(&other, buf.p + 8 * offset + 8, sh.dims, sh.given));
        EXPECT_NE(std::memcmp(&other, &want, sizeof(want)), 0);
      }
    }
    // Flood the cache with 300 other keys between the rounds.
    for (int i = 0; i < 300; ++i) {
      const Shape sh{{128, 4, static_cast<uint64_t>(16 + i), 1}, {128, 512, 0}};
      CUtensorMap m;
      ASSERT_TRUE(sm90::make_head_box_map(&m, buf.p + 8 * (i % 50), sh.dims, sh.given));
    }
  }
}

// ---- (d) producer / consumer warpgroups ----------------------------------------------------------

// One constexpr source for the kernel's sizes.
struct PcConfig {
  static constexpr int kM = 128, kN = 64, kK = 64;  // C (128 x 64) = A (128 x 64) B (64 x 64)
  static constexpr int kThreads = 384;              // warpgroup 0 produces, 1 and 2 consume
  static constexpr int kProducerRegs = 40, kConsumerRegs = 232;
  using ATile = tile::SwizzledTile<Swizzle::k128B, 64, kK>;  // one consumer's 64 rows, K-major
  using BTile = tile::SwizzledTile<Swizzle::k128B, kN, kK>;  // B as N x K (K-major)
  struct Storage {
    tile::TileBuffer<ATile> a[2];
    tile::TileBuffer<BTile> b;
    float half[2][64 * kN];  // each consumer's product, exchanged through the named barrier
    float scale;
    alignas(8) uint64_t full;
  };
  static_assert(ptx::setmaxnreg_fits(kThreads, {kProducerRegs, kConsumerRegs, kConsumerRegs}),
                "the 3 warpgroups' registers after setmaxnreg fit in what the CTA is launched with");
};

__global__ void __launch_bounds__(PcConfig::kThreads, 1)
    probe_producer_consumer(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_bt,
                            float* c) {
  using Cfg = PcConfig;
  extern __shared__ unsigned char smem_raw[];
  auto& st = *tile::smem_storage<Cfg::Storage>(smem_raw);
  const int wg = ptx::warpgroup_index();
  const int t = threadIdx.x % 128;
  const ptx::NamedBarrier consumers{1, 256};
  const ptx::NamedBarrier scale_ready{2, 384};
  if (threadIdx.x == 0) {
    ptx::mbar_init(&st.full, 1);
    ptx::fence_barrier_init();
  }
  __syncthreads();
  if (wg == 0) {
    ptx::setmaxnreg_dec<Cfg::kProducerRegs>();
    if (t == 0) {
      ptx::prefetch_tensor_map(&map_a);
      ptx::prefetch_tensor_map(&map_bt);
      ptx::mbar_arrive_expect_tx(&st.full, 2 * Cfg::ATile::kBytes + Cfg::BTile::kBytes);
      ptx::tma_load_2d(st.a[0].bytes, &map_a, 0, 0, &st.full);
      ptx::tma_load_2d(st.a[1].bytes, &map_a, 0, 64, &st.full);
      ptx::tma_load_2d(st.b.bytes, &map_bt, 0, 0, &st.full);
      st.scale = 0.5f;
    }
    scale_ready.arrive();  // publishes st.scale to the consumers (bar.arrive orders the write)
    return;
  }
  ptx::setmaxnreg_inc<Cfg::kConsumerRegs>();
  const int me = wg - 1;
  ptx::mbar_wait(&st.full, 0);
  const uint32_t a_addr = static_cast<uint32_t>(__cvta_generic_to_shared(st.a[me].bytes));
  const uint32_t b_addr = static_cast<uint32_t>(__cvta_generic_to_shared(st.b.bytes));
  tile::Acc<Cfg::kN> acc;
  acc.fence_operand();
  ptx::wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < Cfg::kK / 16; ++ks)
    acc.mma_ss<0, 0>(tile::kmajor_operand<Cfg::ATile>(ks).at(a_addr), tile::kmajor_operand<Cfg::BTile>(ks).at(b_addr),
                     ks > 0);
  ptx::wgmma_commit_group();
  ptx::wgmma_wait_group<0>();
  acc.fence_operand();
  scale_ready.sync();
  const float scale = st.scale;
#pragma unroll
  for (int i = 0; i < tile::Acc<Cfg::kN>::kCount; ++i)
    st.half[me][tile::Acc<Cfg::kN>::row(t, i) * Cfg::kN + tile::Acc<Cfg::kN>::col(t, i)] = scale * acc.v[i];
  consumers.sync();
  // Each consumer writes the other's half: wrong unless the named barrier ordered the exchange.
  const int other = 1 - me;
  for (int i = t; i < 64 * Cfg::kN; i += 128) c[(other * 64) * Cfg::kN + i] = st.half[other][i];
}

TEST(Tile, ProducerConsumerWarpgroups) {
  KDA_SKIP_WITHOUT_SM90();
  using Cfg = PcConfig;
  const std::vector<uint16_t> a = random_bf16(Cfg::kM * Cfg::kK, 71), bt = random_bf16(Cfg::kN * Cfg::kK, 72);
  std::vector<float> af(a.size()), bf(static_cast<size_t>(Cfg::kK) * Cfg::kN);
  for (size_t i = 0; i < a.size(); ++i) af[i] = bf16_to_float(a[i]);
  for (int n = 0; n < Cfg::kN; ++n)
    for (int k = 0; k < Cfg::kK; ++k) bf[k * Cfg::kN + n] = bf16_to_float(bt[n * Cfg::kK + k]);
  DeviceBuffer<uint16_t> da(a.size()), dbt(bt.size());
  DeviceBuffer<float> dc(Cfg::kM * Cfg::kN);
  upload(da, a);
  upload(dbt, bt);
  ASSERT_EQ(cudaMemset(dc.p, 0xFF, Cfg::kM * Cfg::kN * 4), cudaSuccess);  // NaN until written
  CUtensorMap ma, mbt;
  kda_status st = sm90::make_tensor_map_2d_bf16(&ma, da.p, Cfg::kM, Cfg::kK, Cfg::kK, 64, 64, Swizzle::k128B);
  ASSERT_EQ(st.code, KDA_OK) << st.message;
  st = sm90::make_tensor_map_2d_bf16(&mbt, dbt.p, Cfg::kN, Cfg::kK, Cfg::kK, 64, 64, Swizzle::k128B);
  ASSERT_EQ(st.code, KDA_OK) << st.message;
  const int smem = static_cast<int>(tile::smem_bytes<Cfg::Storage>());
  ASSERT_EQ(cudaFuncSetAttribute(probe_producer_consumer, cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
            cudaSuccess);
  probe_producer_consumer<<<1, Cfg::kThreads, smem>>>(ma, mbt, dc.p);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<double> want, mag;
  cpu_product(af, bf, Cfg::kM, Cfg::kK, Cfg::kN, want, mag);
  for (size_t i = 0; i < want.size(); ++i) {
    want[i] *= 0.5;
    mag[i] *= 0.5;
  }
  expect_close(download(dc, Cfg::kM * Cfg::kN), want, mag, Cfg::kN, "producer/consumer C = 0.5 A B");
}

}  // namespace
}  // namespace kda::test
