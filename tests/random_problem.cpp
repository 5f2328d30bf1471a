// Synthetic KDA problems for the CPU tests (see random_problem.h).
#include "tests/random_problem.h"

#include <cmath>
#include <random>
#include <utility>

#include "reference/common.h"

namespace kda::test {

namespace {
constexpr int64_t D = 128;
}  // namespace

std::vector<uint16_t> normal_bf16(std::mt19937_64& rng, int64_t n, float sigma, bool negative) {
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<uint16_t> r(static_cast<size_t>(n));
  for (auto& x : r) {
    float f = dist(rng);
    x = reference::float_to_bf16(negative ? -std::fabs(f) : f);
  }
  return r;
}

TokenInputs draw_token_inputs(std::mt19937_64& rng, int64_t B, int64_t T, int64_t H, int64_t HV, kda_gate gate,
                              float g_scale, bool with_A_log, bool with_dt_bias) {
  TokenInputs x;
  std::uniform_real_distribution<float> unif(0.0f, 1.0f);
  x.q = normal_bf16(rng, B * T * H * D, 1.0f);
  x.k = normal_bf16(rng, B * T * H * D, 1.0f);
  x.v = normal_bf16(rng, B * T * HV * D, 1.0f);
  x.g = normal_bf16(rng, B * T * HV * D, g_scale, gate == KDA_GATE_PREACTIVATED);
  x.beta = normal_bf16(rng, B * T * HV, 1.0f);
  x.out.assign(static_cast<size_t>(B * T * HV * D), 0);
  if (with_A_log)
    for (int64_t i = 0; i < HV; ++i) x.A_log.push_back(unif(rng));
  if (with_dt_bias)
    for (int64_t i = 0; i < HV * D; ++i) x.dt_bias.push_back(unif(rng));
  return x;
}

void unit_norm_bf16_rows(std::vector<uint16_t>* rows) {
  for (size_t row = 0; row < rows->size() / D; ++row) {
    uint16_t* x = rows->data() + row * D;
    double ss = 0;
    for (int64_t c = 0; c < D; ++c) {
      const double v = reference::bf16_to_float(x[c]);
      ss += v * v;
    }
    if (!(ss > 0)) continue;
    for (int64_t c = 0; c < D; ++c)
      x[c] = reference::float_to_bf16(static_cast<float>(reference::bf16_to_float(x[c]) / std::sqrt(ss)));
  }
}

RandomProblem make_random_problem(const ProblemSpec& s) {
  RandomProblem p;
  p.spec = s;
  p.N = s.cu_seqlens.empty() ? s.B : static_cast<int64_t>(s.cu_seqlens.size()) - 1;
  std::mt19937_64 rng(s.seed);
  take_token_inputs(draw_token_inputs(rng, s.B, s.T, s.H, s.HV, s.gate, s.g_scale, s.with_A_log, s.with_dt_bias),
                    p);
  if (s.with_dt_bias && s.slow_every > 0)
    for (int64_t i = 0; i < s.HV * D; ++i)
      if ((s.slow_heads >> ((i / D) % 64) & 1u) && (i % D) % s.slow_every == 0) p.dt_bias[i] = s.slow_dt_bias;
  const int64_t state_numel = p.N * s.HV * D * D;
  std::normal_distribution<float> snorm(0.0f, 1.0f);
  if (s.initial_state == KDA_DTYPE_F32)
    for (int64_t i = 0; i < state_numel; ++i) p.initial_f32.push_back(snorm(rng));
  if (s.initial_state == KDA_DTYPE_BF16) p.initial_bf16 = normal_bf16(rng, state_numel, 1.0f);
  if (s.final_state == KDA_DTYPE_F32) p.final_f32.assign(static_cast<size_t>(state_numel), 0.0f);
  if (s.final_state == KDA_DTYPE_BF16) p.final_bf16.assign(static_cast<size_t>(state_numel), 0);
  for (int64_t c : s.cu_seqlens) {
    p.cu64.push_back(c);
    p.cu32.push_back(static_cast<int32_t>(c));
  }
  return p;
}

kda_fwd_params RandomProblem::params() {
  const ProblemSpec& s = spec;
  kda_fwd_params p;
  kda_fwd_params_init(&p);
  p.context_split = s.context_split;
  p.context_method = s.context_method;
  p.context_warmup_chunks = s.context_warmup_chunks;
  const int64_t qk_shape[4] = {s.B, s.T, s.H, D}, v_shape[4] = {s.B, s.T, s.HV, D};
  const int64_t state_shape[4] = {N, s.HV, D, D};
  p.q = kda_tensor_contiguous(q.data(), KDA_DTYPE_BF16, 4, qk_shape);
  p.k = kda_tensor_contiguous(k.data(), KDA_DTYPE_BF16, 4, qk_shape);
  p.v = kda_tensor_contiguous(v.data(), KDA_DTYPE_BF16, 4, v_shape);
  p.g = kda_tensor_contiguous(g.data(), KDA_DTYPE_BF16, 4, v_shape);
  p.beta = kda_tensor_contiguous(beta.data(), KDA_DTYPE_BF16, 3, v_shape);
  p.out = kda_tensor_contiguous(out.data(), KDA_DTYPE_BF16, 4, v_shape);
  if (!A_log.empty()) p.A_log = kda_tensor_contiguous(A_log.data(), KDA_DTYPE_F32, 1, &s.HV);
  if (!dt_bias.empty()) {
    const int64_t shape[2] = {s.HV, D};
    p.dt_bias = kda_tensor_contiguous(dt_bias.data(), KDA_DTYPE_F32, 2, shape);
  }
  if (s.initial_state == KDA_DTYPE_F32) p.initial_state = kda_tensor_contiguous(initial_f32.data(), KDA_DTYPE_F32, 4, state_shape);
  if (s.initial_state == KDA_DTYPE_BF16)
    p.initial_state = kda_tensor_contiguous(initial_bf16.data(), KDA_DTYPE_BF16, 4, state_shape);
  if (s.final_state == KDA_DTYPE_F32) p.final_state = kda_tensor_contiguous(final_f32.data(), KDA_DTYPE_F32, 4, state_shape);
  if (s.final_state == KDA_DTYPE_BF16) p.final_state = kda_tensor_contiguous(final_bf16.data(), KDA_DTYPE_BF16, 4, state_shape);
  if (!s.cu_seqlens.empty()) {
    const int64_t shape[1] = {static_cast<int64_t>(s.cu_seqlens.size())};
    p.cu_seqlens = s.cu_dtype == KDA_DTYPE_I32 ? kda_tensor_contiguous(cu32.data(), KDA_DTYPE_I32, 1, shape)
                                               : kda_tensor_contiguous(cu64.data(), KDA_DTYPE_I64, 1, shape);
  }
  p.gate = s.gate;
  p.lower_bound = s.lower_bound;
  return p;
}

}  // namespace kda::test
