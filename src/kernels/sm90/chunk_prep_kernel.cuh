// chunk_prep_kernel: one CTA per (virtual chunk, value head) runs prepare_chunk (prep_chunk.cuh).
//
// Grid:   (num_vchunks, HV); CTAs of unowned virtual chunks exit at once. As the single pass's fallback
//         (PrepParams::sp_fail): at most one wave of CTAs in one dimension striding over the chunks of
//         the units that fell back (the listed mode, single_pass_fallback.cuh), else (forced plans of
//         many units) (fewer, HV), each CTA striding over the chunks of its head.
// Block:  128 threads. This kernel is itself a programmatic dependent launch of whatever the caller
//         ran before (FLASH_KDA_PDL): it waits for that grid before reading any input or writing the
//         workspace, and only then lets the recurrence launch, so that the recurrence's prologue
//         (which reads the caller's initial state before its own wait) still runs after every kernel
//         the caller launched before this call. The recurrence is a programmatic dependent launch
//         too: it may start its prologue during the last wave and waits for this grid's completion
//         before reading the records. The single pass's fallback instance (kFiltered) is an ordinary
//         launch (prep_sm90.cu, FLASH_KDA_FALLBACK_PDL): it starts once the single pass's grid is complete.
#pragma once

#include "src/kernels/sm90/kernel_params.h"
#include "src/kernels/sm90/prep_chunk.cuh"
#include "src/kernels/sm90/single_pass_fallback.cuh"
#include "src/ptx/grid_dependency.cuh"

// Resident CTAs per SM the register allocation is sized for (build-time knob, timed in
// docs/performance_notes.md; shared memory allows seven since version 21).
#ifndef FLASH_KDA_PREP_CTAS_PER_SM
#define FLASH_KDA_PREP_CTAS_PER_SM 6
#endif

namespace kda::sm90 {

// The fallback instance's CTAs per SM: one fewer than the others, for the registers of its loop.
inline constexpr int kFallbackPrepCtasPerSm = FLASH_KDA_PREP_CTAS_PER_SM - 1;

// kFiltered: the single pass's fallback (p.sp_fail set): an instance of its own, at one CTA per SM fewer
// (at the others' 80 registers its loop spilled 12 bytes; the listed mode's loops 48, ptxas -v, version 49).
template <GateKind kGate, bool kBounds = false, bool kFiltered = false>
__global__ void __launch_bounds__(128, kFiltered ? kFallbackPrepCtasPerSm : FLASH_KDA_PREP_CTAS_PER_SM)
    chunk_prep_kernel(PrepParams p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  ptx::wait_primary();       // the caller's previous kernel (inputs, the workspace's last reader)
  ptx::launch_dependents();  // the recurrence may start its prologue during the last wave
  if (kFiltered && p.tail != nullptr) {  // the tail's counters, for a grid of any shape (the listed mode's)
    const int64_t cta = static_cast<int64_t>(blockIdx.y) * gridDim.x + blockIdx.x;
    for (int64_t unit = cta; unit < static_cast<int64_t>(p.seq.N) * p.HV; unit += static_cast<int64_t>(gridDim.x) * gridDim.y)
      if (threadIdx.x < kTailWordsPerUnit) p.tail[kTailHeaderWords + kTailWordsPerUnit * unit + threadIdx.x] = 0;
    if (cta == 0 && threadIdx.x >= 32 && threadIdx.x < 32 + kTailHeaderWords) p.tail[threadIdx.x - 32] = 0;
  } else if (p.tail != nullptr) {  // the tail's counters (kernel_params.h)
    for (int64_t n = blockIdx.x; n < p.seq.N; n += gridDim.x) {
      const int64_t unit = n * p.HV + blockIdx.y;
      if (threadIdx.x < kTailWordsPerUnit) p.tail[kTailHeaderWords + kTailWordsPerUnit * unit + threadIdx.x] = 0;
      if (n == 0 && blockIdx.y == 0 && threadIdx.x >= 32 && threadIdx.x < 32 + kTailHeaderWords)
        p.tail[threadIdx.x - 32] = 0;
    }
  }
  auto& smem = *reinterpret_cast<PrepSmem<kGate>*>(smem_raw);
  if constexpr (kFiltered) {  // the single pass's fallback: its flagged units' chunks only, striding
    // The next call's flags get the next epoch (the single pass's grid, which read this one, is done).
    if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) *p.sp_epoch += 1;
    const int64_t units = static_cast<int64_t>(p.seq.N) * p.HV;
    if (fallback_prep_listed(units, p.seq.cu_seqlens != nullptr)) {  // (single_pass_fallback.cuh)
      // The listed mode: a grid of one dimension over the flagged units' chunks, unit by unit (none on
      // decaying gates: the CTA leaves after listing, one round trip).
      __shared__ int32_t list[kFallbackListMax];
      __shared__ int32_t warp_counts[kFallbackListWarps];
      const int32_t listed = fallback_units(p.sp_fail, p.sp_pieces, static_cast<int32_t>(units), list, warp_counts);
      const int64_t per = (p.seq.T + 15) / 16;  // (fixed-length: sequence n's chunks from n · per)
#pragma unroll 1
      for (int64_t i = blockIdx.x; i < listed * per; i += gridDim.x) {
        const int32_t unit = list[i / per];
        prepare_chunk<kGate, kBounds, false>(p, smem, static_cast<int64_t>(unit / p.HV) * per + i % per, unit % p.HV);
        __syncthreads();  // (prepare_chunk's shared memory, again)
      }
      return;
    }
    // First whether any unit fell back at all (every flag, the CTA's threads in parallel): on decaying
    // gates none did, and the CTA leaves after one round trip.
    if (single_pass_left_nothing(p.sp_fail, units * p.sp_pieces)) return;
    // (Fixed-length batches only, every chunk owned: vc < 2^31, validate.cpp bounds B x T. The flags of
    // the sequence last looked at are kept: a CTA's chunks run through few sequences.)
    int32_t seen = -1;
    bool fell = false;
#pragma unroll 1
    for (int32_t vc = blockIdx.x; vc < p.seq.num_vchunks; vc += gridDim.x) {
      int32_t seq, chunk;
      if (!locate_chunk(p.seq, vc, &seq, &chunk)) continue;
      if (seq != seen) {
        seen = seq;
        fell = single_pass_fell_back(p.sp_fail, p.sp_pieces, units, static_cast<int64_t>(seq) * p.HV + blockIdx.y);
      }
      if (!fell) continue;
      prepare_chunk<kGate, kBounds, false>(p, smem, vc, blockIdx.y);
      __syncthreads();  // (prepare_chunk's shared memory, again)
    }
  } else {
    prepare_chunk<kGate, kBounds>(p, smem, blockIdx.x, blockIdx.y);
  }
}

}  // namespace kda::sm90
