// SM90 launcher of context parallelism across GPUs (docs/design.md §3.4): a shard's transition
// (D, M) and the combine of several shards' transitions.
//
// Workspace of kda_segment_transition: the preparation as the forward launcher lays it out
// (records, check word, chunk bounds: launch.h), then the transition pass's per-unit fallback flags
// and its float32 scratch [units][P][2][128][128] (each segment's end state from zero and its
// transition). kda_fwd_prepared then finds the preparation where it expects it; the workspace size
// is the larger of the two calls' needs. Launches on the caller's stream: chunk_prep_kernel, the
// transition pass of chunk_recurrence_kernel (pass kTransition, via the forward launcher's
// instances), transition_fold_kernel; combine_transitions_kernel on its own.
#include <cuda_runtime.h>

#include <algorithm>

#include "src/core/checked_math.h"
#include "src/kernels/sm90/transition_kernels.cuh"
#include "src/launch/cp_launch.h"
#include "src/launch/launch.h"
#include "src/launch/launch_util.cuh"

namespace kda::sm90 {
namespace {

struct TransitionLayout {
  size_t fallback = 0, scratch = 0, total = 0;
};

TransitionLayout transition_layout(const TransitionProblem& tp, const TransitionPlan& plan) {
  const int64_t units = tp.num_transitions * tp.shard.HV;
  TransitionLayout w;
  w.total = preparation_bytes(tp.shard);
  if (units == 0) return w;
  w.fallback = align256(w.total);
  w.scratch = align256(w.fallback + static_cast<size_t>(units) * sizeof(int32_t));
  w.total = w.scratch + transition_scratch_bytes(units, plan);
  return w;
}

MatrixArray matrices(const kda_tensor& t) {
  return MatrixArray{static_cast<float*>(t.data), t.stride[0], t.stride[1]};
}

}  // namespace

TransitionPlan transition_plan(const TransitionProblem& tp) {
  const Problem& pr = tp.shard;
  const kda_fwd_params& a = *pr.params;
  PlanRequest r;
  r.units = tp.num_transitions * pr.HV;
  r.chunks = ((pr.varlen ? pr.T_total : pr.T) + 15) / 16;  // the longest possible sequence
  r.sms = sm_count();
  r.forced_segments = a.context_split;
  r.method = a.context_method;
  r.warmup_valid = a.qk_l2norm != 0 && a.allow_neg_eigval == 0;  // as fwd_plan: the bound of §3.2
  return plan_transition(r);
}

size_t transition_workspace_bytes(const TransitionProblem& tp, const TransitionPlan& plan) {
  return std::max(transition_layout(tp, plan).total, fwd_prepared_workspace_bytes(tp.shard, fwd_plan(tp.shard)));
}

kda_status segment_transition(const TransitionProblem& tp, const TransitionPlan& plan, void* workspace,
                              kda_stream_t stream_handle) {
  cudaStream_t stream = reinterpret_cast<cudaStream_t>(stream_handle);
  const Problem& pr = tp.shard;
  const kda_fwd_params& a = *pr.params;
  const bool bounded = plan.method == SplitMethod::kWarmup;
  // The bounds serve the bounded transition and a warm-up plan of the forward that follows; both
  // need the same options (qk_l2norm, no allow_neg_eigval, not KDA_CONTEXT_EXACT).
  float* bounds = bounded ? preparation_bounds(pr, workspace) : nullptr;
  // Kr's low parts too (kernel_params.h): kda_fwd_prepared's final states use them.
  KDA_RETURN_IF_ERROR(launch_preparation(pr, workspace, bounds, stream_handle, preparation_kr_lo(pr, workspace)));
  const int64_t units = tp.num_transitions * pr.HV;
  if (units == 0) return make_ok();

  const int64_t ctas = units * transition_slots(plan);
  if (std::max(ctas, units * 32) > 0x7fffffff)
    return make_error(KDA_ERROR_INVALID_ARGUMENT,
                      "D: N_t x HV = %lld (transitions) is too large for one grid with %lld CTAs each",
                      static_cast<long long>(units), static_cast<long long>(transition_slots(plan)));
  const TransitionLayout ws = transition_layout(tp, plan);
  uint8_t* base = static_cast<uint8_t*>(workspace);
  int32_t* unit_fallback = bounded ? reinterpret_cast<int32_t*>(base + ws.fallback) : nullptr;
  float* scratch = reinterpret_cast<float*>(base + ws.scratch);

  const SequenceLayout seq = make_sequence_layout(pr);
  RecurrenceParams rp{};
  rp.seq = seq;
  rp.v = static_cast<const uint16_t*>(a.v.data);
  rp.v_st = Strides4{a.v.stride[0], a.v.stride[1], a.v.stride[2]};
  rp.HV = static_cast<int32_t>(pr.HV);
  rp.vsplit = plan.vsplit;
  rp.records = base;
  rp.method = plan.method;
  rp.pass = RecurrencePass::kTransition;
  rp.units = static_cast<int32_t>(units);
  rp.segments = plan.segments;
  rp.cp_states = scratch;
  rp.pieces = 1;
  rp.forced_warmup = a.context_warmup_chunks;
  rp.chunk_bounds = bounds;
  rp.unit_fallback = unit_fallback;
  rp.seq_offset = static_cast<int32_t>(pr.N - tp.num_transitions);
  KDA_RETURN_IF_ERROR(launch_recurrence_pass(rp, ctas, stream_handle, seq.num_vchunks > 0));

  TransitionFoldParams fp;
  fp.scratch = scratch;
  fp.segments = plan.segments;
  fp.unit_fallback = unit_fallback;
  fp.HV = static_cast<int32_t>(pr.HV);
  fp.D = matrices(tp.D);
  fp.M = matrices(tp.M);
  const cudaError_t err =
      launch_kernel(transition_fold_kernel, dim3(static_cast<unsigned>(units * 32)), kFoldThreads, 0, stream, true, fp);
  if (err != cudaSuccess) return cuda_error("transition_fold_kernel launch", err);
  return make_ok();
}

kda_status combine_transitions(const CombineProblem& cp, kda_stream_t stream_handle) {
  const int64_t ctas = cp.N * cp.HV * 16;
  if (ctas == 0) return make_ok();
  CombineTransitionsParams p;
  p.D = matrices(cp.D);
  p.M = matrices(cp.M);
  p.initial_state = cp.initial_state.data;
  p.initial_is_f32 = cp.initial_state.dtype == KDA_DTYPE_F32;
  p.start_states = matrices(cp.start_states);
  p.end_state = matrices(cp.end_state);
  p.R = static_cast<int32_t>(cp.R);
  p.N = static_cast<int32_t>(cp.N);
  p.HV = static_cast<int32_t>(cp.HV);
  const cudaError_t err = launch_kernel(combine_transitions_kernel, dim3(static_cast<unsigned>(ctas)), kFoldThreads, 0,
                                        reinterpret_cast<cudaStream_t>(stream_handle), false, p);
  if (err != cudaSuccess) return cuda_error("combine_transitions_kernel launch", err);
  return make_ok();
}

}  // namespace kda::sm90
