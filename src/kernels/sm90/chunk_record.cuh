// The chunk record: what the preparation kernel writes for one (chunk, value head) and the
// recurrence kernels copy into shared memory. Since version 37 it is laid out as the wgmma
// recurrence's ring stage reads it (wgmma_stage.h: the record is the stage's first 14,848 bytes),
// so that one bulk copy brings it. Layout (bytes):
//
//   offset  size   what                      layout
//   0       8192   [Wd; Qp]        bf16     one [32][128] operand: rows 0..15 Wd = Tb·Kd, rows 16..31
//                                            Qp = Qd − P·Kd; two column panels of 64 (4096 bytes each),
//                                            row r of a panel at 128 r, its 16-byte chunk c at c ^ (r % 8)
//                                            (the 128B swizzle)
//   8192   4096    Kr              bf16     [16][128], the same panels (2048 bytes each)
//   12288  512     Tb (high part)  bf16     [16 rows][2 chunks of 8], chunk c of row i at c ^ ((i / 4) % 2)
//                                            (the 32B swizzle)
//   12800  512     P (high part)   bf16     idem ([Tb; P] high parts: one [32][16] operand)
//   13312  512     Tb (low part)   bf16     idem; Tb ≈ hi + lo to ~16 bits
//   13824  512     P (low part)    bf16     idem
//   14336  512     Γ               f32      [128]
//   total   14848
//
// The swizzles make every ldmatrix of the mma.sync recurrence conflict-free (8 rows read at one
// logical chunk land in 8 different 16-byte bank groups) and are the ones wgmma's descriptors name.
// The preparation's own shared-memory operand tiles keep the "wide" layout ([16][128], rows of 256
// bytes, chunk c of row r at c ^ (r % 8)); tests/test_wgmma_stage.cpp checks both against the tile
// layouts of src/tile/swizzle.h. Quantities: docs/design.md §2.1.
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
  static constexpr uint32_t kQpOffset = 2048;  // row 16 of the [Wd; Qp] operand
  static constexpr uint32_t kWqPanelBytes = 4096;  // [Wd; Qp]: 32 rows of 128 bytes per panel
  static constexpr uint32_t kKrOffset = 8192;
  static constexpr uint32_t kKrPanelBytes = 2048;  // Kr: 16 rows of 128 bytes per panel
  static constexpr uint32_t kTbHiOffset = 12288;
  static constexpr uint32_t kPHiOffset = 12800;
  static constexpr uint32_t kTbLoOffset = 13312;
  static constexpr uint32_t kPLoOffset = 13824;
  static constexpr uint32_t kGammaOffset = 14336;
  static constexpr uint32_t kBytes = 14848;

  // Byte offset of 16-byte chunk `chunk` (0..15, columns [8 chunk, +8)) of row `row` in a 128-column
  // bf16 operand stored in two 128B-swizzled column panels of kPanelBytes each; kPanelBytes = 0: the
  // wide layout (rows of 256 bytes, chunk ^ (row % 8)).
  template <uint32_t kPanelBytes>
  KDA_RECORD_HD static constexpr uint32_t chunk_byte(int row, int chunk) {
    if constexpr (kPanelBytes == 0) {
      return static_cast<uint32_t>(row * kDim * 2 + ((chunk ^ (row & 7)) << 4));
    } else {
      return static_cast<uint32_t>((chunk >> 3) * static_cast<int>(kPanelBytes) + row * 128 +
                                   (((chunk & 7) ^ (row & 7)) << 4));
    }
  }
  // Element index (bf16 units) of (row, col) in such an operand.
  template <uint32_t kPanelBytes>
  KDA_RECORD_HD static constexpr uint32_t element_index(int row, int col) {
    if constexpr (kPanelBytes == 0) {
      return static_cast<uint32_t>(row * kDim + ((((col >> 3) ^ (row & 7))) << 3) + (col & 7));
    } else {
      return static_cast<uint32_t>((col >> 6) * static_cast<int>(kPanelBytes / 2) + row * 64 +
                                   ((((col >> 3) & 7) ^ (row & 7)) << 3) + (col & 7));
    }
  }
  // The wide layout (the preparation's shared-memory tiles).
  KDA_RECORD_HD static constexpr uint32_t wide_index(int row, int col) { return element_index<0>(row, col); }
  KDA_RECORD_HD static constexpr uint32_t wide_chunk_byte(int row, int chunk) { return chunk_byte<0>(row, chunk); }
  // The record's operands: Wd (row 0..15), Qp (row 0..15, i.e. row 16 + row of [Wd; Qp]), Kr.
  KDA_RECORD_HD static constexpr uint32_t wd_chunk_byte(int row, int chunk) {
    return kWdOffset + chunk_byte<kWqPanelBytes>(row, chunk);
  }
  KDA_RECORD_HD static constexpr uint32_t qp_chunk_byte(int row, int chunk) {
    return kWdOffset + chunk_byte<kWqPanelBytes>(16 + row, chunk);
  }
  KDA_RECORD_HD static constexpr uint32_t kr_chunk_byte(int row, int chunk) {
    return kKrOffset + chunk_byte<kKrPanelBytes>(row, chunk);
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
static_assert(ChunkRecord::kQpOffset == ChunkRecord::qp_chunk_byte(0, 0), "Qp is row 16 of [Wd; Qp]");
static_assert(ChunkRecord::kKrOffset == 2 * ChunkRecord::kWqPanelBytes, "Kr follows [Wd; Qp]");
static_assert(ChunkRecord::kTbHiOffset == ChunkRecord::kKrOffset + 2 * ChunkRecord::kKrPanelBytes, "Tb follows Kr");
static_assert(ChunkRecord::kGammaOffset + 512 == ChunkRecord::kBytes, "record layout is contiguous");

}  // namespace kda::sm90
