// mma operand fragments from the chunk-record layouts (chunk_record.cuh) in shared memory, for one
// warp. Both kernels use them; tests/gpu/test_ptx.cu checks each against a CPU matmul.
//   [16][128] bf16 operands: "wide" (rows of 256 bytes, 16-byte chunks swizzled by row % 8; the
//   preparation's tiles) or, with kPanelBytes > 0, the record's two 128B-swizzled column panels of
//   kPanelBytes each (ChunkRecord::chunk_byte):
//     load_a_mmajor   A (m = row, k = column), k columns [16·ks, +16)
//     load_b_nmajor   B (n = row, k = column) for n-tiles 0 and 1, k columns [16·ks, +16)
//     load_b_nmajor_ntile  B (n = row, k = column) of one n-tile for two k-steps
//     load_b_kmajor   B (k = row, n = column) for n-tiles 2p and 2p+1 (columns [16p, +16))
//   [16][16] bf16 operands ("small", chunks swizzled by (row / 4) % 2):
//     load_b_small    B (n = row, k = column) for both n-tiles
//   [16][ld] float tiles: load_a_f32_split  A (m = row, k = column) as a bf16 hi + lo pair, load_a_f32
//     as one bf16 (ld even, 8-byte aligned tile; ld = 24 makes the 8-byte loads conflict-free)
#pragma once

#include <cstdint>

#include "src/kernels/sm90/chunk_record.cuh"
#include "src/ptx/ldmatrix.cuh"
#include "src/ptx/mma.cuh"

namespace kda::sm90::frag {

__device__ __forceinline__ void load_a_mmajor(uint32_t (&a)[4], const unsigned char* op, int ks, int lane) {
  const int m = lane >> 3, r = lane & 7;
  ptx::ldmatrix_x4(a, op + ChunkRecord::wide_chunk_byte(r + 8 * (m & 1), 2 * ks + (m >> 1)));
}

template <uint32_t kPanelBytes = 0>
__device__ __forceinline__ void load_b_nmajor(uint32_t (&b)[4], const unsigned char* op, int ks, int lane) {
  const int m = lane >> 3, r = lane & 7;
  ptx::ldmatrix_x4(b, op + ChunkRecord::chunk_byte<kPanelBytes>(r + 8 * (m >> 1), 2 * ks + (m & 1)));
}

// B fragments of one n-tile (8 n rows [8·nt, +8)) for two k-steps 2·kp and 2·kp + 1 of an [n][k]
// wide operand: {b[0], b[1]} for k-step 2·kp, {b[2], b[3]} for 2·kp + 1.
__device__ __forceinline__ void load_b_nmajor_ntile(uint32_t (&b)[4], const unsigned char* op, int nt, int kp,
                                                    int lane) {
  const int m = lane >> 3, r = lane & 7;
  ptx::ldmatrix_x4(b, op + ChunkRecord::wide_chunk_byte(8 * nt + r, 4 * kp + m));
}

template <uint32_t kPanelBytes = 0>
__device__ __forceinline__ void load_b_kmajor(uint32_t (&b)[4], const unsigned char* op, int p, int lane) {
  const int m = lane >> 3, r = lane & 7;
  ptx::ldmatrix_x4_trans(b, op + ChunkRecord::chunk_byte<kPanelBytes>(r + 8 * (m & 1), 2 * p + (m >> 1)));
}

__device__ __forceinline__ void load_b_small(uint32_t (&b)[4], const unsigned char* op, int lane) {
  const int m = lane >> 3, r = lane & 7;
  ptx::ldmatrix_x4(b, op + ChunkRecord::small_chunk_byte(r + 8 * (m >> 1), m & 1));
}

// A fragment of the 16x16 float tile t (row stride ld), optionally negated, split into bf16 hi + lo.
__device__ __forceinline__ void load_a_f32_split(const float* t, int ld, bool negate, int lane, uint32_t (&hi)[4],
                                                 uint32_t (&lo)[4]) {
  const int g = ptx::Frag::grp(lane), c = 2 * ptx::Frag::qid(lane);
  const float s = negate ? -1.0f : 1.0f;
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int row = g + 8 * (r & 1), col = c + 8 * (r >> 1);
    const float2 v = *reinterpret_cast<const float2*>(t + row * ld + col);
    ptx::split_bf16x2(s * v.x, s * v.y, hi[r], lo[r]);
  }
}

// Same, as one bf16 fragment (round to nearest).
__device__ __forceinline__ void load_a_f32(const float* t, int ld, bool negate, int lane, uint32_t (&a)[4]) {
  const int g = ptx::Frag::grp(lane), c = 2 * ptx::Frag::qid(lane);
  const float s = negate ? -1.0f : 1.0f;
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int row = g + 8 * (r & 1), col = c + 8 * (r >> 1);
    const float2 v = *reinterpret_cast<const float2*>(t + row * ld + col);
    a[r] = ptx::pack_bf16x2(s * v.x, s * v.y);
  }
}

// Stores a C fragment pair (n-tiles nt and nt+1 of a [16][128] result) as bf16 into a global
// record operand (wide layout), two adjacent columns per 4-byte store.
__device__ __forceinline__ void store_c_wide_bf16(uint16_t* op, const float (&c)[4], int nt, int lane) {
  const int g = ptx::Frag::grp(lane), col = nt * 8 + 2 * ptx::Frag::qid(lane);
  *reinterpret_cast<uint32_t*>(op + ChunkRecord::wide_index(g, col)) = ptx::pack_bf16x2(c[0], c[1]);
  *reinterpret_cast<uint32_t*>(op + ChunkRecord::wide_index(g + 8, col)) = ptx::pack_bf16x2(c[2], c[3]);
}

}  // namespace kda::sm90::frag
