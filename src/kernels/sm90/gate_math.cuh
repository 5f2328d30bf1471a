// Per-element math of the chunk preparation: gate activations and beta. Host and device, so the
// unit tests (tests/test_kernel_math.cpp) check them on the CPU against float64 closed forms.
#pragma once

#include <cmath>

#if defined(__CUDACC__)
#include "src/ptx/fast_math.cuh"
#endif

#if defined(__CUDACC__)
#define KDA_HD __host__ __device__ __forceinline__
#else
#define KDA_HD inline
#endif

namespace kda::sm90 {

inline constexpr float kLog2e = 1.4426950408889634f;

enum class GateKind : int { kBounded = 0, kSoftplus = 1, kPreactivated = 2 };

// On the device: hardware exp2 and reciprocal (relative error ~1e-6 here, far below what bf16
// inputs carry); on the host (tests): the libm functions.
// 2^x: one ex2.approx.ftz on the device (relative error <= 2^-22; results below 2^-126 flush to
// 0, the correct limit for decays).
KDA_HD float exp2_fast(float x) {
#if defined(__CUDA_ARCH__)
  return ptx::ex2_approx_ftz(x);
#else
  return std::exp2(x);
#endif
}

KDA_HD float exp_fast(float x) { return exp2_fast(x * kLog2e); }

KDA_HD float reciprocal_fast(float x) {
#if defined(__CUDA_ARCH__)
  return __fdividef(1.0f, x);  // 0 for |x| > 2^126: the limit we want
#else
  return 1.0f / x;
#endif
}

KDA_HD float sigmoidf_stable(float x) {
  // 1 / (1 + e^-x); for x -> -inf, e^-x -> inf and the reciprocal -> 0 (no NaN).
  return reciprocal_fast(1.0f + exp_fast(-x));
}

KDA_HD float softplusf_stable(float x) {
  // log(1 + e^x) without overflow: x + log1p(e^-x) for x > 0.
  return x > 0.0f ? x + log1pf(exp_fast(-x)) : log1pf(exp_fast(x));
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

// The bounded gate's log2-decay with its constants folded (the preparation kernel's form, six
// operations per element): lower_bound * sigmoid(exp(A_log) * (g + dt_bias)) * log2(e) =
// c2 / (1 + 2^((g + dt_bias) * nc1)) with nc1 = -exp(A_log) * log2(e) and c2 = lower_bound * log2(e).
// Equal to gate_log_decay<kBounded> * kLog2e up to float rounding. g + dt_bias is formed first: with
// a huge rate the product overflows to ±inf with the sign of g + dt_bias, the right limit (a folded
// g * nc1 + dt_bias * nc1 can add infinities of opposite signs, or lose the sign when one is clamped).
struct BoundedGateConstants {
  float nc1, c2;
};
KDA_HD BoundedGateConstants bounded_gate_constants(float exp_a_log, float lower_bound) {
  return BoundedGateConstants{-exp_a_log * kLog2e, lower_bound * kLog2e};
}
KDA_HD float bounded_log2_decay(float g, float dt_bias, const BoundedGateConstants& k) {
  return k.c2 * reciprocal_fast(1.0f + exp2_fast((g + dt_bias) * k.nc1));
}

// Overflow guards (docs/design.md §2.6). Each keeps NaN as NaN (a NaN input gives NaN outputs, as
// on the float64 path) and costs one select where it is applied.
//
// Floor of the per-token log2-decay of the unbounded gates (softplus, preactivated): 2^-256 is
// exactly 0 in fp32, the correct limit of the decay, and keeps every exponent the chunk forms from
// it (cumulative sums over 16 tokens and their differences, >= -4096) finite: a gate of +inf or a
// huge one gives a decay of exactly 0, never inf - inf = NaN.
inline constexpr float kMinLog2Decay = -256.0f;
KDA_HD float clamp_log2_decay(float a2) { return a2 < kMinLog2Decay ? kMinLog2Decay : a2; }

// exp(A_log) with A_log capped at 88 (e^88 = 1.65e38 < FLT_MAX): an infinite rate would turn a zero
// argument of the gate into inf · 0 = NaN.
inline constexpr float kMaxALog = 88.0f;
KDA_HD float exp_a_log_capped(float a_log) {
  return expf(a_log > kMaxALog ? kMaxALog : a_log);
}

// q and k rows whose sum of squares overflows fp32 (|x| of 2^60 and more) are normalised on the row
// scaled by this exact power of two: the largest element then lies in [2^-10, 2^58], the sum of
// 128 squares below 2^123, and the 1e-6 under the square root (2^-140 relative) is dropped.
inline constexpr float kL2RescaleFactor = 0x1p-70f;

KDA_HD float beta_activation(float x, bool sigmoid, bool neg_eigval) {
  float b = sigmoid ? sigmoidf_stable(x) : x;
  return neg_eigval ? 2.0f * b : b;
}

}  // namespace kda::sm90
