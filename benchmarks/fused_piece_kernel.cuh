// The kernel of flash_kda_bench_fused_piece (bench_fused_piece.cu): one CTA per value head runs a
// whole sequence with the preparation (prepare_chunk, prep_chunk.cuh, through an environment that
// makes its barriers named barriers of its warpgroup and sends the record's stores to a ring stage
// in the layout wgmma reads, wgmma_stage.h) and the wgmma recurrence's chunk step in the same CTA:
// the layouts (preparation and consumer warpgroups), their shared storage and register split; and
// fused_warp_kernel, the same consumers beside four or eight warps of the warp preparation
// (prep_warp_kernel.cuh), each writing its chunks' records straight into the ring, holding its stage
// for the whole chunk or taking it only once T and P exist (kLate), beside two consumer warpgroups or
// one stepping both halves with both states in registers (kOneConsumer; run_consumers is every
// kernel's consumer part). Included by that one benchmark only (an unnamed namespace).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "src/kernels/sm90/chunk_record.cuh"
#include "src/kernels/sm90/chunk_recurrence_wgmma_kernel.cuh"  // step_batch
#include "src/kernels/sm90/kernel_params.h"
#include "src/kernels/sm90/prep_chunk.cuh"
#include "src/kernels/sm90/recurrence_task.cuh"
#include "src/kernels/sm90/wgmma_stage.h"
#include "src/ptx/barrier.cuh"
#include "src/ptx/cp_async.cuh"
#include "src/ptx/ldmatrix.cuh"
#include "src/ptx/register_budget.h"
#include "src/ptx/tma.cuh"  // fence_proxy_async_shared
#include "src/ptx/warpgroup.cuh"
#include "src/ptx/wgmma.cuh"
#include "src/tile/fragments.cuh"
#include "src/tile/operand.h"
#include "src/tile/smem_layout.h"
#include "src/tile/swizzle.h"
#include "benchmarks/prep_warp_kernel.cuh"

namespace {

using namespace kda;
using namespace kda::sm90;
using L = WgmmaRecurrenceLayout<2>;
using Prep = PrepSmem<GateKind::kBounded>;

template <int kPrepWG, int kConsumerWG>
struct FusedStorage {
  static constexpr int kRing = kPrepWG <= 2 ? 6 : 4;  // stages (4 leave room for 3-4 preparations)
  typename L::Stage stage[kRing];
  alignas(128) Prep prep[kPrepWG];
  // One consumer warpgroup for 128 rows: the 64-row half not being stepped, each thread's 64 state
  // values as 16 float4 at [j][thread] (conflict-free; swapped with its registers twice a chunk).
  alignas(16) float4 park[kConsumerWG == 1 ? 128 * 16 : 1];
  alignas(16) unsigned char out[8][512];  // per consumer warp: its 16 x 16 output tile
  alignas(8) uint64_t full[kRing];
  uint64_t empty[kRing];
};

// prepare_chunk's environment in this kernel: the 128 threads of one preparation warpgroup, whose
// barrier is named barrier kBar (an immediate), or with kBar = 0 named barrier `bar` (a register:
// ptxas then reserves all 16 barriers of the CTA, harmless at one CTA per SM); the record's stores
// are sent to `stage`.
template <int kBar>
struct StageEnv {
  int t;
  unsigned char* stage;
  int bar = kBar;
  __device__ __forceinline__ int tid() const { return t; }
  __device__ __forceinline__ void sync() const {
    if constexpr (kBar > 0)
      asm volatile("bar.sync %0, 128;\n" ::"n"(kBar) : "memory");
    else
      asm volatile("bar.sync %0, 128;\n" ::"r"(bar) : "memory");
  }
  template <typename T>
  __device__ __forceinline__ T* at(const uint8_t* rec, T* dst) const {
    const uint32_t off = static_cast<uint32_t>(reinterpret_cast<const uint8_t*>(dst) - rec);
    return reinterpret_cast<T*>(stage + off);  // the record is the stage's first bytes (wgmma_stage.h)
  }
};

struct FusedArgs {
  PrepParams pp;  // records: a dummy base (only differences of addresses are used)
  const uint16_t* v;
  Strides4 v_st;
  const float* h0;  // [H][128][128]
  float* ht;
  uint16_t* out;
  Strides4 out_st;
  int chunks;
  // q, k, g as [B, T, H, 128] bf16 boxes of 16 tokens x 64 columns (the warp preparation's tensor copies).
  CUtensorMap qmap, kmap, gmap;
  CUtensorMap vmap;  // v the same way (the late warp layout's values, one box per consumer warpgroup)
};

// kConsumerWG: 2 consumer warpgroups of 64 value rows each (the library's layout for 128-row slices),
// or 1 consumer warpgroup owning all 128 rows as two 64-row halves stepped one after the other, the
// idle half parked in shared memory (a slower chain, which leaves registers for three preparation
// warpgroups).
// kIdle: the consumers only hand each stage back (the preparation's time alone; outputs not written).
// kPrepWG 3 and 4 with two consumer warpgroups only with kIdle (too few registers otherwise).
template <int kPrepWG, int kConsumerWG, bool kIdle>
struct FusedConfig {
  static constexpr int kThreads = 128 * (kPrepWG + kConsumerWG);
  // setmaxnreg: the preparation at 96 registers (80 spills here), the consumers what is left (at most 256).
  static constexpr bool kSetRegs = !kIdle ? kPrepWG >= 2 : kPrepWG == 2;
  static constexpr int kPrepRegs = 96;
  static constexpr int kLeft = (65536 - kPrepWG * 128 * kPrepRegs) / (kConsumerWG * 128) / 8 * 8;
  static constexpr int kConsumerRegs = kLeft > 256 ? 256 : kLeft;
  static_assert(kPrepWG <= 2 || kIdle || kConsumerWG == 1, "three or four preparation warpgroups beside two consumers: timing only");
  // The split must fit in what the CTA is launched with (else setmaxnreg.inc never returns), as
  // ptx::setmaxnreg_fits checks for one count per warpgroup.
  static_assert(!kSetRegs || (kConsumerRegs % 8 == 0 && kConsumerRegs >= 24 &&
                              128 * (kPrepWG * kPrepRegs + kConsumerWG * kConsumerRegs) <=
                                  kThreads * ptx::launch_regs_per_thread(kThreads)),
                "the setmaxnreg split must fit");
};

// The consumer warpgroups' part (both kernels): warpgroup cw of kConsumerWG steps every chunk's stage
// of the ring (chunk i in stage i % kRing, handed over on the full / empty barriers of slot
// i % kSlots), the state in registers, the outputs through out_tile.
// kRegHalves (one consumer warpgroup): both halves' states in registers (S, S2; setmaxnreg 240), none
// parked.
template <int kConsumerWG, bool kIdle, int kRing, int kSlots = kRing, bool kRegHalves = false, bool kOneHalf = false>
__device__ __forceinline__ void run_consumers(const FusedArgs& a, typename L::Stage* stages, uint64_t* full,
                                              uint64_t* empty, unsigned char* out_tile, float4* park_all, int cw) {
  using S_t = tile::Acc<128>;
  using XO_t = tile::Acc<32>;
  static_assert(!kRegHalves || kConsumerWG == 1, "both halves in registers: one consumer warpgroup");
  const int hv = blockIdx.x;
  const int t = threadIdx.x & 127, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  constexpr int kHalves = kConsumerWG == 1 ? 2 : 1;  // 64-row halves per consumer warpgroup
  const int wi = warp & 3;
  auto half_of = [&](int h) { return kHalves == 2 ? h : cw; };  // value rows 64 half ..
  // The state in registers: this warpgroup's 64 rows, or with two halves the half being stepped (the
  // other one parked in shared memory, swapped per thread: no other thread touches its slots).
  S_t S, S2;  // S2: half 1 (kRegHalves)
  float4* park = &park_all[t];  // park[128 * j]: this thread's float4 j
  auto swap_parked = [&] {
    if constexpr (kRegHalves) return;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const float4 x = park[128 * j];
      park[128 * j] = make_float4(S.v[4 * j], S.v[4 * j + 1], S.v[4 * j + 2], S.v[4 * j + 3]);
      S.v[4 * j] = x.x;
      S.v[4 * j + 1] = x.y;
      S.v[4 * j + 2] = x.z;
      S.v[4 * j + 3] = x.w;
    }
  };
#pragma unroll
  for (int h = kHalves - 1; h >= 0; --h) {  // half 1 first, parked (or in S2); half 0 stays
    S_t& Sh = kRegHalves && h == 1 ? S2 : S;
#pragma unroll
    for (int i = 0; i < S_t::kCount; i += 2) {
      const int64_t idx = (static_cast<int64_t>(hv) * 128 + 64 * half_of(h) + S_t::row(t, i)) * 128 + S_t::col(t, i);
      const float2 x = *reinterpret_cast<const float2*>(a.h0 + idx);
      Sh.v[i] = x.x;
      Sh.v[i + 1] = x.y;
    }
    if (h == 1) swap_parked();
  }
  RecurrenceParams rp{};  // what store_out_rows reads: the output and its strides
  rp.out = a.out;
  rp.out_st = a.out_st;
  const SequenceSpan span{0, 0, 16 * a.chunks, 0};
  auto smem = [](const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); };
  // One 64-row chain's step on chunk i, stage stg (the kernel's step: up to the update it is the
  // kernel's own step_batch).
  auto step = [&](S_t& S, int half, typename L::Stage& stg, int i) {
    XO_t xo, uo;
    wgmma_recurrence_detail::step_batch<L>(S, t, stg, half, uo, xo);
    uint32_t ua[4];
    uo.to_a(0, ua);
    const uint64_t d_kr = tile::mnmajor_operand<typename L::KrTile>(0).at(smem(stg.kr.bytes));
    S.fence_operand();
    ptx::wgmma_fence();
    S.mma_rs<1>(ua, d_kr, true);
    ptx::wgmma_commit_group();
    {  // O = O0 + Oin, this warp's 16 rows, as the kernel stores them
      float o[2][4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        o[0][e] = uo.v[8 + e] + xo.v[8 + e];
        o[1][e] = uo.v[12 + e] + xo.v[12 + e];
      }
      store_out_rows(o, out_tile, rp, span, hv, i, 16, 64 * half + 16 * wi, lane);
    }
    ptx::wgmma_wait_group<0>();
    S.fence_operand();
  };
  for (int i = 0; i < a.chunks; ++i) {
    const int s = i % kRing, slot = i % kSlots;
    auto& stg = stages[s];
    ptx::mbar_wait(&full[slot], (i / kSlots) & 1);
    if constexpr (!kIdle) {
      ptx::fence_proxy_async_shared();
      step(S, half_of(0), stg, i);
      if constexpr (kRegHalves) {
        if constexpr (!kOneHalf) step(S2, 1, stg, i);  // kOneHalf: timing only (half 1 not stepped)
      } else if constexpr (kHalves == 2) {
        swap_parked();
        step(S, 1, stg, i);
        swap_parked();
      }
    }
    ptx::mbar_arrive(&empty[slot]);
  }
#pragma unroll
  for (int h = 0; h < kHalves; ++h) {
    if (h == 1) swap_parked();
    const S_t& Sh = kRegHalves && h == 1 ? S2 : S;
#pragma unroll
    for (int i = 0; i < S_t::kCount; i += 2) {
      const int64_t idx = (static_cast<int64_t>(hv) * 128 + 64 * half_of(h) + S_t::row(t, i)) * 128 + S_t::col(t, i);
      *reinterpret_cast<float2*>(a.ht + idx) = make_float2(Sh.v[i], Sh.v[i + 1]);
    }
  }
}

template <int kPrepWG, int kConsumerWG, bool kIdle>
__global__ void __launch_bounds__(FusedConfig<kPrepWG, kConsumerWG, kIdle>::kThreads, 1) fused_piece_kernel(const __grid_constant__ FusedArgs a) {
  using C = FusedConfig<kPrepWG, kConsumerWG, kIdle>;
  extern __shared__ unsigned char smem_raw[];
  FusedStorage<kPrepWG, kConsumerWG>& st = *tile::smem_storage<FusedStorage<kPrepWG, kConsumerWG>>(smem_raw);
  constexpr int kRing = FusedStorage<kPrepWG, kConsumerWG>::kRing;
  const int hv = blockIdx.x;
  const int wg = threadIdx.x >> 7, t = threadIdx.x & 127, warp = threadIdx.x >> 5;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kRing; ++s) {
      ptx::mbar_init(&st.full[s], 128);                // the preparing warpgroup's threads
      ptx::mbar_init(&st.empty[s], 128 * kConsumerWG);  // every consumer lane
    }
    ptx::fence_barrier_init();
  }
  __syncthreads();
  if (wg < kPrepWG) {
    // ---- Preparation warpgroup wg: chunks wg, wg + kPrepWG, ... ----------------------------------
    if constexpr (C::kSetRegs) ptx::setmaxnreg_dec<C::kPrepRegs>();
    auto prepare = [&](auto env_tag, int c) {
      const int s = c % kRing, use = c / kRing;
      if (use > 0) ptx::mbar_wait(&st.empty[s], (use - 1) & 1);
      unsigned char* stage = reinterpret_cast<unsigned char*>(&st.stage[s]);
      // The chunk's values (as the recurrence's producer copies them): 256 pieces, two per thread.
#pragma unroll
      for (int m = 0; m < 2; ++m) {
        const int k = t + 128 * m, w = k / 128, j = (k / 8) % 16, q = k % 8;
        const uint16_t* src = a.v + static_cast<int64_t>(c * 16 + j) * a.v_st.t + hv * a.v_st.h + 64 * w + 8 * q;
        ptx::cp_async_16_zfill(st.stage[s].vt[w].bytes + L::VtTile::offset(j, 8 * q), src, true);
      }
      using Env = decltype(env_tag);
      Env env = env_tag;
      env.t = t;
      env.stage = stage;
      prepare_chunk<GateKind::kBounded, false>(a.pp, st.prep[wg], c, hv, env);
      ptx::cp_async_wait_group<0>();
      ptx::fence_proxy_async_shared();  // the stage's generic-proxy writes, before wgmma reads them
      ptx::mbar_arrive(&st.full[s]);
      env.sync();  // prepare_chunk's shared memory is reused by the next call
    };
    for (int c = wg; c < a.chunks; c += kPrepWG) {
      if constexpr (kPrepWG <= 2) {  // barrier ids as immediates: one inlined preparation per warpgroup
        if (wg == 0)
          prepare(StageEnv<1>{}, c);
        else
          prepare(StageEnv<2>{}, c);
      } else {  // one preparation for all (a register id: ptxas then reserves all 16 barriers, 1 CTA per SM)
        prepare(StageEnv<0>{t, nullptr, wg + 1}, c);
      }
    }
    return;
  }
  if constexpr (C::kSetRegs) ptx::setmaxnreg_inc<C::kConsumerRegs>();
  run_consumers<kConsumerWG, kIdle, kRing>(a, st.stage, st.full, st.empty, st.out[warp - 4 * kPrepWG], st.park, wg - kPrepWG);
}

// The warp preparation (benchmarks/prep_warp_kernel.cuh) inside the chain's CTA: kPW independent
// preparation warps (one warpgroup of four, or two of eight) beside two consumer warpgroups; warp w
// prepares chunks w, w + kPW, ..., its q, k, g by tensor copies into its own boxes, its record
// straight into the chunk's ring stage, the values by cp.async. Four warps: 384 threads, every role
// at most 168 registers, no setmaxnreg. kDouble: each warp has two sets of boxes and issues its next
// chunk's copies before it computes the current one (4 stages instead of 8 then).
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

// kPW = 8: two warpgroups of preparation warps (512 threads): setmaxnreg gives the preparation 112
// registers and the consumers 136 (the consumers spill ~100 bytes; 112 / 144 spills in both roles).
// kLate: RecordTo::kLate, the values by a tensor copy per warpgroup issued when the stage is taken.
// kFlags (late form only), measurements: kConsumersFirst (the consumer warpgroups are warpgroups 0 and
// 1, the preparation warps after them), kPrefetchNext (a warp brings its next chunk's q, k, g into L2
// when it starts a chunk), kSkipPrep (the preparation warps only take each stage and copy its values:
// the chain's time in this layout, on whatever the stage holds).
// kConsumerRegs152: eight warps' setmaxnreg split 104 / 152 instead of 120 / 136 (the consumers without
// their spill, the preparation with one).
// kOneConsumer: one consumer warpgroup steps both 64-row halves, their states in registers
// (run_consumers' kRegHalves; with eight warps setmaxnreg 136 / 232), so that the consumers keep their
// batches unserialised (ptxas C7512 below about 168 registers) beside eight preparation warps.
// kUnroll2 / kUnroll1: the preparation's key loops unrolled 2 / 1 times instead of 8 (its code is ~60 KB
// straight through; the eight-warp layouts stalled 27% on instruction fetch).
inline constexpr int kConsumersFirst = 1, kPrefetchNext = 2, kSkipPrep = 4, kConsumerRegs152 = 8, kOneConsumer = 16,
                     kUnroll2 = 32, kUnroll1 = 64, kThreeStages = 128, kHalfChain = 256;  // kHalfChain: with
// kOneConsumer, only half 0 stepped (timing only: what the chain's length costs)
template <int kPW, int kFlags>
inline constexpr int kFusedWarpThreads = 32 * kPW + ((kFlags & kOneConsumer) ? 128 : 256);
template <bool kIdle, bool kDouble, int kPW = 4, bool kLate = false, int kFlags = 0>
__global__ void __launch_bounds__(kFusedWarpThreads<kPW, kFlags>, 1) fused_warp_kernel(const __grid_constant__ FusedArgs a) {
  static_assert(!(kLate && kDouble), "the late form has one set of boxes");
  static_assert(kLate || kFlags == 0, "flags: the late form only");
  using Storage = FusedWarpStorage<kDouble, kPW, kLate, (kFlags & kThreeStages) ? 3 : 8>;
  constexpr int kPrepWG = kPW / 4;
  constexpr int kCWG = (kFlags & kOneConsumer) ? 1 : 2;
  constexpr int kKeyUnroll = (kFlags & kUnroll1) ? 1 : (kFlags & kUnroll2) ? 2 : 8;
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
    if (kDouble && warp < a.chunks) bench_prep::prep_warp_issue(in_of(0), bar_of(0), a.pp, &a.qmap, &a.kmap, &a.gmap, warp, hv);
    uint32_t i = 0;  // this warp's chunks so far
    if constexpr (kLate) {
      for (int c = warp; c < a.chunks; c += kPW, ++i) {
        const int s = c % kRing, slot = c % kSlots;
        constexpr bool kSkip = (kFlags & kSkipPrep) != 0;
        if (!kSkip) bench_prep::prep_warp_issue(ps.in, &ps.bar, a.pp, &a.qmap, &a.kmap, &a.gmap, c, hv);
        if ((kFlags & kPrefetchNext) && lane == 0 && c + kPW < a.chunks)
          bench_prep::prefetch_chunk_l2(a.pp, &a.qmap, &a.kmap, &a.gmap, c + kPW, hv);
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
          bench_prep::prep_warp_chunk<bench_prep::RecordTo::kLate, kKeyUnroll>(a.pp, ps.in, ps.A, ps.tb, &ps.bar, c, hv,
                                                                               nullptr, i & 1, &ps, acquire, st.dtb);
        ptx::fence_proxy_async_shared();  // the stage's generic-proxy writes, before wgmma reads them
        ptx::mbar_arrive(&st.full[slot]);
      }
    } else {
      for (int c = warp; c < a.chunks; c += kPW, ++i) {
        const int s = c % kRing, slot = c % kSlots;
        if constexpr (kDouble) {
          if (c + kPW < a.chunks) bench_prep::prep_warp_issue(in_of(i + 1), bar_of(i + 1), a.pp, &a.qmap, &a.kmap, &a.gmap, c + kPW, hv);
        } else {
          bench_prep::prep_warp_issue(in_of(i), bar_of(i), a.pp, &a.qmap, &a.kmap, &a.gmap, c, hv);
        }
        if (c >= kRing) {  // the stage's previous chunk consumed
          const int prev = c - kRing;
          ptx::mbar_wait(&st.empty[prev % kSlots], (prev / kSlots) & 1);
        }
#pragma unroll
        for (int m = 0; m < 8; ++m) {  // the chunk's values: 256 16-byte pieces
          const int k = lane + 32 * m, w = k / 128, j = (k / 8) % 16, q = k % 8;
          const uint16_t* src = a.v + static_cast<int64_t>(c * 16 + j) * a.v_st.t + hv * a.v_st.h + 64 * w + 8 * q;
          ptx::cp_async_16_zfill(st.stage[s].vt[w].bytes + L::VtTile::offset(j, 8 * q), src, true);
        }
        // The copies' completion arrives on the slot's barrier by itself (racecheck follows this; with
        // cp.async.wait_group and a plain arrival it reported the values' writes of consecutive uses).
        ptx::cp_async_arrive_noinc(&st.full[slot]);
        bench_prep::prep_warp_chunk<bench_prep::RecordTo::kStage>(a.pp, in_of(i), ps.A, ps.tb, bar_of(i), c, hv,
                                                                  reinterpret_cast<uint8_t*>(&st.stage[s]), kDouble ? (i >> 1) & 1 : i & 1);
        ptx::fence_proxy_async_shared();  // the stage's generic-proxy writes, before wgmma reads them
        ptx::mbar_arrive(&st.full[slot]);
      }
    }
    return;
  }
  if constexpr (kSplitRegs) ptx::setmaxnreg_inc<kConsumerRegs>();
  run_consumers<kCWG, kIdle, kRing, kSlots, kCWG == 1, (kFlags & kHalfChain) != 0>(a, st.stage, st.full, st.empty,
                                                                                   st.out[warp - kPW], st.park, wg - kPrepWG);
}

}  // namespace
