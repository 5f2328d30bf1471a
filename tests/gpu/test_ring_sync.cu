// The stage-ring hand-off of the recurrence and decode kernels, reduced to a probe: a producer warp
// copies each stage with cp.async and completes it on full[stage] (cp.async.mbarrier.arrive.noinc
// per lane); consumer warps wait on full[stage], read the stage from shared memory, and release it
// on empty[stage]; the producer waits on empty[stage] before copying into it again. Two ways to
// release: (a) __syncwarp, then lane 0 arrives (one arrival per warp, as the kernels do); (b) every
// lane arrives (32 per warp). Both are correct under the PTX memory model (the warp barrier orders
// the other lanes' reads before lane 0's release), and both tests check every value each consumer
// lane read against the host over many reuses of each stage. compute-sanitizer racecheck is run on
// each separately (scripts/gpu_verify.sh, sanitizer stage): what it reports on (a) and not on (b)
// is its model, not a race (docs/performance_notes.md, "compute-sanitizer").
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "src/ptx/barrier.cuh"
#include "src/ptx/cp_async.cuh"
#include "tests/gpu/gpu_harness.h"

namespace kda::test {
namespace {

constexpr int kStages = 2, kConsumerWarps = 2, kIters = 64;

template <bool kAllLanes>
__global__ void probe_ring(const uint4* src, unsigned long long* sums) {
  __shared__ __align__(16) uint4 ring[kStages][32];
  __shared__ __align__(8) uint64_t full[kStages], empty[kStages];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      ptx::mbar_init(&full[s], 32);
      ptx::mbar_init(&empty[s], kAllLanes ? 32 * kConsumerWarps : kConsumerWarps);
    }
    ptx::fence_barrier_init();
  }
  __syncthreads();
  if (warp == kConsumerWarps) {  // producer
    for (int i = 0; i < kIters; ++i) {
      const int s = i % kStages, use = i / kStages;
      if (use > 0) ptx::mbar_wait(&empty[s], (use - 1) & 1);
      ptx::cp_async_16_zfill(&ring[s][lane], src + i * 32 + lane, true);
      ptx::cp_async_arrive_noinc(&full[s]);
    }
    return;
  }
  unsigned long long acc = 0;
  for (int i = 0; i < kIters; ++i) {
    const int s = i % kStages;
    ptx::mbar_wait(&full[s], (i / kStages) & 1);
    const uint4 v = ring[s][(lane + 7 * warp + i) % 32];  // another lane's piece
    acc = acc * 1000003ull + (static_cast<unsigned long long>(v.x) ^ v.y ^ (static_cast<unsigned long long>(v.z) << 32) ^ v.w);
    if constexpr (kAllLanes) {
      ptx::mbar_arrive(&empty[s]);
    } else {
      __syncwarp();
      if (lane == 0) ptx::mbar_arrive(&empty[s]);
    }
  }
  sums[warp * 32 + lane] = acc;
}

template <bool kAllLanes>
void run_probe() {
  std::mt19937_64 rng(77);
  std::vector<uint4> host(kIters * 32);
  for (uint4& u : host) u = make_uint4(rng(), rng(), rng(), rng());
  std::vector<unsigned long long> expected(kConsumerWarps * 32);
  for (int w = 0; w < kConsumerWarps; ++w)
    for (int l = 0; l < 32; ++l) {
      unsigned long long acc = 0;
      for (int i = 0; i < kIters; ++i) {
        const uint4 v = host[i * 32 + (l + 7 * w + i) % 32];
        acc = acc * 1000003ull + (static_cast<unsigned long long>(v.x) ^ v.y ^ (static_cast<unsigned long long>(v.z) << 32) ^ v.w);
      }
      expected[w * 32 + l] = acc;
    }
  uint4* d_src = nullptr;
  unsigned long long* d_sums = nullptr;
  ASSERT_EQ(cudaMalloc(&d_src, host.size() * sizeof(uint4)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_sums, expected.size() * sizeof(unsigned long long)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d_src, host.data(), host.size() * sizeof(uint4), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemset(d_sums, 0, expected.size() * sizeof(unsigned long long)), cudaSuccess);
  probe_ring<kAllLanes><<<1, 32 * (kConsumerWarps + 1)>>>(d_src, d_sums);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<unsigned long long> got(expected.size());
  ASSERT_EQ(cudaMemcpy(got.data(), d_sums, got.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(d_src);
  cudaFree(d_sums);
  EXPECT_EQ(got, expected) << "a consumer read a stage before it was filled or after it was refilled";
}

TEST(RingSync, LaneZeroReleasesAfterSyncwarp) {
  KDA_SKIP_WITHOUT_SM90();
  run_probe<false>();
}

TEST(RingSync, EveryLaneReleases) {
  KDA_SKIP_WITHOUT_SM90();
  run_probe<true>();
}

}  // namespace
}  // namespace kda::test
