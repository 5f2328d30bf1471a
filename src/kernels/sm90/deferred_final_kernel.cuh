// deferred_final_kernel: an in-place bounded warm-up (final_state == initial_state) writes pass 1's
// final states to the workspace (RecurrenceParams::deferred_final), because in pass 1 one CTA (a
// unit's last piece) writes the final state while others (piece 0, pieces warming up from the first
// chunk) read the initial state at the same address. This kernel, a programmatic dependent of pass
// 1, copies them to final_state once pass 1 is complete. Units that fell back to an exact layout
// with P >= 2 segments are skipped: their final state comes from pass 2, straight to final_state.
//
// Grid: units x kDeferredCtasPerUnit. Block: kDeferredThreads threads, 16-byte copies.
#pragma once

#include <cstdint>

#include "src/kernels/sm90/kernel_params.h"
#include "src/ptx/grid_dependency.cuh"

namespace kda::sm90 {

constexpr int kDeferredCtasPerUnit = 8;
constexpr int kDeferredThreads = 256;

__global__ void __launch_bounds__(kDeferredThreads) deferred_final_kernel(DeferredFinalParams p) {
  ptx::launch_dependents();
  ptx::wait_primary();  // pass 1 wrote the deferred states and the fallback flags
  const int64_t unit = blockIdx.x / kDeferredCtasPerUnit;
  const int part = blockIdx.x % kDeferredCtasPerUnit;
  if (p.segments >= 2 && p.unit_fallback[unit] != 0) return;
  const int per_cta = p.vecs_per_unit / kDeferredCtasPerUnit;
  const int64_t base = unit * p.vecs_per_unit + static_cast<int64_t>(part) * per_cta;
  const uint4* src = static_cast<const uint4*>(p.deferred) + base;
  uint4* dst = static_cast<uint4*>(p.final_state) + base;
  for (int i = threadIdx.x; i < per_cta; i += kDeferredThreads) dst[i] = src[i];
}

}  // namespace kda::sm90
