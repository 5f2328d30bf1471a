// Shared-memory layout of a kernel: tiles and barriers as members of one shared-storage struct, so
// sizes and alignments come from one constexpr source (the tiles' SwizzledTile types) and the
// compiler places the members.
//
//   using TileA = SwizzledTile<Swizzle::k128B, 64, 64>;
//   struct Storage {
//     TileBuffer<TileA> a[kStages];      // each aligned to TileA::kAlign (1024 for 128B)
//     alignas(8) uint64_t full[kStages];
//   };
//   kernel:   Storage& s = *smem_storage<Storage>(dynamic_smem);   (aligns the base up at run time)
//   launcher: smem_bytes<Storage>() dynamic shared memory (room for that alignment included)
//
// Dynamic shared memory is only guaranteed 16-byte aligned, hence the run-time alignment of the
// base: an alignas on the struct alone does not make the 128B swizzle pattern line up.
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/tile/swizzle.h"

namespace kda::tile {

// Storage of one tile: kBytes bytes aligned for its swizzle pattern.
template <class Tile>
struct alignas(Tile::kAlign) TileBuffer {
  unsigned char bytes[Tile::kBytes];
  using TileType = Tile;
};

KDA_TILE_HD constexpr size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

// Dynamic shared memory to request for a Storage struct (its size plus the alignment slack).
template <class Storage>
constexpr size_t smem_bytes() {
  return sizeof(Storage) + (alignof(Storage) > 16 ? alignof(Storage) - 16 : 0);
}

#if defined(__CUDACC__)
// The Storage struct inside a dynamic shared-memory buffer, its shared-memory address aligned up to
// alignof(Storage) (the swizzle patterns follow shared-memory address bits).
template <class Storage>
__device__ __forceinline__ Storage* smem_storage(void* dynamic_smem) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(dynamic_smem));
  const uint32_t pad = static_cast<uint32_t>(align_up(addr, alignof(Storage))) - addr;
  return reinterpret_cast<Storage*>(static_cast<unsigned char*>(dynamic_smem) + pad);
}
#endif

// Host-checkable layout builder for code that places buffers by offset (a constexpr cursor):
//   constexpr SmemCursor c0{}; constexpr auto a = c0.take(TileA::kBytes, TileA::kAlign); ...
struct SmemCursor {
  size_t end = 0;    // bytes used so far
  size_t last = 0;   // offset of the last buffer taken
  KDA_TILE_HD constexpr SmemCursor take(size_t bytes, size_t align) const {
    const size_t at = align_up(end, align);
    return SmemCursor{at + bytes, at};
  }
};

}  // namespace kda::tile
