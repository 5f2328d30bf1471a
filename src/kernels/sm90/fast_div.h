// Division by a launch constant without a division in the kernel: q = ⌊n / d⌋ as one multiply-high
// by a magic number the launcher computes once (Granlund-Montgomery, rounded up).
//
//   magic = ⌈2^32 / d⌉ for d >= 2 (0 for d = 1: the quotient is n itself)
//   ⌊n / d⌋ = ⌊n · magic / 2^32⌋  exactly whenever n · d < 2^32
//
// Proof: n·magic/2^32 = n/d + n·e/2^32 with 0 <= e < 1, and the fractional part of n/d is at most
// 1 − 1/d, so the sum stays below ⌊n/d⌋ + 1 when n/2^32 < 1/d. The preparation uses it for the
// query head of a value head (hv / group with hv < HV <= 65535, the grid's y limit, and group <= HV)
// and for the sequence of a virtual chunk in fixed mode (vc / chunks-per-row, where the launcher
// checks num_vchunks · chunks-per-row < 2^32: SequenceLayout::per_fast).
// Host and device; tests/test_kernel_math.cpp checks every n < 65536 (with n·d < 2^32) for every
// divisor below 300 and a geometric sweep of divisors up to 65535, and the launcher's guard of the
// second use.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define KDA_FASTDIV_HD __host__ __device__ __forceinline__
#else
#define KDA_FASTDIV_HD inline
#endif

namespace kda::sm90 {

KDA_FASTDIV_HD constexpr uint32_t fast_div_magic(uint32_t d) {
  return d <= 1 ? 0u : static_cast<uint32_t>(((uint64_t{1} << 32) + d - 1) / d);
}

KDA_FASTDIV_HD uint32_t fast_div(uint32_t n, uint32_t magic) {
#if defined(__CUDA_ARCH__)
  return magic == 0 ? n : __umulhi(n, magic);
#else
  return magic == 0 ? n : static_cast<uint32_t>((static_cast<uint64_t>(n) * magic) >> 32);
#endif
}

}  // namespace kda::sm90
