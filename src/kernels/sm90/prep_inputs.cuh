// Phase 1 of prepare_chunk (prep_chunk.cuh; docs/design.md §2.1), in the row map: thread t loads
// columns [8·(t%16), +8) of rows t/16 and t/16 + 8 of q, k and g (every global load first: one round trip),
// L2-normalises q and k into qn and kn (kept in registers until phase 3), writes the per-element
// log2-decay of the gate into G and beta into b. (Moved out of prep_chunk.cuh unchanged. scripts/same_code.py
// on the move: the bounded gate's PTX is the same up to register names, the unbounded gates' the same per
// basic block but for the order of two selects at the norms' rare path; ptxas then allocates registers
// differently, with the same instruction count.)
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "src/kernels/sm90/gate_math.cuh"
#include "src/kernels/sm90/kernel_params.h"
#include "src/kernels/sm90/prep_fragments.cuh"
#include "src/kernels/sm90/prep_smem.cuh"
#include "src/kernels/sm90/sequence_map.cuh"

namespace kda::sm90 {

// Chunk rows [tok0, tok0 + L) of batch row span.batch, query head hq, value head hv; tid: the thread
// (0..127), vec = tid % 16. kOff32: the 32-bit offsets where p.off32 allows (see prepare_chunk).
template <GateKind kGate, bool kOff32>
__device__ __forceinline__ void prep_load_rows(const PrepParams& p, PrepSmem<kGate>& sm, const SequenceSpan& span,
                                               int tok0, int L, int hq, int hv, int tid, int vec,
                                               float (&qn)[2][8], float (&kn)[2][8]) {
  using namespace prep_detail;
  using Smem = PrepSmem<kGate>;
  constexpr int kLd = Smem::kLd;
  constexpr bool kSwz = !Smem::kPairwise;  // G's row-map swizzle (bounded gate; see tile_col)
  uint4 qraw[2], kraw[2], graw[2][2];
  float dtb[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  // The thread's rows r0 and r0 + 8 (eight token strides further). Their element offsets in 32-bit
  // arithmetic when the host found every offset of q, k, g and beta, 16 tokens past the end included,
  // below 2^31 (PrepParams::off32: one IMAD a term, where a 64-bit product takes three), else in
  // 64 bits. A whole chunk (every chunk but a sequence's last) loads without predicates.
  const int r0 = tid >> 4;
  const uint16_t* qrow[2];
  const uint16_t* krow[2];
  int64_t goff[2];
  if (kOff32 && p.off32) {
    const int32_t t0 = tok0 + r0;
    const int32_t qo = span.batch * static_cast<int32_t>(p.q_st.b) + t0 * static_cast<int32_t>(p.q_st.t) +
                       hq * static_cast<int32_t>(p.q_st.h) + 8 * vec;
    const int32_t ko = span.batch * static_cast<int32_t>(p.k_st.b) + t0 * static_cast<int32_t>(p.k_st.t) +
                       hq * static_cast<int32_t>(p.k_st.h) + 8 * vec;
    const int32_t go = span.batch * static_cast<int32_t>(p.g_st.b) + t0 * static_cast<int32_t>(p.g_st.t) +
                       hv * static_cast<int32_t>(p.g_st.h) + 8 * vec;
    qrow[0] = p.q + qo;
    qrow[1] = p.q + (qo + 8 * static_cast<int32_t>(p.q_st.t));
    krow[0] = p.k + ko;
    krow[1] = p.k + (ko + 8 * static_cast<int32_t>(p.k_st.t));
    goff[0] = go;
    goff[1] = go + 8 * static_cast<int32_t>(p.g_st.t);
  } else {
    const int64_t t0 = tok0 + r0;
    qrow[0] = p.q + (span.batch * p.q_st.b + t0 * p.q_st.t + hq * p.q_st.h + 8 * vec);
    krow[0] = p.k + (span.batch * p.k_st.b + t0 * p.k_st.t + hq * p.k_st.h + 8 * vec);
    goff[0] = span.batch * p.g_st.b + t0 * p.g_st.t + hv * p.g_st.h + 8 * vec;
    qrow[1] = qrow[0] + 8 * p.q_st.t;
    krow[1] = krow[0] + 8 * p.k_st.t;
    goff[1] = goff[0] + 8 * p.g_st.t;
  }
  auto load_row = [&](int h) {
    qraw[h] = *reinterpret_cast<const uint4*>(qrow[h]);
    kraw[h] = *reinterpret_cast<const uint4*>(krow[h]);
    if (p.g_is_f32) {
      graw[h][0] = *reinterpret_cast<const uint4*>(static_cast<const float*>(p.g) + goff[h]);
      graw[h][1] = *reinterpret_cast<const uint4*>(static_cast<const float*>(p.g) + goff[h] + 4);
    } else {
      graw[h][0] = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(p.g) + goff[h]);
    }
  };
  if (L == 16) {
#pragma unroll
    for (int h = 0; h < 2; ++h) load_row(h);
  } else {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      qraw[h] = kraw[h] = graw[h][0] = graw[h][1] = make_uint4(0, 0, 0, 0);
      if (r0 + 8 * h < L) load_row(h);
    }
  }
  if (kGate != GateKind::kPreactivated && p.dt_bias != nullptr) {
    const float4 d0 = *reinterpret_cast<const float4*>(p.dt_bias + hv * 128 + 8 * vec);
    const float4 d1 = *reinterpret_cast<const float4*>(p.dt_bias + hv * 128 + 8 * vec + 4);
    dtb[0] = d0.x; dtb[1] = d0.y; dtb[2] = d0.z; dtb[3] = d0.w;
    dtb[4] = d1.x; dtb[5] = d1.y; dtb[6] = d1.z; dtb[7] = d1.w;
  }
  const float exp_a_log = p.A_log != nullptr ? exp_a_log_capped(p.A_log[hv]) : 1.0f;
  // Bounded gate: constants folded (gate_math.cuh, bounded_log2_decay).
  const BoundedGateConstants gk = bounded_gate_constants(exp_a_log, p.lower_bound);
  if (tid < 16) {
    float b = 0.0f;
    if (tid < L) {
      int64_t off;
      if (kOff32 && p.off32)
        off = span.batch * static_cast<int32_t>(p.beta_st.b) + (tok0 + tid) * static_cast<int32_t>(p.beta_st.t) +
              hv * static_cast<int32_t>(p.beta_st.h);
      else
        off = span.batch * p.beta_st.b + static_cast<int64_t>(tok0 + tid) * p.beta_st.t + hv * p.beta_st.h;
      b = beta_activation(load_scalar(p.beta, off, p.beta_is_f32), p.beta_sigmoid != 0, p.allow_neg_eigval != 0);
    }
    sm.b[tid] = b;
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = (tid >> 4) + 8 * h;
    float gx[8];
    unpack8_bf16(qraw[h], qn[h]);
    unpack8_bf16(kraw[h], kn[h]);
    if (p.g_is_f32) {
      const uint4 a = graw[h][0], c = graw[h][1];
      const uint32_t w[8] = {a.x, a.y, a.z, a.w, c.x, c.y, c.z, c.w};
#pragma unroll
      for (int e = 0; e < 8; ++e) gx[e] = __uint_as_float(w[e]);
    } else {
      unpack8_bf16(graw[h][0], gx);
    }
    float qss = 0.0f, kss = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      qss = fmaf(qn[h][e], qn[h][e], qss);
      kss = fmaf(kn[h][e], kn[h][e], kss);
    }
#pragma unroll
    for (int off = 8; off >= 1; off >>= 1) {  // reduce over the 16 lanes holding this row
      qss += __shfl_xor_sync(0xffffffffu, qss, off);
      kss += __shfl_xor_sync(0xffffffffu, kss, off);
    }
    // Overflow-safe norm: a row whose sum of squares overflowed (the butterfly leaves the same sum
    // on its 16 lanes) is scaled by 2^-70 and summed again, eps dropped (gate_math.cuh). Rare:
    // one vote per row pair on the common path, a warp-uniform branch.
    float qeps = 1e-6f, keps = 1e-6f;
    if (__any_sync(0xffffffffu, p.qk_l2norm && !(qss <= 0x1.fffffep127f && kss <= 0x1.fffffep127f)))
      rescale_row_norms(qn[h], kn[h], qss, kss, qeps, keps);
    // q carries the output scale from here on (q̂·scale: Qd, and M for the unbounded gates).
    const float qinv = (p.qk_l2norm ? rsqrtf(qss + qeps) : 1.0f) * p.scale;
    const float kinv = p.qk_l2norm ? rsqrtf(kss + keps) : 1.0f;
    float a[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      qn[h][e] *= qinv;
      kn[h][e] *= kinv;
      if constexpr (kGate == GateKind::kBounded)
        a[e] = r < L ? bounded_log2_decay(gx[e], dtb[e], gk) : 0.0f;
      else
        a[e] = r < L ? clamp_log2_decay(gate_log_decay<kGate>(gx[e] + dtb[e], exp_a_log, p.lower_bound) * kLog2e)
                     : 0.0f;
    }
    row8_store<kSwz>(&sm.G[r * kLd], vec, a);
    if constexpr (Smem::kPairwise) {
      row8_store<false>(&sm.khat[r * kLd], vec, kn[h]);
      row8_store<false>(&sm.qhat[r * kLd], vec, qn[h]);
    }
  }
}

}  // namespace kda::sm90
