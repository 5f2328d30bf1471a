// mbarrier wrappers on top of CCCL's cuda::ptx (SM90).
//
// Pattern used by the recurrence kernel (a producer warp filling a ring of stages with cp.async,
// consumer warps reading them):
//   init:     mbar_init(full, 32); mbar_init(empty, consumer_warps); fence_barrier_init(); __syncthreads()
//   producer: mbar_wait(empty, parity) (skipped on the first round); cp.async ...;
//             cp_async_arrive_noinc(full) (cp_async.cuh), one per lane
//   consumer: mbar_wait(full, parity); read shared memory; __syncwarp(); lane 0: mbar_arrive(empty)
// The phase bit flips each time a barrier completes; waiters pass the parity of the phase they
// wait for.
#pragma once

#include <cuda/ptx>

#include <cstdint>

namespace kda::ptx {

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) { cuda::ptx::mbarrier_init(bar, count); }

// Invalidates a barrier no thread waits on or arrives at any more, so that its memory may be
// initialised again (a CTA that runs several jobs on one stage ring, recurrence_tail.cuh).
__device__ __forceinline__ void mbar_inval(uint64_t* bar) {
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];\n" ::"r"(static_cast<uint32_t>(__cvta_generic_to_shared(bar)))
               : "memory");
}

// Makes barrier initialisation visible to the other threads and proxies before first use.
__device__ __forceinline__ void fence_barrier_init() {
  cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
}

// Arrival (release semantics, CTA scope).
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) { cuda::ptx::mbarrier_arrive(bar); }

// Upper bound (in ns) a waiting thread may stay suspended inside one try_wait before it re-polls:
// the hardware wakes it when the phase completes, so a long hint only saves the issue slots a tight
// polling loop would take from the warps doing work. 0: plain try_wait (system-dependent limit).
#ifndef FLASH_KDA_MBAR_SUSPEND_HINT
#define FLASH_KDA_MBAR_SUSPEND_HINT 0x989680
#endif

// Blocks until the phase with parity `parity` of `bar` has completed (acquire, CTA scope).
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  if constexpr (FLASH_KDA_MBAR_SUSPEND_HINT > 0) {
    while (!cuda::ptx::mbarrier_try_wait_parity(bar, parity, uint32_t{FLASH_KDA_MBAR_SUSPEND_HINT})) {
    }
  } else {
    while (!cuda::ptx::mbarrier_try_wait_parity(bar, parity)) {
    }
  }
}

// An opaque volatile move of a register onto itself: the uses of x stay after the volatile asm before it
// (an mbar_wait), so a global load issued before a wait is consumed only after the wait, its latency
// hidden behind it (the compiler would otherwise move the first use, and the warp's stall on the load,
// above the wait).
__device__ __forceinline__ void keep_after(uint32_t& x) { asm volatile("mov.b32 %0, %0;\n" : "+r"(x)); }
__device__ __forceinline__ void keep_after(float& x) { asm volatile("mov.b32 %0, %0;\n" : "+f"(x)); }

}  // namespace kda::ptx
