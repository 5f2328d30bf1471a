// Building blocks shared by the CPU reference paths (recurrence_f64.cpp, chunked_f32.cpp) and
// callable from tests: bf16 conversion, strided tensor access, clamped sequence ranges, the thread
// pool over (sequence, value head), the three gate forms, the L2 norm, the unit-lower-triangular
// inverse by forward substitution, and the test hooks that expose the unrounded results.
// Templates on the working precision R (double for the oracle, float for the chunked path).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <type_traits>

#include "reference/reference.h"
#include "src/core/problem.h"
#include "src/core/status.h"

namespace kda::reference {

// ---------------------------------------------------------------------------------------------
// bf16 <-> float / double (round to nearest, ties to even; NaN stays NaN)

inline float bf16_to_float(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

inline uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// Rounds a double straight to bf16 (one rounding: no double rounding through float).
uint16_t double_to_bf16(double x);

// x rounded to the nearest bf16 value, kept in float (the emulation of a bf16 operand).
inline float round_bf16(float x) { return bf16_to_float(float_to_bf16(x)); }

// ---------------------------------------------------------------------------------------------
// Strided tensor access. A token index runs over the B*T tokens of the batch (b = t / T, t % T).

// Element offset of (token, head) in a [B, T, heads, ...] tensor: the start of that row.
inline int64_t row_offset(const kda_tensor& t, int64_t token, int64_t head, int64_t T) {
  const int64_t b = token / T, tt = token % T;
  return b * t.stride[0] + tt * t.stride[1] + head * t.stride[2];
}

// Element i of a bf16 or f32 tensor at element offset `off`, as R.
template <class R>
inline R load_element(const kda_tensor& t, int64_t off) {
  if (t.dtype == KDA_DTYPE_BF16) return static_cast<R>(bf16_to_float(static_cast<const uint16_t*>(t.data)[off]));
  return static_cast<R>(static_cast<const float*>(t.data)[off]);
}

// The `n` contiguous elements of row (token, head) of a [B, T, heads, n] tensor.
template <class R>
inline void load_row(const kda_tensor& t, int64_t token, int64_t head, int64_t T, int64_t n, R* dst) {
  const int64_t off = row_offset(t, token, head, T);
  for (int64_t i = 0; i < n; ++i) dst[i] = load_element<R>(t, off + i);
}

// Writes row (token, head) of `out` ([B, T, HV, V] bf16), rounding to nearest even.
void store_out_row(const kda_tensor& out, int64_t token, int64_t head, int64_t T, int64_t n, const double* src);
void store_out_row(const kda_tensor& out, int64_t token, int64_t head, int64_t T, int64_t n, const float* src);

// State [V, K] of (sequence n, value head hv) of a contiguous [N, HV, V, K] tensor: loaded as R
// (zeros when the tensor is absent), stored with the tensor's dtype (bf16 rounded to nearest even).
template <class R>
void load_state(const Problem& pr, const kda_tensor& t, int64_t n, int64_t hv, R* S) {
  const int64_t count = pr.V * pr.K;
  if (t.data == nullptr) {
    for (int64_t i = 0; i < count; ++i) S[i] = R(0);
    return;
  }
  const int64_t base = (n * pr.HV + hv) * count;
  for (int64_t i = 0; i < count; ++i) S[i] = load_element<R>(t, base + i);
}
void store_state(const Problem& pr, const kda_tensor& t, int64_t n, int64_t hv, const double* S);
void store_state(const Problem& pr, const kda_tensor& t, int64_t n, int64_t hv, const float* S);

// ---------------------------------------------------------------------------------------------
// Sequences

struct SeqRange {
  int64_t bos = 0, eos = 0;  // tokens [bos, eos) of the B*T batch
};

// Sequence n. With cu_seqlens (host i32 or i64, contents unchecked) the range is clamped:
// bos = clamp(cu[n], 0, T_total), eos = clamp(cu[n+1], bos, T_total); never out of bounds.
SeqRange sequence_range(const Problem& pr, int64_t n);

// Runs fn(n, hv) for every sequence n < N and value head hv < HV on `num_threads` threads
// (<= 0: hardware concurrency). Each pair is independent, so the result does not depend on the
// schedule. Returns KDA_OK, or an error if a worker threw (e.g. out of memory).
kda_status for_each_seq_head(int64_t N, int64_t HV, int num_threads,
                             const std::function<void(int64_t n, int64_t hv)>& fn);

// ---------------------------------------------------------------------------------------------
// Gates, beta, L2 norm

template <class R>
inline R sigmoid(R x) {
  if (x >= R(0)) return R(1) / (R(1) + std::exp(-x));
  const R e = std::exp(x);
  return e / (R(1) + e);
}

// log(1 + e^x) without overflow for large x or loss for very negative x.
template <class R>
inline R softplus(R x) {
  if (x > R(0)) return x + std::log1p(std::exp(-x));
  return std::log1p(std::exp(x));
}

// The per-channel log-decay a (natural log, <= 0) of one gate form.
//   BOUNDED:       lower_bound * sigmoid(exp_A_log * (g + dt_bias))
//   SOFTPLUS:      -exp_A_log * softplus(g + dt_bias)
//   PREACTIVATED:  g
template <class R>
inline R gate_value(kda_gate gate, R g, R dt_bias, R exp_A_log, R lower_bound) {
  switch (gate) {
    case KDA_GATE_BOUNDED: return lower_bound * sigmoid(exp_A_log * (g + dt_bias));
    case KDA_GATE_SOFTPLUS: return -exp_A_log * softplus(g + dt_bias);
    case KDA_GATE_PREACTIVATED: break;
  }
  return g;
}

// y = x / sqrt(sum(x^2) + 1e-6); a zero vector gives zeros. y may alias x. Overflow-safe: when the
// sum of squares is not finite (float: |x| of 2^60 and more), the vector is scaled by an exact
// power of two first and eps, negligible there, is dropped (the kernel's rule, gate_math.cuh).
template <class R>
inline void l2_normalize(const R* x, R* y, int64_t n) {
  R ss = R(0);
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  if (!(ss <= std::numeric_limits<R>::max())) {
    const R f = std::is_same_v<R, float> ? R(0x1p-70) : R(0x1p-600);
    R s2 = R(0);
    for (int64_t i = 0; i < n; ++i) s2 += (x[i] * f) * (x[i] * f);
    const R inv = R(1) / std::sqrt(s2);
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * f) * inv;
    return;
  }
  const R inv = R(1) / std::sqrt(ss + R(1e-6));
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * inv;
}

// Overflow guards of the gates (the kernel's constants, src/kernels/sm90/gate_math.cuh; checked
// equal by tests/test_kernel_math.cpp). The float32 chunked path floors the per-token log2-decay
// at kMinLog2Decay (a decay of exactly 0 in float; cumulative sums stay finite); both paths cap
// A_log where exp(A_log) would overflow their precision (inf · 0 = NaN in the gate otherwise).
inline constexpr float kMinLog2Decay = -256.0f;
template <class R>
inline R exp_a_log_capped(R a_log) {
  constexpr R cap = std::is_same_v<R, float> ? R(88) : R(700);
  return std::exp(a_log > cap ? cap : a_log);  // NaN stays NaN
}

// ---------------------------------------------------------------------------------------------
// Unit-lower-triangular inverse: T = (I + A)^-1 for A strictly lower triangular (n x n, row
// major; entries on and above the diagonal are ignored), by forward substitution row by row:
//   T[i][j] = delta_ij - sum_{j <= m < i} A[i][m] T[m][j].
template <class R>
void unit_lower_inverse(const R* A, R* T, int n) {
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) T[i * n + j] = R(i == j ? 1 : 0);
    for (int j = 0; j < i; ++j) {
      R acc = R(0);
      for (int m = j; m < i; ++m) acc += A[i * n + m] * T[m * n + j];
      T[i * n + j] = -acc;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Per-token inputs of one value head, activated: q̂, k̂ (L2-normalised when qk_l2norm), v, the
// log-decay a (natural log) and b (sigmoid and doubling applied as the flags say).

template <class R>
struct HeadParams {
  kda_gate gate = KDA_GATE_BOUNDED;
  R exp_A_log = R(1);
  R lower_bound = R(0);
  R dt_bias[kHeadDim] = {};
};

template <class R>
HeadParams<R> head_params(const Problem& pr, int64_t hv) {
  const kda_fwd_params& p = *pr.params;
  HeadParams<R> hp;
  hp.gate = p.gate;
  hp.lower_bound = static_cast<R>(p.lower_bound);
  if (pr.has_A_log) hp.exp_A_log = exp_a_log_capped(static_cast<R>(static_cast<const float*>(p.A_log.data)[hv]));
  if (pr.has_dt_bias) {
    const float* db = static_cast<const float*>(p.dt_bias.data) + hv * pr.K;  // [HV, K] or [HV*K]
    for (int64_t k = 0; k < pr.K; ++k) hp.dt_bias[k] = static_cast<R>(db[k]);
  }
  return hp;
}

template <class R>
struct TokenInputs {
  R q[kHeadDim], k[kHeadDim], v[kHeadDim], a[kHeadDim];
  R b;
};

template <class R>
void load_token(const Problem& pr, const HeadParams<R>& hp, int64_t token, int64_t hv, TokenInputs<R>* x) {
  const kda_fwd_params& p = *pr.params;
  const int64_t h = pr.qk_head(hv);
  load_row(p.q, token, h, pr.T, pr.K, x->q);
  load_row(p.k, token, h, pr.T, pr.K, x->k);
  if (p.qk_l2norm) {
    l2_normalize(x->q, x->q, pr.K);
    l2_normalize(x->k, x->k, pr.K);
  }
  load_row(p.v, token, hv, pr.T, pr.V, x->v);
  load_row(p.g, token, hv, pr.T, pr.K, x->a);
  for (int64_t k = 0; k < pr.K; ++k) x->a[k] = gate_value(hp.gate, x->a[k], hp.dt_bias[k], hp.exp_A_log, hp.lower_bound);
  R b = load_element<R>(p.beta, row_offset(p.beta, token, hv, pr.T));
  if (p.beta_sigmoid) b = sigmoid(b);
  if (p.allow_neg_eigval) b *= R(2);
  x->b = b;
}

// One token of the recurrence (docs/design.md §1) on a state S [V, K] (row-major, K contiguous), in
// precision R: S <- S Diag(exp(a)); S <- S + b (v - S k̂) k̂ᵀ; o = scale S q̂ (o: V values).
// Shared by the forward recurrence (recurrence_f64.cpp) and the decode path (decode_f64.cpp).
template <class R>
void recurrence_token(const TokenInputs<R>& x, R scale, int64_t V, int64_t K, R* S, R* o) {
  R decay[kHeadDim];
  for (int64_t k = 0; k < K; ++k) decay[k] = std::exp(x.a[k]);
  for (int64_t v = 0; v < V; ++v) {
    R* s = &S[v * K];
    R sk = R(0);
    for (int64_t k = 0; k < K; ++k) {
      s[k] *= decay[k];
      sk += s[k] * x.k[k];
    }
    const R u = x.b * (x.v[v] - sk);
    R sq = R(0);
    for (int64_t k = 0; k < K; ++k) {
      s[k] += u * x.k[k];
      sq += s[k] * x.q[k];
    }
    o[v] = scale * sq;
  }
}

// ---------------------------------------------------------------------------------------------
// Test hooks: the same computations as the public entry points, also writing the unrounded
// results. out_exact is [B*T, HV, V] contiguous (rows outside every sequence are not written),
// state_exact is [N, HV, V, K]; either may be null. `out` and `final_state` of the params are
// written as by kda_fwd_cpu.
kda_status fwd_recurrence_f64_ex(const Problem& problem, int num_threads, double* out_exact, double* state_exact);
kda_status fwd_chunked_f32_ex(const Problem& problem, const ChunkedRounding& rounding, int num_threads,
                              float* out_exact, float* state_exact);

}  // namespace kda::reference
