// mma.sync wrappers (SM80+ warp-level tensor-core products) and the register fragment contract.
//
// Fragment contract of mma.m16n8k16 (PTX ISA "Matrix Fragments for mma.m16n8k16"), with
// lane = threadIdx.x % 32, grp = lane / 4 (0..7), qid = lane % 4 (0..3):
//   A (16x16, row-major, bf16x2 registers a[0..3]):
//     a[0] = A[grp    ][2*qid .. 2*qid+1]     a[1] = A[grp + 8][2*qid .. 2*qid+1]
//     a[2] = A[grp    ][2*qid+8 .. +9]        a[3] = A[grp + 8][2*qid+8 .. +9]
//   B (16x8, "col": element pairs consecutive in k, bf16x2 registers b[0..1]):
//     b[0] = B[2*qid .. 2*qid+1][grp]         b[1] = B[2*qid+8 .. +9][grp]
//   C/D (16x8, float c[0..3]):
//     c[0..1] = C[grp][2*qid .. 2*qid+1]      c[2..3] = C[grp + 8][2*qid .. 2*qid+1]
// The C fragments of two adjacent 16x8 tiles (columns 0-7 and 8-15) packed to bf16 pairs are the
// A fragment of the 16x16 tile they form: a = {pack(c0[0],c0[1]), pack(c0[2],c0[3]),
// pack(c1[0],c1[1]), pack(c1[2],c1[3])}. tests/gpu/test_ptx.cu checks all of this against a CPU matmul.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace kda::ptx {

// Fragment coordinates (host and device), used by the kernels and checked by the tests.
struct Frag {
  __host__ __device__ static constexpr int grp(int lane) { return lane >> 2; }
  __host__ __device__ static constexpr int qid(int lane) { return lane & 3; }
  // Row and column of accumulator element r (0..3) of a 16x8 C fragment.
  __host__ __device__ static constexpr int c_row(int lane, int r) { return grp(lane) + ((r >> 1) << 3); }
  __host__ __device__ static constexpr int c_col(int lane, int r) { return (qid(lane) << 1) + (r & 1); }
};

// D = A * B + C, m16n8k16, bf16 inputs, fp32 accumulators (in place on d).
__device__ __forceinline__ void mma_m16n8k16_bf16_f32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  // Not volatile: a pure register operation the compiler may schedule freely (ldmatrix and the
  // barriers stay volatile, so no mma can move across the shared-memory accesses it depends on).
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  __trap();  // compiled for an architecture without bf16 mma: fail loudly
#endif
}

// Two floats to a bf16x2 register (round to nearest even); `lo` goes to the low half (lower column).
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

// Split x into bf16 hi + lo with x ≈ hi + lo to ~16 bits: hi = bf16(x), lo = bf16(x - hi).
__device__ __forceinline__ void split_bf16x2(float x0, float x1, uint32_t& hi, uint32_t& lo) {
  __nv_bfloat162 h = __floats2bfloat162_rn(x0, x1);
  float2 hf = __bfloat1622float2(h);
  __nv_bfloat162 l = __floats2bfloat162_rn(x0 - hf.x, x1 - hf.y);
  hi = *reinterpret_cast<uint32_t*>(&h);
  lo = *reinterpret_cast<uint32_t*>(&l);
}

// The same bits (tests/gpu/test_ptx_math.cu), hi's halves widened to float by a shift and a mask: two
// instructions where __bfloat1622float2 takes four. The single pass's preparation uses it in its
// loops, chunk_prep_kernel in its row tiles (pack8_split, prep_fragments.cuh; spill-free there since
// version 53's 32-bit row offsets freed registers, 4 bytes before).
__device__ __forceinline__ void split_bf16x2_bits(float x0, float x1, uint32_t& hi, uint32_t& lo) {
  hi = pack_bf16x2(x0, x1);
  lo = pack_bf16x2(x0 - __uint_as_float(hi << 16), x1 - __uint_as_float(hi & 0xffff0000u));
}

// movmatrix.trans: the 8x8 b16 matrix whose fragment (row grp, columns 2·qid, +1) a lane holds,
// transposed, in the same fragment layout (an A fragment's register with k along rows becomes one with
// k along columns). Used by the single pass's preparation (warp_prep.cuh) and covered by its GPU tests.
__device__ __forceinline__ uint32_t movmatrix_trans(uint32_t x) {
  uint32_t y;
  asm("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
  return y;
}

// A fragment of a 16x16 tile from the C fragments of its two 16x8 halves (see the contract above).
__device__ __forceinline__ void c_pair_to_a(const float (&c0)[4], const float (&c1)[4], uint32_t (&a)[4]) {
  a[0] = pack_bf16x2(c0[0], c0[1]);
  a[1] = pack_bf16x2(c0[2], c0[3]);
  a[2] = pack_bf16x2(c1[0], c1[1]);
  a[3] = pack_bf16x2(c1[2], c1[3]);
}

// Same, as a bf16 hi + lo split (two A fragments whose sum is the fp32 tile to ~16 bits).
__device__ __forceinline__ void c_pair_to_a_split(const float (&c0)[4], const float (&c1)[4], uint32_t (&hi)[4],
                                                  uint32_t (&lo)[4]) {
  split_bf16x2(c0[0], c0[1], hi[0], lo[0]);
  split_bf16x2(c0[2], c0[3], hi[1], lo[1]);
  split_bf16x2(c1[0], c1[1], hi[2], lo[2]);
  split_bf16x2(c1[2], c1[3], hi[3], lo[3]);
}

}  // namespace kda::ptx
