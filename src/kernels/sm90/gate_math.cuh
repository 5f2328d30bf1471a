// Per-element math of the chunk preparation: gate activations and beta. Host and device, so the
// unit tests (tests/test_kernel_math.cpp) check them on the CPU against float64 closed forms.
#pragma once

#include <cmath>

#if defined(__CUDACC__)
#define KDA_HD __host__ __device__ __forceinline__
#else
#define KDA_HD inline
#endif

namespace kda::sm90 {

enum class GateKind : int { kBounded = 0, kSoftplus = 1, kPreactivated = 2 };

inline constexpr float kLog2e = 1.4426950408889634f;

KDA_HD float sigmoidf_stable(float x) {
  // 1 / (1 + e^-x); for x -> -inf, e^-x -> inf and the quotient -> 0 (no NaN).
  return 1.0f / (1.0f + expf(-x));
}

KDA_HD float softplusf_stable(float x) {
  // log(1 + e^x) without overflow: x + log1p(e^-x) for x > 0.
  return x > 0.0f ? x + log1pf(expf(-x)) : log1pf(expf(x));
}

// Natural-log decay of one element. `x` is g (+ dt_bias for the activated forms).
template <GateKind kGate>
KDA_HD float gate_log_decay(float x, float exp_a_log, float lower_bound) {
  if constexpr (kGate == GateKind::kBounded) {
    return lower_bound * sigmoidf_stable(exp_a_log * x);
  } else if constexpr (kGate == GateKind::kSoftplus) {
    return -exp_a_log * softplusf_stable(x);
  } else {
    return x;
  }
}

KDA_HD float beta_activation(float x, bool sigmoid, bool neg_eigval) {
  float b = sigmoid ? sigmoidf_stable(x) : x;
  return neg_eigval ? 2.0f * b : b;
}

}  // namespace kda::sm90
