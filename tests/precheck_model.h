// The single pass's precheck on the host (src/kernels/sm90/single_pass_precheck.cuh): one candidate chunk's
// lower bound, max over the 128 key channels of the 16 tokens' bounded_log2_decay summed in token order, in
// float32 as the kernel forms it (libm's exp2 and division where the device has its approximations). The
// maximum drops a NaN channel, as the device's fmaxf does (NaN only when every channel is). Shared by the
// rule's soundness test (test_warmup_bound.cpp) and the device's check (gpu/test_gpu_precheck.cu).
#pragma once

#include <cmath>

#include "src/kernels/sm90/gate_math.cuh"

namespace kda::test {

// g_at(t, k): token t's (0..15) gate in channel k, as a float; dt_at(k): channel k's dt_bias.
template <class GateAt, class DtAt>
float precheck_chunk_lower_bound(GateAt g_at, DtAt dt_at, const sm90::BoundedGateConstants& gk) {
  float m = NAN;
  for (int k = 0; k < 128; ++k) {
    float s = 0.0f;
    for (int t = 0; t < 16; ++t) s += sm90::bounded_log2_decay(g_at(t, k), dt_at(k), gk);
    m = std::fmax(m, s);
  }
  return m;
}

}  // namespace kda::test
