// Typed register fragments over wgmma (src/ptx/wgmma.cuh): Acc<N>, the fp32 accumulator of one
// m64nN tile of a warpgroup, with the coordinates of each element (WgmmaAcc, wgmma_desc.h), the
// products that write it, and its conversion into the register A operand of a following wgmma.
//
// Chaining (the FlashAttention-3 trick): the accumulator columns 16s..16s+15 of thread t are at the
// same (row, column) positions as the register A operand of k-step s of an m64 wgmma (both are the
// mma.m16n8k16 layouts on rows 16w..16w+15 of warp w), so
//   O = (A1 B1) B2:  Acc<N1> p; p.mma_ss(...) over K1; wait; uint32_t a[4]; p.to_a(s, a);
//                    o.mma_rs(a, desc of k-step s of B2) for s = 0 .. N1/16 - 1
// needs no shared-memory round trip. tests/gpu/test_tile.cu checks it against the CPU.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "src/ptx/mma.cuh"  // pack_bf16x2
#include "src/ptx/wgmma.cuh"

namespace kda::tile {

template <int N>
struct Acc {
  static constexpr int kN = N;
  static constexpr int kCount = N / 2;  // floats per thread
  static constexpr int kKSteps = N / 16;  // register-A k-steps this tile feeds when chained
  float v[kCount];

  // Coordinates in the 64 x N tile of element i of warpgroup thread t (0..127).
  KDA_PTX_HD static constexpr int row(int t, int i) { return ptx::WgmmaAcc::row(t, i); }
  KDA_PTX_HD static constexpr int col(int t, int i) { return ptx::WgmmaAcc::col(t, i); }

  __device__ __forceinline__ void fill(float x) {
#pragma unroll
    for (int i = 0; i < kCount; ++i) v[i] = x;
  }
  __device__ __forceinline__ void fence_operand() { ptx::wgmma_fence_operand(v); }

  // this (+)= A B for one k-step: A and B from shared memory (descriptors).
  template <int kTransA, int kTransB>
  __device__ __forceinline__ void mma_ss(uint64_t desc_a, uint64_t desc_b, bool accumulate) {
    ptx::Wgmma<N>::template ss<kTransA, kTransB>(v, desc_a, desc_b, accumulate);
  }
  // this (+)= A B for one k-step: A from registers, B from shared memory.
  template <int kTransB>
  __device__ __forceinline__ void mma_rs(const uint32_t (&a)[4], uint64_t desc_b, bool accumulate) {
    ptx::Wgmma<N>::template rs<kTransB>(v, a, desc_b, accumulate);
  }

  // Columns 16s..16s+15 as the register A operand (bf16, round to nearest even) of k-step s of the
  // next product (WgmmaAcc::acc_index_of_a, checked on the host): a[0] rows r, cols c..c+1; a[1] rows
  // r+8; a[2] cols c+8..; a[3] rows r+8, cols c+8..
  __device__ __forceinline__ void to_a(int s, uint32_t (&a)[4]) const {
    using ptx::WgmmaAcc;
#pragma unroll
    for (int q = 0; q < 4; ++q)
      a[q] = ptx::pack_bf16x2(v[WgmmaAcc::acc_index_of_a(s, q, 0)], v[WgmmaAcc::acc_index_of_a(s, q, 1)]);
  }
  // Factors per column, two columns per entry: f[j] holds those of columns col(t, 4j) and col(t, 4j) + 1,
  // the columns of elements 4j..4j+3 (rows r and r + 8). load_col_factors reads thread t's from a row
  // of N floats (shared memory); mul_cols multiplies each element by its column's factor
  // (this · Diag(f)).
  static constexpr int kColPairs = kCount / 4;
  __device__ __forceinline__ static void load_col_factors(int t, const float* row, float2 (&f)[kColPairs]) {
#pragma unroll
    for (int j = 0; j < kColPairs; ++j) f[j] = *reinterpret_cast<const float2*>(row + col(t, 4 * j));
  }
  __device__ __forceinline__ void mul_cols(const float2 (&f)[kColPairs]) {
#pragma unroll
    for (int j = 0; j < kColPairs; ++j) {
      v[4 * j] *= f[j].x;
      v[4 * j + 1] *= f[j].y;
      v[4 * j + 2] *= f[j].x;
      v[4 * j + 3] *= f[j].y;
    }
  }
  // The same operand as a bf16 hi + lo pair (ptx::split_bf16x2: hi = bf16(x), lo = bf16(x - hi)):
  // two register-A operands whose products sum to ~16 significant bits of x.
  __device__ __forceinline__ void to_a_split(int s, uint32_t (&hi)[4], uint32_t (&lo)[4]) const {
    using ptx::WgmmaAcc;
#pragma unroll
    for (int q = 0; q < 4; ++q)
      ptx::split_bf16x2(v[WgmmaAcc::acc_index_of_a(s, q, 0)], v[WgmmaAcc::acc_index_of_a(s, q, 1)], hi[q], lo[q]);
  }
};

}  // namespace kda::tile
