// The forward pass's workspace layout and the size queries of launch.h (fwd_workspace.h says what lies
// where). Host code only; a .cu file so that it sees the kernels' build knobs as fwd_sm90.cu does.
#include "src/launch/fwd_workspace.h"

#include "src/core/checked_math.h"
#include "src/kernels/sm90/chunk_record.cuh"
#include "src/kernels/sm90/kernel_params.h"
#include "src/launch/launch.h"

#ifndef FLASH_KDA_WARMUP_TAIL
#define FLASH_KDA_WARMUP_TAIL 1
#endif

namespace kda::sm90 {
namespace {

// Sizes saturate at SIZE_MAX ("does not fit", reported by the API layer); validation bounds T,
// B*T and N, so num_vchunks itself cannot overflow.
size_t records_bytes(const Problem& pr) {
  return sat_mul(sat_mul(sat_size(num_vchunks(pr)), sat_size(pr.HV)), ChunkRecord::kBytes);
}

size_t bounds_bytes(const Problem& pr) { return sat_mul(sat_mul(sat_size(num_vchunks(pr)), sat_size(pr.HV)), sizeof(float)); }

size_t kr_lo_bytes(const Problem& pr) {
  return sat_mul(sat_size(pr.N * pr.HV), static_cast<size_t>(kKrLoSlots) * kKrLoBytes);
}

}  // namespace

int64_t num_vchunks(const Problem& pr) {
  return pr.varlen ? (pr.T_total + 15) / 16 + pr.N : pr.N * ((pr.T + 15) / 16);
}

PreparationLayout preparation_layout(const Problem& pr) {
  PreparationLayout l;
  l.bounds = align256(sat_add(records_bytes(pr), kCheckBytes));
  l.bounds_end = sat_add(l.bounds, bounds_bytes(pr));
  l.total = l.bounds_end;
  if (kFinalSplit) {
    l.kr_lo = align256(l.bounds_end);
    l.total = sat_add(l.kr_lo, kr_lo_bytes(pr));
  }
  return l;
}

bool uses_tail(const RecurrencePlan& plan, bool prepared) {
  return FLASH_KDA_WARMUP_TAIL != 0 && plan.method == SplitMethod::kWarmup && !prepared && plan.segments >= 2 &&
         plan.vsplit_second == plan.vsplit_first;
}

size_t final_state_bytes(const Problem& pr) {
  return size_t{128} * 128 * (pr.params->final_state.dtype == KDA_DTYPE_F32 ? 4 : 2);
}

// Reserved per unit for deferred final states: f32, whatever the call's dtype.
constexpr size_t kMaxFinalStateBytes = size_t{128} * 128 * 4;

WorkspaceLayout workspace_layout(const Problem& pr, const RecurrencePlan& plan, bool prepared) {
  WorkspaceLayout w;
  const bool warm = plan.method == SplitMethod::kWarmup;
  const int sp_pieces = plan_single_pass_pieces(plan);
  // The single pass's pieces' epoch and flags (single_pass_fallback.cuh): a warm-up plan's pieces, or a
  // one-pass plan's single_pass_pieces (plan.h). Reserved for prepared calls too, which never use them,
  // so that a transition's workspace still covers kda_fwd's.
  auto reserve_piece_flags = [&] {
    if (!warm && sp_pieces <= 1) return;
    w.piece_fail = align256(w.total);
    w.total = sat_add(w.piece_fail,
                      sat_mul(sat_add(sat_mul(sat_size(pr.N * pr.HV), sat_size(sp_pieces)), 1), sizeof(uint64_t)));
  };
  if (!prepared) w.single = choose_single_pass(pr, plan);
  if (w.single.covers_call()) {
    w.total = kCheckBytes;
    reserve_piece_flags();
    return w;
  }
  w.check = records_bytes(pr);
  w.total = sat_add(records_bytes(pr), kCheckBytes);
  if (warm || prepared) {
    const PreparationLayout prep = preparation_layout(pr);
    w.bounds = prep.bounds;
    w.total = prep.bounds_end;
  }
  // Kr's low parts of each sequence's last chunks (PrepParams::kr_lo): kKrLoSlots x 4 KiB per
  // (sequence, head) against the records' 14.5 KiB per chunk and head. Prepared, the place preparation_layout
  // gives it (right after the bounds); kda_fwd reserves it when it stores final states.
  if (kFinalSplit && (prepared || pr.has_final_state)) {
    w.kr_lo = align256(w.total);
    w.total = sat_add(w.kr_lo, kr_lo_bytes(pr));
  }
  if (warm) {
    w.fallback = align256(w.total);
    w.total = sat_add(w.fallback, sat_mul(sat_size(pr.N * pr.HV), sizeof(int32_t)));
    // Pass 1's final states when the call updates the state in place (deferred_final_kernel.cuh);
    // reserved whatever the pointers and the final state's dtype, so that the size depends on
    // neither (kda_segment_transition_workspace_size covers kda_fwd_prepared's calls with it).
    w.deferred = align256(w.total);
    w.total = sat_add(w.deferred, sat_mul(sat_size(pr.N * pr.HV), kMaxFinalStateBytes));
  }
  reserve_piece_flags();
  if (uses_tail(plan, prepared)) {  // the tail's counters (kernel_params.h)
    w.tail = align256(w.total);
    w.total = sat_add(w.tail, sat_mul(sat_add(sat_mul(sat_size(pr.N * pr.HV), size_t{kTailWordsPerUnit}),
                                              size_t{kTailHeaderWords}),
                                      sizeof(int32_t)));
  }
  const size_t cp = context_workspace_bytes(pr.N * pr.HV, plan);
  if (cp > 0) {
    w.context = align256(w.total);
    w.total = sat_add(w.context, cp);
  }
  return w;
}

size_t preparation_bytes(const Problem& pr) { return preparation_layout(pr).total; }

float* preparation_bounds(const Problem& pr, void* workspace) {
  return reinterpret_cast<float*>(static_cast<uint8_t*>(workspace) + preparation_layout(pr).bounds);
}

uint8_t* preparation_kr_lo(const Problem& pr, void* workspace) {
  return kFinalSplit ? static_cast<uint8_t*>(workspace) + preparation_layout(pr).kr_lo : nullptr;
}

size_t fwd_workspace_bytes(const Problem& pr, const RecurrencePlan& plan) {
  return workspace_layout(pr, plan, false).total;
}

size_t fwd_prepared_workspace_bytes(const Problem& pr, const RecurrencePlan& plan) {
  return workspace_layout(pr, plan, true).total;
}

const uint64_t* single_pass_flags(const Problem& pr, const RecurrencePlan& plan, const void* workspace) {
  const size_t at = workspace_layout(pr, plan, false).piece_fail;
  return at == 0 ? nullptr : reinterpret_cast<const uint64_t*>(static_cast<const uint8_t*>(workspace) + at);
}

}  // namespace kda::sm90
