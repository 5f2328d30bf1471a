// The kernels of flash_kda_bench_fused_piece (bench_fused_piece.cu) with the warp preparation
// (prep_warp_kernel.cuh) inside the chain's CTA: fused_warp_kernel, four or eight preparation warps each
// writing its chunks' records straight into the ring, holding its stage for the whole chunk or taking it
// only once T and P exist (kLate), beside two consumer warpgroups or one stepping both halves with both
// states in registers (kOneConsumer), the consumers being fused_piece_kernel.cuh's run_consumers.
// Included by that one benchmark only (an unnamed namespace). Measured: docs/performance_notes.md,
// "The preparation by one warp per chunk" and "The preparation taking its stage late".
#pragma once

#include <cstdint>
#include <type_traits>

#include "benchmarks/fused_piece_kernel.cuh"
#include "benchmarks/prep_warp_kernel.cuh"
#include "src/ptx/barrier.cuh"
#include "src/ptx/bulk_copy.cuh"
#include "src/ptx/cp_async.cuh"
#include "src/ptx/register_budget.h"
#include "src/ptx/tma.cuh"
#include "src/tile/smem_layout.h"

namespace {

// The warp preparation (benchmarks/prep_warp_kernel.cuh) inside the chain's CTA: kPW independent
// preparation warps (one warpgroup of four, or two of eight) beside one or two consumer warpgroups
// (kFlags below); warp w prepares chunks w, w + kPW, ..., its q, k, g by tensor copies into its own
// boxes, its record straight into the chunk's ring stage: holding the stage for the whole chunk, the
// values by cp.async (kLate = false), or taking it once T and P exist, the values by two tensor copies
// then (kLate). Four warps beside two consumer warpgroups: 384 threads, every role at most 168
// registers, no setmaxnreg. kDouble (not with kLate): each warp has two sets of boxes and issues its
// next chunk's copies before it computes the current one (4 stages instead of 8 then).
constexpr int gcd_int(int a, int b) { return b == 0 ? a : gcd_int(b, a % b); }

template <bool kDouble, int kPW = 4, bool kLate = false, int kRingCap = 8>
struct FusedWarpStorage {
  // Chunk c goes to stage c % kRing and is handed over on barrier slot c % kSlots (full: written;
  // empty: consumed), with kSlots = the preparation warps (or the stages, if more): warp w then alone
  // arrives on slot w's full barrier, and before it writes a stage it waits for the stage's previous
  // chunk on that chunk's slot, whose previous phase the same warp already waited for, so a parity wait
  // is never two phases behind (with 8 warps on 4 stages and one barrier per stage a warp was, and the
  // kernel hung).
  // kLate (RecordTo::kLate): the warps compute in their own 19 KB and take a stage only once T and P
  // exist, so every warp has a chunk in flight whatever the stages (3 beside eight warps).
  using Prep = std::conditional_t<kLate, bench_prep::WarpSmemLate,
                                  std::conditional_t<kDouble, bench_prep::WarpSmem2, bench_prep::WarpSmem>>;
  static constexpr int kLateRing = (232448 - 5 * 1024 - kPW * static_cast<int>(sizeof(Prep))) / static_cast<int>(sizeof(typename L::Stage));
  static constexpr int kRing = kLate ? (kLateRing < kRingCap ? kLateRing : kRingCap) : kDouble || kPW == 8 ? 4 : 8;
  static constexpr int kSlots = kPW * kRing / gcd_int(kPW, kRing);  // lcm
  static_assert(kSlots % kPW == 0 && kSlots % kRing == 0 && kRing >= 2, "slots: a multiple of the warps and the stages");
  typename L::Stage stage[kRing];
  Prep prep[kPW];
  float dtb[128];  // the head's dt_bias (zeros without), for preparations with their key loops rolled
  alignas(16) float4 park[1];
  alignas(16) unsigned char out[8][512];
  alignas(8) uint64_t full[kSlots];
  uint64_t empty[kSlots];
};

static_assert(tile::smem_bytes<FusedWarpStorage<false>>() <= 232448 && tile::smem_bytes<FusedWarpStorage<true>>() <= 232448 &&
                  tile::smem_bytes<FusedWarpStorage<false, 8>>() <= 232448 &&
                  tile::smem_bytes<FusedWarpStorage<false, 4, true>>() <= 232448 &&
                  tile::smem_bytes<FusedWarpStorage<false, 8, true>>() <= 232448,
              "the warp layouts fit in one SM's shared memory");

// kPW = 8: two warpgroups of preparation warps; setmaxnreg splits the registers: 120 / 136 beside two
// consumer warpgroups (ptxas serialises the consumers' wgmma batch there, C7512), 136 / 232 beside one
// (kOneConsumer).
// kFlags (the late form only; measurements, docs/performance_notes.md "The preparation taking its stage
// late"):
//   kConsumersFirst   the consumer warpgroups are warpgroups 0 and 1, the preparation warps after them;
//   kPrefetchNext     a warp brings its next chunk's q, k, g into L2 when it starts a chunk;
//   kSkipPrep         the preparation warps only take each stage and copy its values (the chain's time
//                     in this layout, on whatever the stage holds);
//   kConsumerRegs152  eight warps' split 104 / 152 instead of 120 / 136;
//   kOneConsumer      one consumer warpgroup steps both 64-row halves, both states in registers
//                     (run_consumers' kRegHalves; 136 / 232 with eight warps, no C7512);
//   kUnroll4 / kUnroll2 / kUnroll1  the preparation's key loops unrolled 4 / 2 / 1 times instead of 8 (its
//                     straight code is ~60 KB; the eight-warp layouts stalled 27% on instruction fetch);
//   kThreeStages      the ring held to 3 stages;
//   kHalfChain        with kOneConsumer, only half 0 stepped (timing only: what the chain's length costs);
//   kOverlapUpdate    with kOneConsumer, half 1's batch issued while half 0's update runs;
//   kPartialChunks    T need not be a multiple of 16 (prep_warp_chunk's kPartial masks; run_consumers'
//                     kPartialOut); the other layouts take whole chunks only.
inline constexpr int kConsumersFirst = 1, kPrefetchNext = 2, kSkipPrep = 4, kConsumerRegs152 = 8, kOneConsumer = 16,
                     kUnroll2 = 32, kUnroll1 = 64, kThreeStages = 128, kHalfChain = 256, kUnroll4 = 512, kOverlapUpdate = 1024,
                     kPartialChunks = 2048;
// The block: kPW preparation warps and one (kOneConsumer) or two consumer warpgroups.
template <int kPW, int kFlags>
inline constexpr int kFusedWarpThreads = 32 * kPW + ((kFlags & kOneConsumer) ? 128 : 256);
template <bool kIdle, bool kDouble, int kPW = 4, bool kLate = false, int kFlags = 0>
__global__ void __launch_bounds__(kFusedWarpThreads<kPW, kFlags>, 1) fused_warp_kernel(const __grid_constant__ FusedArgs a) {
  static_assert(!(kLate && kDouble), "the late form has one set of boxes");
  static_assert(kLate || kFlags == 0, "flags: the late form only");
  using Storage = FusedWarpStorage<kDouble, kPW, kLate, (kFlags & kThreeStages) ? 3 : 8>;
  constexpr int kPrepWG = kPW / 4;
  constexpr int kCWG = (kFlags & kOneConsumer) ? 1 : 2;
  constexpr int kKeyUnroll = (kFlags & kUnroll1) ? 1 : (kFlags & kUnroll2) ? 2 : (kFlags & kUnroll4) ? 4 : 8;
  constexpr bool kSplitRegs = kPW == 8;
  constexpr bool kWide = (kFlags & kConsumerRegs152) != 0;
  constexpr int kPrepRegs = kCWG == 1 ? 136 : kWide ? 104 : 120;
  constexpr int kConsumerRegs = kCWG == 1 ? 232 : kWide ? 152 : 136;
  static_assert(!kSplitRegs || 128 * (kPrepWG * kPrepRegs + kCWG * kConsumerRegs) <=
                                   kFusedWarpThreads<kPW, kFlags> * ptx::launch_regs_per_thread(kFusedWarpThreads<kPW, kFlags>),
                "the setmaxnreg split must fit");
  extern __shared__ unsigned char smem_raw[];
  Storage& st = *tile::smem_storage<Storage>(smem_raw);
  constexpr int kRing = Storage::kRing, kSlots = Storage::kSlots;
  const int hv = blockIdx.x;
  const int lane = threadIdx.x & 31;
  // Roles: preparation warp `warp` (0 .. kPW - 1) in warpgroup `wg` < kPrepWG, or consumer warpgroup
  // wg - kPrepWG (consumer warp warp - kPW).
  constexpr bool kCF = (kFlags & kConsumersFirst) != 0;
  const int hw_warp = threadIdx.x >> 5;
  const int warp = kCF ? (hw_warp + kPW) % (kPW + 4 * kCWG) : hw_warp;
  const int wg = warp >> 2;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kSlots; ++s) {
      // The preparing warp's lanes: their values' copies and their record (kLate: their record, and
      // lane 0's arrival with the values' tensor-copy bytes).
      ptx::mbar_init(&st.full[s], kLate ? 33 : 64);
      ptx::mbar_init(&st.empty[s], 128 * kCWG);  // every consumer lane
    }
    ptx::fence_barrier_init();
  }
  if (wg < kPrepWG && lane == 0) {
    if constexpr (kDouble) {
      ptx::mbar_init(&st.prep[warp].bar[0], 1);
      ptx::mbar_init(&st.prep[warp].bar[1], 1);
    } else {
      ptx::mbar_init(&st.prep[warp].bar, 1);
    }
    ptx::fence_barrier_init();
  }
  if constexpr (kLate)
    if (threadIdx.x < 128) st.dtb[threadIdx.x] = a.pp.dt_bias != nullptr ? a.pp.dt_bias[hv * 128 + threadIdx.x] : 0.0f;
  __syncthreads();
  if (wg < kPrepWG) {
    if constexpr (kSplitRegs) ptx::setmaxnreg_dec<kPrepRegs>();
    auto& ps = st.prep[warp];
    auto in_of = [&](uint32_t i) -> unsigned char(&)[6][2048] {
      if constexpr (kDouble) return ps.in[i & 1]; else return ps.in;
    };
    auto bar_of = [&](uint32_t i) -> uint64_t* {
      if constexpr (kDouble) return &ps.bar[i & 1]; else return &ps.bar;
    };
    if (kDouble && warp < a.chunks) bench_prep::prep_warp_issue(in_of(0), bar_of(0), a.pp, &a.qmap, &a.kmap, &a.gmap, bench_prep::chunk_coords(a.pp, warp), hv, hv);
    uint32_t i = 0;  // this warp's chunks so far
    if constexpr (kLate) {
      for (int c = warp; c < a.chunks; c += kPW, ++i) {
        const int s = c % kRing, slot = c % kSlots;
        constexpr bool kSkip = (kFlags & kSkipPrep) != 0;
        constexpr bool kPartial = (kFlags & kPartialChunks) != 0;
        if (!kSkip) bench_prep::prep_warp_issue<kPartial>(ps.in, &ps.bar, a.pp, &a.qmap, &a.kmap, &a.gmap, bench_prep::chunk_coords<kPartial>(a.pp, c), hv, hv);
        if ((kFlags & kPrefetchNext) && lane == 0 && c + kPW < a.chunks)
          bench_prep::prefetch_chunk_l2<kPartial>(a.pp, &a.qmap, &a.kmap, &a.gmap, c + kPW, hv);
        auto acquire = [&]() -> uint8_t* {
          if (c >= kRing) {  // the stage's previous chunk consumed
            const int prev = c - kRing;
            ptx::mbar_wait(&st.empty[prev % kSlots], (prev / kSlots) & 1);
          }
          if (lane == 0) {  // the chunk's values: one 16 x 64 box per consumer warpgroup
            ptx::mbar_arrive_expect_tx(&st.full[slot], 2 * L::VtTile::kBytes);
            ptx::tma_load_4d(st.stage[s].vt[0].bytes, &a.vmap, 0, hv, 16 * c, 0, &st.full[slot]);
            ptx::tma_load_4d(st.stage[s].vt[1].bytes, &a.vmap, 64, hv, 16 * c, 0, &st.full[slot]);
          }
          return reinterpret_cast<uint8_t*>(&st.stage[s]);
        };
        if constexpr (kSkip)
          acquire();
        else
          bench_prep::prep_warp_chunk<bench_prep::RecordTo::kLate, kKeyUnroll, kPartial>(a.pp, ps.in, ps.A, ps.tb, &ps.bar,
                                                                               bench_prep::chunk_coords<kPartial>(a.pp, c), hv,
                                                                               nullptr, i & 1, &ps, acquire, st.dtb);
        ptx::fence_proxy_async_shared();  // the stage's generic-proxy writes, before wgmma reads them
        ptx::mbar_arrive(&st.full[slot]);
      }
    } else {
      for (int c = warp; c < a.chunks; c += kPW, ++i) {
        const int s = c % kRing, slot = c % kSlots;
        if constexpr (kDouble) {
          if (c + kPW < a.chunks) bench_prep::prep_warp_issue(in_of(i + 1), bar_of(i + 1), a.pp, &a.qmap, &a.kmap, &a.gmap, bench_prep::chunk_coords(a.pp, c + kPW), hv, hv);
        } else {
          bench_prep::prep_warp_issue(in_of(i), bar_of(i), a.pp, &a.qmap, &a.kmap, &a.gmap, bench_prep::chunk_coords(a.pp, c), hv, hv);
        }
        if (c >= kRing) {  // the stage's previous chunk consumed
          const int prev = c - kRing;
          ptx::mbar_wait(&st.empty[prev % kSlots], (prev / kSlots) & 1);
        }
#pragma unroll
        for (int m = 0; m < 8; ++m) {  // the chunk's values: 256 16-byte pieces
          const int k = lane + 32 * m, w = k / 128, j = (k / 8) % 16, q = k % 8;
          const uint16_t* src = a.v + static_cast<int64_t>(c * 16 + j) * a.v_st.t + hv * a.v_st.h + 64 * w + 8 * q;
          ptx::cp_async_16_zfill(st.stage[s].vt[w].bytes + L::VtTile::offset(j, 8 * q), src, true);  // whole chunks
        }
        // The copies' completion arrives on the slot's barrier by itself (racecheck follows this; with
        // cp.async.wait_group and a plain arrival it reported the values' writes of consecutive uses).
        ptx::cp_async_arrive_noinc(&st.full[slot]);
        bench_prep::prep_warp_chunk<bench_prep::RecordTo::kStage>(a.pp, in_of(i), ps.A, ps.tb, bar_of(i), bench_prep::chunk_coords(a.pp, c), hv,
                                                                  reinterpret_cast<uint8_t*>(&st.stage[s]), kDouble ? (i >> 1) & 1 : i & 1);
        ptx::fence_proxy_async_shared();  // the stage's generic-proxy writes, before wgmma reads them
        ptx::mbar_arrive(&st.full[slot]);
      }
    }
    return;
  }
  if constexpr (kSplitRegs) ptx::setmaxnreg_inc<kConsumerRegs>();
  run_consumers<kCWG, kIdle, kRing, kSlots, kCWG == 1, (kFlags & kHalfChain) != 0, (kFlags & kOverlapUpdate) != 0,
                (kFlags & kPartialChunks) != 0>(a, st.stage, st.full, st.empty, st.out[warp - kPW], st.park,
                                                wg - kPrepWG);
}

}  // namespace
