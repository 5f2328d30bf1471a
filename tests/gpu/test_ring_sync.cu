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
#include "src/ptx/bulk_copy.cuh"
#include "src/ptx/cp_async.cuh"
#include "src/ptx/warpgroup.cuh"
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

// Shared memory filled by a bulk copy (completion by bytes on an mbarrier that every thread waits on),
// then, after a __syncthreads, written again: (0) by each thread's st.shared; (1) by each thread's
// cp.async; (2) by a second bulk copy of thread 0, which every thread waits for too. Every write is
// ordered after the first copy's completion (each writing thread observed it; the second copy's
// issuer too), and every thread checks what it reads after each phase. The wgmma recurrence's
// warm-up tail re-uses its ring this way: racecheck's report on (1) and (2), if it makes one while
// (0) is clean, is the tool's model of bulk copies, not a race (docs/performance_notes.md, version 37).
template <int kMode>
__global__ void probe_bulk_reuse(const uint4* src, unsigned long long* sums) {
  constexpr int kThreads = 128;
  __shared__ __align__(128) uint4 buf[kThreads];
  __shared__ __align__(8) uint64_t bar;
  const int t = threadIdx.x;
  if (t == 0) {
    ptx::mbar_init(&bar, 1);
    ptx::fence_barrier_init();
  }
  __syncthreads();
  if (t == 0) {
    ptx::mbar_arrive_expect_tx(&bar, kThreads * 16);
    ptx::bulk_copy_g2s(buf, src, kThreads * 16, &bar);
  }
  ptx::mbar_wait(&bar, 0);
  uint4 v = buf[(t + 5) % kThreads];
  unsigned long long acc = v.x ^ v.y ^ (static_cast<unsigned long long>(v.z) << 32) ^ v.w;
  __syncthreads();
  if constexpr (kMode == 0) {
    buf[t] = src[kThreads + t];
  } else if constexpr (kMode == 1) {
    ptx::cp_async_16_zfill(&buf[t], src + kThreads + t, true);
    ptx::cp_async_commit();
    ptx::cp_async_wait_group<0>();
  } else {
    if (t == 0) {
      ptx::mbar_arrive_expect_tx(&bar, kThreads * 16);
      ptx::bulk_copy_g2s(buf, src + kThreads, kThreads * 16, &bar);
    }
    ptx::mbar_wait(&bar, 1);
  }
  __syncthreads();
  v = buf[(t + 9) % kThreads];
  acc = acc * 1000003ull + (v.x ^ v.y ^ (static_cast<unsigned long long>(v.z) << 32) ^ v.w);
  sums[t] = acc;
}

template <int kMode>
void run_bulk_reuse() {
  constexpr int kThreads = 128;
  std::mt19937_64 rng(91 + kMode);
  std::vector<uint4> host(2 * kThreads);
  for (uint4& u : host) u = make_uint4(rng(), rng(), rng(), rng());
  std::vector<unsigned long long> expected(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    const uint4 a = host[(t + 5) % kThreads], b = host[kThreads + (t + 9) % kThreads];
    unsigned long long acc = a.x ^ a.y ^ (static_cast<unsigned long long>(a.z) << 32) ^ a.w;
    acc = acc * 1000003ull + (b.x ^ b.y ^ (static_cast<unsigned long long>(b.z) << 32) ^ b.w);
    expected[t] = acc;
  }
  uint4* d_src = nullptr;
  unsigned long long* d_sums = nullptr;
  ASSERT_EQ(cudaMalloc(&d_src, host.size() * sizeof(uint4)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_sums, expected.size() * sizeof(unsigned long long)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d_src, host.data(), host.size() * sizeof(uint4), cudaMemcpyHostToDevice), cudaSuccess);
  probe_bulk_reuse<kMode><<<1, kThreads>>>(d_src, d_sums);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<unsigned long long> got(expected.size());
  ASSERT_EQ(cudaMemcpy(got.data(), d_sums, got.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(d_src);
  cudaFree(d_sums);
  EXPECT_EQ(got, expected) << "mode " << kMode;
}

TEST(RingSync, BulkCopyThenStores) {
  KDA_SKIP_WITHOUT_SM90();
  run_bulk_reuse<0>();
}

TEST(RingSync, BulkCopyThenCpAsync) {
  KDA_SKIP_WITHOUT_SM90();
  run_bulk_reuse<1>();
}

TEST(RingSync, BulkCopyThenBulkCopy) {
  KDA_SKIP_WITHOUT_SM90();
  run_bulk_reuse<2>();
}

// The warm-up tail's hand-over between jobs (recurrence_tail.cuh, run_tail_jobs), reduced: two roles
// (kHandConsumers consumer threads, then kHandProducers producer threads). Every producer thread
// arrives on `producer_done` once it has written its part of the round and waits for `job_ready`; the
// consumers meet at their named barrier, thread 0 waits for `producer_done`, reads what both roles
// wrote in the round and publishes a token, the consumers meet again and each arrives on `job_ready`.
// Every thread records the token it read; a missing order shows as a wrong token (and as a hazard
// under racecheck, which runs this test: scripts/gpu_verify.sh).
constexpr int kHandConsumers = 64, kHandProducers = 32, kHandRounds = 32;

__global__ void probe_handover(const int* salt, int* tokens) {
  __shared__ int written[kHandConsumers + kHandProducers];
  __shared__ __align__(8) uint64_t producer_done, job_ready;
  __shared__ int token;
  __shared__ uint32_t rounds;
  const int t = threadIdx.x;
  const bool consumer = t < kHandConsumers;
  if (t == 0) {
    ptx::mbar_init(&producer_done, kHandProducers);
    ptx::mbar_init(&job_ready, kHandConsumers);
    rounds = 0;
    ptx::fence_barrier_init();
  }
  __syncthreads();
  for (int r = 0; r < kHandRounds; ++r) {
    written[t] = salt[t] * (r + 1);  // the round's "job"
    if (consumer) {
      ptx::named_barrier_sync<14, kHandConsumers>();
      if (t == 0) {
        const uint32_t k = rounds;
        ptx::mbar_wait(&producer_done, k & 1);
        int sum = 0;
        for (int i = 0; i < kHandConsumers + kHandProducers; ++i) sum += written[i] * (i + 1);
        token = sum;
        rounds = k + 1;
      }
      ptx::named_barrier_sync<14, kHandConsumers>();
      ptx::mbar_arrive(&job_ready);
    } else {
      const uint32_t k = rounds;
      ptx::mbar_arrive(&producer_done);
      ptx::mbar_wait(&job_ready, k & 1);
    }
    tokens[r * (kHandConsumers + kHandProducers) + t] = token;
  }
}

TEST(RingSync, RolesHandOverByNamedBarriersAndMbarriers) {
  KDA_SKIP_WITHOUT_SM90();
  constexpr int kThreads = kHandConsumers + kHandProducers;
  std::mt19937 rng(17);
  std::vector<int> salt(kThreads);
  for (int& x : salt) x = static_cast<int>(rng() % 1000) + 1;
  int* d_salt = nullptr;
  int* d_tokens = nullptr;
  ASSERT_EQ(cudaMalloc(&d_salt, kThreads * sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_tokens, kHandRounds * kThreads * sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d_salt, salt.data(), kThreads * sizeof(int), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemset(d_tokens, 0, kHandRounds * kThreads * sizeof(int)), cudaSuccess);
  probe_handover<<<1, kThreads>>>(d_salt, d_tokens);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<int> got(kHandRounds * kThreads);
  ASSERT_EQ(cudaMemcpy(got.data(), d_tokens, got.size() * sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(d_salt);
  cudaFree(d_tokens);
  int wrong = 0;
  for (int r = 0; r < kHandRounds; ++r) {
    int expected = 0;
    for (int i = 0; i < kThreads; ++i) expected += salt[i] * (r + 1) * (i + 1);
    for (int t = 0; t < kThreads; ++t) wrong += got[r * kThreads + t] != expected;
  }
  EXPECT_EQ(wrong, 0) << "threads x rounds that read a token other than their round's";
}

}  // namespace
}  // namespace kda::test
