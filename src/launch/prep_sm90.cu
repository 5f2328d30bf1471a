// SM90 launcher of the preparation (chunk_prep_kernel): the sequence layout and the preparation's
// parameters from a validated problem, its grid (one CTA per (virtual chunk, value head), or the single
// pass's fallback modes) and its launch. fwd_sm90.cu launches it before the recurrence, cp_sm90.cu
// for kda_segment_transition, single_pass_sm90.cu's fallback through fwd_sm90.cu.
#include <cuda_runtime.h>

#include <algorithm>

#include "src/kernels/sm90/chunk_prep_kernel.cuh"
#include "src/kernels/sm90/single_pass_fallback.cuh"
#include "src/launch/fwd_workspace.h"
#include "src/launch/launch.h"
#include "src/launch/launch_util.cuh"

namespace kda::sm90 {

SequenceLayout make_sequence_layout(const Problem& pr) {
  SequenceLayout s{};
  s.cu_seqlens = pr.varlen ? pr.params->cu_seqlens.data : nullptr;
  s.cu_is_i64 = pr.varlen && pr.params->cu_seqlens.dtype == KDA_DTYPE_I64;
  s.N = static_cast<int32_t>(pr.N);
  s.T = static_cast<int32_t>(pr.T);
  s.T_total = static_cast<int32_t>(pr.T_total);
  s.num_vchunks = num_vchunks(pr);
  const int64_t per = (static_cast<int64_t>(s.T) + 15) / 16;  // chunks per batch row (fixed mode)
  if (!pr.varlen && per > 0 && s.num_vchunks <= (int64_t{1} << 32) / per - 1) {
    s.per_magic = fast_div_magic(static_cast<uint32_t>(per));
    s.per_fast = 1;
  }
  return s;
}

namespace {

// The single pass's fallback preparation (PrepParams::sp_fail) outside the listed mode (below; forced
// plans of more than kFallbackListMax units): about kFallbackPrepWaves waves of its instance's CTAs in
// all, each striding over its head's chunks, so that where units fell back each CTA prepares few chunks
// (one wave of this grid: T65536_H8_LM 16% slower, its CTAs of the heads that fell back doing all the
// work; measured with the programmatic launch below, 2026-12-02, docs/performance_notes.md, version 47).
// (Build knob, for measuring.)
#ifndef FLASH_KDA_FALLBACK_PREP_WAVES
#define FLASH_KDA_FALLBACK_PREP_WAVES 4
#endif
constexpr int64_t kFallbackPrepWaves = FLASH_KDA_FALLBACK_PREP_WAVES;
// The fallback preparation as an ordinary launch (0, since version 47), not a programmatic dependent of
// the single pass (1): it then starts once the single pass's grid is complete instead of parking its
// CTAs in griddepcontrol.wait on the SMs the pieces leave free and on each SM as its piece ends.
// Measured (three alternated rounds, 2026-12-02 ~12:44 UTC): T8192_H16_N1 -3% eager, -4% graph;
// T8192_H8 with the single pass forced -6% eager; T65536_H8_LM -2% and T8192_H8_LM (forced) -5% graph;
// the other cases even (docs/performance_notes.md, version 47). A build knob, for measuring.
#ifndef FLASH_KDA_FALLBACK_PDL
#define FLASH_KDA_FALLBACK_PDL 0
#endif

// The listed mode's grid (single_pass_fallback.cuh: few units, fixed-length): kFallbackListWaves waves
// of its instance's CTAs in one dimension, striding over the chunks of the units that fell back, so
// that the launch costs one wave of flag reads on decaying gates (ncu, T8192_H8 with the single pass
// forced: 3.3-3.4 us against 5.2 for the four waves of (columns, HV) before, version 49) and every CTA
// shares the work where some heads fall back (T8192_H8_LM forced: 50 against 54 us). (Build knob, for
// measuring: 4 waves were 1-3% slower on T8192_H16_N1 and T8192_H24_N1, docs/performance_notes.md.)
#ifndef FLASH_KDA_FALLBACK_LIST_WAVES
#define FLASH_KDA_FALLBACK_LIST_WAVES 1
#endif
constexpr int64_t kFallbackListWaves = FLASH_KDA_FALLBACK_LIST_WAVES;

template <GateKind kGate>
kda_status launch_prep(const PrepParams& pp, int64_t vchunks, int HV, cudaStream_t stream) {
  const int smem = static_cast<int>(sizeof(PrepSmem<kGate>));
  const bool listed = pp.sp_fail != nullptr && fallback_prep_listed(static_cast<int64_t>(pp.seq.N) * HV,
                                                                    pp.seq.cu_seqlens != nullptr);
  const int64_t fallback_ctas = (listed ? kFallbackListWaves : kFallbackPrepWaves) * sm_count() * kFallbackPrepCtasPerSm;
  const int64_t cols = pp.sp_fail == nullptr ? vchunks
                       : listed              ? std::min<int64_t>(vchunks * HV, fallback_ctas)
                                             : std::min<int64_t>(vchunks, (fallback_ctas + HV - 1) / HV);
  const dim3 grid(static_cast<unsigned>(cols), listed ? 1 : HV);
  // A programmatic dependent launch of the caller's previous kernel (the kernel waits for it first,
  // chunk_prep_kernel.cuh): the host's launch call is 0.4-0.7 us cheaper with the attribute
  // (flash_kda_bench_host, 2026-12-01), and that call is on every eager call's critical path.
  if constexpr (kGate == GateKind::kBounded) {  // the single pass's fallback (a warm-up plan: with bounds)
    if (pp.sp_fail != nullptr)
      return launch_with_smem<chunk_prep_kernel<kGate, true, true>>("chunk_prep_kernel", grid, 128, smem, stream,
                                                                    FLASH_KDA_FALLBACK_PDL != 0, pp);
  }
  if (pp.chunk_bounds != nullptr)  // the bounded warm-up's chunk bounds too
    return launch_with_smem<chunk_prep_kernel<kGate, true>>("chunk_prep_kernel", grid, 128, smem, stream, true, pp);
  return launch_with_smem<chunk_prep_kernel<kGate, false>>("chunk_prep_kernel", grid, 128, smem, stream, true, pp);
}

}  // namespace

PrepParams preparation_params(const Problem& pr) {
  const kda_fwd_params& a = *pr.params;
  PrepParams pp{};  // value-initialised: a field left unset is zero, never stale stack bytes
  pp.seq = make_sequence_layout(pr);
  pp.q = static_cast<const uint16_t*>(a.q.data);
  pp.k = static_cast<const uint16_t*>(a.k.data);
  pp.g = a.g.data;
  pp.beta = a.beta.data;
  pp.q_st = strides_of(a.q);
  pp.k_st = strides_of(a.k);
  pp.g_st = strides_of(a.g);
  pp.beta_st = strides_of(a.beta);
  pp.A_log = static_cast<const float*>(a.A_log.data);
  pp.dt_bias = static_cast<const float*>(a.dt_bias.data);
  pp.H = static_cast<int32_t>(pr.H);
  pp.HV = static_cast<int32_t>(pr.HV);
  pp.group = static_cast<int32_t>(pr.group());
  pp.group_magic = fast_div_magic(static_cast<uint32_t>(pp.group));
  pp.g_is_f32 = a.g.dtype == KDA_DTYPE_F32;
  pp.beta_is_f32 = a.beta.dtype == KDA_DTYPE_F32;
  pp.beta_sigmoid = a.beta_sigmoid != 0;
  pp.qk_l2norm = a.qk_l2norm != 0;
  pp.allow_neg_eigval = a.allow_neg_eigval != 0;
  pp.scale = static_cast<float>(a.scale);  // the kernels compute in fp32 (never bf16-rounded)
  pp.lower_bound = static_cast<float>(a.lower_bound);
  pp.off32 = offsets_fit_int32(a.q) && offsets_fit_int32(a.k) && offsets_fit_int32(a.g) && offsets_fit_int32(a.beta);
  return pp;
}

kda_status launch_preparation(const Problem& pr, void* workspace, float* chunk_bounds, kda_stream_t stream_handle,
                              uint8_t* kr_lo, int32_t* tail, const SinglePassLaunch* fallback) {
  cudaStream_t stream = reinterpret_cast<cudaStream_t>(stream_handle);
  const kda_fwd_params& a = *pr.params;
  PrepParams pp = preparation_params(pr);
  const SequenceLayout& seq = pp.seq;
  if (seq.num_vchunks == 0) return make_ok();
  pp.records = static_cast<uint8_t*>(workspace);
  pp.chunk_bounds = chunk_bounds;
  pp.kr_lo = kr_lo;
  pp.tail = tail;
  if (fallback != nullptr && fallback->piece_fail != nullptr) {
    pp.sp_fail = fallback->piece_fail;
    pp.sp_epoch = fallback->epoch;
    pp.sp_pieces = fallback->pieces;
  }
  switch (a.gate) {
    case KDA_GATE_BOUNDED: return launch_prep<GateKind::kBounded>(pp, seq.num_vchunks, pp.HV, stream);
    case KDA_GATE_SOFTPLUS: return launch_prep<GateKind::kSoftplus>(pp, seq.num_vchunks, pp.HV, stream);
    default: return launch_prep<GateKind::kPreactivated>(pp, seq.num_vchunks, pp.HV, stream);
  }
}

}  // namespace kda::sm90
