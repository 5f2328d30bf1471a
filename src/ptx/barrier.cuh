// mbarrier, bulk-copy and proxy-fence wrappers on top of CCCL's cuda::ptx (SM90).
//
// Pattern used by the kernels (one producer lane, consumer warps):
//   init: mbar_init(full, 1); mbar_init(empty, consumers); fence_barrier_init(); __syncthreads()
//   producer: mbar_wait(empty, phase ^ 1) (skipped on the first round); mbar_arrive_expect_tx(full, bytes);
//             bulk_copy_g2s(dst, src, n, full) ...
//   consumer: mbar_wait(full, phase); read shared memory; mbar_arrive(empty)
// The phase bit flips each time a barrier completes; waiters pass the parity of the phase they
// wait for.
#pragma once

#include <cuda/ptx>

#include <cstdint>

namespace kda::ptx {

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) { cuda::ptx::mbarrier_init(bar, count); }

// Makes barrier initialisation visible to the async proxy (bulk copies) before first use.
__device__ __forceinline__ void fence_barrier_init() {
  cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
}

__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared, bar,
                                       bytes);
}

__device__ __forceinline__ void mbar_arrive(uint64_t* bar) { cuda::ptx::mbarrier_arrive(bar); }

// Blocks until the phase with parity `parity` of `bar` has completed (acquire, CTA scope).
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  while (!cuda::ptx::mbarrier_try_wait_parity(bar, parity)) {
  }
}

// Bulk copy of `bytes` (multiple of 16, both addresses 16-byte aligned) from global to this CTA's
// shared memory; completes `bytes` transactions on `bar`.
__device__ __forceinline__ void bulk_copy_g2s(void* smem_dst, const void* gmem_src, uint32_t bytes, uint64_t* bar) {
  cuda::ptx::cp_async_bulk(cuda::ptx::space_cluster, cuda::ptx::space_global, smem_dst, gmem_src, bytes, bar);
}

// Orders this thread's generic-proxy shared-memory writes before later async-proxy accesses.
__device__ __forceinline__ void fence_proxy_async_smem() { cuda::ptx::fence_proxy_async(cuda::ptx::space_shared); }

}  // namespace kda::ptx
