// The tile layer's host-checkable contracts (src/tile, src/ptx/wgmma_desc.h, src/ptx/register_budget.h):
// swizzles are bijections matching an independent transcription of the documented pattern, the
// wgmma descriptor packs and unpacks its fields at the documented bits, the accumulator layout
// covers each element of m64nN once and feeds the register A operand, operand descriptors start
// where the tile keeps their k-step, the shared-storage helpers align, the register budget of a CTA
// and of a setmaxnreg split. The tensor-map builder and its cache: test_tile_tensor_map.cpp. tests/gpu/test_tile.cu and test_tile_tma.cu check the same functions on the hardware.
#include <gtest/gtest.h>

#include <vector>

#include "src/ptx/register_budget.h"
#include "src/ptx/wgmma_desc.h"
#include "src/tile/operand.h"
#include "src/tile/smem_layout.h"
#include "src/tile/swizzle.h"

namespace kda::test {
namespace {

using ptx::DescSwizzle;
using ptx::WgmmaAcc;
using ptx::WgmmaDesc;
using tile::Swizzle;

// Independent transcription of the pattern on byte offsets (CUTLASS's Swizzle<B, 4, 3> form):
// within each panel (rows of `span` bytes, laid out contiguously), bits [4, 4 + B) of the linear
// byte offset are XORed with bits [7, 7 + B), B = log2(span / 16).
uint32_t reference_offset(Swizzle s, int rows, int cols, int row, int col) {
  if (s == Swizzle::kNone) return static_cast<uint32_t>(row * cols + col) * 2u;
  const uint32_t span = static_cast<uint32_t>(s);
  const uint32_t bits = span == 128 ? 3 : span == 64 ? 2 : 1;
  const uint32_t span_elems = span / 2;
  const uint32_t panel = static_cast<uint32_t>(col) / span_elems;
  const uint32_t linear = static_cast<uint32_t>(row) * span + (static_cast<uint32_t>(col) % span_elems) * 2u;
  const uint32_t mask = (1u << bits) - 1u;
  const uint32_t swizzled = linear ^ (((linear >> 7) & mask) << 4);
  return panel * static_cast<uint32_t>(rows) * span + swizzled;
}

const Swizzle kAll[] = {Swizzle::kNone, Swizzle::k32B, Swizzle::k64B, Swizzle::k128B};

TEST(TileSwizzle, BijectionWithinEachAtomAndTile) {
  for (Swizzle s : kAll) {
    if (s == Swizzle::kNone) continue;
    const int span = tile::swizzle_bytes(s);
    const int repeat = tile::swizzle_repeat_bytes(s);
    EXPECT_EQ(repeat, 8 * span);
    // One atom: 8 rows x span bytes; the offsets of its 16-byte chunks are a permutation of the atom.
    const int rows = 8, cols = span / 2;
    std::vector<int> seen(static_cast<size_t>(repeat), 0);
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) {
        const uint32_t o = tile::swizzled_offset(s, rows, cols, r, c);
        ASSERT_LT(o, static_cast<uint32_t>(repeat));
        ASSERT_EQ(o % 2, 0u);
        ++seen[o];
        ++seen[o + 1];
        // Elements of one 16-byte chunk stay together and in order; rows stay in their own span.
        EXPECT_EQ(o / span, static_cast<uint32_t>(r)) << "swizzle " << span << " row " << r << " col " << c;
        EXPECT_EQ(o % 16, static_cast<uint32_t>((c * 2) % 16));
      }
    for (int x : seen) EXPECT_EQ(x, 1);
  }
  // Whole tiles with several panels and patterns: a permutation of [0, bytes).
  for (Swizzle s : kAll) {
    const int rows = 64, cols = 128;
    std::vector<int> seen(static_cast<size_t>(rows * cols * 2), 0);
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) {
        const uint32_t o = tile::swizzled_offset(s, rows, cols, r, c);
        ASSERT_LT(o + 1, seen.size());
        ++seen[o];
        ++seen[o + 1];
      }
    for (int x : seen) EXPECT_EQ(x, 1);
  }
}

TEST(TileSwizzle, MatchesTheDocumentedPattern) {
  for (Swizzle s : kAll)
    for (int rows : {8, 16, 64})
      for (int cols : {64, 128, 192})
        for (int r = 0; r < rows; ++r)
          for (int c = 0; c < cols; ++c)
            ASSERT_EQ(tile::swizzled_offset(s, rows, cols, r, c), reference_offset(s, rows, cols, r, c))
                << "swizzle " << static_cast<int>(s) << " tile " << rows << "x" << cols << " at (" << r << ", " << c
                << ")";
  // A few values written out from the pattern's picture (128B: row r's chunk j lands at j ^ r).
  EXPECT_EQ(tile::swizzled_offset(Swizzle::k128B, 8, 64, 0, 0), 0u);
  EXPECT_EQ(tile::swizzled_offset(Swizzle::k128B, 8, 64, 1, 0), 128u + 16u);      // chunk 0 -> 1
  EXPECT_EQ(tile::swizzled_offset(Swizzle::k128B, 8, 64, 7, 8), 7u * 128 + 6 * 16);  // chunk 1 -> 6
  EXPECT_EQ(tile::swizzled_offset(Swizzle::k128B, 8, 64, 5, 63), 5u * 128 + 2 * 16 + 14);  // chunk 7 -> 2
  EXPECT_EQ(tile::swizzled_offset(Swizzle::k64B, 8, 32, 1, 0), 64u);               // rows 0-1: no XOR
  EXPECT_EQ(tile::swizzled_offset(Swizzle::k64B, 8, 32, 2, 0), 2u * 64 + 16);      // rows 2-3: ^1
  EXPECT_EQ(tile::swizzled_offset(Swizzle::k64B, 8, 32, 7, 9), 7u * 64 + (1 ^ 3) * 16 + 2);
  EXPECT_EQ(tile::swizzled_offset(Swizzle::k32B, 8, 16, 3, 8), 3u * 32 + 16);      // rows 0-3: no XOR
  EXPECT_EQ(tile::swizzled_offset(Swizzle::k32B, 8, 16, 4, 8), 4u * 32);           // rows 4-7: ^1
  // Second panel of a 128-wide 128B tile of 64 rows starts after 64 x 128 bytes.
  EXPECT_EQ(tile::swizzled_offset(Swizzle::k128B, 64, 128, 0, 64), 64u * 128);
  using T = tile::SwizzledTile<Swizzle::k128B, 64, 128>;
  static_assert(T::kPanels == 2 && T::kPanelBytes == 8192 && T::kBytes == 16384 && T::kAlign == 1024, "sizes");
  static_assert(T::offset(3, 70) == 8192 + 3 * 128 + ((0 ^ 3) << 4) + 12, "offset");
  static_assert(tile::SwizzledTile<Swizzle::k64B, 8, 64>::kAlign == 512, "64B align");
  static_assert(tile::SwizzledTile<Swizzle::k32B, 8, 64>::kAlign == 256, "32B align");
}

TEST(TileWgmmaDesc, FieldsAtTheDocumentedBits) {
  // Each field alone lands at its bit position.
  EXPECT_EQ(WgmmaDesc::make(0x10, 0, 0, DescSwizzle::kNone), uint64_t{1});
  EXPECT_EQ(WgmmaDesc::make(0, 0x10, 0, DescSwizzle::kNone), uint64_t{1} << 16);
  EXPECT_EQ(WgmmaDesc::make(0, 0, 0x10, DescSwizzle::kNone), uint64_t{1} << 32);
  EXPECT_EQ(WgmmaDesc::make(0, 0, 0, DescSwizzle::kNone, 1), uint64_t{1} << 49);
  EXPECT_EQ(WgmmaDesc::make(0, 0, 0, DescSwizzle::k128B), uint64_t{1} << 62);
  EXPECT_EQ(WgmmaDesc::make(0, 0, 0, DescSwizzle::k64B), uint64_t{2} << 62);
  EXPECT_EQ(WgmmaDesc::make(0, 0, 0, DescSwizzle::k32B), uint64_t{3} << 62);
  // Field widths: 14 bits each, the 4 low address bits dropped.
  EXPECT_EQ(WgmmaDesc::make(0x3FFF0, 0x3FFF0, 0x3FFF0, DescSwizzle::kNone, 7),
            uint64_t{0x3FFF} | (uint64_t{0x3FFF} << 16) | (uint64_t{0x3FFF} << 32) | (uint64_t{7} << 49));
  // A typical K-major 128B operand: start 0x400, LBO 16, SBO 1024.
  EXPECT_EQ(WgmmaDesc::make(0x400, 16, 1024, DescSwizzle::k128B), 0x4000004000010040ull);
  // Round trips over a spread of values.
  for (uint32_t start = 0; start < (1u << 18); start += 16 * 37)
    for (uint32_t lbo : {16u, 128u, 1024u, 8192u, 262128u})
      for (uint32_t sbo : {0u, 256u, 512u, 1024u, 4096u})
        for (DescSwizzle s : {DescSwizzle::kNone, DescSwizzle::k128B, DescSwizzle::k64B, DescSwizzle::k32B})
          for (uint32_t base : {0u, 5u}) {
            const uint64_t d = WgmmaDesc::make(start, lbo, sbo, s, base);
            ASSERT_EQ(WgmmaDesc::start_bytes(d), start);
            ASSERT_EQ(WgmmaDesc::lbo_bytes(d), lbo);
            ASSERT_EQ(WgmmaDesc::sbo_bytes(d), sbo);
            ASSERT_EQ(WgmmaDesc::swizzle(d), s);
            ASSERT_EQ(WgmmaDesc::base_offset(d), base);
            // Unused bits stay clear.
            ASSERT_EQ(d & ((uint64_t{3} << 14) | (uint64_t{3} << 30) | (uint64_t{7} << 46) | (uint64_t{0x3FF} << 52)),
                      0u);
            if (start + 96 < (1u << 18)) {
              ASSERT_EQ(WgmmaDesc::start_bytes(WgmmaDesc::advance(d, 96)), start + 96);
            }
          }
}

template <int N>
void check_accumulator_cover() {
  std::vector<int> seen(64 * N, 0);
  for (int t = 0; t < 128; ++t)
    for (int i = 0; i < N / 2; ++i) {
      const int r = WgmmaAcc::row(t, i), c = WgmmaAcc::col(t, i);
      ASSERT_TRUE(r >= 0 && r < 64 && c >= 0 && c < N) << "thread " << t << " element " << i;
      ++seen[r * N + c];
      // Warp w owns rows 16w..16w+15.
      ASSERT_EQ(r / 16, t / 32);
    }
  for (int x : seen) ASSERT_EQ(x, 1) << "m64n" << N;
}

TEST(TileAccumulator, CoversEveryElementOnce) {
  check_accumulator_cover<16>();
  check_accumulator_cover<32>();
  check_accumulator_cover<64>();
  check_accumulator_cover<128>();
  // Spot values of the layout (PTX ISA figure for wgmma D, m64nNk16): thread 0 holds (0,0),(0,1),
  // (8,0),(8,1),(0,8)...; thread 37 (warp 1, lane 5) holds row 17, columns 2-3.
  EXPECT_EQ(WgmmaAcc::row(0, 2), 8);
  EXPECT_EQ(WgmmaAcc::col(0, 4), 8);
  EXPECT_EQ(WgmmaAcc::row(37, 0), 17);
  EXPECT_EQ(WgmmaAcc::col(37, 1), 3);
  EXPECT_EQ(WgmmaAcc::row(127, 63), 63);
  EXPECT_EQ(WgmmaAcc::col(127, 63), 127);
}

TEST(TileAccumulator, AccumulatorColumnsAreTheNextRegisterA) {
  // Register A operand of k-step s: element (a_row, 16 s + a_col + h) of the 64 x 16 slab; the
  // accumulator element Acc::to_a packs there (WgmmaAcc::acc_index_of_a) must sit at the same place.
  std::vector<int> seen(64 * 16, 0);
  for (int t = 0; t < 128; ++t)
    for (int q = 0; q < 4; ++q)
      for (int h = 0; h < 2; ++h) {
        ++seen[WgmmaAcc::a_row(t, q) * 16 + WgmmaAcc::a_col(t, q) + h];
        for (int s = 0; s < 8; ++s) {
          const int i = WgmmaAcc::acc_index_of_a(s, q, h);  // the element Acc::to_a packs there
          ASSERT_TRUE(i >= 0 && i < 64);
          ASSERT_EQ(WgmmaAcc::row(t, i), WgmmaAcc::a_row(t, q));
          ASSERT_EQ(WgmmaAcc::col(t, i), 16 * s + WgmmaAcc::a_col(t, q) + h);
        }
      }
  for (int x : seen) EXPECT_EQ(x, 1);
}

TEST(TileOperand, DescriptorsStartAtTheirKStep) {
  // K-major 128B tile of 64 rows x 128 K: k-step ks starts at element (0, 16 ks), each row 8 rows
  // (SBO) from the next group.
  using KTile = tile::SwizzledTile<Swizzle::k128B, 64, 128>;
  for (int ks = 0; ks < 8; ++ks) {
    const tile::OperandDesc d = tile::kmajor_operand<KTile>(ks);
    EXPECT_EQ(d.start, KTile::offset(0, 16 * ks)) << ks;
    EXPECT_EQ(d.sbo, KTile::offset(8, 16 * ks) - KTile::offset(0, 16 * ks)) << ks;
    EXPECT_EQ(d.swizzle, DescSwizzle::k128B);
    const uint64_t desc = d.at(0x2000);
    EXPECT_EQ(WgmmaDesc::start_bytes(desc), 0x2000u + d.start);
    EXPECT_EQ(WgmmaDesc::sbo_bytes(desc), 1024u);
  }
  using K64 = tile::SwizzledTile<Swizzle::k64B, 64, 64>;
  for (int ks = 0; ks < 4; ++ks) {
    EXPECT_EQ(tile::kmajor_operand<K64>(ks).start, K64::offset(0, 16 * ks));
    EXPECT_EQ(tile::kmajor_operand<K64>(ks).sbo, 512u);
  }
  using K32 = tile::SwizzledTile<Swizzle::k32B, 64, 64>;
  for (int ks = 0; ks < 4; ++ks) EXPECT_EQ(tile::kmajor_operand<K32>(ks).start, K32::offset(0, 16 * ks));
  // MN-major 128B tile of 64 K rows x 128 N: k-step ks starts at row 16 ks; the next 64 N columns
  // one panel (LBO) further; the next 8 K rows SBO further.
  using NTile = tile::SwizzledTile<Swizzle::k128B, 64, 128>;
  for (int ks = 0; ks < 4; ++ks) {
    const tile::OperandDesc d = tile::mnmajor_operand<NTile>(ks);
    EXPECT_EQ(d.start, NTile::offset(16 * ks, 0));
    EXPECT_EQ(d.lbo, NTile::offset(16 * ks, 64) - NTile::offset(16 * ks, 0));
    EXPECT_EQ(d.sbo, NTile::offset(16 * ks + 8, 0) - NTile::offset(16 * ks, 0));
  }
}

TEST(TileSmemLayout, StorageMembersAligned) {
  using A = tile::SwizzledTile<Swizzle::k128B, 64, 64>;
  using B = tile::SwizzledTile<Swizzle::k64B, 32, 32>;
  struct Storage {
    tile::TileBuffer<A> a[2];
    tile::TileBuffer<B> b;
    alignas(8) uint64_t bars[3];
  };
  static_assert(alignof(Storage) == 1024, "the storage takes its strictest tile's alignment");
  static_assert(sizeof(tile::TileBuffer<A>) == 8192, "no padding in a 1024-multiple tile");
  Storage s;
  const auto at = [&](const void* p) { return reinterpret_cast<const char*>(p) - reinterpret_cast<const char*>(&s); };
  EXPECT_EQ(at(&s.a[1]) % 1024, 0);
  EXPECT_EQ(at(&s.b) % 512, 0);
  EXPECT_EQ(at(&s.bars[0]) % 8, 0);
  EXPECT_EQ(tile::smem_bytes<Storage>(), sizeof(Storage) + 1024 - 16);
  // The constexpr cursor.
  constexpr tile::SmemCursor c0{};
  constexpr tile::SmemCursor c1 = c0.take(100, 16);
  constexpr tile::SmemCursor c2 = c1.take(A::kBytes, A::kAlign);
  constexpr tile::SmemCursor c3 = c2.take(8, 8);
  static_assert(c1.last == 0 && c1.end == 100, "first");
  static_assert(c2.last == 1024 && c2.end == 1024 + 8192, "aligned up");
  static_assert(c3.last == 9216 && c3.end == 9224, "next");
  EXPECT_EQ(tile::align_up(1, 1024), 1024u);
  EXPECT_EQ(tile::align_up(2048, 1024), 2048u);
}

// What a CTA launched with __launch_bounds__(threads, 1) holds per thread: the busiest
// sub-partition's share (ptxas gave 168 for 288 and for 384 threads on 2026-12-01), and which
// setmaxnreg splits fit in it (112 / 200 / 200 with 384 threads made setmaxnreg.inc wait forever).
TEST(RegisterBudget, LaunchCountAndSetmaxnregSplits) {
  EXPECT_EQ(ptx::launch_regs_per_thread(384), 168);
  EXPECT_EQ(ptx::launch_regs_per_thread(288), 168);  // 9 warps: 3 on one sub-partition
  EXPECT_EQ(ptx::launch_regs_per_thread(256), 256);
  EXPECT_EQ(ptx::launch_regs_per_thread(160), 256);
  EXPECT_EQ(ptx::launch_regs_per_thread(512), 128);
  EXPECT_EQ(ptx::launch_regs_per_thread(640), 96);   // 20 warps: 5 per sub-partition, 102 -> 96
  EXPECT_TRUE(ptx::setmaxnreg_fits(384, {40, 232, 232}));
  EXPECT_TRUE(ptx::setmaxnreg_fits(384, {120, 192, 192}));
  EXPECT_FALSE(ptx::setmaxnreg_fits(384, {112, 200, 200}));  // 65536 > 64512: the hang
  EXPECT_FALSE(ptx::setmaxnreg_fits(384, {64, 224, 224}));
  EXPECT_FALSE(ptx::setmaxnreg_fits(384, {40, 232}));         // threads must be 128 x warpgroups
  EXPECT_FALSE(ptx::setmaxnreg_fits(384, {44, 230, 230}));    // not multiples of 8
  static_assert(ptx::setmaxnreg_fits(384, {40, 232, 232}), "usable in static_assert");
}

}  // namespace
}  // namespace kda::test
