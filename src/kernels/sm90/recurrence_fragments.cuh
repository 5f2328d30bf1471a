// The mma.sync recurrence's per-warp state helpers (chunk_recurrence_kernel.cuh): a warp's slice of
// the [V, K] state as m16n8 C fragments (load, store, identity), the named barrier of a row group
// and the exchange of partial products between the warps sharing its key columns. Device only.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "src/ptx/mma.cuh"

namespace kda::sm90 {

namespace recurrence_detail {

using ptx::Frag;

// Element offset in a [V, K] state of the pair (c[2h], c[2h+1]) of C fragment n-tile `nt`, rows v0..v0+15.
__device__ __forceinline__ int64_t state_index(int v0, int nt, int h, int lane) {
  const int row = v0 + Frag::grp(lane) + 8 * h;
  return static_cast<int64_t>(row) * 128 + nt * 8 + 2 * Frag::qid(lane);
}

// This warp's state: kTiles C fragments, n-tile nt0 + i covering key columns 8·(nt0 + i) .. +8 of
// rows v0 .. v0+15; zeros when base is null.
template <int kTiles>
__device__ __forceinline__ void load_state(float (&S)[kTiles][4], const void* base, bool is_f32, int v0, int nt0,
                                           int lane) {
#pragma unroll
  for (int i = 0; i < kTiles; ++i) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t idx = state_index(v0, nt0 + i, h, lane);
      if (base == nullptr) {
        S[i][2 * h] = S[i][2 * h + 1] = 0.0f;
      } else if (is_f32) {
        const float2 x = *reinterpret_cast<const float2*>(static_cast<const float*>(base) + idx);
        S[i][2 * h] = x.x;
        S[i][2 * h + 1] = x.y;
      } else {
        const __nv_bfloat162 x = *reinterpret_cast<const __nv_bfloat162*>(static_cast<const __nv_bfloat16*>(base) + idx);
        S[i][2 * h] = __low2float(x);
        S[i][2 * h + 1] = __high2float(x);
      }
    }
  }
}

template <int kTiles>
__device__ __forceinline__ void store_state(const float (&S)[kTiles][4], void* base, bool is_f32, int v0, int nt0,
                                            int lane) {
#pragma unroll
  for (int i = 0; i < kTiles; ++i) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t idx = state_index(v0, nt0 + i, h, lane);
      if (is_f32) {
        *reinterpret_cast<float2*>(static_cast<float*>(base) + idx) = make_float2(S[i][2 * h], S[i][2 * h + 1]);
      } else {
        *reinterpret_cast<__nv_bfloat162*>(static_cast<__nv_bfloat16*>(base) + idx) =
            __floats2bfloat162_rn(S[i][2 * h], S[i][2 * h + 1]);
      }
    }
  }
}

// The identity rows v0 .. v0+15 (as state rows) over this warp's kTiles n-tiles.
template <int kTiles>
__device__ __forceinline__ void identity_state(float (&S)[kTiles][4], int v0, int nt0, int lane) {
#pragma unroll
  for (int i = 0; i < kTiles; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = v0 + Frag::grp(lane) + 8 * (e >> 1);
      const int col = (nt0 + i) * 8 + 2 * Frag::qid(lane) + (e & 1);
      S[i][e] = row == col ? 1.0f : 0.0f;
    }
}

// Exchange slot of one warp: 16 floats per lane stored as four float4 planes [plane][lane], so
// consecutive lanes touch consecutive 16-byte words (conflict-free).
__device__ __forceinline__ void exchange_store(unsigned char* slot, const float (&x)[2][4], const float (&o)[2][4],
                                               int lane) {
  float4* f = reinterpret_cast<float4*>(slot);
  f[0 * 32 + lane] = make_float4(x[0][0], x[0][1], x[0][2], x[0][3]);
  f[1 * 32 + lane] = make_float4(x[1][0], x[1][1], x[1][2], x[1][3]);
  f[2 * 32 + lane] = make_float4(o[0][0], o[0][1], o[0][2], o[0][3]);
  f[3 * 32 + lane] = make_float4(o[1][0], o[1][1], o[1][2], o[1][3]);
}

__device__ __forceinline__ void exchange_add(const unsigned char* slot, float (&acc)[2][4], int plane0, int lane) {
  const float4* f = reinterpret_cast<const float4*>(slot);
#pragma unroll
  for (int nt = 0; nt < 2; ++nt) {
    const float4 v = f[(plane0 + nt) * 32 + lane];
    acc[nt][0] += v.x;
    acc[nt][1] += v.y;
    acc[nt][2] += v.z;
    acc[nt][3] += v.w;
  }
}

}  // namespace recurrence_detail

}  // namespace kda::sm90
