// cp.async (SM80+ asynchronous 16-byte global -> shared copies) with completion tracked by an
// mbarrier: each copying thread calls cp_async_arrive_noinc(bar) after its copies, and the barrier
// (initialised with one count per such thread, plus any other arrivals) completes once they land.
// Used where data come in many small strided rows (one bulk copy per row would cost one copy-engine
// request each).
#pragma once

#include <cuda/ptx>

#include <cstdint>

#include "src/ptx/ldmatrix.cuh"

namespace kda::ptx {

// Copies 16 bytes from global `src` to shared `dst` (both 16-byte aligned); when !valid, writes 16
// zero bytes instead and reads nothing (src must still be a valid address expression).
__device__ __forceinline__ void cp_async_16_zfill(void* dst, const void* src, bool valid) {
  const uint32_t src_bytes = valid ? 16u : 0u;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(src_bytes)
               : "memory");
}

// Arrives on `bar` once all prior cp.async of this thread have completed (counts as one of the
// barrier's expected arrivals).
__device__ __forceinline__ void cp_async_arrive_noinc(uint64_t* bar) { cuda::ptx::cp_async_mbarrier_arrive_noinc(bar); }

// Completion by groups instead (the tail's combine jobs, recurrence_tail.cuh): commit closes a group
// of this thread's prior cp.async; wait_group<N> returns once at most N of its groups are pending.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

template <int kPending>
__device__ __forceinline__ void cp_async_wait_group() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

}  // namespace kda::ptx
