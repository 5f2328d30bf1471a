// chunk_prep_kernel: one CTA per (virtual chunk, value head) runs prepare_chunk (prep_chunk.cuh).
//
// Grid:   (num_vchunks, HV); CTAs of unowned virtual chunks exit at once.
// Block:  128 threads. This kernel is itself a programmatic dependent launch of whatever the caller
//         ran before (FLASH_KDA_PDL): it waits for that grid before reading any input or writing the
//         workspace, and only then lets the recurrence launch, so that the recurrence's prologue
//         (which reads the caller's initial state before its own wait) still runs after every kernel
//         the caller launched before this call. The recurrence is a programmatic dependent launch
//         too: it may start its prologue during the last wave and waits for this grid's completion
//         before reading the records.
#pragma once

#include "src/kernels/sm90/kernel_params.h"
#include "src/kernels/sm90/prep_chunk.cuh"
#include "src/ptx/grid_dependency.cuh"

// Resident CTAs per SM the register allocation is sized for (build-time knob, timed in
// docs/performance_notes.md; shared memory allows seven since version 21).
#ifndef FLASH_KDA_PREP_CTAS_PER_SM
#define FLASH_KDA_PREP_CTAS_PER_SM 6
#endif

namespace kda::sm90 {

template <GateKind kGate, bool kBounds = false>
__global__ void __launch_bounds__(128, FLASH_KDA_PREP_CTAS_PER_SM) chunk_prep_kernel(PrepParams p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  ptx::wait_primary();       // the caller's previous kernel (inputs, the workspace's last reader)
  ptx::launch_dependents();  // the recurrence may start its prologue during the last wave
  if (p.tail != nullptr && blockIdx.x < static_cast<unsigned>(p.seq.N)) {  // the tail's counters (kernel_params.h)
    const int64_t unit = static_cast<int64_t>(blockIdx.x) * p.HV + blockIdx.y;
    if (threadIdx.x < kTailWordsPerUnit) p.tail[kTailHeaderWords + kTailWordsPerUnit * unit + threadIdx.x] = 0;
    if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x >= 32 && threadIdx.x < 32 + kTailHeaderWords)
      p.tail[threadIdx.x - 32] = 0;
  }
  prepare_chunk<kGate, kBounds>(p, *reinterpret_cast<PrepSmem<kGate>*>(smem_raw), blockIdx.x, blockIdx.y);
}

}  // namespace kda::sm90
