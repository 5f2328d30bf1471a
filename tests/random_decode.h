// Synthetic decode problems (kda_decode_params) in host buffers: random bf16 token inputs (normal),
// A_log and dt_bias uniform [0, 1), a random state pool (fp32 or bf16, normal) and slot indices
// (distinct slots, a random permutation), optionally num_accepted_tokens and cu_seqlens. Shared by
// the host tests (test_decode_cpu.cpp) and the GPU tests (tests/gpu/test_gpu_decode.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "flash_kda/flash_kda.h"

namespace kda::test {

struct DecodeSpec {
  int64_t B = 4, T = 1, H = 2, HV = 2;
  int64_t slots = 8;
  kda_dtype pool = KDA_DTYPE_F32;
  kda_gate gate = KDA_GATE_BOUNDED;
  float lower_bound = -5.0f;
  bool with_A_log = true, with_dt_bias = true;
  int idx_dims = 1;      // 0: absent (slot n), 1: [N], 2: [N, idx_cols]
  int64_t idx_cols = 0;  // 0: T (2-D indices)
  kda_dtype idx_dtype = KDA_DTYPE_I32;
  bool with_accepted = false;  // num_accepted_tokens (2-D indices), all = idx_cols until set
  kda_dtype accepted_dtype = KDA_DTYPE_I32;
  std::vector<int64_t> cu_seqlens;  // non-empty: B = 1, T = cu_seqlens.back() packed tokens
  float g_scale = 1.0f;             // g ~ N(0, g_scale²); PREACTIVATED: -|N(0, g_scale²)|
  uint64_t seed = 1;
};

struct RandomDecode {
  DecodeSpec spec;
  int64_t N = 0, cols = 1;
  std::vector<uint16_t> q, k, v, g, beta, out;  // bf16 bit patterns
  std::vector<float> A_log, dt_bias;
  std::vector<float> pool_f32;      // [slots, HV, 128, 128] when spec.pool is f32
  std::vector<uint16_t> pool_bf16;  // ... or bf16
  std::vector<int64_t> idx64, acc64, cu64;
  std::vector<int32_t> idx32, acc32;

  int64_t index(int64_t n, int64_t t) const { return idx64[n * cols + t]; }
  void set_index(int64_t n, int64_t t, int64_t slot);
  void set_accepted(int64_t n, int64_t a);
  // Contiguous views of the buffers (re-take after copying the object).
  kda_decode_params params();
};

RandomDecode make_random_decode(const DecodeSpec& spec);

// Bytes of one slot's states (HV x 128 x 128 values of the pool's dtype), and a pool slot's bytes.
size_t pool_slot_bytes(const RandomDecode& d);
const uint8_t* pool_slot(const RandomDecode& d, int64_t slot);

}  // namespace kda::test
