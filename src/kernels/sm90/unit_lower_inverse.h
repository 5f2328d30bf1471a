// T = (I + A)^-1 for the strictly lower 16 x 16 A of a chunk, one column per lane, as both preparations
// compute it (chunk_prep_kernel's prep_chunk.cuh since version 52, the single pass's warp_prep.cuh since
// version 41; each scales it by b into Tb). Host and device, so that tests/test_kernel_math.cpp checks
// it on the CPU against the float64 inverse. (chunk_prep_kernel used a second, row form by forward
// substitution until version 51; the two measured even there: docs/performance_notes.md, version 52.)
#pragma once

#include <cmath>

#if defined(__CUDACC__)
#include "src/ptx/ldmatrix.cuh"
#define KDA_INV_HD __host__ __device__ __forceinline__
#define KDA_INV_UNROLL _Pragma("unroll")
#else
#define KDA_INV_HD inline
#define KDA_INV_UNROLL
#endif

namespace kda::sm90::prep_detail {

// Column c of T, A given transposed (At[kLd j + i] = A[i][j], rows of kLd floats, 16-byte aligned) and
// eliminated right-looking: once col[j] is known it is taken out of every later row at once, so that
// the 15 steps' multiply-adds are independent of each other within a step (the chain is 15 long rather
// than one per row's dot product), and column j of A is read as float4s on the device.
// kOrderedLoads (device): the column reads as loads that ptxas keeps in program order (ld.volatile,
// src/ptx/ldmatrix.cuh) rather than hoisting them all ahead of the steps: chunk_prep_kernel's fallback
// instance, at its 96 registers, spilled 4 bytes with the plain loads (ptxas -v, version 52).
// kLd: the row stride of At in floats (a multiple of 4, >= 16); chunk_prep_kernel pads its rows to 20
// so that phase 4's transposed stores do not all land in the same banks (version 54).
template <bool kOrderedLoads = false, int kLd = 16>
KDA_INV_HD void unit_lower_inverse_column_t(const float* At, int c, float (&col)[16]) {
  static_assert(kLd >= 16 && kLd % 4 == 0, "rows of At must hold 16 floats and stay 16-byte aligned");
  float acc[16];
KDA_INV_UNROLL
  for (int i = 0; i < 16; ++i) acc[i] = (i == c) ? 1.0f : 0.0f;
KDA_INV_UNROLL
  for (int j = 0; j < 15; ++j) {
    float a[16];
KDA_INV_UNROLL
    for (int q = (j + 1) / 4; q < 4; ++q) {
#if defined(__CUDA_ARCH__)
      const float4 v = kOrderedLoads ? ptx::ld_shared_f32x4_ordered(At + kLd * j + 4 * q)
                                     : reinterpret_cast<const float4*>(At + kLd * j)[q];
      a[4 * q] = v.x;
      a[4 * q + 1] = v.y;
      a[4 * q + 2] = v.z;
      a[4 * q + 3] = v.w;
#else
      for (int e = 0; e < 4; ++e) a[4 * q + e] = At[kLd * j + 4 * q + e];
#endif
    }
    col[j] = acc[j];
KDA_INV_UNROLL
    for (int i = j + 1; i < 16; ++i) acc[i] = fmaf(-a[i], col[j], acc[i]);
  }
  col[15] = acc[15];
}

}  // namespace kda::sm90::prep_detail

#undef KDA_INV_HD
#undef KDA_INV_UNROLL
