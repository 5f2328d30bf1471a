// The bounded warm-up's fallback as tail jobs of pass 1's grid (docs/design.md §3.2). A warm-up
// plan used to launch the exact combine and pass 2 after pass 1 for the units whose decay bound
// fails; on decaying gates no unit does, and the two launches cost ~2.7 us of waiting for nothing
// (docs/performance_notes.md). Now pass 1's CTAs, once their own job (their blockIdx's slot) is
// done, take tail jobs by ticket from RecurrenceParams::tail: jobs [0, tail_combine_jobs) combine
// p.tail_combine_rows rows of one unit's start states (context_combine_kernel's arithmetic, bit for bit,
// on the consumer threads, in the stage ring's shared memory), jobs [tail_combine_jobs, tail_jobs)
// are pass 2's slots (recurrence_task with pass kSecond: the same kernel instance, the same slices).
//
// When every unit's bound held (the summary word), no CTA takes a ticket: the producer reads the
// summary while the consumers finish the first job, so a CTA exits as it did before.
//
// Waits, and why the grid cannot deadlock: a combine job waits until every pass-1 job of its unit
// has finished (pass1_done), a pass-2 job until its unit's combine jobs have (or, with 2 segments,
// its pass-1 jobs). Pass-1 jobs wait for nothing. A CTA takes its first ticket only once every CTA
// of the grid is past griddepcontrol.wait (started == gridDim.x), i.e. every pass-1 job is held by
// a CTA that is running or done; a ticket is held by a running CTA from the moment it is drawn, and
// jobs wait only for smaller tickets or for pass-1 jobs. So the job with the smallest unfinished
// ticket always proceeds, whatever else shares the GPU (no CTA ever waits for one of another grid,
// or for one not yet placed). A CTA that finds started < gridDim.x takes no ticket: the last CTA to
// start will, and any that see the grid complete.
#pragma once

#include <cstdint>

#include "src/kernels/sm90/kernel_params.h"
#include "src/kernels/sm90/tail_counters.cuh"
#include "src/ptx/barrier.cuh"
#include "src/ptx/cp_async.cuh"
#include "src/ptx/gpu_sync.cuh"
#include "src/ptx/warpgroup.cuh"

namespace kda::sm90 {

// Rows of one combine job (RecurrenceParams::tail_combine_rows): 8 when the units' jobs of 8 rows fit
// on the SMs at once, else 16 (pass 1's CTAs, about one per SM, run the tail: more jobs than that
// run in rounds; T8192_H8_LM 6% faster with 8, T2048_H12_N1_LM 6% slower, 2026-12-01). The
// per-element arithmetic does not depend on the rows per job.
inline constexpr int kTailCombineRowsMax = 16;
__device__ __forceinline__ int tail_combine_jobs_per_unit(const RecurrenceParams& p) {
  return 128 / p.tail_combine_rows;
}
// Shared memory a combine job uses (the stage ring's, free between jobs): two transitions and two
// sets of Lp rows in flight ([2][128][128], [2][rows][128]), the rows of S [rows][128] and four
// partial sums [4][rows][128].
inline constexpr int kTailCombineBytes = (2 * 128 * 128 + 7 * kTailCombineRowsMax * 128) * 4;

// What the job a CTA just finished asks it to signal.
enum class TailDone : int32_t { kNothing = 0, kPass1, kCombine };

__device__ __forceinline__ bool tail_all_bounded(uint64_t summary, int32_t units) {
  return static_cast<uint32_t>(summary) == static_cast<uint32_t>(units) && (summary >> 32) == 0;
}

// Whether tail job `job` is half of a pass-2 slot (RecurrenceParams::tail_half): 64 value rows.
__device__ __forceinline__ bool tail_half_job(const RecurrenceParams& p, int32_t job) {
  return p.tail_half != 0 && job >= p.tail_combine_jobs;
}

// Thread 0's bookkeeping between jobs (in shared memory: see the kernels).
struct TailBook {
  TailDone done;   // what the job just finished asks to signal
  int64_t unit;    // its unit
  bool taking;     // this CTA has passed the started check and takes tickets
};

// What a warm-up CTA's job loop keeps in shared memory (a value carried in registers would stay live
// through the whole step loop of a job). Between jobs the consumers meet at a named barrier of their
// own and the roles hand over by two mbarriers on which every thread of the other role arrives
// (run_tail_jobs), so that each thread's writes reach the other role by its own release.
struct TailShared {
  uint64_t producer_done;  // mbarrier, one arrival per producer thread once it is done with the job
  uint64_t job_ready;      // mbarrier, one arrival per consumer thread once next_job is set
  uint64_t summary_seen;   // the summary as the producer's first thread read it during the job
  TailBook book;           // thread 0's
  uint32_t rounds;         // hand-overs completed (the waits' parity); thread 0 advances it
  int32_t next_job;
};

// Thread 0, before the CTA barrier that follows the ring's initialisation.
template <int kConsumers, int kProducers>
__device__ __forceinline__ void tail_shared_init(TailShared& sh) {
  ptx::mbar_init(&sh.producer_done, kProducers);
  ptx::mbar_init(&sh.job_ready, kConsumers);
  sh.rounds = 0;
}

// The consumers' named barrier in the job loop (not used by the kernels' steps).
inline constexpr uint32_t kTailConsumerBarrier = 14;

// Thread 0, once both roles are done with the CTA's last job (run_tail_jobs): signals it (its unit's counter),
// then returns the next tail job to run, or -1 (none left for this CTA). `summary_seen`: the summary
// as the producer read it during the job. A job of a unit whose bound held is skipped; before
// returning a job it waits for what the job reads (see the top of the file).
__device__ __forceinline__ int32_t next_tail_job(const RecurrenceParams& p, TailBook* book, uint64_t summary_seen) {
  const TailWords w{p.tail};
  if (book->done == TailDone::kPass1) ptx::red_release_add(w.pass1_done(book->unit), 1);
  if (book->done == TailDone::kCombine) ptx::red_release_add(w.combine_done(book->unit), 1);
  book->done = TailDone::kNothing;
  if (!book->taking) {
    if (tail_all_bounded(summary_seen, p.units)) return -1;  // the common case: nothing fell back
    if (ptx::ld_relaxed(w.started()) < static_cast<int32_t>(gridDim.x)) return -1;  // a later CTA will
    // Every CTA is running, the units' first CTAs (which decide without waiting) included: wait for
    // every decision, so that a CTA never walks the tickets of a tail that turns out empty.
    while (static_cast<uint32_t>(summary_seen) < static_cast<uint32_t>(p.units)) {
      __nanosleep(128);
      summary_seen = ptx::ld_acquire(w.summary());
    }
    if ((summary_seen >> 32) == 0) return -1;
    book->taking = true;
  }
  const int32_t pass1_jobs = p.vsplit * (2 * p.segments - 3);
  for (;;) {
    const int32_t t = ptx::atom_relaxed_add(w.ticket(), 1);
    if (t >= p.tail_jobs) return -1;
    const bool combine = t < p.tail_combine_jobs;
    const int64_t unit =
        combine ? t / tail_combine_jobs_per_unit(p) : ((t - p.tail_combine_jobs) >> p.tail_half) % p.units;
    if (ptx::wait_at_least(w.decided(unit), 1) == 1) continue;  // its bound held: nothing to do
    if (combine || p.segments == 2)
      ptx::wait_at_least(w.pass1_done(unit), pass1_jobs);
    else
      ptx::wait_at_least(w.combine_done(unit), tail_combine_jobs_per_unit(p));
    return t;
  }
}

// Combine job `job`: rows r0 .. r0 + R of unit u's start states (R = p.tail_combine_rows), S1 = E0 and
// S(p+1) = Sp·Mp + Lp (p = 1..P-2) in place over Lp, exactly as context_combine_kernel computes
// them (per element: four fmaf chains over 32 key columns each, summed ((q0 + q1) + (q2 + q3)) +
// Lp), so the result does not depend on which path ran it. Run by the kThreads consumer threads
// (tid < kThreads) of a recurrence CTA, with `scratch` at least kTailCombineBytes of its shared
// memory, while the producer runs tail_combine_barriers (the steps' barriers: the whole CTA, met
// from the two places, ptx::cta_barrier_unaligned). Mp+1 and Lp+1 are copied in (cp.async)
// while step p computes. (With a named barrier among the consumers only, compute-sanitizer's
// racecheck reports a hazard on the job word the CTA's next __syncthreads orders: a false report,
// reproduced by a 30-line kernel, docs/performance_notes.md.)
template <int kThreads>
__device__ __forceinline__ void tail_combine_rows(const RecurrenceParams& p, int32_t job, float* scratch, int tid) {
  static_assert(512 % kThreads == 0 && kThreads % 32 == 0, "whole (column, quarter) items per thread");
  constexpr int G = 8;  // rows summed at once (a 16-row job runs two groups: one copy of the code)
  constexpr int64_t kElems = 128 * 128;
  const int R = p.tail_combine_rows;  // 8 or 16
  const int P = p.segments;
  const int64_t unit = job / (128 / R);
  const int r0 = (job % (128 / R)) * R;
  float* states = p.cp_states + unit * (P - 1) * kElems;
  const float* transitions = p.cp_transitions + unit * (P - 2) * kElems;
  constexpr int RM = kTailCombineRowsMax;
  float* mbuf = scratch;               // [2][128][128]
  float* lbuf = mbuf + 2 * kElems;     // [2][RM][128]
  float* s = lbuf + 2 * RM * 128;      // [RM][128]
  float* part = s + RM * 128;          // [4][RM][128]

  auto load = [&](int step) {  // Mstep and the rows of Lstep into buffer (step - 1) & 1
    const float* M = transitions + static_cast<int64_t>(step - 1) * kElems;
    const float* L = states + static_cast<int64_t>(step) * kElems + r0 * 128;
    float* md = mbuf + ((step - 1) & 1) * kElems;
    float* ld = lbuf + ((step - 1) & 1) * RM * 128;
    for (int i = tid; i < kElems / 4; i += kThreads) ptx::cp_async_16_zfill(md + 4 * i, M + 4 * i, true);
    for (int i = tid; i < R * 128 / 4; i += kThreads) ptx::cp_async_16_zfill(ld + 4 * i, L + 4 * i, true);
    ptx::cp_async_commit();
  };
  for (int i = tid; i < R * 128; i += kThreads) s[i] = states[r0 * 128 + i];  // S1 = E0
  if (P > 2) load(1);
  for (int step = 1; step <= P - 2; ++step) {
    ptx::cp_async_wait_group<0>();  // this thread's copies of Mstep and Lstep have landed
    ptx::cta_barrier_unaligned();  // ... every thread's; s holds S(step); every thread is done with step - 1's buffers
    if (step + 1 <= P - 2) load(step + 1);  // into the buffers step - 1 used
    const float* M = mbuf + ((step - 1) & 1) * kElems;
#pragma unroll 1
    for (int item = tid; item < 512; item += kThreads) {  // (column j, quarter q of the key columns)
      const int j = item & 127, q = item >> 7;
#pragma unroll 1
      for (int g = 0; g < R; g += G) {
        float acc[G];
#pragma unroll
        for (int r = 0; r < G; ++r) acc[r] = 0.0f;
#pragma unroll 2  // (fully unrolled, ptxas keeps every row's loads in flight: too many registers)
        for (int k4 = 0; k4 < 32; k4 += 4) {
          float m[4];
#pragma unroll
          for (int e = 0; e < 4; ++e) m[e] = M[(32 * q + k4 + e) * 128 + j];
#pragma unroll
          for (int r = 0; r < G; ++r) {
            const float4 sv = *reinterpret_cast<const float4*>(s + (g + r) * 128 + 32 * q + k4);
            acc[r] = fmaf(sv.x, m[0], acc[r]);
            acc[r] = fmaf(sv.y, m[1], acc[r]);
            acc[r] = fmaf(sv.z, m[2], acc[r]);
            acc[r] = fmaf(sv.w, m[3], acc[r]);
          }
        }
#pragma unroll
        for (int r = 0; r < G; ++r) part[(q * RM + g + r) * 128 + j] = acc[r];
      }
    }
    ptx::cta_barrier_unaligned();
    const float* Lrows = lbuf + ((step - 1) & 1) * RM * 128;
    float* L = states + static_cast<int64_t>(step) * kElems + r0 * 128;
    for (int i = tid; i < R * 128; i += kThreads) {
      const float v = ((part[0 * RM * 128 + i] + part[1 * RM * 128 + i]) + (part[2 * RM * 128 + i] + part[3 * RM * 128 + i])) +
                      Lrows[i];
      s[i] = v;
      L[i] = v;
    }
  }
}

// The producer's part of a combine job: its barriers.
__device__ __forceinline__ void tail_combine_barriers(const RecurrenceParams& p) {
  for (int step = 1; step <= p.segments - 2; ++step) {
    ptx::cta_barrier_unaligned();
    ptx::cta_barrier_unaligned();
  }
}

// Re-arms a stage ring's barriers between two jobs of a CTA (thread 0, every earlier arrival and
// wait done: in run_tail_jobs' handover after a job whose stages were all consumed). The mma.sync
// recurrence's; the wgmma one's ring runs on across jobs instead (chunk_recurrence_wgmma_kernel.cuh).
__device__ __forceinline__ void tail_reset_ring(uint64_t* full, uint64_t* empty, int stages, uint32_t full_count,
                                                uint32_t empty_count) {
  for (int s = 0; s < stages; ++s) {
    ptx::mbar_inval(&full[s]);
    ptx::mbar_inval(&empty[s]);
    ptx::mbar_init(&full[s], full_count);
    ptx::mbar_init(&empty[s], empty_count);
  }
  ptx::fence_barrier_init();
}

// The tail's job loop of a warm-up plan's pass-1 CTA, after its own job (both recurrence kernels;
// every thread calls it; `consumer`: this thread is one of the kConsumers consumer threads, 0 ..
// kConsumers - 1, else one of the kProducers producer threads that follow; TailShared initialised
// with tail_shared_init<kConsumers, kProducers>). Between two jobs: every producer thread arrives on
// producer_done (its first thread, idle by then, having read the summary) and waits for job_ready;
// the consumers meet at their named barrier, thread 0 waits for producer_done, signals the job just
// done, draws the next ticket and prepares the ring for it (reset_ring(job): re-armed, or advanced),
// the consumers meet again and each arrives on job_ready. Then every thread runs combine(job) or
// pass2(job). No CTA-wide barrier: the wgmma kernel's roles run this loop from two copies of it (one
// per role, so that ptxas keeps their setmaxnreg), where __syncthreads is reached from two places
// (synccheck: divergence), and its unaligned form cost the long-memory cases 5-13% (c776f0b,
// 2026-12-01). Every thread arrives itself (no arrival on behalf of a role met at a barrier):
// racecheck then sees each write ordered before the other role's accesses directly (with one
// arrival per role after a named barrier it reported the order it could not follow, intermittently,
// on RingSync.RolesHandOverByNamedBarriersAndMbarriers).
template <int kConsumers, int kProducers, class ResetRing, class Combine, class Pass2>
__device__ __forceinline__ void run_tail_jobs(const RecurrenceParams& p, TailShared& sh, bool consumer,
                                              ResetRing&& reset_ring, Combine&& combine, Pass2&& pass2) {
  for (;;) {
    if (consumer) {
      ptx::named_barrier_sync<kTailConsumerBarrier, kConsumers>();  // every consumer is done with the job
      if (threadIdx.x == 0) {
        const uint32_t k = sh.rounds;
        ptx::mbar_wait(&sh.producer_done, k & 1);  // ... and every producer thread
        sh.next_job = next_tail_job(p, &sh.book, sh.summary_seen);
        if (sh.next_job >= 0) reset_ring(sh.next_job);
        sh.rounds = k + 1;
      }
      ptx::named_barrier_sync<kTailConsumerBarrier, kConsumers>();
      ptx::mbar_arrive(&sh.job_ready);
    } else {
      // (Thread 0 advances `rounds` only once every producer thread has arrived below.)
      const uint32_t k = sh.rounds;
      if (threadIdx.x == kConsumers) sh.summary_seen = ptx::ld_acquire(TailWords{p.tail}.summary());
      ptx::mbar_arrive(&sh.producer_done);
      ptx::mbar_wait(&sh.job_ready, k & 1);
    }
    const int32_t job = sh.next_job;
    if (job < 0) return;
    if (job < p.tail_combine_jobs) {
      combine(job);
      if (threadIdx.x == 0) sh.book.done = TailDone::kCombine, sh.book.unit = job / tail_combine_jobs_per_unit(p);
    } else {
      pass2(job);
      if (threadIdx.x == 0) sh.book.done = TailDone::kNothing;
    }
  }
}

}  // namespace kda::sm90
