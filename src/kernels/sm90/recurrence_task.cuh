// What one CTA of chunk_recurrence_kernel does: which (sequence, value head, row slice), which range
// of the sequence's chunks, from which state to which, and whether it writes outputs. CTAs are
// ordered slot-major (block = slot·units + unit) so that, whatever the unit's layout, the CTAs that
// have work come first. Per unit and pass (src/launch/plan.h):
//
//   one pass      vsplit slots: slice j, all chunks, initial -> final.
//   exact, pass 1 vsplit x (2P - 3) slots: j < vsplit: segment 0, slice j, initial -> E0 (states
//                 slot 0), outputs written; then per middle segment p = 1..P-2, 2 x vsplit slots:
//                 slices of its end state from zero (-> states slot p) and slices of its transition
//                 from the identity with zero values (-> transitions slot p-1), no outputs.
//   exact, pass 2 vsplit x (P - 1) slots: segment 1 + j / vsplit from states slot seg - 1 (the
//                 combined start state), outputs written; the last segment writes the final state.
//   warm-up       pass 1: a unit whose bound holds (no fallback) runs vsplit x pieces slots: piece
//                 j / vsplit walks chunks [c0 - w, c1) from a zero state (from the initial state
//                 when c0 - w = 0), writing outputs from c0 on; the piece holding the last chunk
//                 writes the final state. A unit that falls back runs the exact pass 1 (or, with one
//                 segment, the one pass), then its combine and pass 2 (recurrence_tail.cuh: tail
//                 jobs of this grid; kda_fwd_prepared: their own launches, which skip units that did
//                 not fall back).
//                 Slots a unit does not use are idle (the CTA exits).
//   transition    (across GPUs) per segment 2 x vsplit slots, segment-major: slice j % vsplit of its
//                 end state from zero with the values (-> cp_states [unit][seg][0]), then of its
//                 transition from the identity with zero values (-> [unit][seg][1]); no outputs. P
//                 equal segments, or, with the bounded method when the unit's bound holds, one
//                 segment: the last w chunks (w = warm[0], decided by the kernel as for a piece).
// Segment s covers chunks [segment_first_chunk(s), segment_first_chunk(s + 1)) (kernel_params.h: s·per
// with per = ceil(C / P), C = the sequence's chunks, but the last segment holds the final split's
// chunks; segments may be empty: a short sequence just passes its state through); warm-up piece s >= 1
// starts one chunk later (piece_first_chunk), so piece 0 has per + 1 chunks and the last one fewer.
#pragma once

#include <cstdint>

#include "src/kernels/sm90/kernel_params.h"
#include "src/kernels/sm90/sequence_map.cuh"
#include "src/kernels/sm90/single_pass_fallback.cuh"
#include "src/kernels/sm90/chunk_record.cuh"
#include "src/kernels/sm90/tail_counters.cuh"
#include "src/kernels/sm90/warmup_rule.h"  // warmup_chunks
#include "src/ptx/gpu_sync.cuh"
#include "src/ptx/grid_dependency.cuh"
#include "src/ptx/ldmatrix.cuh"
#include "src/ptx/mma.cuh"

namespace kda::sm90 {

struct RecurrenceTask {
  bool idle;              // nothing to do for this CTA
  int32_t seq, hv, slice;
  SequenceSpan span;
  int32_t c_start, c_out, c_end;  // walks chunks [c_start, c_end), writes outputs of [c_out, c_end)
  bool transition;        // rows of a transition: identity start, zero values, no outputs
  bool write_out;
  const void* init;       // start state [128][128] (nullptr: zeros, or the identity for a transition)
  bool init_f32;
  void* fin;              // end state destination (nullptr: not stored)
  bool fin_f32;
  bool fallback;          // bounded warm-up: the unit runs the exact path
};

__device__ __forceinline__ int32_t ceil_div(int32_t a, int32_t b) { return (a + b - 1) / b; }

// First chunk of warm-up piece `piece` of a sequence of `nchunks` chunks, pieces of `per` chunks:
// piece 0 starts at 0, piece j >= 1 at j·per + kPieceShift (at most nchunks: an empty piece). Piece 0
// walks no warm-up and the piece holding the last chunk also stores the final state, so piece 0
// takes kPieceShift more chunks and the last piece as many fewer (one chunk: the warm-up assumed
// per piece, plan.cpp, and the final state's store and split update take about one step).
#ifndef FLASH_KDA_PIECE_SHIFT
#define FLASH_KDA_PIECE_SHIFT 1
#endif
inline constexpr int32_t kPieceShift = FLASH_KDA_PIECE_SHIFT;
__device__ __forceinline__ int32_t piece_first_chunk(int32_t piece, int32_t per, int32_t nchunks) {
  return piece == 0 ? 0 : min(piece * per + kPieceShift, nchunks);
}

// The caller's initial state [128][128] of a unit (nullptr: none given).
__device__ __forceinline__ const void* unit_initial_state(const RecurrenceParams& p, int64_t unit) {
  return p.initial_state == nullptr
             ? nullptr
             : static_cast<const unsigned char*>(p.initial_state) + unit * (128 * 128) * (p.initial_is_f32 ? 4 : 2);
}

// Bounded warm-up plans, pass 1: CTA `block` is one of the slots below vsplit, which start from the
// caller's initial state at the first chunk in either layout (piece 0, or segment 0 / the one pass),
// so its consumers may load that state before the task is known (it is the caller's, not the
// preparation's). Then *init is it and *slice the CTA's value-row slice.
template <bool kWarm>
__device__ __forceinline__ bool preloads_initial_state(const RecurrenceParams& p, int64_t block, const void** init,
                                                       int* slice) {
  if (!(kWarm && p.pass == RecurrencePass::kFirst && block < static_cast<int64_t>(p.units) * p.vsplit)) return false;
  *init = unit_initial_state(p, block % p.units);
  *slice = static_cast<int>(block / p.units);
  return true;
}

// `fallback`: the unit runs the exact path (warm-up plans); `warm`: per piece, its warm-up chunks;
// `pass`: p.pass, or kSecond for the tail jobs of a warm-up plan's pass 1 (recurrence_tail.cuh).
__device__ __forceinline__ RecurrenceTask recurrence_task(const RecurrenceParams& p, RecurrencePass pass, int64_t block,
                                                          bool fallback, const int32_t* warm) {
  constexpr int64_t kStateElems = 128 * 128;
  const int64_t unit = block % p.units;
  const int j = static_cast<int>(block / p.units);
  RecurrenceTask t;
  t.idle = false;
  t.hv = static_cast<int32_t>(unit % p.HV);
  t.seq = p.seq_offset + static_cast<int32_t>(unit / p.HV);
  t.span = sequence_span(p.seq, t.seq);
  const int32_t nchunks = ceil_div(t.span.len, 16);
  const int64_t state_off = unit * kStateElems;  // [N, HV, 128, 128]
  const void* user_init = unit_initial_state(p, unit);
  // Pass 1 of an in-place bounded warm-up writes final states to the workspace (deferred_final).
  void* fin_base = pass == RecurrencePass::kFirst && p.deferred_final != nullptr ? p.deferred_final : p.final_state;
  void* user_fin =
      fin_base == nullptr ? nullptr : static_cast<unsigned char*>(fin_base) + state_off * (p.final_is_f32 ? 4 : 2);
  const int P = p.segments;
  float* states = p.cp_states + unit * (P > 1 ? P - 1 : 0) * kStateElems;
  float* transitions = p.cp_transitions + unit * (P > 2 ? P - 2 : 0) * kStateElems;

  t.transition = false;
  t.fallback = fallback;
  t.write_out = true;
  t.init = user_init;
  t.init_f32 = p.initial_is_f32 != 0;
  t.fin = user_fin;
  t.fin_f32 = p.final_is_f32 != 0;
  t.c_start = t.c_out = 0;
  t.c_end = nchunks;

  if (pass == RecurrencePass::kTransition) {
    const bool bounded = p.method == SplitMethod::kWarmup && !fallback;
    const int segs = bounded ? 1 : P;
    t.idle = j >= 2 * p.vsplit * segs;
    const int seg = j / (2 * p.vsplit), r = j % (2 * p.vsplit);
    t.slice = r % p.vsplit;
    t.transition = r >= p.vsplit;
    t.write_out = false;
    t.init = nullptr;
    t.fin_f32 = true;
    t.fin = t.idle ? nullptr : p.cp_states + ((unit * P + seg) * 2 + (t.transition ? 1 : 0)) * kStateElems;
    if (bounded) {
      t.c_start = nchunks - warm[0];
      t.c_end = nchunks;
    } else {
      t.c_start = segment_first_chunk(seg, P, nchunks, t.span.len);
      t.c_end = segment_first_chunk(seg + 1, P, nchunks, t.span.len);
    }
    t.c_out = t.c_start;
    return t;
  }

  // Which layout this unit uses in this pass.
  if (p.method == SplitMethod::kWarmup) {
    if (pass == RecurrencePass::kFirst && !fallback) {
      // Warm-up pieces.
      t.idle = j >= p.vsplit * p.pieces;
      const int piece = j / p.vsplit;
      t.slice = j % p.vsplit;
      const int32_t per = ceil_div(nchunks, p.pieces);
      const int32_t c0 = piece_first_chunk(piece, per, nchunks);
      t.c_end = piece_first_chunk(piece + 1, per, nchunks);
      const int32_t w = piece == 0 ? 0 : warm[piece];
      t.c_start = c0 - w;
      t.c_out = c0;
      if (t.c_start > 0) t.init = nullptr;  // zero start; at chunk 0 the true initial state (exact)
      // The piece holding the last chunk writes the final state (piece 0 for an empty sequence).
      if (!(t.c_end == nchunks && (c0 < nchunks || piece == 0))) t.fin = nullptr;
      if (c0 >= nchunks && piece != 0) t.idle = true;  // empty piece
      return t;
    }
    if (!fallback) {  // pass 2 of a unit that did not fall back
      t.idle = true;
      return t;
    }
    if (P == 1) pass = RecurrencePass::kWhole;  // the fallback is the one pass
  }

  if (pass == RecurrencePass::kWhole) {
    t.idle = j >= p.vsplit;
    t.slice = j;
    return t;
  }
  int segment = 0;
  if (pass == RecurrencePass::kFirst) {
    t.idle = j >= p.vsplit * (2 * P - 3);
    t.fin_f32 = true;
    if (j < p.vsplit) {
      t.slice = j;
      t.fin = states;
    } else {
      const int jj = j - p.vsplit;
      segment = 1 + jj / (2 * p.vsplit);
      const int r = jj % (2 * p.vsplit);
      t.slice = r % p.vsplit;
      t.transition = r >= p.vsplit;
      t.write_out = false;
      t.init = nullptr;
      t.fin = t.transition ? static_cast<void*>(transitions + (segment - 1) * kStateElems)
                           : static_cast<void*>(states + segment * kStateElems);
    }
  } else {
    t.idle = j >= p.vsplit * (P - 1);
    segment = 1 + j / p.vsplit;
    t.slice = j % p.vsplit;
    t.init = states + (segment - 1) * kStateElems;
    t.init_f32 = true;
    if (segment != P - 1) t.fin = nullptr;
  }
  t.c_start = t.c_out = segment_first_chunk(segment, P, nchunks, t.span.len);
  t.c_end = segment_first_chunk(segment + 1, P, nchunks, t.span.len);
  return t;
}

// The outputs of one warp's 16 value rows v0.. for one chunk (tokens c·16 .. c·16 + L − 1 of the
// span), given as the two m16n8 C fragments o[nt] (rows v, columns tokens 8nt..8nt+7): to bf16,
// transposed through the warp's 512-byte shared tile (stmatrix.trans), then one 16-byte store per
// (token, half) of valid tokens. Both recurrence kernels use it.
__device__ __forceinline__ void store_out_rows(const float (&o)[2][4], unsigned char* out_tile, const RecurrenceParams& p,
                                               const SequenceSpan& span, int hv, int c, int L, int v0, int lane) {
  const uint32_t r[4] = {ptx::pack_bf16x2(o[0][0], o[0][1]), ptx::pack_bf16x2(o[0][2], o[0][3]),
                         ptx::pack_bf16x2(o[1][0], o[1][1]), ptx::pack_bf16x2(o[1][2], o[1][3])};
  const int m = lane >> 3, rr = lane & 7;
  ptx::stmatrix_x4_trans(out_tile + ChunkRecord::small_chunk_byte(rr + 8 * (m >> 1), m & 1), r);
  __syncwarp();
  const int tok = lane >> 1, h = lane & 1;
  if (tok < L) {
    const int64_t t = span.t0 + c * 16 + tok;
    uint16_t* dst = p.out + span.batch * p.out_st.b + t * p.out_st.t + hv * p.out_st.h + v0 + 8 * h;
    *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(out_tile + ChunkRecord::small_chunk_byte(tok, h));
  }
}

// The task of a CTA of a bounded warm-up plan (kWarm kernels), decided on the device: waits for the
// previous kernel (the preparation's chunk bounds; in pass 2 the fallback flags), then, in pass 1
// and the transition pass, thread t decides piece t's warm-up (t >= 1; transition pass: thread 0,
// the unit's tail, the last w chunks) into warm[] (shared, kMaxContextSegments entries) and the
// unit's fallback (written to p.unit_fallback by the unit's first CTA). Every thread of the CTA
// must call it (block-wide barriers); every CTA of the unit computes the same warm-up lengths.
__device__ __forceinline__ RecurrenceTask warm_recurrence_task(const RecurrenceParams& p, int32_t* warm) {
  bool fallback = false;
  ptx::wait_primary();
  const int64_t unit = blockIdx.x % p.units;
  // A unit the single pass computed (RecurrenceParams::sp_fail): idle, decided bounded.
  const bool done = p.sp_fail != nullptr && p.pass == RecurrencePass::kFirst &&
                    !single_pass_fell_back(p.sp_fail, p.sp_pieces, p.units, unit);
  // Tail jobs (recurrence_tail.cuh) wait only once every CTA of the grid has got this far.
  if (p.tail != nullptr && threadIdx.x == 0) ptx::red_relaxed_add(TailWords{p.tail}.started(), 1);
  if (p.pass == RecurrencePass::kFirst || p.pass == RecurrencePass::kTransition) {
    const bool tail = p.pass == RecurrencePass::kTransition;
    bool ok = true;
    const int t = threadIdx.x;
    if (!done && (tail ? t == 0 : (t >= 1 && t < p.pieces))) {
      const SequenceSpan sp = sequence_span(p.seq, p.seq_offset + static_cast<int32_t>(unit / p.HV));
      const int32_t nchunks = ceil_div(sp.len, 16);
      const int32_t c0 = tail ? nchunks : piece_first_chunk(t, ceil_div(nchunks, p.pieces), nchunks);
      int32_t w = 0;
      if (p.forced_warmup > 0) {
        w = min(p.forced_warmup, c0);
      } else {
        const float* bounds = p.chunk_bounds + static_cast<int64_t>(unit % p.HV) * p.seq.num_vchunks + sp.vbase;
        ok = warmup_chunks<kWarmupCap>([&](int i) { return bounds[c0 - 1 - i]; }, c0, kWarmupLog2Bound, &w);
      }
      warm[t] = w;
    }
    fallback = __syncthreads_and(ok) == 0;
    if (threadIdx.x == 0 && blockIdx.x < p.units) {
      p.unit_fallback[unit] = fallback ? 1 : 0;
      if (p.tail != nullptr) publish_decision(TailWords{p.tail}, unit, fallback);
    }
  } else {
    fallback = p.unit_fallback[unit] != 0;
    __syncthreads();
  }
  RecurrenceTask task = recurrence_task(p, p.pass, blockIdx.x, fallback, warm);
  if (done) task.idle = true;
  return task;
}

}  // namespace kda::sm90
