// The wgmma recurrence's ring stage (src/kernels/sm90/wgmma_stage.h), on the CPU: every 16-byte
// piece of a chunk record lands inside the stage's record tiles, no two on the same bytes, and every
// element of the record ends where the tile layout that wgmma reads (src/tile/swizzle.h) expects
// it: Wd (r, c) at [Wd; Qp] tile row r, Qp at row 16 + r, Kr (token r, key c) at the Kr tile, Tb
// and P (hi and lo) at rows r and 16 + r of the two small tiles, Γ in order.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <vector>

#include "src/kernels/sm90/chunk_record.cuh"
#include "src/kernels/sm90/wgmma_stage.h"
#include "src/ptx/register_budget.h"

namespace kda::test {
namespace {

using sm90::ChunkRecord;

template <int kWG>
void check_stage() {
  using L = sm90::WgmmaRecurrenceLayout<kWG>;
  using Stage = typename L::Stage;
  auto dest = [](uint32_t record_byte) {  // stage byte of a record byte
    return sm90::wgmma_recurrence_detail::stage_offset_of_piece<L>(static_cast<int>(record_byte / 16)) +
           record_byte % 16;
  };
  // Pieces: inside the record tiles (not the value tiles), 16-byte aligned, pairwise distinct.
  std::set<uint32_t> seen;
  const uint32_t vt_begin = offsetof(Stage, vt), vt_end = vt_begin + kWG * L::VtTile::kBytes;
  for (int k = 0; k < static_cast<int>(ChunkRecord::kBytes / 16); ++k) {
    const uint32_t d = sm90::wgmma_recurrence_detail::stage_offset_of_piece<L>(k);
    EXPECT_EQ(d % 16, 0u) << "piece " << k;
    EXPECT_LE(d + 16, sizeof(Stage)) << "piece " << k;
    EXPECT_FALSE(d + 16 > vt_begin && d < vt_end) << "piece " << k << " lands in the value tiles";
    EXPECT_TRUE(seen.insert(d).second) << "piece " << k << " lands on another piece";
  }
  EXPECT_EQ(seen.size(), ChunkRecord::kBytes / 16);
  // Elements.
  for (int r = 0; r < 16; ++r) {
    for (int c = 0; c < 128; ++c) {
      const uint32_t wide = ChunkRecord::wide_index(r, c) * 2;
      ASSERT_EQ(dest(ChunkRecord::kWdOffset + wide), offsetof(Stage, wq) + L::WqTile::offset(r, c)) << r << "," << c;
      ASSERT_EQ(dest(ChunkRecord::kQpOffset + wide), offsetof(Stage, wq) + L::WqTile::offset(16 + r, c)) << r << "," << c;
      ASSERT_EQ(dest(ChunkRecord::kKrOffset + wide), offsetof(Stage, kr) + L::KrTile::offset(r, c)) << r << "," << c;
    }
    for (int c = 0; c < 16; ++c) {
      const uint32_t small = ChunkRecord::small_index(r, c) * 2;
      ASSERT_EQ(dest(ChunkRecord::kTbHiOffset + small), offsetof(Stage, tp_hi) + L::TpTile::offset(r, c));
      ASSERT_EQ(dest(ChunkRecord::kPHiOffset + small), offsetof(Stage, tp_hi) + L::TpTile::offset(16 + r, c));
      ASSERT_EQ(dest(ChunkRecord::kTbLoOffset + small), offsetof(Stage, tp_lo) + L::TpTile::offset(r, c));
      ASSERT_EQ(dest(ChunkRecord::kPLoOffset + small), offsetof(Stage, tp_lo) + L::TpTile::offset(16 + r, c));
    }
  }
  for (int k = 0; k < 128; ++k)
    ASSERT_EQ(dest(ChunkRecord::kGammaOffset + 4 * k), offsetof(Stage, gamma) + 4 * k);
  // Tiles start on their swizzle pattern's repeat (the offsets above are the ones the hardware uses).
  EXPECT_EQ(offsetof(Stage, wq) % 1024, 0u);
  EXPECT_EQ(offsetof(Stage, kr) % 1024, 0u);
  EXPECT_EQ(offsetof(Stage, vt) % 1024, 0u);
  EXPECT_EQ(offsetof(Stage, tp_hi) % 256, 0u);
  EXPECT_EQ(offsetof(Stage, tp_lo) % 256, 0u);
  EXPECT_EQ(sizeof(Stage) % 1024, 0u);
  EXPECT_LE(tile::smem_bytes<typename L::Storage>(), 227u * 1024u);
}

TEST(WgmmaStage, RecordPiecesLandWhereWgmmaReadsThemOneWarpgroup) { check_stage<1>(); }
TEST(WgmmaStage, RecordPiecesLandWhereWgmmaReadsThemTwoWarpgroups) { check_stage<2>(); }

// The block of each layout: one consumer warpgroup with a producer warp (5 warps: the launch gives
// up to 255 registers per thread, no setmaxnreg); two with a producer warpgroup whose setmaxnreg
// split fits in what the 12 warps are launched with (168 each), leaving the consumers more than the
// 168 that 9 warps would get. A split that does not fit hangs the kernel (setmaxnreg.inc waits).
TEST(WgmmaStage, ProducerAndRegisterSplit) {
  using L1 = sm90::WgmmaRecurrenceLayout<1>;
  using L2 = sm90::WgmmaRecurrenceLayout<2>;
  EXPECT_FALSE(L1::kProducerWarpgroup);
  EXPECT_EQ(L1::kThreads, 160);
  EXPECT_EQ(ptx::launch_regs_per_thread(L1::kThreads), 256);
  EXPECT_TRUE(L2::kProducerWarpgroup);
  EXPECT_EQ(L2::kThreads, 384);
  EXPECT_EQ(ptx::launch_regs_per_thread(L2::kThreads), 168);
  EXPECT_TRUE(ptx::setmaxnreg_fits(L2::kThreads, {L2::kProducerRegs, L2::kConsumerRegs, L2::kConsumerRegs}));
  EXPECT_GT(L2::kConsumerRegs, ptx::launch_regs_per_thread(128 * 2 + 32));
  // Record pieces in ceil(928 / 128) = 8 rounds (the last partial) with the warpgroup, 29 with a warp.
  EXPECT_EQ(sm90::wgmma_recurrence_detail::ProducerShare<L2>::kRecordRounds, 8);
  EXPECT_EQ(sm90::wgmma_recurrence_detail::ProducerShare<L1>::kRecordRounds, 29);
}

// Every record piece and every value piece of a step is copied by exactly one producer thread.
template <int kWG>
void check_producer_share() {
  using Share = sm90::wgmma_recurrence_detail::ProducerShare<sm90::WgmmaRecurrenceLayout<kWG>>;
  std::vector<int> record(Share::kRecordPieces, 0), value(Share::kValuePieces, 0);
  for (int pt = 0; pt < Share::kThreads; ++pt) {
    for (int j = 0; j < Share::kRecordRounds; ++j) {
      if (!Share::has_record_piece(pt, j)) continue;
      const int k = Share::record_piece(pt, j);
      ASSERT_GE(k, 0);
      ASSERT_LT(k, Share::kRecordPieces) << "thread " << pt << " round " << j;
      ++record[k];
    }
    for (int m = 0; m < Share::kValueRounds; ++m) {
      const int k = Share::value_piece(pt, m);
      ASSERT_GE(k, 0);
      ASSERT_LT(k, Share::kValuePieces) << "thread " << pt << " round " << m;
      ++value[k];
    }
  }
  for (int k = 0; k < Share::kRecordPieces; ++k) EXPECT_EQ(record[k], 1) << "record piece " << k;
  for (int k = 0; k < Share::kValuePieces; ++k) EXPECT_EQ(value[k], 1) << "value piece " << k;
  EXPECT_EQ(Share::kValuePieces, kWG * 16 * 8);
}

TEST(WgmmaStage, ProducerCopiesEveryPieceOnceOneWarpgroup) { check_producer_share<1>(); }
TEST(WgmmaStage, ProducerCopiesEveryPieceOnceTwoWarpgroups) { check_producer_share<2>(); }

}  // namespace
}  // namespace kda::test
