// chunk_recurrence_kernel: the sequential part (docs/design.md §2.2). For one (sequence, value
// head, slice of value rows) it walks the chunks in order, keeping its slice of the float32 state
// in registers:
//     U = Tb·Vc − Wd·Sᵀ,   O = P·Vc + Qp·Sᵀ,   S ← S·Diag(Γ) + Uᵀ·Kr
// computed transposed (rows = value rows v): Xᵀ = S·Wdᵀ and Oinᵀ = S·Qpᵀ (S as the A operand),
// Uᵀ = Vcᵀ·Tbᵀ − Xᵀ, Oᵀ = Vcᵀ·Pᵀ + Oinᵀ, then S·Diag(Γ) + Uᵀ·Kr with S as the accumulator.
//
// Grid:   per (sequence, value head) vsplit CTAs (one per slice of value rows), or for the passes
//         of context parallelism the CTAs of recurrence_task.cuh, each walking a range of chunks
//         (a segment) from a given start state; a transition CTA runs the identity with zero
//         values and writes no outputs.
// Block:  kRowGroups x kColSplit consumer warps + 1 producer warp. Row group rg owns value rows
//         [slice·16·kRowGroups + 16·rg, +16); within it, warp cp owns key columns
//         [cp·128/kColSplit, +128/kColSplit) of those rows' state, as 16/kColSplit mma C fragments.
//         With kColSplit > 1 a row group's warps exchange their partial Xᵀ and Oinᵀ (sums over
//         their key columns) through shared memory and one named barrier per chunk; each then
//         forms the whole Uᵀ and updates its own columns, and warp cp = 0 forms and stores the
//         output. Splitting columns shortens the per-chunk critical path (fewer mma per warp) when
//         few (sequence, head) pairs leave SMs idle.
// Producer (last warp): per chunk, the chunk record (chunk_record.cuh, copied as it is: these
//         warps read its panels with ldmatrix) and the slice's values by
//         cp.async (16 bytes per lane and step; rows past the sequence zero-filled), into a
//         kStages-deep ring of stages, completing on full[stage] (one arrival per lane);
//         consumers release a stage with one arrive per lane on empty[stage] (each lane's reads
//         released by its own arrive: compute-sanitizer's racecheck follows that hand-off, not a
//         __syncwarp followed by one arrive per warp; tests/gpu/test_ring_sync.cu). (cp.async
//         rather than bulk copies: the values come in 16 strided rows, one copy-engine request each.)
// Precision (kSplitState): S enters the products with Wd and Qp as a bf16 hi + lo pair (two mma),
//         so the state operand carries ~16 bits; Tb and P always enter as hi + lo pairs; Uᵀ in the
//         update is one bf16 (a hi + lo pair with FLASH_KDA_SPLIT_U=1, kernel_params.h); Kr is one bf16 from the record. Operand
//         fragments come from record_fragments.cuh.
// Shared: RecurrenceLayout (recurrence_layout.h).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

#include "src/kernels/sm90/chunk_record.cuh"
#include "src/kernels/sm90/kernel_params.h"
#include "src/kernels/sm90/record_fragments.cuh"
#include "src/kernels/sm90/recurrence_fragments.cuh"
#include "src/kernels/sm90/recurrence_layout.h"
#include "src/kernels/sm90/recurrence_tail.cuh"
#include "src/kernels/sm90/recurrence_task.cuh"
#include "src/kernels/sm90/sequence_map.cuh"
#include "src/ptx/barrier.cuh"
#include "src/ptx/cp_async.cuh"
#include "src/ptx/grid_dependency.cuh"
#include "src/ptx/ldmatrix.cuh"
#include "src/ptx/mma.cuh"
#include "src/ptx/warpgroup.cuh"

namespace kda::sm90 {

// kWarm: the passes of a bounded warm-up plan (method kWarmup), whose CTAs decide their work on
// the device; the other plans use the kWarm = false instance (no decision, one loop).
template <int kRowGroups, int kColSplit, bool kSplitState, int kCtasPerSm = 1, bool kWarm = false>
__global__ void __launch_bounds__(RecurrenceLayout<kRowGroups, kColSplit, kCtasPerSm>::kThreads, kCtasPerSm)
    chunk_recurrence_kernel(RecurrenceParams p) {
  using Layout = RecurrenceLayout<kRowGroups, kColSplit, kCtasPerSm>;
  using namespace recurrence_detail;
  using namespace frag;
  constexpr int kWarps = Layout::kWarps;
  constexpr int kTiles = Layout::kTiles;
  constexpr int kSteps = Layout::kSteps;
  extern __shared__ __align__(128) unsigned char smem[];
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + Layout::kBarrierOffset);
  uint64_t* empty = full + Layout::kStages;

  // The tail's job loop (warm-up instances; recurrence_tail.cuh).
  __shared__ std::conditional_t<kWarm, TailShared, char> tail;
  static_assert(kRowGroups < static_cast<int>(kTailConsumerBarrier),
                "the row groups' named barriers (1 + rg) are not the tail's");

  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  ptx::launch_dependents();
  if constexpr (kWarm) {
    if (skip_after_single_pass(p)) return;
  }
  RecurrenceTask first;  // the job of this CTA's slot (blockIdx.x)
  if constexpr (!kWarm) first = recurrence_task(p, p.pass, blockIdx.x, false, nullptr);

  if (threadIdx.x == 0) {
    for (int s = 0; s < Layout::kStages; ++s) {
      // full: one cp.async arrival per producer lane; empty: one arrival per consumer lane.
      ptx::mbar_init(&full[s], 32);
      ptx::mbar_init(&empty[s], 32 * kWarps);
    }
    if constexpr (kWarm) tail_shared_init<32 * kWarps, 32>(tail);
    ptx::fence_barrier_init();
  }
  // Bounded warm-up: the unit's layout depends on the gates (the preparation's chunk bounds), so
  // these CTAs wait for the preparation before anything else; every CTA of the unit computes the
  // same warm-up lengths (thread t: piece t) and the same decision. Slots below vsplit preload the
  // caller's initial state before waiting (preloads_initial_state, recurrence_task.cuh).
  __shared__ int32_t warm[kWarm ? kMaxContextSegments : 1];
  float S[Layout::kTiles][4];
  const void* preload_init = nullptr;
  int preload_slice = 0;
  const bool first_preloaded =
      preloads_initial_state<kWarm>(p, blockIdx.x, &preload_init, &preload_slice) && warp < kWarps;
  if (first_preloaded)
    recurrence_detail::load_state<Layout::kTiles>(S, preload_init, p.initial_is_f32 != 0,
                                                  preload_slice * Layout::kRows + 16 * (warp / kColSplit),
                                                  (warp % kColSplit) * Layout::kTiles, lane);
  if constexpr (kWarm) {
    first = warm_recurrence_task(p, warm);
  } else {
    __syncthreads();
  }
  // One job (a task of recurrence_task.cuh): the producer returns once it has issued its copies,
  // the consumers once they have stored the end state. `preloaded`: S holds the task's start state.
  auto run = [&](const RecurrenceTask& task, bool preloaded) {
    const int hv = task.hv;
    const SequenceSpan& span = task.span;
    const int c_start = task.c_start, c_out = task.c_out, steps = task.c_end - task.c_start;
    const bool transition = task.transition, write_out = task.write_out;
    const int row0 = task.slice * Layout::kRows;  // first value row of this CTA

    const uint8_t* records = p.records + (static_cast<int64_t>(hv) * p.seq.num_vchunks + span.vbase) * ChunkRecord::kBytes;
    // The last updates (final_split_chunks: the last chunk, and the one before where the last is
    // short) of a walk that ends at the sequence's end and stores its state, with U and Kr as hi + lo
    // pairs (RecurrenceParams::kr_lo): Kr's low part comes with that chunk's stage, into slot
    // steps - 1 - i at Layout::kKrLoOffset.
    const bool final_split = kFinalSplit && p.kr_lo != nullptr && task.fin != nullptr && !transition && steps > 0 &&
                             task.c_end * 16 >= span.len;
    const int split_steps = final_split ? min(final_split_chunks(span.len), steps) : 0;

    if (warp == kWarps) {
      // ---- Producer warp ---------------------------------------------------------------------------
      // Per chunk, by cp.async, 16 bytes per lane and step: the record, then the slice's values (rows
      // past the sequence zero-filled, so no stale or uninitialised data is ever read). Each lane
      // then arrives on full[stage] when its copies have landed.
      constexpr int kRecordPieces = ChunkRecord::kBytes / 16;
      constexpr int kPiecesPerRow = Layout::kRows * 2 / 16;
      constexpr int kValuePieces = 16 * kPiecesPerRow;
      static_assert(kValuePieces % 32 == 0, "whole warp steps");
      ptx::wait_primary();  // the records (and, in pass 2, the start states) come from the previous kernel
      for (int i = 0; i < steps; ++i) {
        const int c = c_start + i;
        const int s = i % Layout::kStages;
        const int use = i / Layout::kStages;
        const int L = min(16, span.len - c * 16);
        unsigned char* stage = smem + s * Layout::kStageBytes;
        if (use > 0) ptx::mbar_wait(&empty[s], (use - 1) & 1);
        const unsigned char* rec = records + static_cast<int64_t>(c) * ChunkRecord::kBytes;
        for (int k = lane; k < kRecordPieces; k += 32) ptx::cp_async_16_zfill(stage + 16 * k, rec + 16 * k, true);
        if (!transition) {  // a transition runs on zero values: it never reads the value stage
#pragma unroll
          for (int k = lane; k < kValuePieces; k += 32) {
            const int row = k / kPiecesPerRow, piece = k % kPiecesPerRow;
            const bool valid = row < L;
            const int64_t t = span.t0 + c * 16 + (valid ? row : 0);
            const uint16_t* src = p.v + span.batch * p.v_st.b + t * p.v_st.t + hv * p.v_st.h + row0 + 8 * piece;
            ptx::cp_async_16_zfill(stage + Layout::kValueOffset + row * Layout::kValueRowBytes + 16 * piece, src, valid);
          }
        }
        if (i >= steps - split_steps) {
          const int slot = steps - 1 - i;
          const unsigned char* lo = p.kr_lo + ((static_cast<int64_t>(task.seq) * p.HV + hv) * kKrLoSlots + slot) * kKrLoBytes;
          for (int k = lane; k < kKrLoBytes / 16; k += 32)
            ptx::cp_async_16_zfill(smem + Layout::kKrLoOffset + slot * kKrLoBytes + 16 * k, lo + 16 * k, true);
        }
        ptx::cp_async_arrive_noinc(&full[s]);
      }
      return;
    }

    // ---- Consumer warps ----------------------------------------------------------------------------
    const int rg = warp / kColSplit;  // row group
    const int cp = warp % kColSplit;  // column part
    const int v0 = row0 + 16 * rg;    // first value row of this warp
    const int nt0 = cp * kTiles;      // first state n-tile of this warp
    // The caller's initial state may be read before the previous kernel completes (programmatic
    // dependent launch: it writes only records and segment states); a combined start state may not.
    if (preloaded) {
      // S holds the caller's initial state (above): piece 0, segment 0 or the one pass.
    } else if (p.pass != RecurrencePass::kSecond) {
      if (transition)
        identity_state<kTiles>(S, v0, nt0, lane);
      else
        load_state<kTiles>(S, task.init, task.init_f32, v0, nt0, lane);
      ptx::wait_primary();
    } else {
      ptx::wait_primary();
      load_state<kTiles>(S, task.init, task.init_f32, v0, nt0, lane);
    }
    unsigned char* out_tile = smem + Layout::kOutOffset + rg * 512;

    // One chunk step; out_step: whether it forms and writes the outputs (not for transitions and
    // warm-up chunks). Two loops below, so that out_step is invariant in each. kFinal
    // (std::integral_constant): the last update of a final state (final_split), with U and Kr as hi +
    // lo pairs (a third copy of the step rather than a branch in every step).
    auto step = [&](int i, bool out_step, auto kFinal) {
      constexpr bool kLast = decltype(kFinal)::value;
      const int c = c_start + i;
      const int s = i % Layout::kStages;
      const int L = min(16, span.len - c * 16);
      const unsigned char* stage = smem + s * Layout::kStageBytes;
      ptx::mbar_wait(&full[s], (i / Layout::kStages) & 1);

      // Xᵀ = S·Wdᵀ and Oinᵀ = S·Qpᵀ over this warp's key columns: [16 v][16 tokens] each, two
      // n-tiles. With 8 k-steps the low parts of S accumulate separately (xl, ol) so that no chain
      // is longer than 8 mma; with fewer they share the accumulators (fewer registers).
      constexpr bool kSeparateLo = kSteps > 4;
      float x[2][4] = {}, o[2][4] = {}, xl_[2][4] = {}, ol_[2][4] = {};
      [[maybe_unused]] float(&xl)[2][4] = kSeparateLo ? xl_ : x;  // (unused without kSplitState)
      [[maybe_unused]] float(&ol)[2][4] = kSeparateLo ? ol_ : o;
#pragma unroll
      for (int kk = 0; kk < kSteps; ++kk) {
        const int ks = cp * kSteps + kk;
        uint32_t bw[4], bq[4];
        load_b_nmajor<ChunkRecord::kWqPanelBytes>(bw, stage + ChunkRecord::kWdOffset, ks, lane);
        if (out_step) load_b_nmajor<ChunkRecord::kWqPanelBytes>(bq, stage + ChunkRecord::kQpOffset, ks, lane);
        const uint32_t bw0[2] = {bw[0], bw[1]}, bw1[2] = {bw[2], bw[3]};
        const uint32_t bq0[2] = {bq[0], bq[1]}, bq1[2] = {bq[2], bq[3]};
        uint32_t a_hi[4];
        [[maybe_unused]] uint32_t a_lo[4];
        if constexpr (kSplitState) {
          ptx::c_pair_to_a_split(S[2 * kk], S[2 * kk + 1], a_hi, a_lo);
          ptx::mma_m16n8k16_bf16_f32(xl[0], a_lo, bw0);
          ptx::mma_m16n8k16_bf16_f32(xl[1], a_lo, bw1);
          if (out_step) {
            ptx::mma_m16n8k16_bf16_f32(ol[0], a_lo, bq0);
            ptx::mma_m16n8k16_bf16_f32(ol[1], a_lo, bq1);
          }
        } else {
          ptx::c_pair_to_a(S[2 * kk], S[2 * kk + 1], a_hi);
        }
        ptx::mma_m16n8k16_bf16_f32(x[0], a_hi, bw0);
        ptx::mma_m16n8k16_bf16_f32(x[1], a_hi, bw1);
        if (out_step) {
          ptx::mma_m16n8k16_bf16_f32(o[0], a_hi, bq0);
          ptx::mma_m16n8k16_bf16_f32(o[1], a_hi, bq1);
        }
      }
      if constexpr (kSeparateLo) {
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            x[nt][e] += xl_[nt][e];
            o[nt][e] += ol_[nt][e];
          }
      }

      // Operands that do not depend on the state: Vcᵀ as an A fragment (m = this row group's 16
      // value rows, k = 16 tokens, from the [token][v] tile) and the Tb hi/lo B fragments (loaded
      // here, before the exchange, so that their latency hides behind it).
      uint32_t av[4] = {}, th[4] = {}, tl[4] = {};
      if (!transition) {
        const int m = lane >> 3, r = lane & 7;
        const int tok = r + 8 * (m >> 1);
        const int col = 16 * rg + 8 * (m & 1);
        ptx::ldmatrix_x4_trans(av, stage + Layout::kValueOffset + tok * Layout::kValueRowBytes + col * 2);
      }
      if (!transition) {
        load_b_small(th, stage + ChunkRecord::kTbHiOffset, lane);
        load_b_small(tl, stage + ChunkRecord::kTbLoOffset, lane);
      }

      if constexpr (kColSplit > 1) {
        // Sum the row group's partial products: every warp needs the whole Xᵀ, warp 0 the whole Oinᵀ.
        unsigned char* exchange = smem + Layout::kExchangeOffset + (c & 1) * (kWarps * 2048);
        exchange_store(exchange + warp * 2048, x, o, lane);
        ptx::NamedBarrier{static_cast<uint32_t>(1 + rg), 32u * kColSplit}.sync();
#pragma unroll
        for (int q = 0; q < kColSplit; ++q) {
          if (q == cp) continue;
          const unsigned char* other = exchange + (rg * kColSplit + q) * 2048;
          exchange_add(other, x, 0, lane);
          if (cp == 0 && out_step) exchange_add(other, o, 2, lane);
        }
      }

      // Uᵀ = Vcᵀ·Tbᵀ − Xᵀ, with Tb as a hi + lo pair.
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) x[nt][e] = -x[nt][e];
        if (!transition) {
          const uint32_t bth[2] = {th[2 * nt], th[2 * nt + 1]}, btl[2] = {tl[2 * nt], tl[2 * nt + 1]};
          ptx::mma_m16n8k16_bf16_f32(x[nt], av, btl);
          ptx::mma_m16n8k16_bf16_f32(x[nt], av, bth);
        }
      }

      // S ← S·Diag(Γ) + Uᵀ·Kr on this warp's columns (the state's critical path: first). Uᵀ as one
      // bf16, or (kSplitU) as a bf16 hi + lo pair.
      uint32_t au[4];
      [[maybe_unused]] uint32_t al[4];
      {
        if constexpr (kSplitU || kLast)
          ptx::c_pair_to_a_split(x[0], x[1], au, al);
        else
          ptx::c_pair_to_a(x[0], x[1], au);
        const float* gamma = reinterpret_cast<const float*>(stage + ChunkRecord::kGammaOffset);
#pragma unroll
        for (int pp = 0; pp < kTiles / 2; ++pp) {
          uint32_t bk[4];
          load_b_kmajor<ChunkRecord::kKrPanelBytes>(bk, stage + ChunkRecord::kKrOffset, nt0 / 2 + pp, lane);
#pragma unroll
          for (int hh = 0; hh < 2; ++hh) {
            const int i = 2 * pp + hh;
            const float2 gm = *reinterpret_cast<const float2*>(gamma + (nt0 + i) * 8 + 2 * Frag::qid(lane));
            S[i][0] *= gm.x;
            S[i][1] *= gm.y;
            S[i][2] *= gm.x;
            S[i][3] *= gm.y;
            const uint32_t b[2] = {bk[2 * hh], bk[2 * hh + 1]};
            if constexpr (kSplitU && !kLast) ptx::mma_m16n8k16_bf16_f32(S[i], al, b);  // the small term first
            ptx::mma_m16n8k16_bf16_f32(S[i], au, b);
          }
        }
      }

      // Output (warp cp = 0 of each row group): Oᵀ = Vcᵀ·Pᵀ + Oinᵀ -> [token][v] tile
      // (stmatrix.trans) -> 16-byte stores of valid tokens.
      if (cp == 0 && out_step) {
        uint32_t ph[4], pl[4];
        load_b_small(ph, stage + ChunkRecord::kPHiOffset, lane);
        load_b_small(pl, stage + ChunkRecord::kPLoOffset, lane);
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
          const uint32_t bph[2] = {ph[2 * nt], ph[2 * nt + 1]}, bpl[2] = {pl[2 * nt], pl[2 * nt + 1]};
          ptx::mma_m16n8k16_bf16_f32(o[nt], av, bpl);
          ptx::mma_m16n8k16_bf16_f32(o[nt], av, bph);
        }
        store_out_rows(o, out_tile, p, span, hv, c, L, v0, lane);
      }
      // The final state's last update: + U_loᵀ·Kr + Uᵀ·Kr_lo, after the outputs and in a loop of its
      // own, so that Kr's two parts are never live with the rest of the step.
      if constexpr (kLast) {
#pragma unroll
        for (int pp = 0; pp < kTiles / 2; ++pp) {
          uint32_t bk[4], bkl[4];
          load_b_kmajor<ChunkRecord::kKrPanelBytes>(bk, stage + ChunkRecord::kKrOffset, nt0 / 2 + pp, lane);
          load_b_kmajor<ChunkRecord::kKrPanelBytes>(bkl, smem + Layout::kKrLoOffset + (steps - 1 - i) * kKrLoBytes,
                                                    nt0 / 2 + pp, lane);
#pragma unroll
          for (int hh = 0; hh < 2; ++hh) {
            const uint32_t b[2] = {bk[2 * hh], bk[2 * hh + 1]}, bl[2] = {bkl[2 * hh], bkl[2 * hh + 1]};
            ptx::mma_m16n8k16_bf16_f32(S[2 * pp + hh], al, b);
            ptx::mma_m16n8k16_bf16_f32(S[2 * pp + hh], au, bl);
          }
        }
      }
      // Release the stage: one arrival per lane, after its reads (the producer's next copies into
      // the stage acquire this barrier first).
      ptx::mbar_arrive(&empty[s]);
    };
    constexpr std::false_type kPlain{};
    const int plain_steps = steps - split_steps;
    if constexpr (kWarm) {
      const int warm_steps = min(c_out - c_start, plain_steps);  // warm-up chunks (no outputs)
      for (int i = 0; i < warm_steps; ++i) step(i, false, kPlain);
      for (int i = warm_steps; i < plain_steps; ++i) step(i, write_out, kPlain);
    } else {
      for (int i = 0; i < plain_steps; ++i) step(i, write_out, kPlain);
    }
    if (split_steps == 2) step(steps - 2, write_out && steps - 2 >= c_out - c_start, std::true_type{});
    if (final_split) step(steps - 1, write_out && steps - 1 >= c_out - c_start, std::true_type{});

    if (task.fin != nullptr) store_state<kTiles>(S, task.fin, task.fin_f32, v0, nt0, lane);
  };
  if constexpr (!kWarm) {
    if (first.idle) return;
    run(first, first_preloaded);
  } else {
    // (Warm-up plans: an idle CTA returns after waiting for the previous kernel, as every CTA must.)
    if (first.idle && p.tail == nullptr) return;
    // (Thread 0's bookkeeping is set before the first job: nothing of it stays live through the job.)
    if (p.tail != nullptr && threadIdx.x == 0)
      tail.book = TailBook{!first.idle && first.fallback ? TailDone::kPass1 : TailDone::kNothing,
                      static_cast<int64_t>(blockIdx.x % p.units), false};
    if (!first.idle) run(first, first_preloaded);
    if (p.tail == nullptr) return;
    // With p.tail, the CTA then takes the fallback's combine and pass-2 jobs (recurrence_tail.cuh).
    run_tail_jobs<32 * kWarps, 32>(
        p, tail, warp < kWarps,
        [&](int32_t) { tail_reset_ring(full, empty, Layout::kStages, 32, 32 * kWarps); },
        [&](int32_t job) {
          if (warp == kWarps)
            tail_combine_barriers(p);
          else
            tail_combine_rows<32 * kWarps>(p, job, reinterpret_cast<float*>(smem), threadIdx.x);
        },
        [&](int32_t job) {  // (tail_half 0)
          run(recurrence_task(p, RecurrencePass::kSecond, job - p.tail_combine_jobs, true, warm), false);
        });
  }
}

}  // namespace kda::sm90
