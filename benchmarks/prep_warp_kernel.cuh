// prep_warp_kernel: the library's warp preparation (src/kernels/sm90/warp_prep.cuh, the single pass's)
// as a kernel of its own (and prefetch_chunk_l2, a benchmark layout's L2 prefetch of a chunk's boxes), one 16-token chunk per warp writing the same chunk record as
// chunk_prep_kernel to global memory (RecordTo::kGlobal): what benchmarks/bench_prep_warp.cu times and
// checks against it. Not a kernel of the library.
#pragma once

#include "src/kernels/sm90/warp_prep.cuh"

namespace kda::bench_prep {

using namespace sm90::warp_prep;

// The same boxes brought into L2 only (one lane; no completion to wait for): cp.async.bulk.prefetch.tensor
// (fused_warp_kernel.cuh's kPrefetchNext, measured without gain).
template <bool kPartial = false>
__device__ __forceinline__ void prefetch_chunk_l2(const sm90::PrepParams& p, const CUtensorMap* qmap,
                                                  const CUtensorMap* kmap, const CUtensorMap* gmap, int64_t vc, int hv) {
  const ChunkCoords cc = chunk_coords<kPartial>(p, vc);
  const int seq = cc.seq, tok0 = cc.tok0;
  const CUtensorMap* maps[3] = {qmap, kmap, gmap};
#pragma unroll
  for (int m = 0; m < 3; ++m)
#pragma unroll
    for (int pn = 0; pn < 2; ++pn)
      asm volatile("cp.async.bulk.prefetch.tensor.4d.L2.global.tile [%0, {%1, %2, %3, %4}];\n" ::"l"(maps[m]),
                   "r"(64 * pn), "r"(hv), "r"(tok0), "r"(seq)
                   : "memory");
}

template <int NW, bool kPartial = false>
__global__ void __launch_bounds__(32 * NW) prep_warp_kernel(const __grid_constant__ CUtensorMap qmap,
                                                            const __grid_constant__ CUtensorMap kmap,
                                                            const __grid_constant__ CUtensorMap gmap,
                                                            sm90::PrepParams p) {
  extern __shared__ unsigned char smem_raw[];
  const uint32_t base = ptx::smem_addr(smem_raw);
  WarpSmem* all = reinterpret_cast<WarpSmem*>(smem_raw + (((base + 1023u) & ~1023u) - base));
  const int warp = threadIdx.x >> 5;
  const int64_t vc = static_cast<int64_t>(blockIdx.x) * NW + warp;
  const int hv = blockIdx.y;
  if (vc >= p.seq.num_vchunks) return;
  uint8_t* rec = p.records + (static_cast<int64_t>(hv) * p.seq.num_vchunks + vc) * ChunkRecord::kBytes;
  WarpSmem& s = all[warp];
  if ((threadIdx.x & 31) == 0) {
    ptx::mbar_init(&s.bar, 1);
    ptx::fence_barrier_init();
  }
  __syncwarp();
  prep_warp_issue<kPartial>(s.in, &s.bar, p, &qmap, &kmap, &gmap, chunk_coords<kPartial>(p, vc), hv, hv);
  prep_warp_chunk<RecordTo::kGlobal, 8, kPartial>(p, s.in, s.A, s.tb, &s.bar, chunk_coords<kPartial>(p, vc), hv, rec, 0);
}

}  // namespace kda::bench_prep
