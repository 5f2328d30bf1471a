// The kernel of flash_kda_bench_step_tokens (bench_step_tokens.cu): the recurrence's chunk step on
// wgmma for chunks of kC = 16, 32 or 64 tokens, with the parts of the library's step that scale with
// the chunk (docs/design.md §2.2; chunk_recurrence_wgmma_kernel.cuh): a ring of stages handed over by
// mbarriers from a producer warpgroup (which copies each stage from global memory by 16-byte cp.async
// when kCopies, else only arrives), Γ from the stage, the [U0 | O0] product as two (hi and lo)
// products, every step's output stored to global memory. Issue 10's "shorter chains" lead measured
// before it is built: what a step of a longer chunk costs against two or four steps of 16 tokens
// (docs/performance_notes.md, "Chunks of 32 tokens in the recurrence, measured before they are
// built"). Not a kernel of the library; included by that one benchmark only (an unnamed namespace).
//
// Per consumer warpgroup (64 value rows of the float32 state S [64 x 128], Acc<128>) and step:
//   [X | Oin] = bf16(S) · [Wd; Qp]ᵀ      8 k-steps of m64n(2C)k16, S as register A
//   [U0 | O0] = Vᵀ · [Tb; P]ᵀ            2 x C/16 k-steps of m64n(2C)k16 (hi and lo), both from smem
//   U = U0 − X,  O = O0 + Oin,  S ← S·Diag(Γ) + bf16(U)·Kr     (C/16 k-steps of m64n128k16)
// The output is stored as bf16 pairs straight from the accumulator (4-byte stores; the library
// transposes through stmatrix first): the same stores per token for every C.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "src/ptx/barrier.cuh"
#include "src/ptx/cp_async.cuh"
#include "src/ptx/mma.cuh"
#include "src/ptx/tma.cuh"  // fence_proxy_async_shared
#include "src/ptx/warpgroup.cuh"
#include "src/ptx/wgmma.cuh"
#include "src/tile/fragments.cuh"
#include "src/tile/operand.h"
#include "src/tile/smem_layout.h"
#include "src/tile/swizzle.h"

namespace {

using namespace kda;
using tile::Swizzle;

// [Tb; P] rows hold C tokens: 32, 64 or 128 bytes, one swizzle span.
constexpr Swizzle tp_swizzle(int c) { return c == 16 ? Swizzle::k32B : c == 32 ? Swizzle::k64B : Swizzle::k128B; }

template <int kC, int kWG>
struct TokStage {
  static_assert(kC == 16 || kC == 32 || kC == 64, "chunks of 16, 32 or 64 tokens");
  using Wq = tile::SwizzledTile<Swizzle::k128B, 2 * kC, 128>;  // [Wd; Qp]: N = 2C rows x K = 128 (K-major B)
  using Vt = tile::SwizzledTile<Swizzle::k128B, kC, 64>;       // V: K = C tokens x M = 64 rows (MN-major A)
  using Tp = tile::SwizzledTile<tp_swizzle(kC), 2 * kC, kC>;   // [Tb; P]: N = 2C x K = C tokens (K-major B)
  using Kr = tile::SwizzledTile<Swizzle::k128B, kC, 128>;      // Kr: K = C tokens x N = 128 (MN-major B)
  tile::TileBuffer<Wq> wq;
  tile::TileBuffer<Kr> kr;
  tile::TileBuffer<Vt> vt[kWG];  // one per consumer warpgroup (its 64 value rows)
  tile::TileBuffer<Tp> tp, tp_lo;
  float gamma[128];
};

// As many stages as fit in ~200 KB, at most 8 (the library's ring has 11 of 17 KB at 16 tokens).
template <int kC, int kWG>
constexpr int tok_ring_stages() {
  const int n = static_cast<int>(200 * 1024 / sizeof(TokStage<kC, kWG>));
  return n > 8 ? 8 : n;
}

template <int kC, int kWG>
struct TokStorage {
  static constexpr int kStages = tok_ring_stages<kC, kWG>();
  TokStage<kC, kWG> stage[kStages];
  alignas(8) uint64_t full[kStages];
  uint64_t empty[kStages];
};

// Operands in plain layouts: wq [2C][128], kr [C][128], v [C][128] (token, value row), tp [2C][C],
// gamma [128]; s0 / s_out [128][128] (value row, key column); o_out [128][C] (the last step's O);
// o_buf [64 steps][128 rows][C] bf16, written cyclically. images (kCopies): n_images stage images per
// CTA, copied in turn; dump (when set, CTA 0): its filled stage 0, to build the images from.
struct TokArgs {
  const uint16_t *wq, *kr, *v, *tp;
  const float *gamma, *s0;
  int steps;
  float *s_out, *o_out;
  uint16_t* o_buf;
  const uint4* images;
  int n_images;
  uint4* dump;
};

template <int kWG>
struct TokRegs {  // setmaxnreg split (two consumer warpgroups: 168 x 384 at launch)
  static constexpr int kProducer = 40, kConsumer = 232;
};

template <int kC, int kWG, bool kCopies>
__global__ void __launch_bounds__(128 * (kWG + 1), 1) step_tokens_kernel(const TokArgs a) {
  using Storage = TokStorage<kC, kWG>;
  using St = TokStage<kC, kWG>;
  constexpr int kStages = Storage::kStages, kKs = kC / 16;
  static_assert(kWG == 1 || ptx::setmaxnreg_fits(384, {TokRegs<kWG>::kProducer, TokRegs<kWG>::kConsumer,
                                                       TokRegs<kWG>::kConsumer}),
                "the setmaxnreg split fits the registers the CTA is launched with");
  extern __shared__ unsigned char smem_raw[];
  Storage& st = *tile::smem_storage<Storage>(smem_raw);
  const int tid = threadIdx.x, wg = ptx::warpgroup_index(), t = tid % 128;
  const int nthreads = 128 * kWG;  // consumer threads; the producer warpgroup follows
  for (int s = 0; s < kStages; ++s) {
    St& sg = st.stage[s];
    uint16_t* swq = reinterpret_cast<uint16_t*>(sg.wq.bytes);
    uint16_t* skr = reinterpret_cast<uint16_t*>(sg.kr.bytes);
    uint16_t* stp = reinterpret_cast<uint16_t*>(sg.tp.bytes);
    uint16_t* stl = reinterpret_cast<uint16_t*>(sg.tp_lo.bytes);
    for (int i = tid; i < 2 * kC * 128; i += blockDim.x) swq[St::Wq::index(i / 128, i % 128)] = a.wq[i];
    for (int i = tid; i < kC * 128; i += blockDim.x) skr[St::Kr::index(i / 128, i % 128)] = a.kr[i];
    for (int i = tid; i < 2 * kC * kC; i += blockDim.x) {
      stp[St::Tp::index(i / kC, i % kC)] = a.tp[i];
      stl[St::Tp::index(i / kC, i % kC)] = 0;
    }
    for (int i = tid; i < kWG * kC * 64; i += blockDim.x) {
      const int w = i / (kC * 64), j = (i / 64) % kC, r = i % 64;
      reinterpret_cast<uint16_t*>(sg.vt[w].bytes)[St::Vt::index(j, r)] = a.v[j * 128 + 64 * w + r];
    }
    for (int i = tid; i < 128; i += blockDim.x) sg.gamma[i] = a.gamma[i];
  }
  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      ptx::mbar_init(&st.full[s], kCopies ? 128 : 1);
      ptx::mbar_init(&st.empty[s], nthreads);
    }
    ptx::fence_barrier_init();
  }
  ptx::fence_proxy_async_shared();
  __syncthreads();
  if (a.dump != nullptr && blockIdx.x == 0) {
    for (int k = tid; k < static_cast<int>(sizeof(St) / 16); k += blockDim.x)
      a.dump[k] = reinterpret_cast<const uint4*>(&st.stage[0])[k];
    return;
  }

  if (wg == kWG) {  // the producer warpgroup
    if constexpr (kWG == 2) ptx::setmaxnreg_dec<TokRegs<kWG>::kProducer>();
    constexpr int kPieces = static_cast<int>(sizeof(St) / 16);
    static_assert(sizeof(St) % 16 == 0, "a stage is whole 16-byte pieces");
    const uint4* img0 = a.images + static_cast<size_t>(blockIdx.x) * (kCopies ? a.n_images : 0) * kPieces;
    for (int i = 0; i < a.steps; ++i) {
      const int s = i % kStages, use = i / kStages;
      if (use > 0) ptx::mbar_wait(&st.empty[s], (use - 1) & 1);
      if constexpr (kCopies) {
        const uint4* src = img0 + static_cast<size_t>(i % a.n_images) * kPieces;
        unsigned char* dst = reinterpret_cast<unsigned char*>(&st.stage[s]);
        for (int k = t; k < kPieces; k += 128) ptx::cp_async_16_zfill(dst + 16 * k, src + k, true);
        ptx::cp_async_arrive_noinc(&st.full[s]);
      } else if (t == 0) {
        ptx::mbar_arrive(&st.full[s]);
      }
    }
    return;
  }
  if constexpr (kWG == 2) ptx::setmaxnreg_inc<TokRegs<kWG>::kConsumer>();

  auto saddr = [](const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); };
  using S_t = tile::Acc<128>;
  using XO_t = tile::Acc<2 * kC>;
  S_t S;
#pragma unroll
  for (int i = 0; i < S_t::kCount; ++i) S.v[i] = a.s0[(64 * wg + S_t::row(t, i)) * 128 + S_t::col(t, i)];
  XO_t xo, uo;
  for (int step = 0; step < a.steps; ++step) {
    const int s = step % kStages;
    St& sg = st.stage[s];
    ptx::mbar_wait(&st.full[s], (step / kStages) & 1);
    ptx::fence_proxy_async_shared();
    uint32_t sa[8][4];
#pragma unroll
    for (int k = 0; k < 8; ++k) S.to_a(k, sa[k]);
    const uint32_t wq = saddr(sg.wq.bytes), vt = saddr(sg.vt[wg].bytes), tp = saddr(sg.tp.bytes),
                   tl = saddr(sg.tp_lo.bytes), kr = saddr(sg.kr.bytes);
    uo.fence_operand();
    xo.fence_operand();
    ptx::wgmma_fence();
#pragma unroll
    for (int k = 0; k < kKs; ++k) {  // [U0 | O0]: the lo tile's products first, then the hi tile's
      const uint64_t dv = tile::mnmajor_operand<typename St::Vt>(k).at(vt);
      uo.template mma_ss<1, 0>(dv, tile::kmajor_operand<typename St::Tp>(k).at(tl), k > 0);
      uo.template mma_ss<1, 0>(dv, tile::kmajor_operand<typename St::Tp>(k).at(tp), true);
    }
#pragma unroll
    for (int k = 0; k < 8; ++k) xo.template mma_rs<0>(sa[k], tile::kmajor_operand<typename St::Wq>(k).at(wq), k > 0);
    ptx::wgmma_commit_group();
    ptx::wgmma_wait_group<0>();
    uo.fence_operand();
    xo.fence_operand();
    {
      float2 gm[S_t::kColPairs];
      S_t::load_col_factors(t, sg.gamma, gm);
      S.mul_cols(gm);
    }
#pragma unroll
    for (int i = 0; i < XO_t::kCount; ++i) {
      if (XO_t::col(t, i) < kC)
        uo.v[i] -= xo.v[i];  // U
      else
        uo.v[i] += xo.v[i];  // O
    }
    uint32_t ua[kKs][4];  // every k-step's U before the fence (written after it, ptxas injects a wait: C7519)
#pragma unroll
    for (int k = 0; k < kKs; ++k) uo.to_a(k, ua[k]);
    S.fence_operand();
    ptx::wgmma_fence();
#pragma unroll
    for (int k = 0; k < kKs; ++k) S.template mma_rs<1>(ua[k], tile::mnmajor_operand<typename St::Kr>(k).at(kr), true);
    ptx::wgmma_commit_group();
    // O to global memory while the update runs: element pairs (i, i + 1) are adjacent tokens of one row.
    uint16_t* ob = a.o_buf + static_cast<int64_t>(step & 63) * 128 * kC;
#pragma unroll
    for (int i = 0; i < XO_t::kCount; i += 2) {
      if (XO_t::col(t, i) >= kC) {
        const int r = 64 * wg + XO_t::row(t, i), c = XO_t::col(t, i) - kC;
        *reinterpret_cast<uint32_t*>(ob + r * kC + c) = ptx::pack_bf16x2(uo.v[i], uo.v[i + 1]);
      }
    }
    ptx::wgmma_wait_group<0>();
    S.fence_operand();
    ptx::mbar_arrive(&st.empty[s]);
  }
  if (a.s_out != nullptr) {
#pragma unroll
    for (int i = 0; i < S_t::kCount; ++i) a.s_out[(64 * wg + S_t::row(t, i)) * 128 + S_t::col(t, i)] = S.v[i];
#pragma unroll
    for (int i = 0; i < XO_t::kCount; ++i)
      if (XO_t::col(t, i) >= kC) a.o_out[(64 * wg + XO_t::row(t, i)) * kC + XO_t::col(t, i) - kC] = uo.v[i];
  }
}

}  // namespace
