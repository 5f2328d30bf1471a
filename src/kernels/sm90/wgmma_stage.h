// The ring stage of chunk_recurrence_wgmma_kernel.cuh (host and device, so that
// tests/test_wgmma_stage.cpp checks it on the CPU): the tiles wgmma reads, and where each 16-byte
// piece of a chunk record (chunk_record.cuh) goes in them. The record's [16][128] operands (256-byte
// rows whose 16-byte chunks are XORed with row % 8) become 128B-swizzled column panels
// ([panel][row][128 B], the same XOR); Wd and Qp one 32-row tile; Tb and P (hi, lo) two 32-row
// 32B-swizzled tiles (the record's small layout is the 32B pattern already); Γ as it is. The
// values of each warpgroup's 64 rows: a [16 tokens][64 rows] 128B-swizzled tile (the MN-major A
// operand Vᵀ), filled by the producer.
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/kernels/sm90/chunk_record.cuh"
#include "src/tile/smem_layout.h"
#include "src/tile/swizzle.h"

namespace kda::sm90 {

template <int kWG>
struct WgmmaRecurrenceLayout {
  using WqTile = tile::SwizzledTile<tile::Swizzle::k128B, 32, 128>;  // [Wd; Qp]: K-major B, N = 32
  using KrTile = tile::SwizzledTile<tile::Swizzle::k128B, 16, 128>;  // Kr: MN-major B, K = 16 tokens
  using TpTile = tile::SwizzledTile<tile::Swizzle::k32B, 32, 16>;    // [Tb; P] (hi or lo): K-major B
  using VtTile = tile::SwizzledTile<tile::Swizzle::k128B, 16, 64>;   // values: MN-major A (Vᵀ)
  struct Stage {
    tile::TileBuffer<WqTile> wq;
    tile::TileBuffer<KrTile> kr;
    tile::TileBuffer<VtTile> vt[kWG];
    tile::TileBuffer<TpTile> tp_hi, tp_lo;
    float gamma[128];
  };
  static constexpr int kStageBytes = static_cast<int>(sizeof(Stage));
  static constexpr int kStages = (200 * 1024) / kStageBytes < 12 ? (200 * 1024) / kStageBytes : 12;
  struct Storage {
    Stage stage[kStages];
    // Kr's low part for a sequence's last update (RecurrenceParams::kr_lo), filled with that
    // chunk's stage.
    tile::TileBuffer<KrTile> kr_lo;
    alignas(16) unsigned char out[4 * kWG][512];  // per consumer warp: a 16x16 bf16 output tile
    alignas(8) uint64_t full[kStages];
    uint64_t empty[kStages];
  };
  static constexpr int kRows = 64 * kWG;
  // The producer: one warp beside one consumer warpgroup (5 warps: up to 255 registers per
  // thread), a whole warpgroup beside two (9 warps would cap every thread at 168; 12 warps hold 168 x
  // 384, which setmaxnreg splits 88 / 208 / 208, checked by the kernel with ptx::setmaxnreg_fits).
  // With two consumer warpgroups the four producer warps share the copies (8 record pieces and 2
  // value pieces per thread and step instead of 29 and 8 per lane of one warp); full grids run 1-5%
  // faster (docs/performance_notes.md, version 29).
  static constexpr bool kProducerWarpgroup = kWG >= 2;
  static constexpr int kProducerThreads = kProducerWarpgroup ? 128 : 32;
  static constexpr int kThreads = 128 * kWG + kProducerThreads;
  static constexpr int kProducerRegs = 88, kConsumerRegs = 208;  // setmaxnreg (kProducerWarpgroup)
  static constexpr int kConsumerWarps = 4 * kWG;
  static_assert(kStages >= 3, "at least three stages");
};

namespace wgmma_recurrence_detail {

// Where record piece k (bytes [16k, 16k + 16) of the record) goes in a stage.
template <class L>
KDA_TILE_HD constexpr uint32_t stage_offset_of_piece(int k) {
  using Stage = typename L::Stage;
  const uint32_t off = 16u * static_cast<uint32_t>(k);
  if (off < ChunkRecord::kKrOffset) {  // Wd (rows 0..15) or Qp (rows 16..31) of the [Wd; Qp] tile
    const uint32_t which = off >> 12, r = (off >> 8) & 15, c = (off >> 4) & 15;  // c: the stored chunk
    return static_cast<uint32_t>(offsetof(Stage, wq)) + (c >> 3) * L::WqTile::kPanelBytes + (which * 16 + r) * 128 +
           (c & 7) * 16;
  }
  if (off < ChunkRecord::kGammaOffset) {
    const uint32_t r = ((off - ChunkRecord::kKrOffset) >> 8) & 15, c = (off >> 4) & 15;
    return static_cast<uint32_t>(offsetof(Stage, kr)) + (c >> 3) * L::KrTile::kPanelBytes + r * 128 + (c & 7) * 16;
  }
  if (off < ChunkRecord::kTbHiOffset) return static_cast<uint32_t>(offsetof(Stage, gamma)) + (off - ChunkRecord::kGammaOffset);
  const uint32_t idx = (off - ChunkRecord::kTbHiOffset) >> 9, within = (off - ChunkRecord::kTbHiOffset) & 511;
  // idx: 0 Tb hi, 1 Tb lo, 2 P hi, 3 P lo. The small layout's 32-byte rows with chunk ^ ((row / 4) % 2)
  // are the 32B swizzle; P's rows go below Tb's (rows 16..31, the same XOR).
  const uint32_t base = (idx & 1) ? static_cast<uint32_t>(offsetof(Stage, tp_lo)) : static_cast<uint32_t>(offsetof(Stage, tp_hi));
  return base + (idx >> 1) * 512 + within;
}

// Where piece k (bytes [16k, 16k + 16)) of a Kr low part (the record's wide layout, like its Kr)
// goes in the kr_lo tile: the place of the record's Kr piece k in a stage's kr tile.
template <class L>
KDA_TILE_HD constexpr uint32_t kr_lo_offset_of_piece(int k) {
  return stage_offset_of_piece<L>(static_cast<int>(ChunkRecord::kKrOffset / 16) + k) -
         static_cast<uint32_t>(offsetof(typename L::Stage, kr));
}

// The producer's share of a step: producer thread pt (of L::kProducerThreads) copies record pieces
// record_piece(pt, j) for j < kRecordRounds where has_record_piece (the last round is partial when
// the 928 pieces do not divide evenly) and value pieces value_piece(pt, m) for m < kValueRounds (piece k: warpgroup
// k / 128, token (k / 8) % 16, rows 8 (k % 8) ..). Together every piece exactly once
// (tests/test_wgmma_stage.cpp).
template <class L>
struct ProducerShare {
  static constexpr int kThreads = L::kProducerThreads;
  static constexpr int kRecordPieces = static_cast<int>(ChunkRecord::kBytes / 16);
  static constexpr int kRecordRounds = (kRecordPieces + kThreads - 1) / kThreads;
  static constexpr bool kWholeRounds = kRecordPieces % kThreads == 0;
  static constexpr int kValuePieces = L::kConsumerWarps / 4 * 16 * 8;  // per warpgroup: 16 tokens x 8 pieces
  static_assert(kValuePieces % kThreads == 0, "every producer thread copies the same number of value pieces");
  static constexpr int kValueRounds = kValuePieces / kThreads;
  KDA_TILE_HD static constexpr int record_piece(int pt, int j) { return pt + kThreads * j; }
  KDA_TILE_HD static constexpr bool has_record_piece(int pt, int j) {
    return kWholeRounds || record_piece(pt, j) < kRecordPieces;
  }
  KDA_TILE_HD static constexpr int value_piece(int pt, int m) { return pt + kThreads * m; }
};

}  // namespace wgmma_recurrence_detail

}  // namespace kda::sm90
