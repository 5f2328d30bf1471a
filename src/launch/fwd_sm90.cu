// SM90 forward launcher: grid and shared-memory sizes, kernel selection, the launches. The only host
// code that knows the kernels (src/kernels/sm90/*), with single_pass_sm90.cu and cp_sm90.cu; the
// workspace's layout is fwd_workspace.h's.
//
// Calls that the single pass takes (single_pass_sm90.cu, decided first in run_fwd) launch
// single_pass_kernel: whole, or in bounded pieces whose flags go to the workspace and whose units that
// fell back run again either on the single pass's whole sequences (a one-pass plan's own pieces, a
// warm-up plan with single_pass_redo; single_pass_fallback.cuh) or on the two-kernel path below (other
// warm-up plans). Otherwise, launches on the caller's stream: chunk_prep_kernel (token-parallel) writes
// the records; chunk_recurrence_kernel (sequence-parallel) reads them, in one pass, or for context
// parallelism in two passes around context_combine_kernel (in place, a bounded warm-up's pass 1 is
// followed by deferred_final_kernel). kda_fwd_prepared finds the records and bounds where
// kda_segment_transition's preparation left them (cp_sm90.cu). No allocation, no synchronisation, no
// host read of device data (except the opt-in check).
#include <cuda_runtime.h>

#include <algorithm>

#include "src/kernels/sm90/chunk_recurrence_kernel.cuh"
#include "src/kernels/sm90/chunk_recurrence_wgmma_kernel.cuh"
#include "src/kernels/sm90/context_combine_kernel.cuh"
#include "src/kernels/sm90/cu_seqlens_check_kernel.cuh"
#include "src/kernels/sm90/deferred_final_kernel.cuh"
#include "src/core/checked_math.h"
#include "src/launch/fwd_workspace.h"
#include "src/launch/launch.h"
#include "src/launch/launch_util.cuh"
#include "src/launch/plan.h"
#include "src/launch/tensor_map.h"

namespace kda::sm90 {
namespace {

// Warps sharing the key columns of a row group in the recurrence (1, 2 or 4): for split grids
// (vsplit > 1, latency-bound) and for full grids (vsplit = 1, throughput-bound). Build-time knobs
// so that variants can be timed against each other in one run (scripts/gpu_verify.sh,
// VARIANT_BUILDS); the defaults are the fastest measured on the H200 (docs/performance_notes.md).
#ifndef FLASH_KDA_COLUMN_SPLIT
#define FLASH_KDA_COLUMN_SPLIT 2
#endif
#ifndef FLASH_KDA_COLUMN_SPLIT_FULL
#define FLASH_KDA_COLUMN_SPLIT_FULL 1
#endif
// Whether grids with vsplit <= 2 (loaded SMs: throughput matters) carry the state operand as a bf16
// hi + lo pair (1) or as one bf16 (0: a third fewer tensor-core operations, ~2e-4 more relative
// state error). Grids with vsplit >= 4 (latency-bound) always use the pair.
#ifndef FLASH_KDA_SPLIT_STATE_FULL
#define FLASH_KDA_SPLIT_STATE_FULL 0
#endif
constexpr int kColumnSplit = FLASH_KDA_COLUMN_SPLIT;
constexpr int kColumnSplitFull = FLASH_KDA_COLUMN_SPLIT_FULL;
constexpr bool kSplitStateFull = FLASH_KDA_SPLIT_STATE_FULL != 0;
// Full grids (vsplit = 1, usually several waves of CTAs) run this many CTAs per SM: more warps to
// hide latency, at the price of half the registers and half the stage ring each.
#ifndef FLASH_KDA_FULL_GRID_CTAS_PER_SM
#define FLASH_KDA_FULL_GRID_CTAS_PER_SM 1
#endif
constexpr int kFullGridCtasPerSm = FLASH_KDA_FULL_GRID_CTAS_PER_SM;
// Slices of 128 or 64 value rows (vsplit 1, 2) on the wgmma recurrence (1, the default since
// 2026-12-01: 7-9% faster end to end, docs/performance_notes.md) or the mma.sync one (0, kept as a
// build variant until the wgmma kernel has been through more sessions; slices of 32 and 16 rows
// always run on mma.sync).
#ifndef FLASH_KDA_WGMMA_RECURRENCE
#define FLASH_KDA_WGMMA_RECURRENCE 1
#endif
// The wgmma recurrence's values by tensor copies (1, since version 37) or by cp.async of every piece
// (0: what a launch does when the driver rejects the tensor map; a build variant for measuring).
#ifndef FLASH_KDA_VALUE_TMA
#define FLASH_KDA_VALUE_TMA 1
#endif

template <int kRowGroups, int kColSplit, bool kSplitState = true, int kCtasPerSm = 1>
kda_status launch_recurrence(const RecurrenceParams& rp, int64_t ctas, cudaStream_t stream, bool dependent) {
  using Layout = RecurrenceLayout<kRowGroups, kColSplit, kCtasPerSm>;
  const dim3 grid(static_cast<unsigned>(ctas));
  if (rp.method == SplitMethod::kWarmup)
    return launch_with_smem<chunk_recurrence_kernel<kRowGroups, kColSplit, kSplitState, kCtasPerSm, true>>(
        "chunk_recurrence_kernel", grid, Layout::kThreads, static_cast<int>(Layout::kBytes), stream, dependent, rp);
  return launch_with_smem<chunk_recurrence_kernel<kRowGroups, kColSplit, kSplitState, kCtasPerSm, false>>(
      "chunk_recurrence_kernel", grid, Layout::kThreads, static_cast<int>(Layout::kBytes), stream, dependent, rp);
}

// The wgmma recurrence's tensor map of v (its kernel's v_map parameter): {V, HV, T, B} innermost
// first, boxes of 64 value rows x 1 head x 16 tokens x 1 batch row, 128B swizzle (the stage's VtTile).
// A dimension of size 1 gets a dense stride (the caller's may be anything there). False for a
// broadcast dimension (stride 0 over more than one element) and when the driver rejects the map: the
// kernel then copies the values by cp.async.
template <int kWG>
bool make_value_map(const RecurrenceParams& rp, CUtensorMap* map) {
  using L = WgmmaRecurrenceLayout<kWG>;
  const SequenceLayout& sq = rp.seq;
  const uint64_t T = sq.cu_seqlens != nullptr ? static_cast<uint64_t>(sq.T_total) : static_cast<uint64_t>(sq.T);
  const uint64_t B = sq.cu_seqlens != nullptr || sq.T <= 0 ? 1 : static_cast<uint64_t>(sq.T_total / sq.T);
  if (rp.v == nullptr || T == 0 || rp.HV <= 0) return false;
  const uint64_t dims[4] = {128, static_cast<uint64_t>(rp.HV), T, B};
  const int64_t given[3] = {rp.v_st.h, rp.v_st.t, rp.v_st.b};
  uint64_t strides[3];
  if (!head_box_strides(dims, given, strides)) return false;  // a broadcast (stride 0)
  static_assert(L::VtTile::kRows == 16 && L::VtTile::kCols == 64 && L::VtTile::kSwizzle == tile::Swizzle::k128B &&
                    kHeadBox[0] == 64 && kHeadBox[2] == 16,
                "the box is the stage's value tile");
  // The last map of this host thread is kept (serving loops and graph captures repeat the same v):
  // the encoding is a pure function of these arguments.
  struct Last {
    const void* base = nullptr;
    uint64_t dims[4] = {}, strides[3] = {};
    CUtensorMap map{};
    bool ok = false;
  };
  thread_local Last last;
  if (last.base == rp.v && std::equal(dims, dims + 4, last.dims) && std::equal(strides, strides + 3, last.strides)) {
    *map = last.map;
    return last.ok;
  }
  const bool ok = make_tensor_map_bf16(map, rp.v, 4, dims, strides, kHeadBox, tile::Swizzle::k128B).code == KDA_OK;
  last.base = rp.v;
  std::copy(dims, dims + 4, last.dims);
  std::copy(strides, strides + 3, last.strides);
  last.map = *map;
  last.ok = ok;
  return ok;
}

template <int kWG>
kda_status launch_recurrence_wgmma(const RecurrenceParams& rp, int64_t ctas, cudaStream_t stream, bool dependent) {
  using L = WgmmaRecurrenceLayout<kWG>;
  const dim3 grid(static_cast<unsigned>(ctas));
  const int smem = static_cast<int>(tile::smem_bytes<typename L::Storage>());
  CUtensorMap v_map{};
  const int32_t v_tma = FLASH_KDA_VALUE_TMA != 0 && make_value_map<kWG>(rp, &v_map) ? 1 : 0;
  if (rp.method == SplitMethod::kWarmup)
    return launch_with_smem<chunk_recurrence_wgmma_kernel<kWG, true>>("chunk_recurrence_wgmma_kernel", grid,
                                                                      L::kThreads, smem, stream, dependent, rp, v_map,
                                                                      v_tma);
  return launch_with_smem<chunk_recurrence_wgmma_kernel<kWG, false>>("chunk_recurrence_wgmma_kernel", grid,
                                                                     L::kThreads, smem, stream, dependent, rp, v_map,
                                                                     v_tma);
}

}  // namespace

// The recurrence plan (plan.h) for this problem on the current device. Slices of the 128 value rows
// per (sequence, head) give more independent chains (CTAs) when sequences x heads leave SMs idle,
// at the price of re-reading each chunk record once per slice (from L2); sequence parallelism
// splits long sequences into pieces or segments. The chain length is the longest possible sequence
// (B*T tokens when packed: the host never reads cu_seqlens). The last plan of each host thread is
// kept (thread-local: serving loops repeat shapes; nothing is shared between threads).
RecurrencePlan fwd_plan(const Problem& pr) {
  const int64_t tokens = pr.varlen ? pr.T_total : pr.T;
  PlanRequest r;
  r.units = pr.N * pr.HV;
  r.chunks = (tokens + 15) / 16;
  r.sms = sm_count();
  r.forced_segments = pr.params->context_split;
  r.method = pr.params->context_method;
  // The decay bound of spec §10 needs unit keys and b in [0, 1] (the device also checks b per chunk).
  r.warmup_valid = pr.params->qk_l2norm != 0 && pr.params->allow_neg_eigval == 0;
  thread_local PlanRequest last_request{};
  thread_local RecurrencePlan last_plan{};
  thread_local bool have_last = false;
  if (!(have_last && r.units == last_request.units && r.chunks == last_request.chunks && r.sms == last_request.sms &&
        r.forced_segments == last_request.forced_segments && r.method == last_request.method &&
        r.warmup_valid == last_request.warmup_valid)) {
    last_plan = plan_recurrence(r);
    last_request = r;
    have_last = true;
  }
  return last_plan;
}

namespace {

// chunk_recurrence_kernel with the configuration for `vsplit` value-row slices: warps per CTA =
// 128 / vsplit value rows in groups of 16; when the grid leaves SMs idle (vsplit > 1),
// kColumnSplit warps share each row group's key columns (shorter critical path per chunk, at the
// price of an exchange of partial sums).
// `dependent`: launched as a programmatic dependent of the previous kernel, which must be one of
// ours (the caller's kernels may still be writing the inputs the prologue reads).
kda_status launch_recurrence_for(const RecurrenceParams& rp, int64_t ctas, cudaStream_t stream, bool dependent) {
  constexpr int kCs = kColumnSplit;
  if constexpr (FLASH_KDA_WGMMA_RECURRENCE != 0) {
    // The mma.sync instances for 128 and 64 rows are not compiled at all here.
    switch (rp.vsplit) {
      case 1: return launch_recurrence_wgmma<2>(rp, ctas, stream, dependent);
      case 2: return launch_recurrence_wgmma<1>(rp, ctas, stream, dependent);
      case 4: return launch_recurrence<2, kCs>(rp, ctas, stream, dependent);
      default: return launch_recurrence<1, kCs>(rp, ctas, stream, dependent);
    }
  } else {
    switch (rp.vsplit) {
      case 1:
        return launch_recurrence<8, kColumnSplitFull, kSplitStateFull, kFullGridCtasPerSm>(rp, ctas, stream, dependent);
      case 2: return launch_recurrence<4, kCs, kSplitStateFull>(rp, ctas, stream, dependent);
      case 4: return launch_recurrence<2, kCs>(rp, ctas, stream, dependent);
      default: return launch_recurrence<1, kCs>(rp, ctas, stream, dependent);
    }
  }
}

}  // namespace

kda_status launch_recurrence_pass(const RecurrenceParams& rp, int64_t ctas, kda_stream_t stream, bool dependent) {
  return launch_recurrence_for(rp, ctas, reinterpret_cast<cudaStream_t>(stream), dependent);
}


namespace {

// The forward pass; `prepared`: the workspace already holds this problem's preparation (records and
// chunk bounds, from kda_segment_transition), so the recurrence starts at once, as an ordinary
// launch (the previous kernel in the stream is not the preparation).
kda_status run_fwd(const Problem& pr, const RecurrencePlan& plan, void* workspace, kda_stream_t stream_handle,
                   bool prepared) {
  cudaStream_t stream = reinterpret_cast<cudaStream_t>(stream_handle);
  const kda_fwd_params& a = *pr.params;
  const SequenceLayout seq = make_sequence_layout(pr);
  uint8_t* records = static_cast<uint8_t*>(workspace);

  const int64_t units = pr.N * pr.HV;
  if (units == 0) return make_ok();
  const WorkspaceLayout ws = workspace_layout(pr, plan, prepared);
  // The single pass, where it is chosen and takes the problem (single_pass_sm90.cu); with bounded
  // pieces whose fallback is not its own whole-sequence launch, the two-kernel path below runs too, on
  // the units it left (single_pass_fallback.cuh).
  SinglePassLaunch single;
  if (!prepared) {
    uint64_t* fail_space = ws.piece_fail != 0 ? reinterpret_cast<uint64_t*>(records + ws.piece_fail) : nullptr;
    KDA_RETURN_IF_ERROR(maybe_single_pass(pr, plan, ws.single, fail_space, stream_handle, &single));
    if (single.launched && single.piece_fail == nullptr) return make_ok();
    // A workspace sized for the single pass alone has no room for the two kernels: only a tensor map
    // that the host's checks accepted and the driver refused gets here.
    if (ws.single.covers_call())
      return make_error(KDA_ERROR_UNSUPPORTED,
                        "single_pass: the workspace was sized for the single pass (kda_fwd_workspace_size), but the "
                        "driver refused the tensor map of %s; with single_pass = KDA_SINGLE_PASS_NEVER (0) in both "
                        "calls the two kernels take it",
                        single.unmapped != nullptr ? single.unmapped : "an input");
  }
  const bool warm = plan.method == SplitMethod::kWarmup;
  const int64_t combine_ctas = has_combine(plan) ? units * (128 / kCombineRows) : 0;
  if (std::max({first_pass_ctas(units, plan), second_pass_ctas(units, plan) + combine_ctas}) > 0x7fffffff)
    return make_error(KDA_ERROR_INVALID_ARGUMENT, "q: N x HV = %lld (sequences x value heads) is too large for one grid",
                      static_cast<long long>(units));
  float* chunk_bounds = warm ? reinterpret_cast<float*>(records + ws.bounds) : nullptr;
  int32_t* unit_fallback = warm ? reinterpret_cast<int32_t*>(records + ws.fallback) : nullptr;
  // The final state's last update (kernel_params.h): Kr's low parts, written by this call's
  // preparation or, prepared, by kda_segment_transition's.
  uint8_t* kr_lo = ws.kr_lo != 0 && pr.has_final_state ? records + ws.kr_lo : nullptr;
  const bool tail = uses_tail(plan, prepared);
  int32_t* tail_words = tail ? reinterpret_cast<int32_t*>(records + ws.tail) : nullptr;
  if (!prepared)
    KDA_RETURN_IF_ERROR(launch_preparation(pr, workspace, chunk_bounds, stream_handle, kr_lo, tail_words, &single));

  RecurrenceParams rp;
  rp.seq = seq;
  rp.v = static_cast<const uint16_t*>(a.v.data);
  rp.out = static_cast<uint16_t*>(a.out.data);
  rp.v_st = strides_of(a.v);
  rp.out_st = strides_of(a.out);
  rp.initial_state = a.initial_state.data;
  rp.final_state = a.final_state.data;
  rp.initial_is_f32 = pr.has_initial_state && a.initial_state.dtype == KDA_DTYPE_F32;
  rp.final_is_f32 = pr.has_final_state && a.final_state.dtype == KDA_DTYPE_F32;
  rp.HV = static_cast<int32_t>(pr.HV);
  rp.records = records;
  rp.method = plan.method;
  rp.units = static_cast<int32_t>(units);
  rp.segments = plan.segments;
  rp.pieces = plan.pieces;
  rp.forced_warmup = a.context_warmup_chunks;
  rp.chunk_bounds = chunk_bounds;
  rp.unit_fallback = unit_fallback;
  rp.kr_lo = kr_lo;
  rp.sp_fail = single.piece_fail;  // (the single pass's fallback: only the units it flagged)
  rp.sp_pieces = single.pieces;
  const int64_t state_elems = 128 * 128;
  rp.cp_states = plan.segments > 1 ? reinterpret_cast<float*>(records + ws.context) : nullptr;
  rp.cp_transitions = rp.cp_states == nullptr ? nullptr : rp.cp_states + units * (plan.segments - 1) * state_elems;
  // Else the previous kernel in the stream is the caller's.
  const bool after_prep = !prepared && seq.num_vchunks > 0;
  // In place (memory_rules.cpp admits only the exact same tensor): pass 1 of the warm-up defers its
  // final states (deferred_final_kernel.cuh).
  const bool in_place = pr.has_final_state && pr.has_initial_state && a.final_state.data == a.initial_state.data;
  if (warm && in_place) rp.deferred_final = records + ws.deferred;
  rp.pass = plan.method == SplitMethod::kNone ? RecurrencePass::kWhole : RecurrencePass::kFirst;
  rp.vsplit = plan.vsplit_first;
  if (tail) {  // the fallback's combine and pass 2 as tail jobs of pass 1's grid
    rp.tail = tail_words;
    // Combine jobs of 8 rows when they all fit on the SMs at once, else 16 (recurrence_tail.cuh).
    const int64_t resident = std::min<int64_t>(first_pass_ctas(units, plan), sm_count());
    rp.tail_combine_rows = units * 16 <= resident ? 8 : 16;
    const int64_t combine_jobs = has_combine(plan) ? units * (128 / rp.tail_combine_rows) : 0;
    rp.tail_combine_jobs = static_cast<int32_t>(combine_jobs);
    // Pass-2 slots of 128 rows in halves (one warpgroup each) when twice their count fits in the
    // grid's CTAs at once (one per SM): T8192_H8_LM 10% faster; T65536_H8_LM, whose 264 CTAs take
    // two waves, 10% slower with halves (2026-12-01).
    const int64_t second = second_pass_ctas(units, plan);
    rp.tail_half = FLASH_KDA_WGMMA_RECURRENCE != 0 && plan.vsplit_first == 1 && 2 * second <= resident;
    rp.tail_jobs = static_cast<int32_t>(combine_jobs + (second << rp.tail_half));
  }
  KDA_RETURN_IF_ERROR(launch_recurrence_for(rp, first_pass_ctas(units, plan), stream, after_prep));
  if (warm && in_place) {
    DeferredFinalParams df;
    df.deferred = records + ws.deferred;
    df.final_state = a.final_state.data;
    df.units = static_cast<int32_t>(units);
    df.vecs_per_unit = static_cast<int32_t>(final_state_bytes(pr) / 16);
    df.segments = plan.segments;
    df.unit_fallback = unit_fallback;
    const cudaError_t err = launch_kernel(deferred_final_kernel, dim3(static_cast<unsigned>(units * kDeferredCtasPerUnit)),
                                          kDeferredThreads, 0, stream, true, df);
    if (err != cudaSuccess) return cuda_error("deferred_final_kernel launch", err);
  }
  if (second_pass_ctas(units, plan) == 0 || tail) return make_ok();
  if (has_combine(plan)) {
    CombineParams cb;
    cb.cp_states = rp.cp_states;
    cb.cp_transitions = rp.cp_transitions;
    cb.segments = plan.segments;
    cb.unit_fallback = unit_fallback;
    const cudaError_t err = launch_kernel(context_combine_kernel, dim3(static_cast<unsigned>(combine_ctas)),
                                          kCombineThreads, 0, stream, true, cb);
    if (err != cudaSuccess) return cuda_error("context_combine_kernel launch", err);
  }
  rp.pass = RecurrencePass::kSecond;
  rp.vsplit = plan.vsplit_second;
  return launch_recurrence_for(rp, second_pass_ctas(units, plan), stream, true);
}

}  // namespace

kda_status fwd(const Problem& pr, const RecurrencePlan& plan, void* workspace, kda_stream_t stream) {
  return run_fwd(pr, plan, workspace, stream, false);
}

kda_status fwd_prepared(const Problem& pr, const RecurrencePlan& plan, void* workspace, kda_stream_t stream) {
  return run_fwd(pr, plan, workspace, stream, true);
}

kda_status check_cu_seqlens(const Problem& pr, const RecurrencePlan& plan, bool prepared, void* workspace,
                            kda_stream_t stream_handle) {
  cudaStream_t stream = reinterpret_cast<cudaStream_t>(stream_handle);
  int64_t* result =
      reinterpret_cast<int64_t*>(static_cast<uint8_t*>(workspace) + workspace_layout(pr, plan, prepared).check);
  cu_seqlens_check_kernel<<<1, 256, 0, stream>>>(make_sequence_layout(pr), result);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return cuda_error("cu_seqlens_check_kernel launch", err);
  int64_t host[4];
  err = cudaMemcpyAsync(host, result, sizeof(host), cudaMemcpyDeviceToHost, stream);
  if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
  if (err != cudaSuccess) return cuda_error("check_cu_seqlens: reading the result", err);
  // host = {kind, index, value, previous or bound}
  switch (host[0]) {
    case 0: return make_ok();
    case 1:
      return make_error(KDA_ERROR_INVALID_ARGUMENT, "cu_seqlens: expected cu_seqlens[0] = 0, got %lld",
                        static_cast<long long>(host[2]));
    case 2:
      return make_error(KDA_ERROR_INVALID_ARGUMENT,
                        "cu_seqlens: expected non-decreasing entries, got cu_seqlens[%lld] = %lld < cu_seqlens[%lld] = %lld",
                        static_cast<long long>(host[1]), static_cast<long long>(host[2]),
                        static_cast<long long>(host[1] - 1), static_cast<long long>(host[3]));
    default:
      return make_error(KDA_ERROR_INVALID_ARGUMENT,
                        "cu_seqlens: expected entries <= the packed length B*T = %lld, got cu_seqlens[%lld] = %lld",
                        static_cast<long long>(host[3]), static_cast<long long>(host[1]),
                        static_cast<long long>(host[2]));
  }
}

}  // namespace kda::sm90
