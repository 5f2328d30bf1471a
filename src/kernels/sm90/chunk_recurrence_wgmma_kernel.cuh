// chunk_recurrence_wgmma_kernel: the recurrence of chunk_recurrence_kernel.cuh on warpgroup MMA
// (wgmma), for slices of 64 or 128 value rows (vsplit 2 or 1). Same tasks (recurrence_task.cuh),
// same record (chunk_record.cuh), same results up to float rounding; the state of each 64 value
// rows lives in the fp32 accumulators of one warpgroup (tile::Acc<128>, 64 registers per thread).
//
// The chunk step's products (the batch, the update, what ptxas serialises) are wgmma_step.cuh's,
// shared with the single pass.
//
// Block: kWG consumer warpgroups (warps 4w..4w+3 own value rows slice·64·kWG + 64w + [0, 64)) and
// a producer: one warp beside one consumer warpgroup, a whole warpgroup beside two, which hands
// registers to the consumers by setmaxnreg (wgmma_stage.h). The chunk record is laid out as the
// ring stage's first bytes (chunk_record.cuh: 128B-swizzled column panels of [Wd; Qp] and Kr, the
// 32B-swizzled [Tb; P] hi and lo tiles, Γ), so the producer's first thread brings each chunk with one
// bulk copy of the record and one tensor copy per warpgroup of its values (a 16-token x 64-row box of
// v with the 128B swizzle: the MN-major A operand Vᵀ; the kernel's v_map, made by the launcher), all completing
// by bytes on full[stage] (a transition's zero values by a box wholly out of the tensor, which the copy
// engine fills with zeros). A sequence's partial last chunk and launches without a tensor map take
// the values by cp.async of the producer's first warp instead (zero-filled past the sequence: a tensor
// copy would read the next sequence's tokens). 16-byte cp.async of every
// piece, as until version 36, cost the two-warpgroup step 0.85 us against 0.65-0.74 us for bulk and
// tensor copies (benchmarks/wgmma_step_kernel.cuh). empty[stage]: one arrival per consumer lane,
// after its warpgroup's products have read the stage (wgmma.wait_group 0).
#pragma once

#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "src/kernels/sm90/chunk_record.cuh"
#include "src/kernels/sm90/kernel_params.h"
#include "src/kernels/sm90/recurrence_tail.cuh"
#include "src/kernels/sm90/recurrence_task.cuh"
#include "src/kernels/sm90/sequence_map.cuh"
#include "src/kernels/sm90/wgmma_stage.h"
#include "src/kernels/sm90/wgmma_step.cuh"
#include "src/ptx/barrier.cuh"
#include "src/ptx/bulk_copy.cuh"
#include "src/ptx/cp_async.cuh"
#include "src/ptx/grid_dependency.cuh"
#include "src/ptx/ldmatrix.cuh"
#include "src/ptx/mma.cuh"
#include "src/ptx/tma.cuh"  // fence_proxy_async_shared
#include "src/ptx/warpgroup.cuh"
#include "src/ptx/wgmma.cuh"
#include "src/tile/fragments.cuh"
#include "src/tile/operand.h"
#include "src/tile/smem_layout.h"
#include "src/tile/swizzle.h"

namespace kda::sm90 {

namespace wgmma_recurrence_detail {

inline constexpr int kAnyRole = 0, kProducerRole = 1, kConsumerRole = 2;

}  // namespace wgmma_recurrence_detail

template <int kWG, bool kWarm = false>
__global__ void __launch_bounds__(WgmmaRecurrenceLayout<kWG>::kThreads, 1)
    chunk_recurrence_wgmma_kernel(RecurrenceParams p, const __grid_constant__ CUtensorMap v_map, int32_t v_tma) {
  using L = WgmmaRecurrenceLayout<kWG>;
  static_assert(wgmma_recurrence_detail::record_is_stage_prefix<L>(), "one bulk copy brings the record");
  using Storage = typename L::Storage;
  using S_t = tile::Acc<128>;
  using XO_t = tile::Acc<32>;
  using namespace wgmma_recurrence_detail;
  extern __shared__ unsigned char smem_raw[];
  // The ring runs on across the jobs of a warm-up CTA (its tail): job j's step i is the ring's step
  // ring[0] + i (stage and phase from it), so every stage's reuse waits for its release, also from one
  // job to the next, and the barriers are initialised once (racecheck lost the order of the previous
  // job's bulk copies when they were invalidated and initialised again). ring[1]: the steps of the job
  // just done (thread 0), added to ring[0] between jobs (run_tail_jobs' reset step).
  __shared__ int32_t ring[2];
  // The tail's job loop (warm-up instances; recurrence_tail.cuh).
  __shared__ std::conditional_t<kWarm, TailShared, char> tail;
  Storage& st = *tile::smem_storage<Storage>(smem_raw);
  uint64_t* full = st.full;
  uint64_t* empty = st.empty;

  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int wg = warp >> 2;            // consumer warpgroup (kWG: the producer)
  const int t = threadIdx.x & 127;     // thread within the warpgroup
  ptx::launch_dependents();
  if constexpr (kWarm) {
    if (skip_after_single_pass(p)) return;
  }
  RecurrenceTask first;  // the job of this CTA's slot (blockIdx.x)
  if constexpr (!kWarm) first = recurrence_task(p, p.pass, blockIdx.x, false, nullptr);

  if (threadIdx.x == 0) {
    for (int s = 0; s < L::kStages; ++s) {
      ptx::mbar_init(&full[s], 1);  // the producer's first thread (expect_tx)
      ptx::mbar_init(&empty[s], 32 * L::kConsumerWarps);  // one arrival per consumer lane
    }
    if constexpr (kWarm) tail_shared_init<128 * kWG, L::kProducerThreads>(tail);
    ptx::fence_barrier_init();
    ring[0] = ring[1] = 0;
  }
  __shared__ int32_t warm[kWarm ? kMaxContextSegments : 1];
  S_t S;
  auto load_state = [&](const void* base, bool is_f32, int rows0) {
#pragma unroll
    for (int i = 0; i < S_t::kCount; i += 2) {
      const int64_t idx = static_cast<int64_t>(rows0 + S_t::row(t, i)) * 128 + S_t::col(t, i);
      if (base == nullptr) {
        S.v[i] = S.v[i + 1] = 0.0f;
      } else if (is_f32) {
        const float2 x = *reinterpret_cast<const float2*>(static_cast<const float*>(base) + idx);
        S.v[i] = x.x;
        S.v[i + 1] = x.y;
      } else {
        const __nv_bfloat162 x = *reinterpret_cast<const __nv_bfloat162*>(static_cast<const __nv_bfloat16*>(base) + idx);
        S.v[i] = __low2float(x);
        S.v[i + 1] = __high2float(x);
      }
    }
  };
  const void* preload_init = nullptr;
  int preload_slice = 0;
  const bool first_preloaded =
      preloads_initial_state<kWarm>(p, blockIdx.x, &preload_init, &preload_slice) && wg < kWG;
  if (first_preloaded) load_state(preload_init, p.initial_is_f32 != 0, preload_slice * L::kRows + 64 * wg);
  if constexpr (kWarm) {
    first = warm_recurrence_task(p, warm);
  } else {
    __syncthreads();
  }

  static_assert(!L::kProducerWarpgroup ||
                    ptx::setmaxnreg_fits(L::kThreads, {L::kProducerRegs, L::kConsumerRegs, L::kConsumerRegs}),
                "the setmaxnreg split must fit in the registers the CTA is launched with (else inc never returns)");
  // One job (a task of recurrence_task.cuh): the producer returns once it has issued its copies,
  // the consumers once they have stored the end state. `preloaded`: S holds the task's start state;
  // kSetRegs (std::integral_constant): the roles' setmaxnreg happens here (a CTA's only job).
  // half_row >= 0 (tail jobs of warm-up plans, RecurrenceParams::tail_half): the job is the 64 value
  // rows from half_row on, run by consumer warpgroup 0 alone (the others return; the ring's empty
  // barriers then count its lanes only), so that a tail with few pass-2 jobs takes twice the SMs.
  // kRole (std::integral_constant<int>): kAnyRole decides by the warpgroup at run time; kProducerRole
  // and kConsumerRole compile one role's code only (the warm-up instance's per-role loops, below).
  auto run = [&](const RecurrenceTask& task, bool preloaded, auto kSetRegs, int half_row, auto kRole) {
    constexpr int kRoleV = decltype(kRole)::value;
    const bool half = kWG == 2 && half_row >= 0;
    const int hv = task.hv;
    const SequenceSpan& span = task.span;
    const int c_start = task.c_start, c_out = task.c_out, steps = task.c_end - task.c_start;
    const bool transition = task.transition, write_out = task.write_out;
    const int row0 = task.slice * L::kRows + (half ? half_row : 0);  // first value row of this CTA
    const int base = kWarm ? ring[0] : 0;  // the ring's step of this job's step 0

    const uint8_t* records = p.records + (static_cast<int64_t>(hv) * p.seq.num_vchunks + span.vbase) * ChunkRecord::kBytes;
    // The last updates (final_split_chunks: the last chunk, and the one before where the last is
    // short) of a walk that ends at the sequence's end and stores its state, with U and Kr as hi + lo
    // pairs (RecurrenceParams::kr_lo): Kr's low part comes with that chunk's stage, into
    // st.kr_lo[steps - 1 - i].
    const bool final_split = kFinalSplit && p.kr_lo != nullptr && task.fin != nullptr && !transition && steps > 0 &&
                             task.c_end * 16 >= span.len;
    const int split_steps = final_split ? min(final_split_chunks(span.len), steps) : 0;

    if (kRoleV == kProducerRole || (kRoleV == kAnyRole && wg == kWG)) {
      // ---- Producer (L::kProducerThreads threads) ------------------------------------------------------
      if constexpr (L::kProducerWarpgroup && decltype(kSetRegs)::value) ptx::setmaxnreg_dec<L::kProducerRegs>();
      using Share = ProducerShare<L>;
      // The producer's first warp does the copies (a producer warpgroup's other warps have nothing to do:
      // they go on to the next job, or end). Its lane 0 issues the bulk and tensor copies; the whole warp
      // meets only in steps whose values come by cp.async.
      if (warp != 4 * kWG) return;
      const int pt = lane;
      // Tensor copies of the values for whole chunks of a sequence, and of a transition's zeros (a box
      // wholly before the first token: the copy engine fills it with zeros and completes its bytes).
      const bool tma = v_tma != 0;
      ptx::wait_primary();
      for (int i = 0; i < steps; ++i) {
        const int c = c_start + i;
        const int s = (base + i) % L::kStages;
        const int use = (base + i) / L::kStages;
        const int Lc = min(16, span.len - c * 16);
        unsigned char* stage = reinterpret_cast<unsigned char*>(&st.stage[s]);
        const bool by_tma = tma && (Lc == 16 || transition);  // (uniform over the producer)
        if (pt == 0 && use > 0) ptx::mbar_wait(&empty[s], (use - 1) & 1);
        if (!by_tma) {
          __syncwarp();  // the stage is free: lane 0 has seen its empty barrier
          // Tokens past the sequence and a transition's values are zeros (zero-filled copies): its steps
          // take the same path.
#pragma unroll
          for (int m = 0; m < Share::kValueRounds; ++m) {
            const int k = Share::value_piece(pt, m);
            const int w = k / 128, j = (k / 8) % 16, q = k % 8;  // warpgroup, token, piece of 8 rows
            const bool valid = j < Lc && !transition;
            // An invalid piece reads nothing; its address stays the chunk's first token (in range). (A half
            // job's warpgroup 1 computes nothing: its tile gets warpgroup 0's rows, in range.)
            const uint16_t* src = p.v + span.batch * p.v_st.b + (span.t0 + 16 * static_cast<int64_t>(c) + (valid ? j : 0)) * p.v_st.t +
                                  hv * p.v_st.h + row0 + 64 * (half ? 0 : w) + 8 * q;
            ptx::cp_async_16_zfill(st.stage[s].vt[w].bytes + L::VtTile::offset(j, 8 * q), src, valid);
          }
          // Landed before lane 0's arrival (the barrier then counts that one arrival only: an arrival per
          // lane raised above its expected count was a "barrier overflow" for synccheck).
          ptx::cp_async_commit();
          ptx::cp_async_wait_group<0>();
          __syncwarp();
        }
        if (pt == 0) {
          // The record by one bulk copy (it is the stage's first kBytes), each warpgroup's values by one
          // tensor copy (a 16-token x 64-row box, 128B-swizzled: the VtTile), Kr's low part by one bulk
          // copy with the chunk of a final update. Completion by bytes on full[s].
          const bool fin = i >= steps - split_steps;
          const unsigned char* rec = records + static_cast<int64_t>(c) * ChunkRecord::kBytes;
          ptx::mbar_arrive_expect_tx(&full[s], ChunkRecord::kBytes + (by_tma ? kWG * L::VtTile::kBytes : 0) +
                                                   (fin ? kKrLoBytes : 0));
          ptx::bulk_copy_g2s(stage, rec, ChunkRecord::kBytes, &full[s]);
          if (by_tma) {
#pragma unroll
            for (int w = 0; w < kWG; ++w)
              ptx::tma_load_4d(st.stage[s].vt[w].bytes, &v_map, row0 + (half ? 0 : 64 * w), hv,
                               transition ? -16 : span.t0 + 16 * c, span.batch, &full[s]);
          }
          if (fin) {
            const int slot = steps - 1 - i;
            ptx::bulk_copy_g2s(st.kr_lo[slot].bytes,
                               p.kr_lo + ((static_cast<int64_t>(task.seq) * p.HV + hv) * kKrLoSlots + slot) * kKrLoBytes,
                               kKrLoBytes, &full[s]);
          }
        }
      }
      return;
    }

    // ---- Consumer warpgroups -------------------------------------------------------------------------
    if constexpr (L::kProducerWarpgroup && decltype(kSetRegs)::value) ptx::setmaxnreg_inc<L::kConsumerRegs>();
    if (half && wg != 0) {
      // A half job's idle warpgroup still waits for every stage and releases it, so that each consumer
      // thread has seen the copies land before the ring's memory serves the tail's next job (a combine
      // writes it: racecheck orders the bulk copies' writes only before the threads that waited on them).
      for (int i = base; i < base + steps; ++i) {
        ptx::mbar_wait(&full[i % L::kStages], (i / L::kStages) & 1);
        ptx::mbar_arrive(&empty[i % L::kStages]);
      }
      return;
    }
    const int rows0 = row0 + 64 * wg;  // first value row of this warpgroup
    if (preloaded) {
    } else if (p.pass != RecurrencePass::kSecond) {
      if (transition) {
#pragma unroll
        for (int i = 0; i < S_t::kCount; ++i) S.v[i] = (rows0 + S_t::row(t, i) == S_t::col(t, i)) ? 1.0f : 0.0f;
      } else {
        load_state(task.init, task.init_f32, rows0);
      }
      ptx::wait_primary();
    } else {
      ptx::wait_primary();
      load_state(task.init, task.init_f32, rows0);
    }
    unsigned char* out_tile = st.out[warp];
    const int wi = warp & 3;  // warp within the warpgroup: rows 16 wi .. of the warpgroup's 64

    // kFinal (std::integral_constant): one of a final state's last updates (split_steps), with U and
    // Kr as hi + lo pairs: U_lo·Kr + U·Kr_lo + U·Kr (Kr_lo landed with this step's stage, in
    // st.kr_lo[steps - 1 - i]). A third copy of the step rather than a branch in every step: a kept U
    // cost the full grids 2-5%.
    auto step = [&](int i, bool out_step, auto kFinal) {
      const int c = c_start + i;
      const int s = (base + i) % L::kStages;
      const int Lc = min(16, span.len - c * 16);
      auto& stg = st.stage[s];
      ptx::mbar_wait(&full[s], ((base + i) / L::kStages) & 1);
      // A partial chunk's values were written by cp.async (generic proxy); wgmma reads the stage through
      // the async proxy (the bulk and tensor copies need no fence: they are async-proxy writes).
      ptx::fence_proxy_async_shared();
      // No branch on `transition` around the products (a transition's values are zero-filled): with
      // the accumulators written under that branch, ptxas serialised every wgmma of the warm-up
      // instances (C7520; T8192_H64's recurrence 291 -> 266 us without it, 2026-12-01).
      XO_t xo, uo;
      step_batch<L>(S, t, stg, wg, uo, xo);
      step_update<L, decltype(kFinal)::value, kSplitU>(S, uo, stg,
                                                       st.kr_lo[decltype(kFinal)::value ? steps - 1 - i : 0].bytes);
      if (out_step) {
        // O = O0 + Oin: columns 16..31 (n-blocks 2, 3), this warp's 16 rows as two m16n8 C fragments.
        float o[2][4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          o[0][e] = uo.v[8 + e] + xo.v[8 + e];
          o[1][e] = uo.v[12 + e] + xo.v[12 + e];
        }
        store_out_rows(o, out_tile, p, span, hv, c, Lc, rows0 + 16 * wi, lane);
      }
      ptx::wgmma_wait_group<0>();
      S.fence_operand();
      ptx::mbar_arrive(&empty[s]);  // one arrival per lane (tests/gpu/test_ring_sync.cu)
    };
    constexpr std::false_type kPlain{};
    const int plain_steps = steps - split_steps;
    if constexpr (kWarm) {
      const int warm_steps = min(c_out - c_start, plain_steps);
      for (int i = 0; i < warm_steps; ++i) step(i, false, kPlain);
      for (int i = warm_steps; i < plain_steps; ++i) step(i, write_out, kPlain);
    } else {
      for (int i = 0; i < plain_steps; ++i) step(i, write_out, kPlain);
    }
    {  // The final steps (1 or 2) as one rolled loop over one copy of the step, its two output flags
       // computed before it (a loop that computed them in it spilled the warm-up instance); the same
       // speed as two inlined copies within the noise, 170 KB less code (docs/performance_notes.md,
       // "The final split over the last 8 tokens").
      const bool out_last = write_out && steps - 1 >= c_out - c_start;
      const bool out_prev = write_out && steps - 2 >= c_out - c_start;
#pragma unroll 1
      for (int k = split_steps; k > 0; --k) step(steps - k, k == 1 ? out_last : out_prev, std::true_type{});
    }

    if (kWarm && threadIdx.x == 0) ring[1] = steps;  // (read between jobs, after the CTA barrier)
    if (task.fin != nullptr) {
#pragma unroll
      for (int i = 0; i < S_t::kCount; i += 2) {
        const int64_t idx = static_cast<int64_t>(rows0 + S_t::row(t, i)) * 128 + S_t::col(t, i);
        if (task.fin_f32)
          *reinterpret_cast<float2*>(static_cast<float*>(task.fin) + idx) = make_float2(S.v[i], S.v[i + 1]);
        else
          *reinterpret_cast<__nv_bfloat162*>(static_cast<__nv_bfloat16*>(task.fin) + idx) =
              __floats2bfloat162_rn(S.v[i], S.v[i + 1]);
      }
    }
  };
  if constexpr (!kWarm) {
    if (first.idle) return;
    run(first, first_preloaded, std::true_type{}, -1, std::integral_constant<int, kAnyRole>{});
  } else {
    if (first.idle && p.tail == nullptr) return;
    constexpr std::false_type kKeepRegs{};
    // With p.tail, the CTA then takes the fallback's combine and pass-2 jobs (run_tail_jobs,
    // recurrence_tail.cuh).
    static_assert(sizeof(st.stage) >= kTailCombineBytes, "a combine job fits in the stage ring");
    auto jobs = [&](auto kRole) {
      constexpr int kRoleV = decltype(kRole)::value;
      // (Thread 0's bookkeeping is set before the first job: nothing of it stays live through the job.)
      if (p.tail != nullptr && threadIdx.x == 0)
        tail.book = TailBook{!first.idle && first.fallback ? TailDone::kPass1 : TailDone::kNothing,
                             static_cast<int64_t>(blockIdx.x % p.units), false};
      if (!first.idle) run(first, first_preloaded, kKeepRegs, -1, kRole);
      if (p.tail == nullptr) return;
      run_tail_jobs<128 * kWG, L::kProducerThreads>(
          p, tail, kRoleV == kConsumerRole || (kRoleV == kAnyRole && wg < kWG),
          [&](int32_t) {  // the ring runs on (a half job's idle warpgroup releases the stages too)
            ring[0] += ring[1];
            ring[1] = 0;
          },
          [&](int32_t job) {
            if (kRoleV == kProducerRole || (kRoleV == kAnyRole && wg == kWG))
              tail_combine_barriers(p);
            else {
              tail_combine_rows<128 * kWG>(p, job, reinterpret_cast<float*>(&st.stage[0]), threadIdx.x);
              // The combine wrote the ring's memory through the generic proxy (stores, cp.async); the next
              // job's bulk and tensor copies write it through the async proxy: a proxy fence by the writers
              // before the CTA barrier that ends the job orders them (racecheck reported the pair without it).
              ptx::fence_proxy_async_shared();
            }
          },
          [&](int32_t job) {
            const int32_t j2 = (job - p.tail_combine_jobs) >> p.tail_half;  // pass 2's slot
            run(recurrence_task(p, RecurrencePass::kSecond, j2, true, warm), false, kKeepRegs,
                tail_half_job(p, job) ? 64 * ((job - p.tail_combine_jobs) & 1) : -1, kRole);
          });
    };
    // One loop per role, each compiled with its role's code only, so that ptxas keeps the setmaxnreg
    // (with one loop for both roles it ignores it, note C7507, and every warp keeps the launch's 168
    // registers: the bulk-copy producer of version 37 then made the consumers' step spill 52 bytes).
    if constexpr (L::kProducerWarpgroup) {
      if (wg == kWG) {
        ptx::setmaxnreg_dec<L::kProducerRegs>();
        jobs(std::integral_constant<int, kProducerRole>{});
      } else {
        ptx::setmaxnreg_inc<L::kConsumerRegs>();
        jobs(std::integral_constant<int, kConsumerRole>{});
      }
    } else {
      jobs(std::integral_constant<int, kAnyRole>{});
    }
  }
}

}  // namespace kda::sm90
