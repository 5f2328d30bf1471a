// How the recurrence is laid out on the GPU: value-row slices per (sequence, head) and, for long
// sequences with few heads, sequence parallelism (docs/design.md §3.1, §3.2). Host code only (no
// CUDA), so the choice is unit-tested on the CPU (tests/test_plan.cpp).
//
// Exact combine (method kExact), P segments: every sequence's chunks split into P equal ranges;
//   pass 1  segment 0 runs from the true initial state (writing its outputs and its end state E0);
//           each middle segment p = 1..P-2 runs from a zero state (its end state Lp) and, on
//           separate CTAs, its transition Mp (the same recurrence on the identity with zero values);
//   combine the start states S1 = E0, S(p+1) = Sp·Mp + Lp (float32, sequential over p);
//   pass 2  segments 1..P-1 run from their start states, writing outputs (and the final state).
// The chain each CTA walks shrinks from C chunks to about 2·C/P.
//
// Bounded warm-up (method kWarmup), `pieces` pieces: one pass; piece p >= 1 starts w chunks before
// its first chunk from a zero state, w chosen on the device from the gates (the smallest w whose
// decay bound is <= 2^-24, at most kWarmupCap chunks, or back to the sequence start, which is
// exact); the chain is about C/pieces + w. Where the bound does not allow that for some piece of a
// (sequence, head), that unit runs the exact combine with `segments` segments instead (decided on
// the device: pass 1's CTAs cover both layouts; through kda_fwd they also run the combine and pass
// 2 of the units that fell back, as tail jobs, src/kernels/sm90/recurrence_tail.cuh, so pass 2 uses
// pass 1's slices, vsplit_second == vsplit_first). segments = 1 makes the fallback the plain
// one-pass walk.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "flash_kda/flash_kda.h"
#include "src/kernels/sm90/kernel_params.h"

namespace kda::sm90 {

static_assert(kMaxContextSegments == KDA_MAX_CONTEXT_SPLIT, "one limit for validation and the kernels");

struct RecurrencePlan {
  SplitMethod method = SplitMethod::kNone;
  int segments = 1;       // exact combine: P (kWarmup: the fallback's P; 1 = one pass)
  int pieces = 1;         // kWarmup: pieces per sequence
  int vsplit_first = 1;   // value-row slices (1, 2, 4, 8) of the one pass / pass 1
  int vsplit_second = 1;  // slices of pass 2 (segments > 1)
  double cost_us = 0;     // the model's estimate of the recurrence (kWarmup: when no unit falls back)
  double fallback_cost_us = 0;  // kWarmup: when every unit falls back
  // kNone, chosen by the planner (automatic, the decay bound valid): the pieces per sequence of the
  // single pass when it runs this plan (single_pass_split below; 1: whole sequences). Its fallback is
  // the whole-sequence single pass on the units whose pieces fell back, not the two kernels.
  int single_pass_pieces = 1;
  // kWarmup, chosen by the planner (automatic): where the single pass runs the plan's pieces, their
  // fallback is the whole-sequence single pass (a second single-pass launch, as for single_pass_pieces)
  // rather than the two kernels. Set where the two kernels' own fallback is one pass (segments == 1):
  // both then walk every unit's whole chain (T8192_H64: the whole-sequence single pass 0.667 ms, the
  // two kernels 0.53, 2026-12-02), and the call needs no records in
  // the workspace (fwd_workspace.h). Elsewhere the two kernels' fallback splits the chain (T32768_H32: 3
  // segments; the whole-sequence single pass 2.61 ms against 0.755 in pieces).
  bool single_pass_redo = false;
  int sms = 132;  // the SM count the plan was made for (PlanRequest::sms)
};

struct PlanRequest {
  int64_t units = 1;    // sequences x value heads
  int64_t chunks = 0;   // 16-token chunks of the longest sequence (or an upper bound)
  int sms = 132;        // streaming multiprocessors
  int forced_segments = 0;  // kda_fwd_params.context_split: 0 automatic, 1 off, n segments / pieces
  int32_t method = KDA_CONTEXT_AUTO;  // kda_fwd_params.context_method
  bool warmup_valid = true;  // the decay bound holds for these options (spec §10)
};

// Slots (CTAs per unit) of each pass, and whether the combine runs.
int64_t first_pass_slots(const RecurrencePlan& p);
int64_t second_pass_slots(const RecurrencePlan& p);
inline int64_t first_pass_ctas(int64_t units, const RecurrencePlan& p) { return units * first_pass_slots(p); }
inline int64_t second_pass_ctas(int64_t units, const RecurrencePlan& p) { return units * second_pass_slots(p); }
inline bool has_combine(const RecurrencePlan& p) { return p.method != SplitMethod::kNone && p.segments >= 3; }

// Chooses the plan: the fastest under a latency model of the recurrence (one CTA per SM, a
// per-chunk step time that shrinks with the slice, a cost per wave and per launch).
RecurrencePlan plan_recurrence(const PlanRequest& request);

// ---- The single pass (single_pass_sm90.cu; docs/design.md §3.5) ----

// Whether a single-pass launch may cut sequences into the plan's pieces (`pieces_ok`): every sequence a
// multiple of 16 tokens and not packed (whole chunks: the partial-chunk instance with pieces would spill),
// not in place (a last piece would write the final state while piece 0 reads the initial one), and,
// unless the warm-up length is forced (context_warmup_chunks > 0: testing), a workspace with room for
// the pieces' fallback flags (single_pass_fallback.cuh).
inline bool single_pass_pieces_ok(bool whole_chunks, bool in_place, int32_t forced_warmup, bool fail_space) {
  return whole_chunks && !in_place && (forced_warmup > 0 || fail_space);
}

// KDA_SINGLE_PASS_AUTO's choice (measured 2026-12-01 and 2026-12-02, docs/performance_notes.md):
// - a plan that splits no sequence: when the (sequence, head) pairs fill at least 70% of the SMs (one
//   CTA per pair prepares its own chunks: with fewer pairs the two kernels, whose preparation spreads
//   over every SM, are faster; T8192_H96's 96 pairs on 132 SMs at parity or better, T8192_H64's 64 at
//   1.55x the two kernels' time);
// - a bounded warm-up plan that the planner chose (`planned`: context_split, context_method and
//   context_warmup_chunks automatic; a forced plan is the two kernels' unless single_pass forces it too):
//   in its pieces (pieces_ok) when they hold at least kSinglePassMinPieceChunks chunks, in as many waves
//   as they take. Measured 2026-12-02 with version 41's preparation, the two kernels' time against the
//   single pass's (T8192_H64's and T32768_H32's two-kernel times from the 01:31 UTC call, those kernels
//   unchanged since; docs/performance_notes.md): pieces of 256 and 512 chunks in one wave (T8192_H64,
//   T32768_H32) 0.53 -> 0.40 and 1.03 -> 0.76 ms; of 125 in two waves (T65536_H8) 0.533 -> 0.401; of 64
//   in one or three waves (T8192_H16_N1, T8192_H12_N4) -12% and -19%; of 47 in two (T8192_H24_N1) -16%;
//   of 32 (T8192_H8) even; of 24 and fewer (T4096_H12_N1, T2048_H12_N1, T1024_H4_N1) 4-35% slower,
//   where the candidates' preparation and the fallback's launches weigh more than the shorter chains.
//   The pieces taken pay on slowly decaying gates, where units fall back after their attempt: to the
//   two kernels, T32768_H32_LM 1.15x the two kernels' time and T65536_H8_LM 1.15x (each wave pays its
//   attempt); to the whole-sequence single pass (single_pass_redo below, versions 43-44), T8192_H64_LM
//   0.99x and T8192_H12_N4_LM 1.10x (design.md §3.5).
inline constexpr int64_t kSinglePassFillNum = 7, kSinglePassFillDen = 10;
inline constexpr int64_t kSinglePassMinPieceChunks = 40;
// Whether `units` pairs fill enough of the SMs for the single pass on a plan that splits no sequence.
inline bool single_pass_fills(int64_t units, int sms) {
  return units * kSinglePassFillDen >= int64_t{std::max(sms, 1)} * kSinglePassFillNum;
}
inline bool single_pass_auto(int64_t units, int sms, const RecurrencePlan& plan, int64_t chunks, bool pieces_ok,
                             bool planned = true) {
  if (plan.method == SplitMethod::kNone) return single_pass_fills(units, sms);
  return plan.method == SplitMethod::kWarmup && planned && pieces_ok && plan.pieces >= 2 &&
         (chunks + plan.pieces - 1) / plan.pieces >= kSinglePassMinPieceChunks;
}

// The single pass's own pieces for a problem the two-kernel planner runs in one pass (with at least as
// many pairs as kSinglePassFillNum / kSinglePassFillDen of the SMs, where the single pass takes whole
// sequences): P >= 2 when P pieces of at least kSinglePassMinPieceChunks chunks, in as many waves as
// they take, beat the whole sequences by kSinglePassPiecesGain under the model below; else 1. Model
// (fitted 2026-12-02 to T8192_H96's whole sequences and 3, 4 and 6 pieces, docs/performance_notes.md
// "The single pass's own pieces"): each wave of CTAs costs its chain, ceil(C / P) chunks plus
// kSinglePassPieceOverhead for pieces (the candidates' preparation, the warm-up, the ring's fill and
// the fallback's launch), in steps that are shorter where the wave leaves SMs idle (a step on a full
// wave 1, on an empty one kSinglePassIdleStep). Where a piece falls back (slowly decaying gates), its
// unit runs whole in a second single-pass launch: the attempt is the price, not the two kernels.
inline constexpr double kSinglePassPieceOverhead = 5.0;
inline constexpr double kSinglePassIdleStep = 0.65;
inline constexpr double kSinglePassPiecesGain = 0.9;
inline constexpr int kSinglePassMaxPieces = 16;
double single_pass_cost(int64_t units, int64_t chunks, int sms, int pieces);
int single_pass_split(int64_t units, int64_t chunks, int sms);

// The pieces a plan gives the single pass: a bounded warm-up plan's pieces (their fallback the two
// kernels, or with single_pass_redo the whole-sequence single pass), a one-pass plan's
// single_pass_pieces (their fallback the whole-sequence single pass), else 1. The workspace reserves
// the pieces' flags by it (fwd_workspace.h).
inline int plan_single_pass_pieces(const RecurrencePlan& plan) {
  return plan.method == SplitMethod::kWarmup ? plan.pieces
         : plan.method == SplitMethod::kNone ? plan.single_pass_pieces
                                             : 1;
}

// Pieces per sequence of a single-pass launch: plan_single_pass_pieces where pieces_ok (and, for a
// one-pass plan, `planned`: the warm-up length automatic); 1 (whole sequences) otherwise or where the
// grid would exceed 2^31 - 1 CTAs.
inline int single_pass_pieces(const RecurrencePlan& plan, bool pieces_ok, int64_t units, bool planned = true) {
  const int pieces = plan.method == SplitMethod::kNone && !planned ? 1 : plan_single_pass_pieces(plan);
  if (!pieces_ok || pieces < 2) return 1;
  return units * pieces > 0x7fffffff ? 1 : pieces;
}

// Float32 workspace of the exact combine: (P-1) states and max(P-2, 0) transitions of 128 x 128 per
// unit (0 without one); SIZE_MAX when the product does not fit in size_t.
size_t context_workspace_bytes(int64_t units, const RecurrencePlan& plan);

// ---- Across GPUs: the transition pass of a shard (docs/design.md §3.4, cp_sm90.cu) ----
//
// Exact layout, P segments per unit (P >= 1): per segment 2 x vsplit CTAs, its end state from zero
// and its transition (no outputs), then a fold of P steps. Bounded (method kWarmup): a unit whose
// decay bound holds runs one segment of at most kWarmupCap chunks (its tail), the others the exact
// layout, decided on the device; the launch covers the exact layout.
struct TransitionPlan {
  SplitMethod method = SplitMethod::kExact;  // kExact or kWarmup (bounded, exact fallback per unit)
  int segments = 1;                          // P of the exact layout
  int vsplit = 1;
  double cost_us = 0;                        // model: the exact layout
};

// units: transitions to compute (sequences x value heads); chunks: of the longest sequence;
// forced_segments: kda_fwd_params.context_split (0 automatic, n >= 1 segments); method:
// kda_fwd_params.context_method (KDA_CONTEXT_EXACT: never bounded); warmup_valid: as PlanRequest.
TransitionPlan plan_transition(const PlanRequest& request);

inline int64_t transition_slots(const TransitionPlan& p) { return int64_t{2} * p.vsplit * p.segments; }

// Float32 scratch of the transition pass: per unit and segment its end state and transition.
size_t transition_scratch_bytes(int64_t units, const TransitionPlan& plan);

// Whether every element offset of the [B, T, heads(, D)] tensor t, with 16 token strides added (the
// rows a chunk's threads address past a sequence's end), is below 2^31: then the preparation forms
// its row offsets in 32-bit arithmetic (PrepParams::off32). Shapes and strides non-negative (validated).
bool offsets_fit_int32(const kda_tensor& t);

}  // namespace kda::sm90
