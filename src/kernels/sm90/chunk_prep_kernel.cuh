// chunk_prep_kernel: one CTA per (virtual chunk, value head) runs prepare_chunk (prep_chunk.cuh).
//
// Grid:   (num_vchunks, HV); CTAs of unowned virtual chunks exit at once.
// Block:  128 threads. The recurrence is a programmatic dependent launch: this kernel lets it start
//         its prologue during the last wave; it waits for this grid's completion before reading.
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
  ptx::launch_dependents();  // the recurrence may start its prologue during the last wave
  prepare_chunk<kGate, kBounds>(p, *reinterpret_cast<PrepSmem<kGate>*>(smem_raw), blockIdx.x, blockIdx.y);
}

}  // namespace kda::sm90
