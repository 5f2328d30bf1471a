// The PTX layer's synchronisation between grids and CTAs: the programmatic-dependent-launch pair
// (grid_dependency.cuh: a dependent grid that starts while its primary still runs sees the primary's
// writes after wait_primary) and the relaxed 64-bit words the single pass's pieces poll (gpu_sync.cuh).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "src/ptx/gpu_sync.cuh"
#include "src/ptx/grid_dependency.cuh"
#include "tests/gpu/gpu_harness.h"

namespace kda::test {
namespace {

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

// Primary: lets its dependent launch, then writes `value` after ~200 µs; records when it finished.
__global__ void probe_slow_writer(int* data, int n, int value, unsigned long long* done_ns) {
  ptx::launch_dependents();
  const unsigned long long t0 = global_ns();
  while (global_ns() - t0 < 200000) {
  }
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) data[i] = value;
  __syncthreads();
  if (threadIdx.x == 0) atomicMax(done_ns, global_ns());
}

// Dependent: records when it started, waits for the primary, copies what it sees.
__global__ void probe_dependent_reader(const int* data, int* seen, int n, unsigned long long* start_ns) {
  if (threadIdx.x == 0) atomicMin(start_ns, global_ns());
  ptx::wait_primary();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) seen[i] = data[i];
}

TEST(Ptx, DependentLaunchSeesThePrimaryAfterWaiting) {
  KDA_SKIP_WITHOUT_SM90();
  constexpr int n = 1 << 16;
  int *data, *seen;
  unsigned long long* t;  // [0] writer done, [1] reader start
  ASSERT_EQ(cudaMalloc(&data, n * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&seen, n * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&t, 16), cudaSuccess);
  const unsigned long long init[2] = {0, ~0ull};
  // Whether the dependent grid started before the primary finished, in any round (the first round
  // may not overlap: lazy module loading). Under compute-sanitizer kernels are serialised, so the
  // overlap is required only when FLASH_KDA_REQUIRE_PDL_OVERLAP=1 (scripts/gpu_verify.sh tests).
  bool overlapped = false;
  for (int round = 1; round <= 3; ++round) {
    ASSERT_EQ(cudaMemset(data, 0, n * 4), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(t, init, 16, cudaMemcpyHostToDevice), cudaSuccess);
    probe_slow_writer<<<2, 256>>>(data, n, round, t);
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(4);
    cfg.blockDim = dim3(256);
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    ASSERT_EQ(cudaLaunchKernelEx(&cfg, probe_dependent_reader, static_cast<const int*>(data), seen, n, t + 1),
              cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<int> host(n);
    unsigned long long times[2];
    ASSERT_EQ(cudaMemcpy(host.data(), seen, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(times, t, 16, cudaMemcpyDeviceToHost), cudaSuccess);
    for (int i = 0; i < n; ++i) ASSERT_EQ(host[i], round) << "element " << i << " read before the primary wrote it";
    overlapped = overlapped || times[1] < times[0];
    std::printf("[ pdl ] round %d: dependent started %.1f us before the primary finished\n", round,
                (static_cast<double>(times[0]) - static_cast<double>(times[1])) * 1e-3);
  }
  const char* require = std::getenv("FLASH_KDA_REQUIRE_PDL_OVERLAP");
  if (require != nullptr && std::string(require) == "1")
    EXPECT_TRUE(overlapped) << "the dependent grid never started before its primary finished: the wait was not exercised";
  cudaFree(data);
  cudaFree(seen);
  cudaFree(t);
}

// The relaxed 64-bit words the single pass's pieces poll (gpu_sync.cuh): every CTA stores its own word,
// then (a second launch) every CTA reads all of them back.
__global__ void probe_store_words(unsigned long long* words, unsigned long long tag) {
  if (threadIdx.x == 0) ptx::st_relaxed(reinterpret_cast<uint64_t*>(words) + blockIdx.x, (tag << 1) | (blockIdx.x & 1));
}
__global__ void probe_load_words(const unsigned long long* words, int n, unsigned long long tag, int* bad) {
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    if (ptx::ld_relaxed(reinterpret_cast<const uint64_t*>(words) + i) != ((tag << 1) | (i & 1))) atomicAdd(bad, 1);
}

TEST(Ptx, RelaxedWordsReadBackAcrossCtas) {
  KDA_SKIP_WITHOUT_SM90();
  constexpr int kCtas = 300;
  unsigned long long* words = nullptr;
  int* bad = nullptr;
  ASSERT_EQ(cudaMalloc(&words, sizeof(unsigned long long) * kCtas), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&bad, sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMemset(bad, 0, sizeof(int)), cudaSuccess);
  const unsigned long long tag = 0x123456789abcdefull;
  probe_store_words<<<kCtas, 32>>>(words, tag);
  probe_load_words<<<4, 128>>>(words, kCtas, tag, bad);
  int h = -1;
  ASSERT_EQ(cudaMemcpy(&h, bad, sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(h, 0);
  cudaFree(words);
  cudaFree(bad);
}

}  // namespace
}  // namespace kda::test
