// Shared-memory swizzles of bf16 tiles: where element (row, col) of a tile lies, in the patterns the
// tensor copy engine (TMA, CU_TENSOR_MAP_SWIZZLE_*) writes and wgmma reads (descriptor swizzle
// modes). Host and device constexpr; tests/test_tile_layout.cpp checks them on the CPU,
// tests/gpu/test_tile_tma.cu against what TMA really writes and tests/gpu/test_tile.cu what wgmma really reads.
//
// The pattern (CUDA programming guide, "TMA swizzle"; PTX ISA, shared-memory matrix layouts): with
// S = 32, 64 or 128 swizzle bytes, shared memory is seen as rows of S bytes made of 16-byte chunks;
// the chunk index inside a row is XORed with bits of the row index, namely
//   128B: chunk (0..7) ^= row % 8           (the pattern repeats every 8 rows = 1024 bytes)
//    64B: chunk (0..3) ^= (row / 2) % 4     (repeats every 512 bytes)
//    32B: chunk (0..1) ^= (row / 4) % 2     (repeats every 256 bytes)
// i.e. on byte offsets: bits 4.. (log2(S/16) of them) ^= bits 7.. of the offset. The hardware
// applies this to shared-memory address bits, so a tile must start on the pattern's repeat (1024 /
// 512 / 256 bytes) for the offsets below to be the ones it uses (smem_layout.h aligns tiles so).
//
// Tiles: Rows x Cols bf16, Cols the contiguous dimension. A row holds at most S bytes (S / 2
// elements: the TMA box's inner size is limited to the swizzle span), so a wider tile is stored as
// Cols / (S / 2) column panels one after the other, each Rows x (S / 2) elements (one TMA box, or
// one wgmma operand k-slab, per panel). Swizzle::kNone: plain row-major, rows of Cols elements.
#pragma once

#include <cstdint>

#include "src/ptx/wgmma_desc.h"

#if defined(__CUDACC__)
#define KDA_TILE_HD __host__ __device__ __forceinline__
#else
#define KDA_TILE_HD inline
#endif

namespace kda::tile {

enum class Swizzle : int { kNone = 0, k32B = 32, k64B = 64, k128B = 128 };

// Bytes of one swizzled row (the span); 0 for kNone.
KDA_TILE_HD constexpr int swizzle_bytes(Swizzle s) { return static_cast<int>(s); }

// Bytes after which the pattern repeats (the alignment a tile needs): 8 rows of the span.
KDA_TILE_HD constexpr int swizzle_repeat_bytes(Swizzle s) { return s == Swizzle::kNone ? 16 : 8 * swizzle_bytes(s); }

// Row-chunk XOR of the pattern for row `row` of the span-wide rows.
KDA_TILE_HD constexpr int swizzle_xor(Swizzle s, int row) {
  return s == Swizzle::k128B ? (row & 7) : s == Swizzle::k64B ? ((row >> 1) & 3) : s == Swizzle::k32B ? ((row >> 2) & 1) : 0;
}

// Byte offset, inside a tile of `rows` x `cols` bf16 (cols a multiple of the span's elements),
// of element (row, col).
KDA_TILE_HD constexpr uint32_t swizzled_offset(Swizzle s, int rows, int cols, int row, int col) {
  if (s == Swizzle::kNone) return static_cast<uint32_t>((row * cols + col) * 2);
  const int span = swizzle_bytes(s);      // bytes per row of a panel
  const int span_elems = span / 2;        // bf16 per row of a panel
  const int panel = col / span_elems;     // which column panel
  const int byte_in_row = (col % span_elems) * 2;
  const int chunk = (byte_in_row >> 4) ^ swizzle_xor(s, row);
  return static_cast<uint32_t>(panel * rows * span + row * span + (chunk << 4) + (byte_in_row & 15));
}

// The descriptor encoding of a swizzle (wgmma_desc.h).
KDA_TILE_HD constexpr ptx::DescSwizzle desc_swizzle(Swizzle s) {
  return s == Swizzle::k128B ? ptx::DescSwizzle::k128B
         : s == Swizzle::k64B ? ptx::DescSwizzle::k64B
         : s == Swizzle::k32B ? ptx::DescSwizzle::k32B
                              : ptx::DescSwizzle::kNone;
}

// A Rows x Cols bf16 tile in swizzle S: sizes and offsets from one place.
template <Swizzle S, int Rows, int Cols>
struct SwizzledTile {
  static constexpr Swizzle kSwizzle = S;
  static constexpr int kRows = Rows;
  static constexpr int kCols = Cols;
  static constexpr int kSpanElems = S == Swizzle::kNone ? Cols : swizzle_bytes(S) / 2;
  static constexpr int kPanels = Cols / kSpanElems;
  static constexpr int kPanelBytes = Rows * kSpanElems * 2;
  static constexpr int kBytes = Rows * Cols * 2;
  static constexpr int kAlign = S == Swizzle::kNone ? 128 : swizzle_repeat_bytes(S) < 128 ? 128 : swizzle_repeat_bytes(S);
  static_assert(Cols % kSpanElems == 0, "a swizzled tile holds whole column panels");
  static_assert(S == Swizzle::kNone || Rows % 8 == 0, "a swizzled tile holds whole 8-row patterns");

  KDA_TILE_HD static constexpr uint32_t offset(int row, int col) { return swizzled_offset(S, Rows, Cols, row, col); }
  // Index in bf16 units (offset / 2).
  KDA_TILE_HD static constexpr uint32_t index(int row, int col) { return offset(row, col) >> 1; }
};

}  // namespace kda::tile
