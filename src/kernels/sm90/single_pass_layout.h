// The single pass's block, ring and shared storage (single_pass_kernel.cuh; docs/design.md §3.5), host
// and device, so that tests/test_wgmma_stage.cpp checks its hand-over rules on the CPU: eight preparation
// warps (19 KB each) and one consumer warpgroup, 3 ring stages of the wgmma recurrence's stage
// (wgmma_stage.h), 24 barrier slots, the setmaxnreg split 136 / 232.
//
// Hand-over: chunk (step) j goes to stage j % kRing and barrier slot j % kSlots, prepared by warp
// j % kPrepWarps. Because kSlots is a multiple of the warps, a slot has one writer warp, which waits for
// the stage's previous step (j - kRing) to be consumed before it writes step j: since kRing <= kSlots,
// the slot's previous phase (step j - kSlots) was consumed by then too, and that warp waited for every
// earlier phase of the slot itself, so neither side's parity wait is ever two phases behind.
#pragma once

#include "src/kernels/sm90/kernel_params.h"  // kWarmupCap
#include "src/kernels/sm90/warp_prep_layout.cuh"
#include "src/kernels/sm90/wgmma_stage.h"
#include "src/ptx/register_budget.h"
#include "src/tile/smem_layout.h"

namespace kda::sm90 {

// The single pass's longest bounded warm-up, in chunks: its candidates are prepared before the chain
// starts and the unneeded ones thrown away, so each costs a chunk's preparation per piece; one chunk
// suffices on decaying gates (design.md §3.2), and a unit that needs more than this runs on the two
// kernels (whose warm-up goes to kWarmupCap chunks, then to the exact combine).
inline constexpr int kSinglePassWarmupCap = 2;
static_assert(kSinglePassWarmupCap >= 1 && kSinglePassWarmupCap <= kWarmupCap, "within the two kernels' cap");

// A CTA of the single pass walks several whole sequences in turn (single_pass_kernel.cuh's kWalk) only
// when each holds at least this many chunks: Kr's low part (st.kr_lo[0], the last chunk's: a walk's
// units are whole chunks, so its final split is their last chunk alone) and the ring then never hold two
// units' last chunks at once (a warp runs at most kPrepWarps + kRing steps ahead).
inline constexpr int kSinglePassWalkMinChunks = 16;
// ... and at most this many: a walk saves a unit's ring fill and drain and its state's wait (~2.5 us per
// unit boundary), worth it where units are short; on units of 256 chunks it measured 1-2% slower
// (B16_T4096_H32, 2026-12-02), at 64-128 even (docs/performance_notes.md, version 46).
inline constexpr int kSinglePassWalkMaxChunks = 64;
// The launcher's rule (single_pass_sm90.cu): a launch on whole sequences (pieces == 1) of a fixed-length
// batch in whole chunks (`fixed_whole`), more units than SMs, each of kSinglePassWalkMinChunks to
// kSinglePassWalkMaxChunks chunks, runs one CTA per SM that walks its units; any other, one per unit.
constexpr bool single_pass_walks(bool fixed_whole, int pieces, int64_t units, int sms, int64_t chunks) {
  return fixed_whole && pieces == 1 && units > sms && chunks >= kSinglePassWalkMinChunks &&
         chunks <= kSinglePassWalkMaxChunks;
}

// A walk's arithmetic without a division in its loops (host-tested against the divisions it replaces,
// tests/test_wgmma_stage.cpp). A preparation warp's next ring step is `by` (kPrepWarps) chunks further:
// chunk c of the walk's unit k becomes chunk (c + by) mod steps, of unit k + 1 where that wrapped
// (steps >= by: one wrap at most). `next` is the unit of the chunk after (c's own unit is read first).
constexpr void walk_advance_chunk(int& c, int& next, int by, int steps) {
  c += by;
  if (c >= steps) c -= steps;
  if (c < by) ++next;  // (the advance wrapped: the next chunk is the next unit's)
}
// The consumers' unit `stride` (the grid) further, as its (batch row, head) pair.
constexpr void walk_advance_unit(int& seq, int& hv, int stride, int HV) {
  hv += stride % HV;
  seq += stride / HV;
  if (hv >= HV) {
    hv -= HV;
    ++seq;
  }
}

struct SinglePassLayout {
  using L = WgmmaRecurrenceLayout<2>;  // the stage: the record's tiles, then two 16 x 64 value tiles
  static constexpr int kPrepWarps = 8;
  static constexpr int kThreads = 32 * kPrepWarps + 128;
  static constexpr int kPrepRegs = 136, kConsumerRegs = 232;
  // The other split that fits, the whole-sequence instance's since version 48 (FLASH_KDA_SP_REGS,
  // single_pass_kernel.cuh): with it that instance compiles without spills (8 bytes at 136 / 232, in its
  // consumers: they vanish with more consumer registers while the preparation gets fewer); the pieces
  // instance would spill 4 bytes (version 48: 12 at 136 / 232, none there since version 51) but grow by 32
  // instructions and ran 1-2% slower; the partial and walk instances would spill more (44, 28-56 bytes at
  // version 48). The other three instances keep 136 / 232.
  static constexpr int kPrepRegsAlt = 128, kConsumerRegsAlt = 248;
  static constexpr int kRing = 3;
  static constexpr int kSlots = 24;  // lcm(kPrepWarps, kRing)
  static_assert(kSlots % kPrepWarps == 0 && kSlots % kRing == 0 && kRing <= kSlots,
                "slots: a multiple of the warps and the stages");
  struct Storage {
    typename L::Stage stage[kRing];
    warp_prep::WarpSmemLate prep[kPrepWarps];
    // Kr's low parts of the sequence's last chunks under the final split (slot 0 the last chunk's, 1 the
    // one before: final_split_chunks, kernel_params.h)
    tile::TileBuffer<typename L::KrTile> kr_lo[kKrLoSlots];
    float dtb[128];                              // the head's dt_bias (zeros without)
    alignas(16) unsigned char out[4][512];       // per consumer warp: its 16 x 16 output tile
    alignas(8) uint64_t full[kSlots];
    uint64_t empty[kSlots];
    // Pieces with the bounded warm-up: the candidate warm-up chunks' decay bounds (chunk c0 - nc + j in
    // wbound[j]) and their arrival, after which every role decides the warm-up (single_pass_kernel.cuh).
    uint64_t decide;
    uint64_t epoch;  // bounded pieces: the call's flag epoch (single_pass_fallback.cuh)
    int32_t abort;   // bounded pieces: 1 once the consumers saw the unit fall back
    float wbound[kSinglePassWarmupCap];
    int32_t nc, c0;  // the piece's candidates and first chunk (read back where registers are short)
    int32_t skip[kRing];  // bounded pieces: 1 where the stage was handed over unprepared (its unit fell back)
    alignas(16) float dtb_w[kPrepWarps][128];  // a walk's (kWalk): each preparation warp's own copy of dt_bias
    // Bounded pieces with the precheck (FLASH_KDA_SP_PRECHECK, single_pass_precheck.cuh; after every other
    // member, so that without the knob no offset moves): the first chunk of the piece whose candidates it
    // reads (0: no check, the piece cannot fail it), the consumers' verdict and its barrier (one
    // arrival), the consumer warps' maxima.
    uint64_t pre_bar;
    int32_t pre_c0, pre_fail;
    float pre_max[4][kSinglePassWarmupCap];
  };
  static_assert(tile::smem_bytes<Storage>() <= 232448, "fits in one SM's shared memory");
  static_assert(ptx::setmaxnreg_fits(kThreads, {kPrepRegs, kPrepRegs, kConsumerRegs}) &&
                    ptx::setmaxnreg_fits(kThreads, {kPrepRegsAlt, kPrepRegsAlt, kConsumerRegsAlt}),
                "the setmaxnreg splits fit in the registers the CTA is launched with");
};

}  // namespace kda::sm90
