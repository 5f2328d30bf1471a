// The kernel of flash_kda_bench_fused_piece (bench_fused_piece.cu): one CTA per value head runs a
// whole sequence with the preparation (prepare_chunk, prep_chunk.cuh, through an environment that
// makes its barriers named barriers of its warpgroup and sends the record's stores to a ring stage
// in the layout wgmma reads, wgmma_stage.h) and the wgmma recurrence's chunk step in the same CTA:
// the layouts (preparation and consumer warpgroups), their shared storage and register split; and
// run_consumers, the consumer part that fused_warp_kernel.cuh's kernels share (two consumer warpgroups,
// or one stepping both halves, the idle half parked or, kRegHalves, in registers). Included by that one
// benchmark only (an unnamed namespace).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "src/kernels/sm90/chunk_record.cuh"
#include "src/kernels/sm90/wgmma_step.cuh"  // step_batch
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
// kOverlap (with kRegHalves): half 0's update is not waited for; half 1's batch runs while it does (the
// batch's wait retires both).
// kPartialOut: the sequence's last chunk may be partial (its output rows beyond T not stored); false:
// whole chunks (T = 16 chunks).
template <int kConsumerWG, bool kIdle, int kRing, int kSlots = kRing, bool kRegHalves = false, bool kOneHalf = false,
          bool kOverlap = false, bool kPartialOut = false>
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
    if constexpr (!kRegHalves) {
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        const float4 x = park[128 * j];
        park[128 * j] = make_float4(S.v[4 * j], S.v[4 * j + 1], S.v[4 * j + 2], S.v[4 * j + 3]);
        S.v[4 * j] = x.x;
        S.v[4 * j + 1] = x.y;
        S.v[4 * j + 2] = x.z;
        S.v[4 * j + 3] = x.w;
      }
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
  const SequenceSpan span{0, 0, kPartialOut ? a.pp.seq.T : 16 * a.chunks, 0};
  auto smem = [](const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); };
  // One 64-row chain's step on chunk i, stage stg (the kernel's step: up to the update it is the
  // kernel's own step_batch).
  auto step = [&](S_t& S, int half, typename L::Stage& stg, int i, auto wait_tag) {
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
      store_out_rows(o, out_tile, rp, span, hv, i, kPartialOut ? min(16, span.len - 16 * i) : 16, 64 * half + 16 * wi, lane);
    }
    if constexpr (decltype(wait_tag)::value) {
      ptx::wgmma_wait_group<0>();
      S.fence_operand();
    }
  };
  using Wait = std::true_type;
  for (int i = 0; i < a.chunks; ++i) {
    const int s = i % kRing, slot = i % kSlots;
    auto& stg = stages[s];
    ptx::mbar_wait(&full[slot], (i / kSlots) & 1);
    if constexpr (!kIdle) {
      ptx::fence_proxy_async_shared();
      if constexpr (kRegHalves && kOverlap) {
        step(S, 0, stg, i, std::false_type{});
        step(S2, 1, stg, i, Wait{});  // its batch's wait retires half 0's update too
        S.fence_operand();
      } else {
        step(S, half_of(0), stg, i, Wait{});
      }
      if constexpr (kRegHalves) {
        if constexpr (!kOneHalf && !kOverlap) step(S2, 1, stg, i, Wait{});  // kOneHalf: timing only (half 1 not stepped)
      } else if constexpr (kHalves == 2) {
        swap_parked();
        step(S, 1, stg, i, Wait{});
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
        ptx::cp_async_16_zfill(st.stage[s].vt[w].bytes + L::VtTile::offset(j, 8 * q), src, c * 16 + j < a.pp.seq.T);
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
  run_consumers<kConsumerWG, kIdle, kRing, kRing, false, false, false, true>(a, st.stage, st.full, st.empty,
                                                                            st.out[warp - 4 * kPrepWG], st.park, wg - kPrepWG);
}

}  // namespace
