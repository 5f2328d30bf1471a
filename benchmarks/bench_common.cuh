// What the C++ benchmarks share (bench_fwd.cu, bench_decode.cu, the studies): CUDA error checks,
// deterministic random inputs generated on the device (a counter hash: the same values for a given
// seed on every run), the non-finite count of a bf16 output, host vectors copied to the device, the
// median, case filters.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "case_filter.h"  // matches(): the --filter

#define CUDA_OK(expr)                                                                             \
  do {                                                                                            \
    cudaError_t e_ = (expr);                                                                      \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); \
      std::exit(2);                                                                               \
    }                                                                                             \
  } while (0)

namespace kda::bench {

__device__ inline uint32_t hash32(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

// Standard normal (Box-Muller on a counter hash) or uniform [0, 1).
__device__ inline float random_value(uint64_t seed, uint64_t i, bool normal) {
  const float u1 = (hash32(seed * 0x9e3779b97f4a7c15ull + 2 * i) + 1.0f) * 2.3283064e-10f;
  if (!normal) return u1 * 0.99999994f;
  const float u2 = hash32(seed * 0x9e3779b97f4a7c15ull + 2 * i + 1) * 2.3283064e-10f;
  return sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
}

// n standard-normal values rounded to bf16 (nearest even).
__global__ inline void fill_bf16(uint16_t* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const uint32_t u = __float_as_uint(random_value(seed, i, true));
    p[i] = static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
}

__global__ inline void fill_f32(float* p, size_t n, uint64_t seed, bool normal) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = random_value(seed, i, normal);
}

__global__ inline void count_non_finite_bf16(const uint16_t* p, size_t n, unsigned long long* count) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    if ((p[i] & 0x7f80u) == 0x7f80u) atomicAdd(count, 1ull);
}

// Relative L2 error of x against ref (same length).
template <typename X, typename R>
double rel_l2(const std::vector<X>& x, const std::vector<R>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double d = static_cast<double>(x[i]) - static_cast<double>(ref[i]);
    num += d * d;
    den += static_cast<double>(ref[i]) * static_cast<double>(ref[i]);
  }
  return std::sqrt(num / den);
}

// A host vector copied into a new device allocation (never freed: the studies run once and exit).
template <typename T>
T* to_device(const std::vector<T>& h) {
  T* d = nullptr;
  CUDA_OK(cudaMalloc(&d, h.size() * sizeof(T)));
  CUDA_OK(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Median time (ms) of CUDA-graph replays of whatever `enqueue` puts on `stream` (one capture, 40
// replays, the first 10 dropped).
template <typename F>
double graph_ms(cudaStream_t stream, F enqueue) {
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  enqueue();
  CUDA_OK(cudaStreamEndCapture(stream, &g));
  CUDA_OK(cudaGraphInstantiate(&ge, g, 0));
  cudaEvent_t e0, e1;
  CUDA_OK(cudaEventCreate(&e0));
  CUDA_OK(cudaEventCreate(&e1));
  std::vector<double> v;
  for (int i = 0; i < 40; ++i) {
    CUDA_OK(cudaEventRecord(e0, stream));
    CUDA_OK(cudaGraphLaunch(ge, stream));
    CUDA_OK(cudaEventRecord(e1, stream));
    CUDA_OK(cudaEventSynchronize(e1));
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
    if (i >= 10) v.push_back(ms);
  }
  CUDA_OK(cudaEventDestroy(e0));
  CUDA_OK(cudaEventDestroy(e1));
  CUDA_OK(cudaGraphExecDestroy(ge));
  CUDA_OK(cudaGraphDestroy(g));
  return median(v);
}

// A bf16 bit pattern as a float (host).
inline float bf16_bits_value(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The SM clock now, in MHz: one thread counts its SM's cycles (clock64) against the global
// nanosecond timer over ~200 us (the timer's granularity is about a microsecond). The H200's clock
// moves between ~1,740 and 1,980 MHz with its power management (docs/performance_notes.md), so
// flash_kda_bench records it beside its times.
__global__ void clock_probe_kernel(double* mhz) {
  unsigned long long t0, t1;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  const long long c0 = clock64();
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
  } while (t1 - t0 < 200000ull);
  const long long c1 = clock64();
  *mhz = static_cast<double>(c1 - c0) * 1e3 / static_cast<double>(t1 - t0);
}

// Runs clock_probe_kernel on `stream` and waits for it (`buf`: one double of device memory).
inline double sm_clock_mhz(cudaStream_t stream, double* buf) {
  clock_probe_kernel<<<1, 1, 0, stream>>>(buf);
  double mhz = 0;
  if (cudaMemcpyAsync(&mhz, buf, sizeof(mhz), cudaMemcpyDeviceToHost, stream) != cudaSuccess ||
      cudaStreamSynchronize(stream) != cudaSuccess)
    return -1;
  return mhz;
}

}  // namespace kda::bench
