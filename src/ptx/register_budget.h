// How many registers a CTA holds, and whether a setmaxnreg split of them fits (host and device
// constexpr, so tests/test_tile_layout.cpp checks it on the CPU and kernels check it with
// static_assert).
//
// A CTA launched with __launch_bounds__(threads, 1) gets, per thread, what the sub-partition with
// the most of its warps can hold: the 4 sub-partitions of an SM have 16,384 registers each, the
// CTA's warps are spread over them round-robin, and a thread's count is allocated in steps of 8 up
// to 256 (255 usable by code, 256 the most setmaxnreg grants). For example, 9 warps (288
// threads) put 3 on one sub-partition: 16384 / 96 = 170, so 168 per thread, although 65536 / 288
// would allow 227.
//
// setmaxnreg moves registers between the CTA's warpgroups within what the CTA was launched with:
// the counts after reallocation, summed over the warpgroups, times 128, must not exceed
// threads x launch count. A setmaxnreg.inc that asks for more never returns (the kernel hangs). For
// example, with 384 threads (168 each, 64,512 in all): producer 40 + two consumers 232 = 504 x 128
// = 64,512 fits; 112 + 2 x 200 = 512 x 128 = 65,536 does not (it hung, 2026-12-01).
#pragma once

#if defined(__CUDACC__)
#define KDA_REGS_HD __host__ __device__
#else
#define KDA_REGS_HD
#endif

namespace kda::ptx {

KDA_REGS_HD constexpr int warps_of(int threads) { return (threads + 31) / 32; }

// Registers per thread of a CTA of `threads` threads launched with __launch_bounds__(threads, 1).
KDA_REGS_HD constexpr int launch_regs_per_thread(int threads) {
  const int per_subpartition = (warps_of(threads) + 3) / 4;  // warps on the busiest sub-partition
  const int r = 16384 / (32 * per_subpartition);
  const int r8 = r - r % 8;
  return r8 > 256 ? 256 : r8;
}

// Whether warpgroups of `counts` registers each (after setmaxnreg) fit in a CTA of `threads`
// threads launched with __launch_bounds__(threads, 1); `threads` must be 128 x the number of counts.
template <int kN>
KDA_REGS_HD constexpr bool setmaxnreg_fits(int threads, const int (&counts)[kN]) {
  int sum = 0;
  for (int i = 0; i < kN; ++i) {
    if (counts[i] < 24 || counts[i] > 256 || counts[i] % 8 != 0) return false;
    sum += counts[i];
  }
  return threads == 128 * kN && 128 * sum <= threads * launch_regs_per_thread(threads);
}

}  // namespace kda::ptx
