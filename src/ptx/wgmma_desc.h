// The host-and-device half of the wgmma contract (src/ptx/wgmma.cuh issues the instructions): the
// shared-memory matrix descriptor and the accumulator fragment layout. Plain constexpr functions,
// so tests/test_tile_layout.cpp checks them on the CPU.
//
// Matrix descriptor (PTX ISA, "Matrix Descriptor Format" of the asynchronous warpgroup MMA), 64 bits:
//   bits  0-13  start address        (shared-memory byte address >> 4)
//   bits 16-29  leading-dimension byte offset (LBO) >> 4
//   bits 32-45  stride-dimension byte offset (SBO) >> 4
//   bits 49-51  matrix base offset   (0 when the swizzle pattern starts on its own alignment:
//                                     1024 bytes for 128B, 512 for 64B, 256 for 32B)
//   bits 62-63  swizzle mode         0 none (interleave), 1 = 128B, 2 = 64B, 3 = 32B
// Meaning of LBO / SBO for the swizzled canonical layouts of bf16 (see src/tile/operand.h):
//   K-major:  SBO = byte distance between consecutive groups of 8 rows (M or N); LBO unused
//             (encoded as 1).
//   MN-major: LBO = byte distance between consecutive swizzle-wide column panels in MN
//             (64 bf16 for 128B); SBO = byte distance between consecutive groups of 8 K rows.
//
// Accumulator layout of wgmma.m64nNk16 with fp32 accumulators (PTX ISA "Register Fragments",
// wgmma .m64nNk16 D): thread t of the warpgroup (0..127), warp w = t / 32, lane = t % 32, holds
// N/2 floats; element i lies in column block j = i / 4 (8 columns each) and is element r = i % 4 of
// the m16n8 C fragment of mma.sync (src/ptx/mma.cuh, Frag) placed at rows 16w.., columns 8j..:
//   row = 16 w + lane/4 + 8 (r / 2),   col = 8 j + 2 (lane % 4) + (r % 2).
// The register A operand of wgmma.m64nNk16 (4 x b32 per thread) has the mma.m16n8k16 A layout on
// rows 16w..16w+15, so the accumulator columns 16s..16s+15 packed to bf16 pairs are the A operand of
// k-step s of the next product (fragments.cuh: Acc::to_a).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define KDA_PTX_HD __host__ __device__ __forceinline__
#else
#define KDA_PTX_HD inline
#endif

namespace kda::ptx {

// Swizzle field of the descriptor (its encoding, not a byte count).
enum class DescSwizzle : uint32_t { kNone = 0, k128B = 1, k64B = 2, k32B = 3 };

struct WgmmaDesc {
  static constexpr uint64_t kField14 = 0x3FFF;

  // Packs a descriptor. Addresses and offsets in bytes (multiples of 16; start below 256 KiB,
  // offsets below 256 KiB); base_offset 0..7.
  KDA_PTX_HD static constexpr uint64_t make(uint32_t start_bytes, uint32_t lbo_bytes, uint32_t sbo_bytes,
                                            DescSwizzle swizzle, uint32_t base_offset = 0) {
    return ((static_cast<uint64_t>(start_bytes) >> 4) & kField14) |
           (((static_cast<uint64_t>(lbo_bytes) >> 4) & kField14) << 16) |
           (((static_cast<uint64_t>(sbo_bytes) >> 4) & kField14) << 32) |
           ((static_cast<uint64_t>(base_offset) & 0x7) << 49) | (static_cast<uint64_t>(swizzle) << 62);
  }
  KDA_PTX_HD static constexpr uint32_t start_bytes(uint64_t d) { return static_cast<uint32_t>(d & kField14) << 4; }
  KDA_PTX_HD static constexpr uint32_t lbo_bytes(uint64_t d) {
    return static_cast<uint32_t>((d >> 16) & kField14) << 4;
  }
  KDA_PTX_HD static constexpr uint32_t sbo_bytes(uint64_t d) {
    return static_cast<uint32_t>((d >> 32) & kField14) << 4;
  }
  KDA_PTX_HD static constexpr uint32_t base_offset(uint64_t d) { return static_cast<uint32_t>((d >> 49) & 0x7); }
  KDA_PTX_HD static constexpr DescSwizzle swizzle(uint64_t d) { return static_cast<DescSwizzle>(d >> 62); }
  // The same descriptor moved by `bytes` (a multiple of 16) in shared memory: how k-steps advance.
  KDA_PTX_HD static constexpr uint64_t advance(uint64_t d, uint32_t bytes) { return d + (bytes >> 4); }
};

// Accumulator coordinates of wgmma.m64nNk16 (fp32 D), see the header comment.
struct WgmmaAcc {
  KDA_PTX_HD static constexpr int row(int thread, int i) {
    return 16 * (thread >> 5) + ((thread & 31) >> 2) + 8 * ((i & 3) >> 1);
  }
  KDA_PTX_HD static constexpr int col(int thread, int i) { return 8 * (i >> 2) + 2 * (thread & 3) + (i & 1); }
  // Register-A operand (4 x bf16x2 per thread): row and first column of the pair in register q.
  KDA_PTX_HD static constexpr int a_row(int thread, int q) { return 16 * (thread >> 5) + ((thread & 31) >> 2) + 8 * (q & 1); }
  KDA_PTX_HD static constexpr int a_col(int thread, int q) { return 2 * (thread & 3) + 8 * (q >> 1); }
  // Accumulator element that feeds half h (0 = low = lower column) of register q of the register-A
  // operand of k-step s, when columns 16s..16s+15 of an accumulator become the next A (chaining).
  KDA_PTX_HD static constexpr int acc_index_of_a(int s, int q, int h) { return 8 * s + 2 * q + h; }
};

}  // namespace kda::ptx
