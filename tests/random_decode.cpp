// Synthetic decode problems (see random_decode.h).
#include "tests/random_decode.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <utility>

#include "tests/random_problem.h"

namespace kda::test {

namespace {
constexpr int64_t D = 128;
}  // namespace

void RandomDecode::set_index(int64_t n, int64_t t, int64_t slot) {
  idx64[n * cols + t] = slot;
  idx32[n * cols + t] = static_cast<int32_t>(slot);
}

void RandomDecode::set_accepted(int64_t n, int64_t a) {
  acc64[n] = a;
  acc32[n] = static_cast<int32_t>(a);
}

RandomDecode make_random_decode(const DecodeSpec& spec) {
  DecodeSpec s = spec;
  if (!s.cu_seqlens.empty()) {
    s.B = 1;
    s.T = s.cu_seqlens.back();
  }
  RandomDecode d;
  d.spec = s;
  d.N = s.cu_seqlens.empty() ? s.B : static_cast<int64_t>(s.cu_seqlens.size()) - 1;
  d.cols = s.idx_dims == 2 ? (s.idx_cols > 0 ? s.idx_cols : s.T) : 1;
  std::mt19937_64 rng(s.seed);
  take_token_inputs(draw_token_inputs(rng, s.B, s.T, s.H, s.HV, s.gate, s.g_scale, s.with_A_log, s.with_dt_bias),
                    d);
  const int64_t pool_numel = s.slots * s.HV * D * D;
  if (s.pool == KDA_DTYPE_F32) {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    d.pool_f32.resize(static_cast<size_t>(pool_numel));
    for (auto& x : d.pool_f32) x = nd(rng);
  } else {
    d.pool_bf16 = normal_bf16(rng, pool_numel, 1.0f);
  }
  // Distinct slots: a random permutation of the pool (slots >= N * cols), or slot n when fewer.
  std::vector<int64_t> perm(static_cast<size_t>(s.slots));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  d.idx64.resize(static_cast<size_t>(d.N * d.cols));
  d.idx32.resize(d.idx64.size());
  for (int64_t e = 0; e < d.N * d.cols; ++e) d.set_index(e / d.cols, e % d.cols, e < s.slots ? perm[e] : e % s.slots);
  d.acc64.assign(static_cast<size_t>(d.N), d.cols);
  d.acc32.assign(static_cast<size_t>(d.N), static_cast<int32_t>(d.cols));
  d.cu64 = s.cu_seqlens;
  return d;
}

kda_decode_params RandomDecode::params() {
  const DecodeSpec& s = spec;
  kda_decode_params p;
  kda_decode_params_init(&p);
  const int64_t qk_shape[4] = {s.B, s.T, s.H, D}, v_shape[4] = {s.B, s.T, s.HV, D};
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
  const int64_t pool_shape[4] = {s.slots, s.HV, D, D};
  p.state_pool = s.pool == KDA_DTYPE_F32 ? kda_tensor_contiguous(pool_f32.data(), KDA_DTYPE_F32, 4, pool_shape)
                                         : kda_tensor_contiguous(pool_bf16.data(), KDA_DTYPE_BF16, 4, pool_shape);
  const bool i64 = s.idx_dtype == KDA_DTYPE_I64;
  void* idx = i64 ? static_cast<void*>(idx64.data()) : static_cast<void*>(idx32.data());
  if (s.idx_dims == 1) p.state_indices = kda_tensor_contiguous(idx, s.idx_dtype, 1, &N);
  if (s.idx_dims == 2) {
    const int64_t shape[2] = {N, cols};
    p.state_indices = kda_tensor_contiguous(idx, s.idx_dtype, 2, shape);
  }
  if (s.with_accepted) {
    void* acc = s.accepted_dtype == KDA_DTYPE_I64 ? static_cast<void*>(acc64.data()) : static_cast<void*>(acc32.data());
    p.num_accepted_tokens = kda_tensor_contiguous(acc, s.accepted_dtype, 1, &N);
  }
  if (!cu64.empty()) {
    const int64_t shape[1] = {static_cast<int64_t>(cu64.size())};
    p.cu_seqlens = kda_tensor_contiguous(cu64.data(), KDA_DTYPE_I64, 1, shape);
  }
  p.gate = s.gate;
  p.lower_bound = s.lower_bound;
  return p;
}

size_t pool_slot_bytes(const RandomDecode& d) {
  return static_cast<size_t>(d.spec.HV * D * D) * (d.spec.pool == KDA_DTYPE_F32 ? 4 : 2);
}

const uint8_t* pool_slot(const RandomDecode& d, int64_t slot) {
  const uint8_t* base = d.spec.pool == KDA_DTYPE_F32 ? reinterpret_cast<const uint8_t*>(d.pool_f32.data())
                                                     : reinterpret_cast<const uint8_t*>(d.pool_bf16.data());
  return base + static_cast<size_t>(slot) * pool_slot_bytes(d);
}

}  // namespace kda::test
