// wgmma shared-memory operands over swizzled tiles (swizzle.h): which descriptor (start offset, LBO,
// SBO, swizzle mode) reads k-step `ks` (16 K values) of a tile. Host and device constexpr: the
// host tests check that the start offset of each k-step is where the tile keeps that k-step's first
// element; the GPU tests check that wgmma reads the whole operand right.
//
// K-major operand (A as M x K, or B as N x K, K contiguous): Tile = SwizzledTile<S, MN, K>. A row is
// one M (or N) index; k-step ks lies in panel ks / (span / 32) at byte (ks % (span / 32)) * 32 of
// each row; SBO = 8 rows of the span (the next group of 8 M/N rows); LBO unused (1).
// MN-major operand (A as K x M, or B as K x N, M/N contiguous): Tile = SwizzledTile<S, K, MN>. A row
// is one K index; k-step ks starts at row 16 ks of the first panel; SBO = 8 rows of the span (the
// next 8 K rows); LBO = one panel (the next S / 2 M/N columns).
// base_offset 0: tiles start on their pattern's repeat (SwizzledTile::kAlign).
#pragma once

#include <cstdint>

#include "src/ptx/wgmma_desc.h"
#include "src/tile/swizzle.h"

namespace kda::tile {

struct OperandDesc {
  uint32_t start;  // byte offset from the tile's start
  uint32_t lbo;
  uint32_t sbo;
  ptx::DescSwizzle swizzle;

  // The descriptor for a tile placed at shared-memory byte address `tile_addr`.
  KDA_TILE_HD constexpr uint64_t at(uint32_t tile_addr) const {
    return ptx::WgmmaDesc::make(tile_addr + start, lbo, sbo, swizzle);
  }
};

template <class Tile>
KDA_TILE_HD constexpr OperandDesc kmajor_operand(int ks) {
  static_assert(Tile::kSwizzle != Swizzle::kNone, "the K-major operand helpers cover the swizzled layouts");
  constexpr int span = swizzle_bytes(Tile::kSwizzle);
  constexpr int steps_per_panel = span / 32;  // 16 bf16 = 32 bytes per k-step
  return OperandDesc{static_cast<uint32_t>((ks / steps_per_panel) * Tile::kPanelBytes + (ks % steps_per_panel) * 32),
                     16u, static_cast<uint32_t>(8 * span), desc_swizzle(Tile::kSwizzle)};
}

template <class Tile>
KDA_TILE_HD constexpr OperandDesc mnmajor_operand(int ks) {
  static_assert(Tile::kSwizzle != Swizzle::kNone, "the MN-major operand helpers cover the swizzled layouts");
  constexpr int span = swizzle_bytes(Tile::kSwizzle);
  return OperandDesc{static_cast<uint32_t>(16 * ks * span), static_cast<uint32_t>(Tile::kPanelBytes),
                     static_cast<uint32_t>(8 * span), desc_swizzle(Tile::kSwizzle)};
}

}  // namespace kda::tile
