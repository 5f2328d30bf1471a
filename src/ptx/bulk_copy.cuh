// One-dimensional bulk copies (SM90 TMA, cp.async.bulk) from global to shared memory, completing on
// an mbarrier by byte count, and bulk prefetches into L2. Pattern (one thread issues, every thread waits):
//   thread 0: mbar_init(bar, 1); fence_barrier_init(); mbar_arrive_expect_tx(bar, bytes);
//             bulk_copy_g2s(dst, src, bytes, bar)
//   all:      __syncthreads() (the barrier's initialisation is then visible); mbar_wait(bar, 0)
#pragma once

#include <cstdint>
#include <cuda/ptx>

namespace kda::ptx {

// One arrival on `bar` that also makes its current phase wait for `bytes` more transaction bytes.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared, bar,
                                       bytes);
}

// Copies `bytes` (a multiple of 16; both addresses 16-byte aligned) from global `src` to shared
// `dst` with the copy engine; the bytes complete on `bar` (which must expect them).
__device__ __forceinline__ void bulk_copy_g2s(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  cuda::ptx::cp_async_bulk(cuda::ptx::space_cluster, cuda::ptx::space_global, dst, src, bytes, bar);
}

// Asks the copy engine to bring `bytes` (a multiple of 16; 16-byte aligned) of global memory into
// L2, with no completion to wait for: a hint that changes no memory, so it may name data another
// grid is still writing (the later reads see whatever L2 holds then, as any read would).
__device__ __forceinline__ void bulk_prefetch_l2(const void* src, uint32_t bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(src), "r"(bytes) : "memory");
}

}  // namespace kda::ptx
