// Synthetic KDA problems for the CPU tests: random bf16 inputs (normal), A_log and dt_bias
// uniform [0, 1), optional states of either dtype and optional cu_seqlens, in host buffers with
// contiguous kda_fwd_params describing them.
#pragma once

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "flash_kda/flash_kda.h"

namespace kda::test {

struct ProblemSpec {
  int64_t B = 1, T = 32, H = 1, HV = 1;
  kda_gate gate = KDA_GATE_BOUNDED;
  float lower_bound = -5.0f;
  bool with_A_log = true, with_dt_bias = true;
  kda_dtype initial_state = KDA_DTYPE_F32;  // KDA_DTYPE_NONE: absent
  kda_dtype final_state = KDA_DTYPE_F32;    // KDA_DTYPE_NONE: not requested
  std::vector<int64_t> cu_seqlens;          // empty: N = B sequences of T tokens
  kda_dtype cu_dtype = KDA_DTYPE_I64;
  int32_t context_split = 0;  // kda_fwd_params.context_split (GPU plan; 0 = automatic)
  int32_t context_method = KDA_CONTEXT_AUTO;  // kda_fwd_params.context_method
  int32_t context_warmup_chunks = 0;          // kda_fwd_params.context_warmup_chunks (testing)
  // Slowly decaying key channels (spec §7's long-memory inputs): in the value heads of the bit mask
  // slow_heads, every slow_every-th key channel of dt_bias is slow_dt_bias (0: none).
  int slow_every = 0;
  float slow_dt_bias = -8.0f;
  uint64_t slow_heads = ~uint64_t{0};
  float g_scale = 1.0f;  // g ~ N(0, g_scale²); PREACTIVATED: g = -|N(0, g_scale²)|
  uint64_t seed = 1;
};

// A fixed-length spec of B x T tokens, H query and HV value heads, the other fields their defaults.
inline ProblemSpec fixed_spec(int64_t B, int64_t T, int64_t H, int64_t HV, uint64_t seed) {
  ProblemSpec s;
  s.B = B;
  s.T = T;
  s.H = H;
  s.HV = HV;
  s.seed = seed;
  return s;
}

struct RandomProblem {
  ProblemSpec spec;
  int64_t N = 0;
  std::vector<uint16_t> q, k, v, g, beta, out;  // bf16 bit patterns
  std::vector<float> A_log, dt_bias;
  std::vector<float> initial_f32, final_f32;       // used when the state dtype is f32
  std::vector<uint16_t> initial_bf16, final_bf16;  // ... or bf16
  std::vector<int64_t> cu64;
  std::vector<int32_t> cu32;

  // Contiguous views of the buffers above (re-take after copying the object).
  kda_fwd_params params();
};

RandomProblem make_random_problem(const ProblemSpec& spec);

// What random_problem.cpp and random_decode.cpp draw alike, in this order from `rng`: n normal
// values of deviation sigma as bf16 (-|x| when negative, the pre-activated gate's sign).
std::vector<uint16_t> normal_bf16(std::mt19937_64& rng, int64_t n, float sigma, bool negative = false);

// Scales every 128-wide row of bf16 values to unit L2 norm (float64 sum of squares, each value
// divided by its root, rounded to bf16): q and k for qk_l2norm = 0. An all-zero row stays zero.
void unit_norm_bf16_rows(std::vector<uint16_t>* rows);

// The token inputs of B x T tokens (q, k: H heads; v, g, beta: HV heads), then A_log [HV] and
// dt_bias [HV, 128] ~ U[0, 1) when asked; out zeroed. The draw order is part of every seeded test.
struct TokenInputs {
  std::vector<uint16_t> q, k, v, g, beta, out;  // bf16 bit patterns
  std::vector<float> A_log, dt_bias;
};
TokenInputs draw_token_inputs(std::mt19937_64& rng, int64_t B, int64_t T, int64_t H, int64_t HV, kda_gate gate,
                              float g_scale, bool with_A_log, bool with_dt_bias);

// Moves drawn token inputs into the buffers of the same names of a problem (RandomProblem,
// RandomDecode).
template <typename Problem>
void take_token_inputs(TokenInputs&& x, Problem& p) {
  p.q = std::move(x.q);
  p.k = std::move(x.k);
  p.v = std::move(x.v);
  p.g = std::move(x.g);
  p.beta = std::move(x.beta);
  p.out = std::move(x.out);
  p.A_log = std::move(x.A_log);
  p.dt_bias = std::move(x.dt_bias);
}

}  // namespace kda::test
