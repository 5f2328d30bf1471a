// The tensor-map builder (src/launch/tensor_map.h) and its cache (src/launch/tensor_map_cache.h) on the
// CPU: bad arguments rejected by name, the head-box map's strides (dense where a size is one, no
// broadcast), a map built without the driver, and the cache answering only its own key. The rest of the
// tile layer's host-checkable contracts: test_tile_layout.cpp; on the hardware: gpu/test_tile_tma.cu.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "src/launch/tensor_map.h"
#include "src/launch/tensor_map_cache.h"
#include "src/tile/swizzle.h"

namespace kda::test {
namespace {

using tile::Swizzle;

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

}  // namespace
}  // namespace kda::test
