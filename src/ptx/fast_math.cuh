// Hardware approximations of the special-function unit (SM80+), for per-element math where their
// error is far below what the bf16 inputs carry.
//   ex2_approx_ftz(x): 2^x, one ex2.approx.ftz.f32 (relative error <= 2^-22; results below 2^-126
//   flush to 0, the correct limit for decays).
//   rsqrt_approx_ftz(x): 1/sqrt(x), one rsqrt.approx.ftz.f32 (relative error <= 2^-22.9); rsqrtf's
//   result for every normal x, without its rescaling of subnormal arguments (which flush to 0 here,
//   giving +inf).
#pragma once

namespace kda::ptx {

__device__ __forceinline__ float ex2_approx_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float rsqrt_approx_ftz(float x) {
  float y;
  asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace kda::ptx
