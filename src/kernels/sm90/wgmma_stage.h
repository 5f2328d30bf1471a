// The ring stage of chunk_recurrence_wgmma_kernel.cuh (host and device, so that
// tests/test_wgmma_stage.cpp checks it on the CPU): the tiles wgmma reads. The chunk record
// (chunk_record.cuh) is laid out as the stage's first 14,848 bytes, so that one bulk copy brings it:
// [Wd; Qp] one 32-row 128B-swizzled K-major tile, Kr a 16-row 128B-swizzled MN-major tile, [Tb; P]
// (hi, lo) two 32-row 32B-swizzled tiles, Γ; then, 1024-aligned, the values of each warpgroup's 64
// rows: a [16 tokens][64 rows] 128B-swizzled tile (the MN-major A operand Vᵀ), which is what a tensor
// copy of a 16 x 64 box of v with the 128B swizzle writes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/kernels/sm90/chunk_record.cuh"
#include "src/kernels/sm90/kernel_params.h"  // kKrLoSlots
#include "src/tile/smem_layout.h"
#include "src/tile/swizzle.h"

namespace kda::sm90 {

template <int kWG>
struct WgmmaRecurrenceLayout {
  using WqTile = tile::SwizzledTile<tile::Swizzle::k128B, 32, 128>;  // [Wd; Qp]: K-major B, N = 32
  using KrTile = tile::SwizzledTile<tile::Swizzle::k128B, 16, 128>;  // Kr: MN-major B, K = 16 tokens
  using TpTile = tile::SwizzledTile<tile::Swizzle::k32B, 32, 16>;    // [Tb; P] (hi or lo): K-major B
  using VtTile = tile::SwizzledTile<tile::Swizzle::k128B, 16, 64>;   // values: MN-major A (Vᵀ)
  struct Stage {  // the record's part first, in the record's order (checked below)
    tile::TileBuffer<WqTile> wq;
    tile::TileBuffer<KrTile> kr;
    tile::TileBuffer<TpTile> tp_hi, tp_lo;
    float gamma[128];
    tile::TileBuffer<VtTile> vt[kWG];
  };
  static constexpr int kStageBytes = static_cast<int>(sizeof(Stage));
  static constexpr int kStages = (200 * 1024) / kStageBytes < 12 ? (200 * 1024) / kStageBytes : 12;
  struct Storage {
    Stage stage[kStages];
    // Kr's low parts for a sequence's last updates (RecurrenceParams::kr_lo; slot 0 the last chunk's,
    // 1 the one before: final_split_chunks), each filled with its chunk's stage.
    tile::TileBuffer<KrTile> kr_lo[kKrLoSlots];
    alignas(16) unsigned char out[4 * kWG][512];  // per consumer warp: a 16x16 bf16 output tile
    alignas(8) uint64_t full[kStages];
    uint64_t empty[kStages];
  };
  static constexpr int kRows = 64 * kWG;
  // The producer: one warp beside one consumer warpgroup (5 warps: up to 255 registers per
  // thread), a whole warpgroup beside two (9 warps would cap every thread at 168; 12 warps hold 168 x
  // 384, which setmaxnreg splits 88 / 208 / 208, checked with ptx::setmaxnreg_fits).
  // The producer's first thread issues each stage's copies (the record by one bulk copy, the values
  // by one tensor copy per warpgroup); the others join in only for the steps whose values come by
  // cp.async (ProducerShare below). The warpgroup form stays for setmaxnreg's sake (version 29: with
  // cp.async of every piece it was 1-5% faster on full grids than one producer warp).
  static constexpr bool kProducerWarpgroup = kWG >= 2;
  static constexpr int kProducerThreads = kProducerWarpgroup ? 128 : 32;
  static constexpr int kThreads = 128 * kWG + kProducerThreads;
  static constexpr int kProducerRegs = 88, kConsumerRegs = 208;  // setmaxnreg (kProducerWarpgroup)
  static constexpr int kConsumerWarps = 4 * kWG;
  static_assert(kStages >= 3, "at least three stages");
};

namespace wgmma_recurrence_detail {

// The record is the stage's first ChunkRecord::kBytes bytes, tile by tile.
template <class L>
KDA_TILE_HD constexpr bool record_is_stage_prefix() {
  using Stage = typename L::Stage;
  return offsetof(Stage, wq) == ChunkRecord::kWdOffset && static_cast<uint32_t>(L::WqTile::kPanelBytes) == ChunkRecord::kWqPanelBytes &&
         L::WqTile::offset(16, 0) == ChunkRecord::kQpOffset && offsetof(Stage, kr) == ChunkRecord::kKrOffset &&
         static_cast<uint32_t>(L::KrTile::kPanelBytes) == ChunkRecord::kKrPanelBytes && offsetof(Stage, tp_hi) == ChunkRecord::kTbHiOffset &&
         offsetof(Stage, tp_hi) + L::TpTile::offset(16, 0) == ChunkRecord::kPHiOffset &&
         offsetof(Stage, tp_lo) == ChunkRecord::kTbLoOffset &&
         offsetof(Stage, tp_lo) + L::TpTile::offset(16, 0) == ChunkRecord::kPLoOffset &&
         offsetof(Stage, gamma) == ChunkRecord::kGammaOffset && offsetof(Stage, vt) >= ChunkRecord::kBytes;
}

// The producer's share of a step whose values come by cp.async (a sequence's partial last chunk;
// every step, a transition's zero values included, when no tensor map describes v): lane pt of the
// producer's first warp copies value pieces value_piece(pt, m) for m < kValueRounds (piece k:
// warpgroup k / 128, token (k / 8) % 16, rows 8 (k % 8) ..). Together every piece exactly once
// (tests/test_wgmma_stage.cpp).
template <class L>
struct ProducerShare {
  static constexpr int kThreads = 32;
  static constexpr int kValuePieces = L::kConsumerWarps / 4 * 16 * 8;  // per warpgroup: 16 tokens x 8 pieces
  static_assert(kValuePieces % kThreads == 0, "every producer thread copies the same number of value pieces");
  static constexpr int kValueRounds = kValuePieces / kThreads;
  KDA_TILE_HD static constexpr int value_piece(int pt, int m) { return pt + kThreads * m; }
};

}  // namespace wgmma_recurrence_detail

}  // namespace kda::sm90
