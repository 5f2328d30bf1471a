// The single pass's launcher (single_pass_kernel.cuh; docs/design.md §3.5): which problems it takes,
// its tensor maps and its launch. fwd_sm90.cu's run_fwd calls it before the two-kernel path.
#include <cuda_runtime.h>


#include "src/kernels/sm90/single_pass_kernel.cuh"
#include "src/launch/launch.h"
#include "src/launch/launch_util.cuh"
#include "src/launch/tensor_map.h"

namespace kda::sm90 {
namespace {

// The dims and caller strides of a [B, T, heads, 128] bf16 tensor in the warp preparation's boxes.
struct HeadBox {
  uint64_t dims[4];
  int64_t given[3];
};
HeadBox head_box(const kda_tensor& x, int64_t heads, int64_t T, int64_t B) {
  return HeadBox{{128, static_cast<uint64_t>(heads), static_cast<uint64_t>(T), static_cast<uint64_t>(B)},
                 {x.stride[2], x.stride[1], x.stride[0]}};
}
// Whether a tensor map describes it (tensor_map.h: no broadcast dimension, a 16-byte aligned base,
// strides of whole 16 bytes, a contiguous innermost dimension), from host arithmetic only; box_map
// then encodes it, with the same checks (the driver may still refuse: the call then runs on the two
// kernels).
bool box_shape_ok(const kda_tensor& x, int64_t heads, int64_t T, int64_t B) {
  return T > 0 && heads > 0 && B > 0 && x.stride[3] == 1;
}
bool box_mappable(const kda_tensor& x, int64_t heads, int64_t T, int64_t B) {
  if (!box_shape_ok(x, heads, T, B)) return false;
  const HeadBox h = head_box(x, heads, T, B);
  return head_box_map_ok(x.data, h.dims, h.given);
}
bool box_map(const kda_tensor& x, int64_t heads, int64_t T, int64_t B, CUtensorMap* map) {
  if (!box_shape_ok(x, heads, T, B)) return false;
  const HeadBox h = head_box(x, heads, T, B);
  return make_head_box_map(map, x.data, h.dims, h.given);  // (head_box_map_ok's checks first)
}

// One of single_pass_kernel's instances (kPartial: a sequence may end inside a chunk; kPieces: pieces,
// bounded or with a forced warm-up; kWalk: one CTA per SM walking whole sequences), as a programmatic
// dependent launch of the caller's previous kernel (the kernel waits for it before reading anything).
template <bool kPartial, bool kPieces, bool kWalk = false>
kda_status launch_kernel_for(dim3 grid, const SinglePassParams& sp, const CUtensorMap& qmap, const CUtensorMap& kmap,
                             const CUtensorMap& gmap, const CUtensorMap& vmap, cudaStream_t stream) {
  constexpr int kSmem = static_cast<int>(tile::smem_bytes<SinglePassLayout::Storage>());
  return launch_with_smem<single_pass_kernel<kPartial, kPieces, kWalk>>("single_pass_kernel", grid, SinglePassLayout::kThreads,
                                                                  kSmem, stream, true, sp, qmap, kmap, gmap, vmap);
}

// Why the single pass cannot take `pr` (a phrase naming the input), or null when it can, as far as
// shapes, dtypes and options tell (the tensor maps of q, k, g and v may still be refused).
const char* single_pass_limit(const Problem& pr) {
  const kda_fwd_params& a = *pr.params;
  if (a.gate != KDA_GATE_BOUNDED) return "a gate other than KDA_GATE_BOUNDED";
  if (a.g.dtype != KDA_DTYPE_BF16) return "g in a dtype other than bf16";
  if (pr.K != 128 || pr.V != 128) return "K or V other than 128";
  if (pr.N * pr.HV > 0x7fffffff) return "more than 2^31 - 1 (sequence, head) pairs";
  return nullptr;
}

}  // namespace

SinglePassChoice choose_single_pass(const Problem& pr, const RecurrencePlan& plan) {
  SinglePassChoice c;
  const kda_fwd_params& a = *pr.params;
  const bool always = a.single_pass == KDA_SINGLE_PASS_ALWAYS;
  if (a.single_pass == KDA_SINGLE_PASS_NEVER) return c;
  // The workspace holds the pieces' flags for these plans (fwd_workspace.h).
  const bool fail_space = plan.method == SplitMethod::kWarmup || plan_single_pass_pieces(plan) > 1;
  const bool in_place = pr.has_final_state && pr.has_initial_state && a.final_state.data == a.initial_state.data;
  const bool pieces_ok = single_pass_pieces_ok(!pr.varlen && pr.T % 16 == 0, in_place, a.context_warmup_chunks, fail_space);
  const int64_t chunks = pr.varlen ? 0 : (pr.T + 15) / 16;  // (per sequence; packed batches are never cut)
  const bool planned = a.context_split == 0 && a.context_method == KDA_CONTEXT_AUTO && a.context_warmup_chunks == 0;
  if (!always && !single_pass_auto(pr.N * pr.HV, plan.sms, plan, chunks, pieces_ok, planned)) return c;  // (plan.h)
  if (const char* why = single_pass_limit(pr)) {
    if (always) c.refusal = why;
    return c;
  }
  // The tensors as [B, T, heads, 128], or packed as [1, B*T, heads, 128] with cu_seqlens.
  const int64_t T = pr.varlen ? pr.T_total : pr.T, B = pr.varlen ? 1 : pr.B;
  c.unmapped = T == 0                                     ? nullptr  // (no tokens: the kernel copies the states)
               : !box_mappable(a.q, pr.H, T, B)  ? "q"
               : !box_mappable(a.k, pr.H, T, B)  ? "k"
               : !box_mappable(a.g, pr.HV, T, B) ? "g"
               : !box_mappable(a.v, pr.HV, T, B) ? "v"
                                                 : nullptr;
  if (c.unmapped != nullptr) return c;
  c.runs = true;
  // Pieces (plan.h): with the bounded warm-up their flags go to the workspace. A one-pass plan's pieces,
  // and a warm-up plan's with single_pass_redo, fall back to this kernel on whole sequences (a second
  // launch); other warm-up plans' pieces to the two kernels.
  c.pieces = single_pass_pieces(plan, pieces_ok, pr.N * pr.HV, planned);
  c.bounded = c.pieces > 1 && a.context_warmup_chunks == 0;
  c.redo = c.bounded && (plan.method == SplitMethod::kNone || plan.single_pass_redo);
  return c;
}

kda_status maybe_single_pass(const Problem& pr, const RecurrencePlan& plan, const SinglePassChoice& choice,
                             uint64_t* fail_space, kda_stream_t stream_handle, SinglePassLaunch* out) {
  *out = SinglePassLaunch{};
  const kda_fwd_params& a = *pr.params;
  const bool always = a.single_pass == KDA_SINGLE_PASS_ALWAYS;
  if (choice.refusal != nullptr)
    return make_error(KDA_ERROR_UNSUPPORTED, "single_pass: KDA_SINGLE_PASS_ALWAYS (2), but the single pass does not take %s",
                      choice.refusal);
  const int64_t T = pr.varlen ? pr.T_total : pr.T, B = pr.varlen ? 1 : pr.B;
  CUtensorMap qmap{}, kmap{}, gmap{}, vmap{};  // (no tokens: never used, the kernel copies the states)
  const char* unmapped = choice.unmapped;
  if (choice.runs && T > 0)
    unmapped = !box_map(a.q, pr.H, T, B, &qmap)    ? "q"
               : !box_map(a.k, pr.H, T, B, &kmap)  ? "k"
               : !box_map(a.g, pr.HV, T, B, &gmap) ? "g"
               : !box_map(a.v, pr.HV, T, B, &vmap) ? "v"
                                                   : nullptr;
  out->unmapped = unmapped;
  if (unmapped != nullptr) {
    if (!always) return make_ok();
    return make_error(KDA_ERROR_UNSUPPORTED,
                      "single_pass: KDA_SINGLE_PASS_ALWAYS (2), but no tensor map describes %s (it needs a 16-byte "
                      "aligned base, strides that are multiples of 8 elements and no broadcast dimension)",
                      unmapped);
  }
  if (!choice.runs) return make_ok();
  if (choice.bounded && fail_space == nullptr)  // (workspace_layout reserves it for every plan with pieces)
    return make_error(KDA_ERROR_UNSUPPORTED, "single_pass: pieces with a fallback, but no room for their flags");
  SinglePassParams sp{};
  sp.pp = preparation_params(pr);
  sp.v = static_cast<const uint16_t*>(a.v.data);
  sp.out = static_cast<uint16_t*>(a.out.data);
  sp.v_st = Strides4{a.v.stride[0], a.v.stride[1], a.v.stride[2]};
  sp.out_st = Strides4{a.out.stride[0], a.out.stride[1], a.out.stride[2]};
  sp.initial_state = pr.has_initial_state ? a.initial_state.data : nullptr;
  sp.final_state = pr.has_final_state ? a.final_state.data : nullptr;
  sp.initial_is_f32 = pr.has_initial_state && a.initial_state.dtype == KDA_DTYPE_F32;
  sp.final_is_f32 = pr.has_final_state && a.final_state.dtype == KDA_DTYPE_F32;
  sp.HV = static_cast<int32_t>(pr.HV);
  sp.units = static_cast<int32_t>(pr.N * pr.HV);
  sp.pieces = choice.pieces;
  sp.forced_warmup = a.context_warmup_chunks;
  const bool bounded = choice.bounded;
  sp.epoch = bounded ? fail_space : nullptr;  // (its first word; the flags after it)
  sp.piece_fail = bounded ? fail_space + 1 : nullptr;
  cudaStream_t stream = reinterpret_cast<cudaStream_t>(stream_handle);
  const bool partial = pr.varlen || pr.T % 16 != 0;
  // One CTA per SM walking its units in turn (single_pass_kernel.cuh's kWalk; the rule in
  // single_pass_layout.h), else one CTA per unit (and piece).
  const bool walk = single_pass_walks(!partial, sp.pieces, sp.units, plan.sms, pr.T / 16);
  const dim3 grid(static_cast<unsigned>(walk ? plan.sms : pr.N * pr.HV * sp.pieces));
  const kda_status s = sp.pieces > 1 ? launch_kernel_for<false, true>(grid, sp, qmap, kmap, gmap, vmap, stream)
                       : partial     ? launch_kernel_for<true, false>(grid, sp, qmap, kmap, gmap, vmap, stream)
                       : walk        ? launch_kernel_for<false, false, true>(grid, sp, qmap, kmap, gmap, vmap, stream)
                                     : launch_kernel_for<false, false>(grid, sp, qmap, kmap, gmap, vmap, stream);
  out->launched = s.code == KDA_OK;
  out->pieces = sp.pieces;
  if (!out->launched) return s;
  if (choice.redo) {  // the whole-sequence fallback (single_pass_fallback.cuh)
    SinglePassParams redo = sp;
    redo.pieces = 1;
    redo.piece_fail = nullptr;
    redo.epoch = nullptr;
    redo.redo_fail = sp.piece_fail;
    redo.redo_epoch = fail_space;
    redo.redo_pieces = sp.pieces;
    return launch_kernel_for<false, false>(dim3(static_cast<unsigned>(sp.units)), redo, qmap, kmap, gmap, vmap,
                                           stream);  // (nothing left for the two kernels: piece_fail null)
  }
  out->piece_fail = sp.piece_fail;
  out->epoch = sp.epoch != nullptr ? fail_space : nullptr;  // (bounded pieces only)
  return s;
}

}  // namespace kda::sm90
