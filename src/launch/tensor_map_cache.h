// A small per-thread cache of head-box tensor maps (tensor_map.h's make_head_box_map), so that a call
// whose q, k, g or v has the address, sizes and strides of a recent call's reuses that map instead of
// encoding it again (the single pass encodes four before its launch: host time before the first
// kernel of an eager call). Host only, no driver: the encoder is the caller's.
//
// Why a cached map is always the right one: a map is a pure function of the encoder's arguments (base
// address, sizes, strides; the box, swizzle and element type are fixed for head boxes), and the key
// holds all of them, so a hit gives the bytes a fresh encode would give. Nothing is assumed about the
// memory behind the address (a freed and reused address gives the same map; the pointer checks are
// made elsewhere, before any map is built). Per thread (thread_local at the use): no lock, no sharing.
#pragma once

#include <cuda.h>  // CUtensorMap (type only)

#include <cstddef>
#include <cstdint>

namespace kda::sm90 {

// What a head-box map is a function of: the base address and the resolved sizes and element strides
// (head_box_strides: dimensions of size 1 already have their dense stride, so equal tensors give equal
// keys whatever strides the caller gave there).
struct HeadBoxKey {
  uintptr_t base = 0;
  uint64_t dims[4] = {};
  uint64_t strides[3] = {};
  bool operator==(const HeadBoxKey& o) const {
    if (base != o.base) return false;
    for (int d = 0; d < 4; ++d)
      if (dims[d] != o.dims[d]) return false;
    for (int d = 0; d < 3; ++d)
      if (strides[d] != o.strides[d]) return false;
    return true;
  }
};

// kSlots entries, direct-mapped by a hash of the key (a miss overwrites the slot): a lookup is one
// hash and one key comparison. 64 slots hold the four maps of 16 recent calls' distinct tensors.
template <int kSlots = 64>
class HeadBoxMapCache {
  static_assert(kSlots > 0 && (kSlots & (kSlots - 1)) == 0, "a power of two");

 public:
  // The cached map of `key`, or nullptr.
  const CUtensorMap* find(const HeadBoxKey& key) const {
    const Entry& e = entries_[slot(key)];
    return e.valid && e.key == key ? &e.map : nullptr;
  }
  void put(const HeadBoxKey& key, const CUtensorMap& map) {
    Entry& e = entries_[slot(key)];
    e.key = key;
    e.map = map;
    e.valid = true;
  }
  static size_t slot(const HeadBoxKey& key) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ static_cast<uint64_t>(key.base);
    auto mix = [&h](uint64_t x) {
      h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    };
    for (uint64_t d : key.dims) mix(d);
    for (uint64_t s : key.strides) mix(s);
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return static_cast<size_t>(h & (kSlots - 1));
  }

 private:
  struct Entry {
    HeadBoxKey key;
    CUtensorMap map;
    bool valid = false;
  };
  Entry entries_[kSlots];
};

}  // namespace kda::sm90
