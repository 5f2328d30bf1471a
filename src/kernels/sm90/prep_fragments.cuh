// What chunk_prep_kernel.cuh's phases are made of: element helpers (bf16 unpacking, the float
// tile's swizzled row map, hi/lo packing, the overflow-safe L2-norm path), T's columns (from
// unit_lower_inverse.h), and the tensor-core products of the record's wide operands (identity
// fragment, wide_product: X·Kd (+ Qd) over a warp's 32 key columns). Device only; the layouts are
// chunk_record.cuh's and record_fragments.cuh's.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "src/kernels/sm90/chunk_record.cuh"
#include "src/kernels/sm90/gate_math.cuh"
#include "src/kernels/sm90/record_fragments.cuh"
#include "src/kernels/sm90/unit_lower_inverse.h"
#include "src/ptx/mma.cuh"

namespace kda::sm90 {

namespace prep_detail {

__device__ __forceinline__ float bf16_bits_to_float(uint32_t bits16) { return __uint_as_float(bits16 << 16); }

__device__ __forceinline__ void unpack8_bf16(const uint4& u, float (&x)[8]) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    x[2 * e] = bf16_bits_to_float(w[e] & 0xffffu);
    x[2 * e + 1] = bf16_bits_to_float(w[e] >> 16);
  }
}

// Row-map accesses of a [16][kLd] float tile: thread vec owns the eight floats [8·vec, 8·vec + 8)
// of a row, two 16-byte chunks. In a plain row, the quarter warp vec = 0..7 would hit only four
// 16-byte bank groups per access (2-way conflicts). With kSwizzle, 16-byte chunk c of a row is
// stored at c ^ ((c >> 3) & 1), i.e. column x at tile_col(x) = x ^ (((x >> 5) & 1) << 2): both
// accesses of the quarter warp then hit eight different bank groups, and a warp reading 32
// consecutive columns (the column map) still reads one permuted 128-byte line. The unbounded
// gates' column loops read the tiles at a common column, so they keep the plain layout.
template <bool kSwizzle>
__device__ __forceinline__ int tile_col(int x) {
  return kSwizzle ? x ^ (((x >> 5) & 1) << 2) : x;
}
template <bool kSwizzle>
__device__ __forceinline__ void row8_store(float* row, int vec, const float (&x)[8]) {
  *reinterpret_cast<float4*>(row + tile_col<kSwizzle>(8 * vec)) = make_float4(x[0], x[1], x[2], x[3]);
  *reinterpret_cast<float4*>(row + tile_col<kSwizzle>(8 * vec + 4)) = make_float4(x[4], x[5], x[6], x[7]);
}
template <bool kSwizzle>
__device__ __forceinline__ void row8_load(const float* row, int vec, float (&x)[8]) {
  const float4 lo = *reinterpret_cast<const float4*>(row + tile_col<kSwizzle>(8 * vec));
  const float4 hi = *reinterpret_cast<const float4*>(row + tile_col<kSwizzle>(8 * vec + 4));
  x[0] = lo.x; x[1] = lo.y; x[2] = lo.z; x[3] = lo.w;
  x[4] = hi.x; x[5] = hi.y; x[6] = hi.z; x[7] = hi.w;
}

__device__ __forceinline__ uint16_t float_to_bf16_bits(float x) {
  __nv_bfloat16 h = __float2bfloat16_rn(x);
  return *reinterpret_cast<uint16_t*>(&h);
}

// A float as an int32 with the same order (for integer max reductions); not for NaN.
__device__ __forceinline__ int32_t float_order_key(float x) {
  const int32_t b = __float_as_int(x);
  return b >= 0 ? b : b ^ 0x7fffffff;
}
__device__ __forceinline__ float float_from_order_key(int32_t k) { return __int_as_float(k >= 0 ? k : k ^ 0x7fffffff); }

__device__ __forceinline__ float load_scalar(const void* p, int64_t idx, bool is_f32) {
  return is_f32 ? static_cast<const float*>(p)[idx] : bf16_bits_to_float(static_cast<const uint16_t*>(p)[idx]);
}

// Eight floats as a 16-byte chunk of bf16: the hi part, and optionally the lo part (x − hi).
__device__ __forceinline__ uint4 pack8(const float (&x)[8]) {
  return make_uint4(ptx::pack_bf16x2(x[0], x[1]), ptx::pack_bf16x2(x[2], x[3]), ptx::pack_bf16x2(x[4], x[5]),
                    ptx::pack_bf16x2(x[6], x[7]));
}
__device__ __forceinline__ void pack8_split(const float (&x)[8], uint4& hi, uint4& lo) {
  uint32_t h[4], l[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) ptx::split_bf16x2_bits(x[2 * e], x[2 * e + 1], h[e], l[e]);
  hi = make_uint4(h[0], h[1], h[2], h[3]);
  lo = make_uint4(l[0], l[1], l[2], l[3]);
}

// The rare path of the L2 norm: rows (16 lanes each) whose sum of squares is not finite are
// scaled by kL2RescaleFactor (exact) and summed again; their eps becomes 0. Called by all 32
// lanes of the warp (shuffles); rows that did not overflow keep their values and sums.
__device__ __forceinline__ void rescale_row_norms(float (&q)[8], float (&k)[8], float& qss, float& kss, float& qeps,
                                               float& keps) {
  const bool qbig = !(qss <= 0x1.fffffep127f), kbig = !(kss <= 0x1.fffffep127f);
  float qs = 0.0f, ks = 0.0f;
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    if (qbig) q[e] *= kL2RescaleFactor;
    if (kbig) k[e] *= kL2RescaleFactor;
    qs = fmaf(q[e], q[e], qs);
    ks = fmaf(k[e], k[e], ks);
  }
#pragma unroll
  for (int off = 8; off >= 1; off >>= 1) {
    qs += __shfl_xor_sync(0xffffffffu, qs, off);
    ks += __shfl_xor_sync(0xffffffffu, ks, off);
  }
  if (qbig) qss = qs, qeps = 0.0f;
  if (kbig) kss = ks, keps = 0.0f;
}

}  // namespace prep_detail

// A fragment of the 16x16 identity (bf16): I·B adds B to an accumulator on the tensor cores.
__device__ __forceinline__ void identity_a(uint32_t (&a)[4], int lane) {
  const int g = ptx::Frag::grp(lane), c = 2 * ptx::Frag::qid(lane);
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int row = g + 8 * (r & 1), col = c + 8 * (r >> 1);
    a[r] = ptx::pack_bf16x2(row == col ? 1.0f : 0.0f, row == col + 1 ? 1.0f : 0.0f);
  }
}

// Columns of T = (I + A)^-1 (unit_lower_inverse_column_t, A stored transposed): in
// unit_lower_inverse.h, host and device. Both preparations (prep_chunk.cuh, warp_prep.cuh) scale a
// column by b_c into Tb.

// out[:, 32w .. 32w+32) = X·Kd (+ Qd when kAddQd) for a 16x16 X given as a bf16 A fragment, Kd
// from its bf16 tile: one pass; Qd added exactly as I·Qd_hi + I·Qd_lo; stored as bf16 in the record.
// (X and Kd as one bf16 each: the rounding emulation finds no measurable change in out or state
// against hi + lo pairs, docs/performance_notes.md "Where precision matters".) row_sq (optional,
// [16]): the squared norms of the result's rows over this warp's 32 columns, in float32 (kRowSq).
template <bool kAddQd, bool kRowSq = false, typename Smem>
__device__ __forceinline__ void wide_product(const uint32_t (&xh)[4], const Smem& sm, int warp, int lane,
                                             uint16_t* out, float* row_sq = nullptr) {
  float sq[2] = {0.0f, 0.0f};  // rows grp(lane) and grp(lane) + 8
  uint32_t ident[4];
  if constexpr (kAddQd) identity_a(ident, lane);
#pragma unroll
  for (int pp = 0; pp < 2; ++pp) {
    const int p = 2 * warp + pp;
    uint32_t kh[4], qh[4], ql[4];
    frag::load_b_kmajor(kh, reinterpret_cast<const unsigned char*>(sm.kd_hi), p, lane);
    if constexpr (kAddQd) {
      frag::load_b_kmajor(qh, reinterpret_cast<const unsigned char*>(sm.qd_hi), p, lane);
      frag::load_b_kmajor(ql, reinterpret_cast<const unsigned char*>(sm.qd_lo), p, lane);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int nt = 2 * p + h;
      float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      if constexpr (kAddQd) {
        const uint32_t bqh[2] = {qh[2 * h], qh[2 * h + 1]}, bql[2] = {ql[2 * h], ql[2 * h + 1]};
        ptx::mma_m16n8k16_bf16_f32(c, ident, bql);
        ptx::mma_m16n8k16_bf16_f32(c, ident, bqh);
      }
      const uint32_t bh[2] = {kh[2 * h], kh[2 * h + 1]};
      ptx::mma_m16n8k16_bf16_f32(c, xh, bh);
      frag::store_c_wide_bf16(out, c, nt, lane);
      if constexpr (kRowSq) {
        sq[0] = fmaf(c[0], c[0], fmaf(c[1], c[1], sq[0]));
        sq[1] = fmaf(c[2], c[2], fmaf(c[3], c[3], sq[1]));
      }
    }
  }
  if constexpr (kRowSq) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // the quad of lanes holding a row's columns
      sq[h] += __shfl_xor_sync(0xffffffffu, sq[h], 1);
      sq[h] += __shfl_xor_sync(0xffffffffu, sq[h], 2);
    }
    if (ptx::Frag::qid(lane) == 0) {
      row_sq[ptx::Frag::grp(lane)] = sq[0];
      row_sq[ptx::Frag::grp(lane) + 8] = sq[1];
    }
  }
}

}  // namespace kda::sm90
