// The chunk record: what the preparation kernel writes for one (chunk, value head) and the
// recurrence kernel copies into shared memory (cp.async, 16 bytes per lane and step). Layout (bytes):
//
//   offset  size   what                      layout
//   0       4096   Wd = Tb·Kd      bf16     [16 rows][16 chunks of 8], chunk c of row i stored at c ^ (i % 8)
//   4096    4096   Qp = Qd − P·Kd  bf16     idem
//   8192    4096   Kr              bf16     idem
//   12288   512    Γ               f32      [128]
//   12800   512    Tb (high part)  bf16     [16 rows][2 chunks of 8], chunk c of row i stored at c ^ ((i / 4) % 2)
//   13312   512    Tb (low part)   bf16     idem; Tb ≈ hi + lo to ~16 bits
//   13824   512    P (high part)   bf16     idem
//   14336   512    P (low part)    bf16     idem
//   total   14848
//
// The swizzles make every ldmatrix of the recurrence kernel conflict-free (8 rows read at one
// logical chunk land in 8 different 16-byte bank groups). Quantities: docs/design.md §2.1.
#pragma once

#include <cstdint>

// Host and device (the layout functions are also checked by host tests).
#if defined(__CUDACC__)
#define KDA_RECORD_HD __host__ __device__
#else
#define KDA_RECORD_HD
#endif

namespace kda::sm90 {

struct ChunkRecord {
  static constexpr int kRows = 16;
  static constexpr int kDim = 128;
  static constexpr uint32_t kWdOffset = 0;
  static constexpr uint32_t kQpOffset = 4096;
  static constexpr uint32_t kKrOffset = 8192;
  static constexpr uint32_t kGammaOffset = 12288;
  static constexpr uint32_t kTbHiOffset = 12800;
  static constexpr uint32_t kTbLoOffset = 13312;
  static constexpr uint32_t kPHiOffset = 13824;
  static constexpr uint32_t kPLoOffset = 14336;
  static constexpr uint32_t kBytes = 14848;

  // Element index (in bf16 units) of (row, col) in a [16][128] operand (Wd, Qp, Kr).
  KDA_RECORD_HD static constexpr uint32_t wide_index(int row, int col) {
    return static_cast<uint32_t>(row * kDim + ((((col >> 3) ^ (row & 7))) << 3) + (col & 7));
  }
  // Byte offset of 16-byte chunk `chunk` (0..15) of row `row` in a [16][128] operand.
  KDA_RECORD_HD static constexpr uint32_t wide_chunk_byte(int row, int chunk) {
    return static_cast<uint32_t>(row * kDim * 2 + ((chunk ^ (row & 7)) << 4));
  }
  // Element index of (row, col) in a [16][16] operand (Tb, P halves).
  KDA_RECORD_HD static constexpr uint32_t small_index(int row, int col) {
    return static_cast<uint32_t>(row * 16 + ((((col >> 3) ^ ((row >> 2) & 1))) << 3) + (col & 7));
  }
  KDA_RECORD_HD static constexpr uint32_t small_chunk_byte(int row, int chunk) {
    return static_cast<uint32_t>(row * 32 + ((chunk ^ ((row >> 2) & 1)) << 4));
  }
};

static_assert(ChunkRecord::kBytes % 16 == 0, "copied in 16-byte pieces");
static_assert(ChunkRecord::kPLoOffset + 512 == ChunkRecord::kBytes, "record layout is contiguous");

}  // namespace kda::sm90
