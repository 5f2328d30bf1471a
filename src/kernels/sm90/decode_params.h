// Parameters of the decode kernels (decode_kernel.cuh, decode_check_kernel.cuh), filled by the
// launcher (src/launch/decode_sm90.cu). Plain data.
#pragma once

#include <cstdint>

#include "src/kernels/sm90/kernel_params.h"

namespace kda::sm90 {

struct DecodeParams {
  SequenceLayout seq;  // cu_seqlens (or N rows of T tokens), N, T, T_total (num_vchunks unused)
  const uint16_t* q;   // bf16 bits
  const uint16_t* k;
  const uint16_t* v;
  const void* g;     // bf16 or f32
  const void* beta;  // bf16 or f32
  uint16_t* out;
  Strides4 q_st, k_st, v_st, g_st, beta_st, out_st;
  const float* A_log;    // nullptr: exp(A_log) = 1
  const float* dt_bias;  // [HV * 128] or nullptr
  void* pool;            // [slots][HV][128][128] f32 or bf16 (by the kernel's template)
  int64_t pool_stride;   // elements from one slot to the next
  int64_t slots;
  const void* indices;  // nullptr: sequence n uses slot n
  int64_t idx_stride_n, idx_stride_t;
  const void* accepted;  // num_accepted_tokens [N] or nullptr
  int64_t accepted_stride;
  int32_t indices_i64, indices_2d, idx_cols, accepted_i64;
  int32_t H, HV, group;
  int32_t g_is_f32, beta_is_f32;
  int32_t beta_sigmoid, qk_l2norm, allow_neg_eigval;
  float scale, lower_bound;
  int32_t tok_cap;  // tokens per prepared block: min(longest possible sequence, kDecodeMaxTokBlock)
};

}  // namespace kda::sm90
