// The tile layer's host-checkable contracts (src/tile, src/ptx/wgmma_desc.h, src/launch/tensor_map.h):
// swizzles are bijections matching an independent transcription of the documented pattern, the
// wgmma descriptor packs and unpacks its fields at the documented bits, the accumulator layout
// covers each element of m64nN once and feeds the register A operand, operand descriptors start
// where the tile keeps their k-step, the shared-storage helpers align, the tensor-map builder
// rejects bad arguments by name, the register budget of a CTA and of a setmaxnreg split. tests/gpu/test_tile.cu and test_tile_tma.cu check the same functions on the hardware.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "src/launch/tensor_map.h"
#include "src/launch/tensor_map_cache.h"
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

// A tensor-map builder's error: invalid argument, naming `name` and the function `fn`.
void expect_map_error(kda_status st, const char* name, const char* fn) {
  EXPECT_EQ(st.code, KDA_ERROR_INVALID_ARGUMENT) << st.message;
  EXPECT_NE(std::string(st.message).find(name), std::string::npos) << st.message;
  EXPECT_NE(std::string(st.message).find(fn), std::string::npos) << st.message;
}

TEST(TileTensorMap, RejectsBadArgumentsByName) {
  alignas(64) static unsigned char buffer[64];
  CUtensorMap map;
  const void* base = buffer;
  const auto expect_error = [](kda_status st, const char* name) { expect_map_error(st, name, "make_tensor_map_2d_bf16"); };
  using sm90::make_tensor_map_2d_bf16;
  expect_error(make_tensor_map_2d_bf16(nullptr, base, 64, 64, 64, 64, 64, Swizzle::k128B), "map is NULL");
  expect_error(make_tensor_map_2d_bf16(&map, nullptr, 64, 64, 64, 64, 64, Swizzle::k128B), "base is NULL");
  expect_error(make_tensor_map_2d_bf16(&map, buffer + 8, 64, 64, 64, 64, 64, Swizzle::k128B), "aligned");
  expect_error(make_tensor_map_2d_bf16(&map, base, 0, 64, 64, 64, 64, Swizzle::k128B), ": rows = 0");
  expect_error(make_tensor_map_2d_bf16(&map, base, (uint64_t{1} << 32) + 1, 64, 64, 64, 64, Swizzle::k128B), ": rows = 4294967297");
  expect_error(make_tensor_map_2d_bf16(&map, base, 64, 0, 64, 64, 64, Swizzle::k128B), ": cols = 0");
  expect_error(make_tensor_map_2d_bf16(&map, base, 64, 64, 60, 64, 64, Swizzle::k128B), "row_stride =");
  expect_error(make_tensor_map_2d_bf16(&map, base, 64, 64, 68, 64, 64, Swizzle::k128B), "row_stride =");
  expect_error(make_tensor_map_2d_bf16(&map, base, 64, 64, 64, 0, 64, Swizzle::k128B), "box_rows");
  expect_error(make_tensor_map_2d_bf16(&map, base, 64, 64, 64, 257, 64, Swizzle::k128B), "box_rows");
  expect_error(make_tensor_map_2d_bf16(&map, base, 64, 64, 64, 64, 12, Swizzle::k128B), "box_cols");
  expect_error(make_tensor_map_2d_bf16(&map, base, 64, 64, 64, 64, 128, Swizzle::k128B), "box_cols");
  expect_error(make_tensor_map_2d_bf16(&map, base, 64, 64, 64, 64, 64, Swizzle::k64B), "64-byte swizzle");
  expect_error(make_tensor_map_2d_bf16(&map, base, 64, 64, 64, 64, 32, Swizzle::k32B), "32-byte swizzle");
  expect_error(make_tensor_map_2d_bf16(&map, base, 64, 64, 64, 64, 64, static_cast<Swizzle>(16)), "swizzle = 16");
  EXPECT_EQ(sm90::tensor_map_swizzle(Swizzle::k128B), CU_TENSOR_MAP_SWIZZLE_128B);
  EXPECT_EQ(sm90::tensor_map_swizzle(Swizzle::k64B), CU_TENSOR_MAP_SWIZZLE_64B);
  EXPECT_EQ(sm90::tensor_map_swizzle(Swizzle::k32B), CU_TENSOR_MAP_SWIZZLE_32B);
  EXPECT_EQ(sm90::tensor_map_swizzle(Swizzle::kNone), CU_TENSOR_MAP_SWIZZLE_NONE);
}

// The rank-N form (the wgmma recurrence's map of v, rank 4): each bad argument named with its dimension,
// before the driver is asked.
TEST(TileTensorMap, RankNRejectsBadArgumentsByName) {
  alignas(64) static unsigned char buffer[64];
  CUtensorMap map;
  const void* base = buffer;
  const auto expect_error = [](kda_status st, const char* name) { expect_map_error(st, name, "make_tensor_map_bf16"); };
  using sm90::make_tensor_map_bf16;
  const uint64_t dims[4] = {128, 8, 1024, 2}, strides[3] = {128, 1024, 1024 * 1024};
  const uint32_t box[4] = {64, 1, 16, 1};
  expect_error(make_tensor_map_bf16(nullptr, base, 4, dims, strides, box, Swizzle::k128B), "map is NULL");
  expect_error(make_tensor_map_bf16(&map, nullptr, 4, dims, strides, box, Swizzle::k128B), "base is NULL");
  expect_error(make_tensor_map_bf16(&map, buffer + 8, 4, dims, strides, box, Swizzle::k128B), "aligned");
  expect_error(make_tensor_map_bf16(&map, base, 0, dims, strides, box, Swizzle::k128B), "rank = 0");
  expect_error(make_tensor_map_bf16(&map, base, 6, dims, strides, box, Swizzle::k128B), "rank = 6");
  expect_error(make_tensor_map_bf16(&map, base, 4, nullptr, strides, box, Swizzle::k128B), "must not be NULL");
  expect_error(make_tensor_map_bf16(&map, base, 4, dims, nullptr, box, Swizzle::k128B), "must not be NULL");
  const uint64_t zero_dim[4] = {128, 8, 0, 2};
  expect_error(make_tensor_map_bf16(&map, base, 4, zero_dim, strides, box, Swizzle::k128B), "dims[2] = 0");
  const uint64_t odd_stride[3] = {128, 1020, 1024 * 1024};
  expect_error(make_tensor_map_bf16(&map, base, 4, dims, odd_stride, box, Swizzle::k128B), "strides[1] = 1020");
  const uint64_t zero_stride[3] = {128, 1024, 0};
  expect_error(make_tensor_map_bf16(&map, base, 4, dims, zero_stride, box, Swizzle::k128B), "strides[2] = 0");
  const uint32_t big_box[4] = {64, 1, 257, 1};
  expect_error(make_tensor_map_bf16(&map, base, 4, dims, strides, big_box, Swizzle::k128B), "box[2] = 257");
  const uint32_t odd_box[4] = {12, 1, 16, 1};
  expect_error(make_tensor_map_bf16(&map, base, 4, dims, strides, odd_box, Swizzle::k128B), "box[0] = 12");
  const uint32_t wide_box[4] = {128, 1, 16, 1};
  expect_error(make_tensor_map_bf16(&map, base, 4, dims, strides, wide_box, Swizzle::k128B), "128-byte swizzle");
  expect_error(make_tensor_map_bf16(&map, base, 4, dims, strides, box, static_cast<Swizzle>(16)), "swizzle = 16");
}

TEST(TileTensorMap, HeadBoxStridesDenseWhereASizeIsOneAndNoBroadcast) {
  using sm90::head_box_strides;
  uint64_t st[3];
  // [B=2, T=100, H=3, 128] with the caller's strides (h, t, b) kept.
  ASSERT_TRUE(head_box_strides({128, 3, 100, 2}, {128, 3 * 128, 100 * 3 * 128}, st));
  EXPECT_EQ(st[0], 128u);
  EXPECT_EQ(st[1], 384u);
  EXPECT_EQ(st[2], 38400u);
  // Padded rows are kept too (a head stride of 256, a token stride of 1024).
  ASSERT_TRUE(head_box_strides({128, 3, 100, 2}, {256, 1024, 102400}, st));
  EXPECT_EQ(st[0], 256u);
  EXPECT_EQ(st[1], 1024u);
  EXPECT_EQ(st[2], 102400u);
  // A dimension of size 1 gets the dense stride, whatever the caller gave there (even 0 or negative).
  ASSERT_TRUE(head_box_strides({128, 1, 100, 1}, {0, 128, -5}, st));
  EXPECT_EQ(st[0], 128u);
  EXPECT_EQ(st[1], 128u);
  EXPECT_EQ(st[2], 12800u);
  // A broadcast dimension (stride 0 over more than one element): no tensor map.
  EXPECT_FALSE(head_box_strides({128, 4, 100, 1}, {0, 512, 51200}, st));
  EXPECT_FALSE(head_box_strides({128, 4, 100, 1}, {128, 0, 51200}, st));
  EXPECT_FALSE(head_box_strides({128, 4, 100, 2}, {128, 512, -1}, st));
  EXPECT_EQ(sm90::kHeadBox[0], 64u);
  EXPECT_EQ(sm90::kHeadBox[2], 16u);
}

// head_box_map_ok: make_head_box_map's own checks without the driver (the workspace's size rests on
// them): a non-null, 16-byte aligned base, no broadcast, dims in [1, 2^32], strides of whole 16 bytes
// in [8, 2^39) elements.
TEST(TileTensorMap, HeadBoxMapOkWithoutTheDriver) {
  using sm90::head_box_map_ok;
  const void* base = reinterpret_cast<const void*>(uintptr_t{1} << 20);
  const void* odd = reinterpret_cast<const void*>((uintptr_t{1} << 20) + 8);
  EXPECT_TRUE(head_box_map_ok(base, {128, 3, 100, 2}, {128, 384, 38400}));
  EXPECT_TRUE(head_box_map_ok(base, {128, 1, 100, 1}, {0, 128, -5}));  // sizes of 1: dense strides
  EXPECT_FALSE(head_box_map_ok(nullptr, {128, 3, 100, 2}, {128, 384, 38400}));
  EXPECT_FALSE(head_box_map_ok(odd, {128, 3, 100, 2}, {128, 384, 38400}));
  EXPECT_FALSE(head_box_map_ok(base, {128, 4, 100, 1}, {0, 512, 51200}));       // broadcast heads
  EXPECT_FALSE(head_box_map_ok(base, {128, 3, 100, 2}, {132, 396, 39600}));     // not whole 16 bytes
  EXPECT_FALSE(head_box_map_ok(base, {128, 3, 100, 2}, {128, 384, int64_t{1} << 39}));  // too far apart
  EXPECT_FALSE(head_box_map_ok(base, {128, 3, (uint64_t{1} << 32) + 1, 1}, {128, 384, 0}));  // T past 2^32
}

// The per-thread cache of head-box maps (tensor_map_cache.h): a lookup answers with the map stored
// under exactly that key or with nothing, never with another key's map, whatever the collisions; a
// key differing in any one field is another key.
TEST(TileTensorMap, HeadBoxMapCacheAnswersOnlyItsOwnKey) {
  using sm90::HeadBoxKey;
  auto key = [](uintptr_t base, uint64_t T) {
    HeadBoxKey k;
    k.base = base;
    const uint64_t dims[4] = {128, 8, T, 1}, strides[3] = {128, 1024, 1024 * T};
    for (int d = 0; d < 4; ++d) k.dims[d] = dims[d];
    for (int d = 0; d < 3; ++d) k.strides[d] = strides[d];
    return k;
  };
  auto map_of = [](const HeadBoxKey& k) {  // stand-in map bytes that name their key
    CUtensorMap m;
    std::memset(&m, 0, sizeof(m));
    uint64_t words[3] = {static_cast<uint64_t>(k.base), k.dims[2], k.strides[1]};
    std::memcpy(&m, words, sizeof(words));
    return m;
  };
  auto same = [](const CUtensorMap* a, const CUtensorMap& b) { return a != nullptr && std::memcmp(a, &b, sizeof(b)) == 0; };
  sm90::HeadBoxMapCache<8> cache;
  const HeadBoxKey a = key(uintptr_t{1} << 20, 100);
  EXPECT_EQ(cache.find(a), nullptr);
  cache.put(a, map_of(a));
  EXPECT_TRUE(same(cache.find(a), map_of(a)));
  // One field changed: another key (a miss, or the map stored under that key only).
  HeadBoxKey b = a;
  b.base += 256;
  HeadBoxKey c = a;
  c.dims[1] = 16;
  HeadBoxKey d = a;
  d.strides[0] = 256;
  for (const HeadBoxKey& k : {b, c, d}) EXPECT_FALSE(k == a);
  for (const HeadBoxKey& k : {b, c, d}) EXPECT_EQ(cache.find(k), nullptr);
  // A key in a's slot replaces it: a misses afterwards, the new key hits.
  HeadBoxKey e = a;
  for (uint64_t T = 101; sm90::HeadBoxMapCache<8>::slot(e) != sm90::HeadBoxMapCache<8>::slot(a) || e == a; ++T)
    e = key(a.base, T);
  cache.put(e, map_of(e));
  EXPECT_EQ(cache.find(a), nullptr);
  EXPECT_TRUE(same(cache.find(e), map_of(e)));
  // Many keys (collisions among them): every lookup is its own map or a miss, and the last one put hits.
  std::set<size_t> slots;
  for (int i = 0; i < 200; ++i) {
    const HeadBoxKey k = key((uintptr_t{1} << 20) + 256 * (i % 17), 64 + i);
    slots.insert(sm90::HeadBoxMapCache<8>::slot(k));
    cache.put(k, map_of(k));
    EXPECT_TRUE(same(cache.find(k), map_of(k)));
    for (int j = 0; j <= i; ++j) {
      const HeadBoxKey o = key((uintptr_t{1} << 20) + 256 * (j % 17), 64 + j);
      const CUtensorMap* hit = cache.find(o);
      EXPECT_TRUE(hit == nullptr || same(hit, map_of(o))) << i << " " << j;
    }
  }
  EXPECT_EQ(slots.size(), 8u);  // the hash spreads keys over every slot
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
