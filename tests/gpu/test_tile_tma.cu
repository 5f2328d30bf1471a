// The TMA PTX wrappers and the tile layer's roles (src/ptx/tma.cuh, barrier.cuh, warpgroup.cuh,
// wgmma.cuh, src/tile, src/launch/tensor_map.h) on the hardware, against the CPU (test_tile.cu: the
// wgmma products):
//   Tma.*    a 2D box loaded into swizzled shared memory lands exactly at the swizzle function's
//            offsets; stored back bitwise; a store after generic writes + proxy fence;
//   TileTensorMap.*  the head-box maps from the cache are the encoder's bytes;
//   Tile.*   a 3-warpgroup kernel: a producer (setmaxnreg.dec) loads tiles by TMA on an mbarrier,
//            two consumers (setmaxnreg.inc) multiply them with wgmma, exchange halves through a
//            named barrier and read a scale the producer published with bar.arrive.
// Inputs and check as test_tile.cu's (tile_test_util.h). Skips without an SM90 GPU.
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
