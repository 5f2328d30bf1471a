// context_combine_kernel: the combine step of context parallelism (src/launch/plan.h). For each
// (sequence, value head) the start state of segment p+1 is S(p+1) = Sp·Mp + Lp (p = 1..P-2,
// S1 = E0), where Lp (segment p's end state from zero) sits in states slot p and is overwritten in
// place by S(p+1), and Mp is transitions slot p-1. Rows of S are independent, so a CTA owns
// kCombineRows rows of one unit and walks p sequentially, in float32 on CUDA cores (the products
// are exact to fp32 rounding, like the reference's state).
//
// With the bounded warm-up (plan.h), only units that fell back to the exact path are combined.
// Grid: units x 128 / kCombineRows CTAs (kCombineRows rows each). Block: 512 threads; thread
// (column j = t % 128, quarter q = t / 128) sums k in [32q, 32q + 32) for its rows; the quarters
// meet in shared memory. The next transition's 32 values per thread are loaded before the current
// step's sums (they do not depend on S), so each step costs its arithmetic and two barriers, not an
// L2 round trip.
#pragma once

#include <cstdint>

#include "src/kernels/sm90/kernel_params.h"
#include "src/ptx/grid_dependency.cuh"

namespace kda::sm90 {

// State rows per CTA (build-time knob; the result does not depend on it, the per-row arithmetic
// being the same). Each step's time is the CTA's chain of sums and barriers, about the same for 4
// and 8 rows; 4 rows made the 12-unit combine faster (T2048_H12_N1_LM: 28.1 -> 22.1 us; with 8 rows
// its 192 CTAs exceed one per SM) but double the CTAs of the launch that warm-up plans make without
// needing it (3% slower on small random-gate cases, docs/performance_notes.md): 8 stays the default.
#ifndef FLASH_KDA_COMBINE_ROWS
#define FLASH_KDA_COMBINE_ROWS 8
#endif
constexpr int kCombineRows = FLASH_KDA_COMBINE_ROWS;
constexpr int kCombineThreads = 512;

__global__ void __launch_bounds__(kCombineThreads) context_combine_kernel(CombineParams p) {
  constexpr int64_t kElems = 128 * 128;
  __shared__ float s[kCombineRows][128];
  __shared__ float part[3][kCombineRows][128];
  ptx::launch_dependents();
  ptx::wait_primary();  // pass 1 wrote the states and transitions
  const int P = p.segments;
  const int64_t unit = blockIdx.x / (128 / kCombineRows);
  const int r0 = (blockIdx.x % (128 / kCombineRows)) * kCombineRows;
  if (p.unit_fallback != nullptr && p.unit_fallback[unit] == 0) return;  // bounded warm-up held: no combine
  const int j = threadIdx.x & 127, q = threadIdx.x >> 7;
  float* states = p.cp_states + unit * (P - 1) * kElems;
  const float* transitions = p.cp_transitions + unit * (P - 2) * kElems;

  for (int i = threadIdx.x; i < kCombineRows * 128; i += kCombineThreads)
    s[i / 128][i % 128] = states[(r0 + i / 128) * 128 + i % 128];  // S1 = E0

  float m[32];
  auto load_m = [&](int step) {
    const float* M = transitions + static_cast<int64_t>(step - 1) * kElems + (32 * q) * 128 + j;
#pragma unroll
    for (int k = 0; k < 32; ++k) m[k] = M[k * 128];
  };
  load_m(1);
  for (int step = 1; step <= P - 2; ++step) {
    __syncthreads();  // s holds S(step)
    float* L = states + static_cast<int64_t>(step) * kElems;
    float acc[kCombineRows], lv[kCombineRows];
#pragma unroll
    for (int r = 0; r < kCombineRows; ++r) {
      acc[r] = 0.0f;
      lv[r] = q == 0 ? L[(r0 + r) * 128 + j] : 0.0f;  // issued early: its latency hides behind the sums
    }
#pragma unroll
    for (int k = 0; k < 32; ++k)
#pragma unroll
      for (int r = 0; r < kCombineRows; ++r) acc[r] = fmaf(s[r][32 * q + k], m[k], acc[r]);
    if (step + 1 <= P - 2) load_m(step + 1);
    if (q > 0)
#pragma unroll
      for (int r = 0; r < kCombineRows; ++r) part[q - 1][r][j] = acc[r];
    __syncthreads();
    if (q == 0) {
#pragma unroll
      for (int r = 0; r < kCombineRows; ++r) {
        const float v = ((acc[r] + part[0][r][j]) + (part[1][r][j] + part[2][r][j])) + lv[r];
        s[r][j] = v;
        L[(r0 + r) * 128 + j] = v;
      }
    }
  }
}

}  // namespace kda::sm90
