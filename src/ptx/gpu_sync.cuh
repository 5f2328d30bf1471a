// Device-scope (gpu) synchronisation between CTAs of one grid: release/acquire on global words,
// for counters one CTA publishes and another waits for (the bounded warm-up's tail jobs,
// src/kernels/sm90/recurrence_tail.cuh); relaxed 64-bit words, for flags that CTAs only poll (the
// single pass's pieces, single_pass_fallback.cuh). The pattern: the writing CTA's threads store their data,
// __syncthreads(), then one thread red_release_add()s the counter; the waiting CTA's thread spins
// on ld_acquire() (wait_at_least) and then __syncthreads() before its threads read the data. The
// barriers carry the order between the CTA's threads, the release/acquire pair between the CTAs
// (PTX memory model: causality order). A waiter must only wait for work already held by a running
// CTA, or the grid can deadlock (the tail's tickets guarantee it).
#pragma once

#include <cstdint>

namespace kda::ptx {

__device__ __forceinline__ int32_t ld_acquire(const int32_t* p) {
  int32_t v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ uint64_t ld_acquire(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.gpu.global.b64 %0, [%1];\n" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ int32_t ld_relaxed(const int32_t* p) {
  int32_t v;
  asm volatile("ld.relaxed.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ uint64_t ld_relaxed(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.relaxed.gpu.global.b64 %0, [%1];\n" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void st_relaxed(uint64_t* p, uint64_t v) {
  asm volatile("st.relaxed.gpu.global.b64 [%0], %1;\n" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ void st_release(int32_t* p, int32_t v) {
  asm volatile("st.release.gpu.global.b32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}

// Adds v, releasing every write this thread (and, after a barrier, its CTA) made before.
__device__ __forceinline__ void red_release_add(int32_t* p, int32_t v) {
  asm volatile("red.release.gpu.global.add.s32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ void red_release_add(uint64_t* p, uint64_t v) {
  asm volatile("red.release.gpu.global.add.u64 [%0], %1;\n" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ void red_relaxed_add(int32_t* p, int32_t v) {
  asm volatile("red.relaxed.gpu.global.add.s32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}

// Returns the value before the addition.
__device__ __forceinline__ int32_t atom_relaxed_add(int32_t* p, int32_t v) {
  int32_t old;
  asm volatile("atom.relaxed.gpu.global.add.s32 %0, [%1], %2;\n" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}

// Spins (with short sleeps, leaving issue slots to the SM's other warps) until *p >= target, with
// acquire semantics once it returns.
__device__ __forceinline__ int32_t wait_at_least(const int32_t* p, int32_t target) {
  int32_t v;
  while ((v = ld_acquire(p)) < target) __nanosleep(256);
  return v;
}

}  // namespace kda::ptx
