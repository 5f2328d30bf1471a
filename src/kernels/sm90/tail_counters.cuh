// The words of RecurrenceParams::tail (kernel_params.h) and how pass 1 publishes a unit's warm-up
// decision there; what the tail jobs do with them is in recurrence_tail.cuh.
#pragma once

#include <cstdint>

#include "src/kernels/sm90/kernel_params.h"
#include "src/ptx/gpu_sync.cuh"

namespace kda::sm90 {

struct TailWords {
  int32_t* base;
  // Units decided (low 32 bits) and units fallen back (high 32 bits), one atomic word.
  __device__ __forceinline__ uint64_t* summary() const { return reinterpret_cast<uint64_t*>(base); }
  __device__ __forceinline__ int32_t* started() const { return base + 2; }  // CTAs past griddepcontrol.wait
  __device__ __forceinline__ int32_t* ticket() const { return base + 3; }   // next tail job
  __device__ __forceinline__ int32_t* unit_word(int64_t unit, int k) const {
    return base + kTailHeaderWords + kTailWordsPerUnit * unit + k;
  }
  __device__ __forceinline__ int32_t* decided(int64_t unit) const { return unit_word(unit, 0); }  // 0, 1 bounded, 2 fallback
  __device__ __forceinline__ int32_t* pass1_done(int64_t unit) const { return unit_word(unit, 1); }
  __device__ __forceinline__ int32_t* combine_done(int64_t unit) const { return unit_word(unit, 2); }
};

inline constexpr uint64_t kTailFallbackOne = uint64_t{1} << 32;

// The unit's first CTA (thread 0), once it has decided: the decision (after unit_fallback, which the
// release orders before it), then the summary.
__device__ __forceinline__ void publish_decision(TailWords w, int64_t unit, bool fallback) {
  ptx::st_release(w.decided(unit), fallback ? 2 : 1);
  ptx::red_release_add(w.summary(), uint64_t{1} + (fallback ? kTailFallbackOne : 0));
}

}  // namespace kda::sm90
