// Warpgroup-level control (SM90): register reallocation between warpgroups (setmaxnreg) and named
// barriers (bar.sync / bar.arrive on barriers 1..15; barrier 0 is __syncthreads').
//
// setmaxnreg: every thread of a warpgroup executes the same setmaxnreg (.sync.aligned); the count is
// a multiple of 8 in 24..256. dec releases registers to the CTA's pool, inc blocks until the pool
// has enough, so an inc beyond what the CTA was launched with never returns. The pool is the launch
// count times the threads, not 65536: 3 warpgroups with __launch_bounds__(384, 1) hold 168 x 384 =
// 64512, e.g. producer dec<40>, consumers inc<232> (128 x (40 + 2 x 232) = 64512). Check a split
// with register_budget.h's setmaxnreg_fits (static_assert).
//
// Named barriers: NamedBarrier{id, threads}; threads a multiple of 32 (whole warps). sync() waits
// until `threads` threads arrived (sync or arrive) on the barrier; arrive() counts without waiting
// (a producer signalling consumers).
#pragma once

#include <cstdint>

#include "src/ptx/register_budget.h"

namespace kda::ptx {

template <uint32_t kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  static_assert(kRegs >= 24 && kRegs <= 256 && kRegs % 8 == 0, "setmaxnreg takes a multiple of 8 in 24..256");
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}

template <uint32_t kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  static_assert(kRegs >= 24 && kRegs <= 256 && kRegs % 8 == 0, "setmaxnreg takes a multiple of 8 in 24..256");
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}

// Index of this thread's warpgroup, uniform across the warp (the compiler can keep it in a uniform
// register and branch on it without divergence).
__device__ __forceinline__ int warpgroup_index() { return __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 128, 0); }

// Every thread of the CTA, reached from different places of the code (barrier.sync without
// .aligned: __syncthreads and bar.sync are the .aligned form, which every thread must execute at the
// same instruction; compute-sanitizer's synccheck reports two roles meeting at two __syncthreads as
// divergence). Memory ordering as __syncthreads.
__device__ __forceinline__ void cta_barrier_unaligned() { asm volatile("barrier.sync 0;\n" ::: "memory"); }

// Named barrier kId among kThreads threads (bar.sync with immediates: an id in a register makes ptxas
// reserve all 16 barriers of the CTA). The .aligned form: every participating thread at this same
// instruction, the warp converged (the recurrence tail's per-role loops, recurrence_tail.cuh).
template <uint32_t kId, uint32_t kThreads>
__device__ __forceinline__ void named_barrier_sync() {
  static_assert(kId >= 1 && kId <= 15, "named barriers are 1..15 (0 is __syncthreads')");
  static_assert(kThreads % 32 == 0 && kThreads > 0, "whole warps");
  asm volatile("bar.sync %0, %1;\n" ::"n"(kId), "n"(kThreads) : "memory");
}

struct NamedBarrier {
  uint32_t id;       // 1..15 (0 is __syncthreads')
  uint32_t threads;  // participating threads, a multiple of 32

  __device__ __forceinline__ void sync() const {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
  }
  __device__ __forceinline__ void arrive() const {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
  }
};

}  // namespace kda::ptx
