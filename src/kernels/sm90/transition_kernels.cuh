// The float32 folds of context parallelism across GPUs (docs/design.md §3.4), on CUDA cores:
//
//   transition_fold_kernel       a shard's (D, M) from its segments' (Lp, Mp) (transition pass of
//                                chunk_recurrence_kernel): D = (…(L0·M1 + L1)·M2 + …) + L(P-1) and
//                                Mᵀ = M0·M1⋯M(P-1) (internal transitions: S_end = S_start·Mp + Lp);
//                                D written as it is, M transposed (S_end = S_start·Mᵀ + D).
//   combine_transitions_kernel   start states of R shards: S0 = initial state (or zeros),
//                                S(r+1) = S(r)·M_rᵀ + D_r; every S(r) and S(R) on request.
//
// Rows of a state are independent, so a CTA owns 8 rows of one matrix and walks the steps
// sequentially: thread (column j = t % 128, quarter q = t / 128) sums k in [32q, 32q + 32) for its
// 8 rows, the quarters meet in shared memory (as context_combine_kernel, §3.1). The summation order
// is fixed: results are deterministic. Grid: fold: units x 32 CTAs (16 for D's rows, 16 for the
// rows of Mᵀ); combine: N·HV x 16 CTAs. Block: 512 threads.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "src/kernels/sm90/cp_params.h"
#include "src/ptx/grid_dependency.cuh"

namespace kda::sm90 {

constexpr int kFoldRows = 8;
constexpr int kFoldThreads = 512;

namespace fold_detail {

constexpr int64_t kElems = 128 * 128;

// m[kk] = X[32q + kk][j] of a dense [128][128] X (coalesced over j).
__device__ __forceinline__ void load_column(float (&m)[32], const float* X, int j, int q) {
#pragma unroll
  for (int kk = 0; kk < 32; ++kk) m[kk] = X[(32 * q + kk) * 128 + j];
}

// m[kk] = X[j][32q + kk]: column j of Xᵀ (one row of X per thread, 16-byte loads).
__device__ __forceinline__ void load_row(float (&m)[32], const float* X, int j, int q) {
  const float4* row = reinterpret_cast<const float4*>(X + j * 128 + 32 * q);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float4 x = row[i];
    m[4 * i] = x.x;
    m[4 * i + 1] = x.y;
    m[4 * i + 2] = x.z;
    m[4 * i + 3] = x.w;
  }
}

// s[r][j] <- sum_k s[r][k]·m_j[k] + add[r0 + r][j] (add: a dense [128][128] or nullptr), where
// thread (j, q) holds m_j[32q + kk] in m[kk]. s must be complete on entry; it is on exit.
__device__ __forceinline__ void fold_step(float (&s)[kFoldRows][128], float (&part)[3][kFoldRows][128],
                                          const float (&m)[32], const float* add, int r0, int j, int q) {
  float acc[kFoldRows], lv[kFoldRows];
#pragma unroll
  for (int r = 0; r < kFoldRows; ++r) {
    acc[r] = 0.0f;
    lv[r] = (q == 0 && add != nullptr) ? add[(r0 + r) * 128 + j] : 0.0f;
  }
#pragma unroll
  for (int kk = 0; kk < 32; ++kk)
#pragma unroll
    for (int r = 0; r < kFoldRows; ++r) acc[r] = fmaf(s[r][32 * q + kk], m[kk], acc[r]);
  if (q > 0)
#pragma unroll
    for (int r = 0; r < kFoldRows; ++r) part[q - 1][r][j] = acc[r];
  __syncthreads();
  if (q == 0)
#pragma unroll
    for (int r = 0; r < kFoldRows; ++r) s[r][j] = ((acc[r] + part[0][r][j]) + (part[1][r][j] + part[2][r][j])) + lv[r];
  __syncthreads();
}

// Rows r0 .. r0+7 of s to a dense [128][128] destination.
__device__ __forceinline__ void store_rows(const float (&s)[kFoldRows][128], float* dst, int r0) {
  for (int i = threadIdx.x; i < kFoldRows * 128; i += kFoldThreads) dst[(r0 + i / 128) * 128 + i % 128] = s[i / 128][i % 128];
}

}  // namespace fold_detail

__global__ void __launch_bounds__(kFoldThreads) transition_fold_kernel(TransitionFoldParams p) {
  using namespace fold_detail;
  __shared__ float s[kFoldRows][128];
  __shared__ float part[3][kFoldRows][128];
  ptx::launch_dependents();
  ptx::wait_primary();  // the transition pass wrote the segments' (Lp, Mp)
  const int64_t unit = blockIdx.x / 32;
  const int c = blockIdx.x % 32;
  const int kind = c / 16;  // 0: rows of D; 1: rows of Mᵀ
  const int r0 = (c % 16) * kFoldRows;
  const int j = threadIdx.x & 127, q = threadIdx.x >> 7;
  const int segs = (p.unit_fallback != nullptr && p.unit_fallback[unit] == 0) ? 1 : p.segments;
  const float* base = p.scratch + unit * p.segments * 2 * kElems;  // [P][2][128 x 128]

  // Segment 0: 0·M0 + L0 = L0 (D rows); I·M0 = M0 (rows of Mᵀ).
  for (int i = threadIdx.x; i < kFoldRows * 128; i += kFoldThreads)
    s[i / 128][i % 128] = base[kind * kElems + (r0 + i / 128) * 128 + i % 128];
  __syncthreads();
  for (int seg = 1; seg < segs; ++seg) {
    float m[32];
    load_column(m, base + (2 * seg + 1) * kElems, j, q);
    fold_step(s, part, m, kind == 0 ? base + 2 * seg * kElems : nullptr, r0, j, q);
  }

  const int64_t n = unit / p.HV, hv = unit % p.HV;
  if (kind == 0) {
    store_rows(s, p.D.data + n * p.D.s0 + hv * p.D.s1, r0);
  } else {
    // Row v of Mᵀ is column v of M: M[i][r0 + r] = s[r][i] (8 consecutive floats per i).
    float* M = p.M.data + n * p.M.s0 + hv * p.M.s1;
    for (int idx = threadIdx.x; idx < kFoldRows * 128; idx += kFoldThreads) {
      const int i = idx / kFoldRows, r = idx % kFoldRows;
      M[i * 128 + r0 + r] = s[r][i];
    }
  }
}

__global__ void __launch_bounds__(kFoldThreads) combine_transitions_kernel(CombineTransitionsParams p) {
  using namespace fold_detail;
  __shared__ float s[kFoldRows][128];
  __shared__ float part[3][kFoldRows][128];
  const int64_t unit = blockIdx.x / 16;
  const int r0 = (blockIdx.x % 16) * kFoldRows;
  const int j = threadIdx.x & 127, q = threadIdx.x >> 7;
  const int64_t n = unit / p.HV, hv = unit % p.HV;

  for (int i = threadIdx.x; i < kFoldRows * 128; i += kFoldThreads) {
    const int64_t idx = (unit * 128 + r0 + i / 128) * 128 + i % 128;  // [N][HV][128][128]
    float x = 0.0f;
    if (p.initial_state != nullptr)
      x = p.initial_is_f32 ? static_cast<const float*>(p.initial_state)[idx]
                           : __bfloat162float(static_cast<const __nv_bfloat16*>(p.initial_state)[idx]);
    s[i / 128][i % 128] = x;
  }
  __syncthreads();
  for (int r = 0; r < p.R; ++r) {
    const int64_t row = static_cast<int64_t>(r) * p.N + n;
    if (p.start_states.data != nullptr) store_rows(s, p.start_states.data + row * p.start_states.s0 + hv * p.start_states.s1, r0);
    float m[32];
    load_row(m, p.M.data + row * p.M.s0 + hv * p.M.s1, j, q);
    fold_step(s, part, m, p.D.data + row * p.D.s0 + hv * p.D.s1, r0, j, q);
  }
  if (p.end_state.data != nullptr) store_rows(s, p.end_state.data + n * p.end_state.s0 + hv * p.end_state.s1, r0);
}

}  // namespace kda::sm90
