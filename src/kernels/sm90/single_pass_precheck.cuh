// The single pass's precheck (docs/design.md §3.5, "The precheck"; build knob FLASH_KDA_SP_PRECHECK,
// single_pass_options.cuh): a bounded piece refused from its candidates' raw gate before any chunk is
// prepared, by warmup_rule.h's rule. The consumer warpgroup, idle until the first stage arrives, reads
// the kSinglePassWarmupCap candidate chunks' g (thread t: key channel t, 16 tokens a chunk), forms each
// chunk's summed log2-decays per channel with the preparation's own gate arithmetic
// (bounded_log2_decay, as elem_key_step), and takes the maximum over the channels: a lower bound of the
// bound the chunk's preparation would record (chunk_decay_bound). Where those lower bounds already fail
// the rule, so would the recorded ones, and the piece falls back whatever its preparation finds.
#pragma once

#include <cstdint>

#include "src/kernels/sm90/gate_math.cuh"
#include "src/kernels/sm90/kernel_params.h"
#include "src/kernels/sm90/sequence_map.cuh"
#include "src/kernels/sm90/single_pass_layout.h"
#include "src/kernels/sm90/warmup_rule.h"
#include "src/ptx/warpgroup.cuh"

namespace kda::sm90 {

// The consumer warpgroup's named barrier (the single pass meets no other: ids 1..15 are free there).
inline constexpr uint32_t kPrecheckBarrier = 1;

// Whether the piece whose first chunk is c0 (> kSinglePassWarmupCap: nearer the start a warm-up back to
// chunk 0 is exact and never fails) certainly falls back, from chunks c0 - kSinglePassWarmupCap .. c0 - 1
// of its unit, whole chunks (the pieces instance's only kind). g: key channel t of the unit's first token
// (g_tok apart), dtb: the head's dt_bias in shared memory, wmax: the consumer warps' maxima (shared).
// Every consumer thread t = 0..127 calls it and gets the same answer (one named barrier). Out of line, its
// arguments by value: inlined, the pieces instance grew by 744 instructions and spilled 20 bytes; out of
// line it is 423 instructions after the kernel's code, no spills (scripts/kernel_sizes.sh, the cubin's
// symbols). All 32 loads are in flight at once: the preparation warps wait for this answer, so one memory
// round trip, not one per chunk (a chunk at a time would save ~160 instructions of this cold code).
static __device__ __noinline__ bool precheck_fails(const uint16_t* g, int64_t g_tok, const float* A_log, float lower_bound,
                                                   int hv, int c0, const float* dtb, float* wmax, int t) {
  constexpr int kCap = kSinglePassWarmupCap;
  const float exp_a_log = A_log != nullptr ? exp_a_log_capped(A_log[hv]) : 1.0f;
  const BoundedGateConstants gk = bounded_gate_constants(exp_a_log, lower_bound);
  const float db = dtb[t];
  const int lane = t & 31, warp = t >> 5;
  g += static_cast<int64_t>(16 * (c0 - kCap)) * g_tok;
  uint16_t raw[16 * kCap];
#pragma unroll
  for (int i = 0; i < 16 * kCap; ++i) raw[i] = g[i * g_tok];
#pragma unroll
  for (int j = 0; j < kCap; ++j) {
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 16; ++i) s += bounded_log2_decay(__uint_as_float(static_cast<uint32_t>(raw[16 * j + i]) << 16), db, gk);
    // (fmaxf drops a NaN channel: the full rule fails such a chunk anyway, so either answer is sound.)
#pragma unroll
    for (int off = 16; off >= 1; off >>= 1) s = fmaxf(s, __shfl_xor_sync(0xffffffffu, s, off));
    if (lane == 0) wmax[warp * kCap + j] = s;
  }
  ptx::named_barrier_sync<kPrecheckBarrier, 128>();
  float lb[kCap];
#pragma unroll
  for (int j = 0; j < kCap; ++j)
    lb[j] = fmaxf(fmaxf(wmax[j], wmax[kCap + j]), fmaxf(wmax[2 * kCap + j], wmax[3 * kCap + j]));
  return warmup_certainly_fails<kCap>([&](int i) { return lb[kCap - 1 - i]; }, c0);
}

// The same for unit (span, hv) of the call (thread t: key channel t).
__device__ __forceinline__ bool precheck_fails(const PrepParams& pp, const SequenceSpan& span, int hv, int c0,
                                               const float* dtb, float (*wmax)[kSinglePassWarmupCap], int t) {
  const uint16_t* g = static_cast<const uint16_t*>(pp.g) + span.batch * pp.g_st.b +
                      static_cast<int64_t>(span.t0) * pp.g_st.t + hv * pp.g_st.h + t;
  return precheck_fails(g, pp.g_st.t, pp.A_log, pp.lower_bound, hv, c0, dtb, &wmax[0][0], t);
}

}  // namespace kda::sm90
