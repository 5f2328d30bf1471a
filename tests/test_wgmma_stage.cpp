// The wgmma recurrence's ring stage (src/kernels/sm90/wgmma_stage.h) and the chunk record
// (src/kernels/sm90/chunk_record.cuh), on the CPU: the record is the stage's first kBytes bytes, so
// every element the preparation stores through ChunkRecord's layout functions lands where the tile
// layout that wgmma reads (src/tile/swizzle.h) expects it: Wd (r, c) at [Wd; Qp] tile row r, Qp at
// row 16 + r, Kr (token r, key c) at the Kr tile, Tb and P (hi and lo) at rows r and 16 + r of the
// two small tiles, Γ in order; no two elements share bytes; the value tiles lie past the record. The
// single pass's ring (single_pass_layout.h): test_single_pass_ring.cpp.
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
  EXPECT_TRUE(sm90::wgmma_recurrence_detail::record_is_stage_prefix<L>());
  // Every bf16 element of the record's operands, by its layout function, at the byte wgmma reads.
  std::set<uint32_t> seen;  // bf16 slots of the record
  auto mark = [&](uint32_t byte) {
    EXPECT_LT(byte + 2, ChunkRecord::kBytes + 1);
    EXPECT_TRUE(seen.insert(byte).second) << "byte " << byte << " stored twice";
  };
  for (int r = 0; r < 16; ++r) {
    for (int c = 0; c < 128; ++c) {
      const uint32_t wd = ChunkRecord::wd_chunk_byte(r, c / 8) + 2 * (c % 8);
      const uint32_t qp = ChunkRecord::qp_chunk_byte(r, c / 8) + 2 * (c % 8);
      const uint32_t kr = ChunkRecord::kr_chunk_byte(r, c / 8) + 2 * (c % 8);
      ASSERT_EQ(wd, offsetof(Stage, wq) + L::WqTile::offset(r, c)) << r << "," << c;
      ASSERT_EQ(qp, offsetof(Stage, wq) + L::WqTile::offset(16 + r, c)) << r << "," << c;
      ASSERT_EQ(kr, offsetof(Stage, kr) + L::KrTile::offset(r, c)) << r << "," << c;
      // The element forms agree with the chunk forms (the preparation uses both).
      ASSERT_EQ(ChunkRecord::kKrOffset + 2 * ChunkRecord::element_index<ChunkRecord::kKrPanelBytes>(r, c), kr);
      ASSERT_EQ(ChunkRecord::kQpOffset + 2 * ChunkRecord::element_index<ChunkRecord::kWqPanelBytes>(r, c), qp);
      mark(wd);
      mark(qp);
      mark(kr);
    }
    for (int c = 0; c < 16; ++c) {
      const uint32_t small = ChunkRecord::small_index(r, c) * 2;
      ASSERT_EQ(ChunkRecord::kTbHiOffset + small, offsetof(Stage, tp_hi) + L::TpTile::offset(r, c));
      ASSERT_EQ(ChunkRecord::kPHiOffset + small, offsetof(Stage, tp_hi) + L::TpTile::offset(16 + r, c));
      ASSERT_EQ(ChunkRecord::kTbLoOffset + small, offsetof(Stage, tp_lo) + L::TpTile::offset(r, c));
      ASSERT_EQ(ChunkRecord::kPLoOffset + small, offsetof(Stage, tp_lo) + L::TpTile::offset(16 + r, c));
      for (uint32_t base : {ChunkRecord::kTbHiOffset, ChunkRecord::kPHiOffset, ChunkRecord::kTbLoOffset,
                            ChunkRecord::kPLoOffset})
        mark(base + small);
    }
  }
  for (int k = 0; k < 128; ++k) {
    ASSERT_EQ(ChunkRecord::kGammaOffset + 4 * k, offsetof(Stage, gamma) + 4 * k);
    mark(ChunkRecord::kGammaOffset + 4 * k);
    mark(ChunkRecord::kGammaOffset + 4 * k + 2);
  }
  EXPECT_EQ(seen.size(), ChunkRecord::kBytes / 2) << "the record has no gaps";
  // Tiles start on their swizzle pattern's repeat (the offsets above are the ones the hardware uses);
  // the value tiles, which tensor copies fill, past the record.
  EXPECT_EQ(offsetof(Stage, wq) % 1024, 0u);
  EXPECT_EQ(offsetof(Stage, kr) % 1024, 0u);
  EXPECT_EQ(offsetof(Stage, vt) % 1024, 0u);
  EXPECT_GE(offsetof(Stage, vt), ChunkRecord::kBytes);
  EXPECT_EQ(offsetof(Stage, tp_hi) % 256, 0u);
  EXPECT_EQ(offsetof(Stage, tp_lo) % 256, 0u);
  EXPECT_EQ(sizeof(Stage) % 1024, 0u);
  EXPECT_LE(tile::smem_bytes<typename L::Storage>(), 227u * 1024u);
}

TEST(WgmmaStage, RecordIsTheStagePrefixOneWarpgroup) { check_stage<1>(); }
TEST(WgmmaStage, RecordIsTheStagePrefixTwoWarpgroups) { check_stage<2>(); }

// The wide layout (the preparation's shared-memory tiles): rows of 256 bytes, chunk ^ (row % 8), a
// permutation of each row's 16 chunks.
TEST(WgmmaStage, WideLayoutPermutesEachRow) {
  for (int r = 0; r < 16; ++r) {
    std::set<uint32_t> row;
    for (int c = 0; c < 16; ++c) {
      const uint32_t b = ChunkRecord::wide_chunk_byte(r, c);
      EXPECT_EQ(b / 256, static_cast<uint32_t>(r));
      row.insert(b);
    }
    EXPECT_EQ(row.size(), 16u);
  }
}

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
  // Value pieces by cp.async (steps without the tensor copy), by the producer's first warp: 8 per lane
  // beside two consumer warpgroups, 4 beside one.
  EXPECT_EQ(sm90::wgmma_recurrence_detail::ProducerShare<L2>::kValueRounds, 8);
  EXPECT_EQ(sm90::wgmma_recurrence_detail::ProducerShare<L1>::kValueRounds, 4);
}

// Every value piece of a step is copied by exactly one producer thread.
template <int kWG>
void check_producer_share() {
  using Share = sm90::wgmma_recurrence_detail::ProducerShare<sm90::WgmmaRecurrenceLayout<kWG>>;
  std::vector<int> value(Share::kValuePieces, 0);
  for (int pt = 0; pt < Share::kThreads; ++pt) {
    for (int m = 0; m < Share::kValueRounds; ++m) {
      const int k = Share::value_piece(pt, m);
      ASSERT_GE(k, 0);
      ASSERT_LT(k, Share::kValuePieces) << "thread " << pt << " round " << m;
      ++value[k];
    }
  }
  for (int k = 0; k < Share::kValuePieces; ++k) EXPECT_EQ(value[k], 1) << "value piece " << k;
  EXPECT_EQ(Share::kValuePieces, kWG * 16 * 8);
}

TEST(WgmmaStage, ProducerCopiesEveryPieceOnceOneWarpgroup) { check_producer_share<1>(); }
TEST(WgmmaStage, ProducerCopiesEveryPieceOnceTwoWarpgroups) { check_producer_share<2>(); }

}  // namespace
}  // namespace kda::test
