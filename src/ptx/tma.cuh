// Tensor TMA (SM90 cp.async.bulk.tensor): boxes of a 2D or 4D tensor described by a CUtensorMap
// (built on the host, src/launch/tensor_map.h) copied between global and shared memory by the copy
// engine, with the tensor map's swizzle applied on the shared-memory side (src/tile/swizzle.h
// gives the resulting byte offsets). On CCCL's cuda::ptx where it has the instruction.
//
// Coordinates are element indices, innermost (contiguous) dimension first: {col, row}. Out-of-range
// parts of a box read as zero and are not written back.
// The tensor map lives in global / constant / parameter memory (pass it to the kernel as a
// `const __grid_constant__ CUtensorMap` parameter and hand its address here).
//
// Load (one thread issues; the bytes complete on an mbarrier, barrier.cuh / bulk_copy.cuh):
//   thread 0: mbar_arrive_expect_tx(bar, box_bytes); tma_load_2d(dst, &map, col, row, bar)
//   all:      mbar_wait(bar, parity); read dst (or hand it to wgmma)
//   dst: 128-byte aligned; 1024-byte aligned for the 128B swizzle (the pattern follows address
//   bits 7-9, see swizzle.h).
// Store (shared -> global, completion by bulk groups):
//   writers: st.shared ...; fence_proxy_async_shared(); barrier among the writers
//   thread 0: tma_store_2d(&map, col, row, src); tma_store_commit(); tma_store_wait_read<0>()
//             (the shared source may be overwritten after wait_read; global visibility to other
//             grids at kernel end, or after tma_store_wait<0>()).
#pragma once

#include <cuda.h>  // CUtensorMap (types only: nothing links libcuda)
#include <cuda/ptx>

#include <cstdint>

namespace kda::ptx {

// 2D box load global -> shared; the box's bytes complete on `bar` (shared::cluster form, which for a
// single CTA addresses its own shared memory).
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, int32_t col, int32_t row,
                                            uint64_t* bar) {
  const int32_t coords[2] = {col, row};
  cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global, dst, map, coords, bar);
}

// 4D box load (coordinates innermost first: {c0, c1, c2, c3}), as tma_load_2d.
__device__ __forceinline__ void tma_load_4d(void* dst, const CUtensorMap* map, int32_t c0, int32_t c1, int32_t c2,
                                            int32_t c3, uint64_t* bar) {
  const int32_t coords[4] = {c0, c1, c2, c3};
  cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global, dst, map, coords, bar);
}

// 2D box store shared -> global (bulk_group completion).
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, int32_t col, int32_t row, const void* src) {
  const int32_t coords[2] = {col, row};
  cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_global, cuda::ptx::space_shared, map, coords, src);
}

// Closes the stores issued by this thread since the last commit into one bulk group.
__device__ __forceinline__ void tma_store_commit() { cuda::ptx::cp_async_bulk_commit_group(); }

// Waits until at most kPending bulk groups of this thread still read their shared source.
template <int kPending>
__device__ __forceinline__ void tma_store_wait_read() {
  cuda::ptx::cp_async_bulk_wait_group_read(cuda::ptx::n32_t<kPending>{});
}

// Waits until at most kPending bulk groups of this thread are incomplete (writes done).
template <int kPending>
__device__ __forceinline__ void tma_store_wait() {
  cuda::ptx::cp_async_bulk_wait_group(cuda::ptx::n32_t<kPending>{});
}

// Makes this thread's prior generic-proxy shared-memory writes visible to the async proxy (TMA
// stores, wgmma operand reads); follow it with a barrier among the writers before the consumer.
__device__ __forceinline__ void fence_proxy_async_shared() { cuda::ptx::fence_proxy_async(cuda::ptx::space_shared); }

// Brings the tensor map into the cache ahead of its first use (a hint; generic address of a
// parameter / constant / global tensor map).
__device__ __forceinline__ void prefetch_tensor_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

}  // namespace kda::ptx
