// The preparation's shared memory and where it runs (prepare_chunk, prep_chunk.cuh).
//
// PrepSmem (bounded gate, 30 KB: six CTAs per SM): G [16][132] float (aliased in phases 6-7 by Wd and Qp,
// staged for 16-byte stores), Kd, Qd hi/lo, Ki hi/lo: 5 x [16][128] bf16 in the record layout (Ki
// aliased by A, M, Tb, P: 4 x [16][24] float once the phase-4 products are done), b: 16, the bound's
// partial sums (1.5 KB). Unbounded gates add k̂ and q̂ as [16][132] float.
#pragma once

#include <cstdint>

#include "src/kernels/sm90/gate_math.cuh"

namespace kda::sm90 {

template <GateKind kGate>
struct PrepSmem {
  static constexpr int kLd = 132;       // padded row length of the [16][128] float tiles (the column
                                        // loops of the unbounded gates read 4 rows at once)
  static constexpr int kSmallLd = 24;   // [16][16] float tiles: conflict-free 8-byte fragment loads
  static constexpr int kAtLd = 20;      // A transposed: a warp's phase-4 stores (8 rows i x 4 columns j
                                        // of one parity) hit 32 banks; rows of 16 gave 8 banks, 4-way
                                        // conflicts. Rows stay 16-byte aligned for phase 5's float4 reads
  static constexpr int kTile = 16 * 128;  // bf16 elements of a [16][128] tile (the wide layout)
  static constexpr bool kPairwise = kGate != GateKind::kBounded;
  union {
    float G[16 * kLd];         // per-element log2-decay, then its inclusive cumulative sum
    uint16_t wide_out[2][kTile];  // phases 6-7: Wd and Qp (wide layout), copied to the record at the end
  };
  uint16_t kd_hi[kTile], qd_hi[kTile], qd_lo[kTile];  // Kd as one bf16 (A, Wd, Qp); Qd as hi + lo (M, Qp)
  union {
    struct {
      uint16_t ki_hi[kTile], ki_lo[kTile];  // bounded gate, phases 3-4
    };
    struct {
      // phases 4-7; A transposed in rows of kAtLd floats (At[kAtLd j + i] = A[i][j], float4s in phase 5)
      alignas(16) float A[16 * kSmallLd];
      float M[16 * kSmallLd], Tb[16 * kSmallLd], P[16 * kSmallLd];
    };
  };
  float b[16];
  // Bounded warm-up's chunk bound (chunk_bounds != nullptr): per warp, the largest G[15, k] over its
  // key columns (float_order_key); per row and 8-column part, the squared norm of Kr; per warp, the
  // squared row norms of Wd over its key columns.
  int32_t bound[4];
  alignas(16) float kr_sq[16][20];  // [row][16-column part]; rows padded to 20 floats (fewer bank
                                    // conflicts on the per-row stores, version 54)
  float wd_sq[4][16];
  alignas(16) float khat[kPairwise ? 16 * kLd : 4];  // unbounded gates only
  float qhat[kPairwise ? 16 * kLd : 4];
};

// Where prepare_chunk runs and where its record goes. The default: the 128 threads of a CTA
// (__syncthreads) writing the record to global memory at `rec`. A kernel that prepares chunks beside
// other roles (issue 10's single pass; benchmarks/fused_piece_kernel.cuh) passes an environment whose
// threads are one warpgroup of a larger CTA (a named barrier) and whose `at` sends each record store
// (4 or 16 bytes, inside one 16-byte piece) to a shared-memory stage instead: `at(rec, dst)` gets the
// global address the store would have, `rec` + its byte offset in the record.
struct PrepCtaEnv {
  __device__ __forceinline__ int tid() const { return static_cast<int>(threadIdx.x); }
  __device__ __forceinline__ void sync() const { __syncthreads(); }
  template <typename T>
  __device__ __forceinline__ T* at(const uint8_t* /*rec*/, T* dst) const { return dst; }
};

}  // namespace kda::sm90
