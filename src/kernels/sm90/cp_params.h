// Parameters of the kernels of context parallelism across GPUs (src/kernels/sm90/transition_kernels.cuh),
// filled by src/launch/cp_sm90.cu. Plain data. A [128][128] float32 matrix is dense (row stride 128);
// the matrices of a tensor are addressed per (sequence or shard row, value head) by two strides in
// elements.
#pragma once

#include <cstdint>

namespace kda::sm90 {

// Strided bases of [rows][HV] dense 128 x 128 float32 matrices.
struct MatrixArray {
  float* data;  // nullptr: absent
  int64_t s0, s1;
};

// transition_fold_kernel: per unit (sequence seq_offset + u / HV, value head u % HV) the shard's
// D = fold of the segments' (Lp, Mp) from zero and Mᵀ = M0·M1⋯ (internal convention, §3.1), from
// cp_states [units][P][2][128][128] (slot 0: Lp, slot 1: Mp) of the transition pass; D written
// as it is, M transposed (public convention: S_end = S_start·Mᵀ + D).
struct TransitionFoldParams {
  const float* scratch;
  int32_t segments;              // P of the exact layout (>= 1)
  const int32_t* unit_fallback;  // bounded method: per unit 1 = P segments, 0 = one; nullptr: P segments
  int32_t HV;
  MatrixArray D, M;              // [N_t][HV]
};

// combine_transitions_kernel: per (sequence n, value head) S0 = initial state (or zeros),
// S(r+1) = S(r)·M_rᵀ + D_r for shards r = 0..R-1 (public convention, row r·N + n of D and M);
// start_states[r·N + n] = S(r), end_state[n] = S(R).
struct CombineTransitionsParams {
  MatrixArray D, M;                 // [R·N][HV] (read only)
  const void* initial_state;        // [N][HV][128][128] contiguous, f32 or bf16; nullptr: zeros
  int32_t initial_is_f32;
  MatrixArray start_states;         // [R·N][HV] or absent
  MatrixArray end_state;            // [N][HV] or absent
  int32_t R, N, HV;
};

}  // namespace kda::sm90
