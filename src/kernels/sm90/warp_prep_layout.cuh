// The warp preparation's shared memory (warp_prep.cuh): one warp's storage in its
// three forms (WarpSmem: the boxes and float tiles, 15 KB; WarpSmemLate: with Kr and Γ parked, 19 KB;
// WarpSmem2: two sets of boxes, 27 KB) and the boxes' layout, the tensor copies' 16 x 64 tiles with
// the 128B swizzle, checked at compile time to be the chunk record's panel layout. The single pass
// uses WarpSmemLate; the other two serve the benchmarks' layouts (benchmarks/fused_warp_kernel.cuh).
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/kernels/sm90/chunk_record.cuh"
#include "src/tile/swizzle.h"

namespace kda::sm90::warp_prep {

using sm90::ChunkRecord;

// One warp's shared memory (15 KB; the boxes 1024-aligned: their 128B swizzle follows address bits
// 7-9).
struct WarpSmem {
  static constexpr int kAld = 16, kTld = 20;  // row strides of A (broadcast reads) and Tb (conflict-free B reads)
  // q, k, g of the chunk: [panel][16 tokens][64 columns] bf16 boxes; row r at 128 r, its 16-byte
  // chunk c at c ^ (r % 8). Later Kd (q), Qd hi (k), Qd lo (g) in the same places, then Wd (q), Qp (k).
  alignas(1024) unsigned char in[6][2048];
  float A[16 * kAld];
  float tb[16 * kTld];  // T·Diag(b)
  uint64_t bar;
  unsigned char pad[3072 - (16 * kAld + 16 * kTld) * 4 - 8];
};
static_assert(sizeof(WarpSmem) == 15 * 1024, "15 KB per warp");
static_assert(offsetof(WarpSmem, bar) % 8 == 0, "mbarrier alignment");

inline constexpr int kIn = 0, kInK = 2, kInG = 4;  // in[] pieces: q p0/p1, k p0/p1, g p0/p1

// A box (16 tokens x 64 columns, 128B swizzle): the tile the tensor copies write.
using Box = tile::SwizzledTile<tile::Swizzle::k128B, 16, 64>;

// The row address lane `lane` gives ldmatrix / stmatrix (.x4) for key step ks (columns 16 ks, +16 of
// the chunk, in the box of panel ks / 4): matrix m = lane / 8 is (tokens 8 (m % 2) .. +8, columns
// 8 (2 ks + m / 2) ..), its row lane % 8.
KDA_TILE_HD constexpr uint32_t box_row_offset(int lane, int ks) {
  const int m = lane >> 3, row = (lane & 7) + 8 * (m & 1);
  return static_cast<uint32_t>(row * 128 + (((((2 * ks) & 7) + (m >> 1)) ^ (lane & 7)) << 4));
}

// Checked at compile time: those addresses are the box's swizzled rows, and a box's bytes are where the
// record keeps the same rows and columns, so stmatrix into the boxes and a bulk copy per box write
// [Wd; Qp] (Wd rows 0..15 of a panel, Qp rows 16..31, 2048 bytes further), and Kr's panels the same way.
constexpr bool box_layout_is_the_records() {
  for (int lane = 0; lane < 32; ++lane)
    for (int ks = 0; ks < 8; ++ks) {
      const int m = lane >> 3, row = (lane & 7) + 8 * (m & 1), col = 8 * (((2 * ks) & 7) + (m >> 1));
      if (box_row_offset(lane, ks) != Box::offset(row, col)) return false;
    }
  for (int p = 0; p < 2; ++p)
    for (int r = 0; r < 16; ++r)
      for (int c = 0; c < 8; ++c) {
        const uint32_t in_box = Box::offset(r, 8 * c);
        if (p * ChunkRecord::kWqPanelBytes + in_box != ChunkRecord::wd_chunk_byte(r, 8 * p + c)) return false;
        if (p * ChunkRecord::kWqPanelBytes + 2048 + in_box != ChunkRecord::qp_chunk_byte(r, 8 * p + c)) return false;
        if (ChunkRecord::kKrOffset + p * ChunkRecord::kKrPanelBytes + in_box != ChunkRecord::kr_chunk_byte(r, 8 * p + c))
          return false;
      }
  return Box::kBytes == 2048;
}
static_assert(box_layout_is_the_records(), "the boxes' layout is the record's panel layout");

// The lanes that store a key's Γ in the key loop (one lane of each quad, Frag::qid(lane) == 0), told
// from the lane's row offset box_row_offset(lane, 0), which the loop keeps in a register anyway:
// bits 7-8 of it are the lane's row % 4 = lane % 4. Tested from threadIdx there, the predicate needed a
// scratch register at each key-loop entry, which the single pass's pieces instance found only by
// spilling one (4 bytes stored and reloaded twice per chunk and warp, cuobjdump 2026-12-03).
inline constexpr uint32_t kQuadLeaderMask = 0x180u;
KDA_TILE_HD constexpr bool quad_leader_from_offset(uint32_t row_offset) { return (row_offset & kQuadLeaderMask) == 0u; }
constexpr bool quad_leader_test_is_qid_zero() {
  for (int lane = 0; lane < 32; ++lane)
    if (quad_leader_from_offset(box_row_offset(lane, 0)) != ((lane & 3) == 0)) return false;
  return true;
}
static_assert(quad_leader_test_is_qid_zero(), "bits 7-8 of a lane's row offset are lane % 4");

// A preparation warp that takes its ring stage only at the end of its chunk (RecordTo::kLate): Kr and Γ
// wait in the warp's own memory (kr in the record's panel layout, so that the move into the stage is a
// straight copy) until the stage is free; 19 KB per warp, so that eight such warps leave room for 3
// stages.
struct WarpSmemLate {
  alignas(1024) unsigned char in[6][2048];
  alignas(128) unsigned char kr[2 * ChunkRecord::kKrPanelBytes];
  float A[16 * WarpSmem::kAld];
  float tb[16 * WarpSmem::kTld];
  float gamma[128];
  uint64_t bar;
  unsigned char pad[19 * 1024 - 6 * 2048 - 2 * ChunkRecord::kKrPanelBytes - (16 * WarpSmem::kAld + 16 * WarpSmem::kTld + 128) * 4 - 8];
};
static_assert(sizeof(WarpSmemLate) == 19 * 1024, "19 KB per warp");
static_assert(offsetof(WarpSmemLate, bar) % 8 == 0, "mbarrier alignment");

// A preparation warp that loads its next chunk while it computes the current one: two sets of boxes.
struct WarpSmem2 {
  alignas(1024) unsigned char in[2][6][2048];
  float A[16 * WarpSmem::kAld];
  float tb[16 * WarpSmem::kTld];
  uint64_t bar[2];
  unsigned char pad[3072 - (16 * WarpSmem::kAld + 16 * WarpSmem::kTld) * 4 - 16];
};
static_assert(sizeof(WarpSmem2) == 27 * 1024, "27 KB per warp");

}  // namespace kda::sm90::warp_prep
