// What one CTA of chunk_recurrence_kernel does: which (sequence, value head, row slice), which range
// of the sequence's chunks, from which state to which, and whether it writes outputs. Decoded from
// the block index for the three passes of src/launch/plan.h:
//
//   kWhole   per unit (sequence x value head) vsplit CTAs: slice j, all chunks, initial -> final.
//   kFirst   per unit vsplit x (2P - 3) CTAs: j < vsplit: segment 0, slice j, initial -> E0 (states
//            slot 0), outputs written; then per middle segment p = 1..P-2, 2 x vsplit CTAs: slices
//            of its end state from zero (-> states slot p) and slices of its transition from the
//            identity with zero values (-> transitions slot p-1), no outputs.
//   kSecond  per unit vsplit x (P - 1) CTAs: segment 1 + j / vsplit from states slot seg - 1 (the
//            combined start state), outputs written; the last segment writes the final state.
// Segment s covers chunks [s·per, min((s+1)·per, C)) with per = ceil(C / P), C = the sequence's
// chunks (possibly empty: a short sequence just passes its state through).
#pragma once

#include <cstdint>

#include "src/kernels/sm90/kernel_params.h"
#include "src/kernels/sm90/sequence_map.cuh"

namespace kda::sm90 {

struct RecurrenceTask {
  int32_t seq, hv, slice;
  SequenceSpan span;
  int32_t c0, c1;         // chunk range [c0, c1) of the sequence
  bool transition;        // rows of a transition: identity start, zero values, no outputs
  bool write_out;
  const void* init;       // start state [128][128] (nullptr: zeros, or the identity for a transition)
  bool init_f32;
  void* fin;              // end state destination (nullptr: not stored)
  bool fin_f32;
};

__device__ __forceinline__ RecurrenceTask recurrence_task(const RecurrenceParams& p, int64_t block) {
  constexpr int64_t kStateElems = 128 * 128;
  const int P = p.segments;
  const int64_t slots = p.pass == RecurrencePass::kWhole   ? p.vsplit
                        : p.pass == RecurrencePass::kFirst ? static_cast<int64_t>(p.vsplit) * (2 * P - 3)
                                                           : static_cast<int64_t>(p.vsplit) * (P - 1);
  const int64_t unit = block / slots;
  const int j = static_cast<int>(block % slots);
  RecurrenceTask t;
  t.hv = static_cast<int32_t>(unit % p.HV);
  t.seq = static_cast<int32_t>(unit / p.HV);
  t.span = sequence_span(p.seq, t.seq);
  const int32_t nchunks = (t.span.len + 15) / 16;
  const int64_t state_off = unit * kStateElems;  // [N, HV, 128, 128]
  const void* user_init =
      p.initial_state == nullptr
          ? nullptr
          : static_cast<const unsigned char*>(p.initial_state) + state_off * (p.initial_is_f32 ? 4 : 2);
  void* user_fin = p.final_state == nullptr
                       ? nullptr
                       : static_cast<unsigned char*>(p.final_state) + state_off * (p.final_is_f32 ? 4 : 2);
  float* states = p.cp_states + unit * (P - 1) * kStateElems;
  float* transitions = p.cp_transitions + unit * (P > 2 ? P - 2 : 0) * kStateElems;

  int segment = 0;
  t.transition = false;
  t.write_out = true;
  t.init = user_init;
  t.init_f32 = p.initial_is_f32 != 0;
  t.fin = user_fin;
  t.fin_f32 = p.final_is_f32 != 0;
  if (p.pass == RecurrencePass::kWhole) {
    t.slice = j;
  } else if (p.pass == RecurrencePass::kFirst) {
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
    segment = 1 + j / p.vsplit;
    t.slice = j % p.vsplit;
    t.init = states + (segment - 1) * kStateElems;
    t.init_f32 = true;
    if (segment != P - 1) t.fin = nullptr;
  }
  if (p.pass == RecurrencePass::kWhole) {
    t.c0 = 0;
    t.c1 = nchunks;
  } else {
    const int32_t per = (nchunks + P - 1) / P;
    t.c0 = min(segment * per, nchunks);
    t.c1 = min(t.c0 + per, nchunks);
  }
  return t;
}

}  // namespace kda::sm90
