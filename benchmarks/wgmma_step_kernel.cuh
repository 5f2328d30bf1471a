// The kernel of flash_kda_bench_wgmma_step (bench_wgmma_step.cu): the recurrence's chunk step on
// wgmma with its operands fixed in shared memory, and, one bit of `Variant` each, the parts that the
// library's chunk_recurrence_wgmma_kernel.cuh adds to it (a ring of stages, the mbarrier hand-off
// with a producer warp, Γ from shared memory, the second [U0 | O0] product, the output stores) and
// the alternatives tried against the hand-off's cost (docs/performance_notes.md, "Issue 10 measured
// before it is built"). The bits, the tiles and the shared storage are wgmma_step_variants.cuh.
// Included by that one benchmark only (an unnamed namespace).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "src/kernels/sm90/chunk_record.cuh"
#include "src/ptx/barrier.cuh"
#include "src/ptx/bulk_copy.cuh"
#include "src/ptx/tma.cuh"
#include "src/ptx/cp_async.cuh"
#include "src/ptx/ldmatrix.cuh"
#include "src/ptx/tma.cuh"  // fence_proxy_async_shared
#include "src/ptx/wgmma.cuh"
#include "src/tile/fragments.cuh"
#include "src/tile/operand.h"
#include "src/tile/smem_layout.h"
#include "src/tile/swizzle.h"
#include "benchmarks/wgmma_step_variants.cuh"

namespace {

// Operands in plain layouts: wq [32][128], kr [16][128], v [16][128] (token, value row), tp [32][16],
// gamma [128]; s0 / s_out [128][128] (value row, key column); o_out [128][16] (the last step's O);
// o_buf (kOut): [64 steps][16 tokens][128 rows] bf16, written cyclically.
// vmap (kTmaValues): the values tensor, g_n_images blocks of 16 tokens per CTA, CTA b's image i at
// token row 16 (b g_n_images + i).
template <int kV>
__global__ void __launch_bounds__((kV & (kMbar | kCap)) ? 384 : 256, 1) wgmma_step_kernel(const uint16_t* wq, const uint16_t* kr, const uint16_t* v,
                                                         const uint16_t* tp, const float* gamma, const float* s0,
                                                         int steps, float* s_out, float* o_out, float* sink,
                                                         uint16_t* o_buf, int consumer_wgs,
                                                         const __grid_constant__ CUtensorMap vmap) {
  constexpr bool kAfter = (kV & (kDecayAfter | kGammaSmem)) != 0;
  constexpr int kStagesUsed = (kV & kRing) ? kRingStages : 1;
  extern __shared__ unsigned char smem_raw[];
  Storage<kV>& st = *tile::smem_storage<Storage<kV>>(smem_raw);
  const int tid = threadIdx.x, wg = tid / 128, t = tid % 128;
  const int nthreads = 128 * consumer_wgs;  // consumer threads; a producer warp follows with kMbar
  for (int s = 0; s < kStagesUsed; ++s) {
    Stage& sg = st.stage[s];
    uint16_t* swq = reinterpret_cast<uint16_t*>(sg.wq.bytes);
    uint16_t* skr = reinterpret_cast<uint16_t*>(sg.kr.bytes);
    uint16_t* stp = reinterpret_cast<uint16_t*>(sg.tp.bytes);
    uint16_t* stl = reinterpret_cast<uint16_t*>(sg.tp_lo.bytes);
    for (int i = tid; i < 32 * 128; i += blockDim.x) swq[WqTile::index(i / 128, i % 128)] = wq[i];
    for (int i = tid; i < 16 * 128; i += blockDim.x) skr[KrTile::index(i / 128, i % 128)] = kr[i];
    for (int i = tid; i < 32 * 16; i += blockDim.x) {
      stp[TpTile::index(i / 16, i % 16)] = tp[i];
      stl[TpTile::index(i / 16, i % 16)] = 0;
    }
    for (int i = tid; i < 2 * 16 * 64; i += blockDim.x) {
      const int w = i / (16 * 64), j = (i / 64) % 16, r = i % 64;
      reinterpret_cast<uint16_t*>(sg.vt[w].bytes)[VtTile::index(j, r)] = v[j * 128 + 64 * w + r];
    }
    for (int i = tid; i < 128; i += blockDim.x) sg.gamma[i] = gamma[i];
  }
  if (tid == 0) {
    for (int s = 0; s < kRingStages; ++s) {
      ptx::mbar_init(&st.full[s], !(kV & kCopies) ? 1 : (kV & kMixed) ? 129 : (kV & (kBulk | kTmaValues)) ? 1 : 128);
      if (s < 2) ptx::mbar_init(&st.staged[s], 1);
      ptx::mbar_init(&st.empty[s], (kV & kWarpArrive) ? nthreads / 32 : nthreads);
    }
    ptx::fence_barrier_init();
  }
  ptx::fence_proxy_async_shared();
  __syncthreads();
  if (g_dump != nullptr && blockIdx.x == 0) {
    for (int k = tid; k < static_cast<int>(sizeof(Stage) / 16); k += blockDim.x)
      g_dump[k] = reinterpret_cast<const uint4*>(&st.stage[0])[k];
  }
  if constexpr ((kV & kCopies) != 0) {
    static_assert((kV & kMbar) != 0 && (kV & kRing) != 0 && sizeof(Stage) % 16 == 0, "copies need the ring and the hand-off");
    if (tid >= nthreads) {  // the producer warpgroup: copies every stage, as the kernel's producer does
      const int pt = tid - nthreads;
      constexpr int kPieces = static_cast<int>(sizeof(Stage) / 16);
      const uint4* img0 = g_images + static_cast<size_t>(blockIdx.x) * g_n_images * kPieces;
      if constexpr ((kV & kRelayout) != 0) {
        auto issue = [&](int i) {  // image i into staging buffer i % 2
          if (pt == 0) {
            ptx::mbar_arrive_expect_tx(&st.staged[i & 1], 16 * kPieces);
            ptx::bulk_copy_g2s(&st.staging[i & 1], img0 + static_cast<size_t>(i % g_n_images) * kPieces, 16 * kPieces,
                               &st.staged[i & 1]);
          }
        };
        issue(0);
        for (int i = 0; i < steps; ++i) {
          if (i + 1 < steps) issue(i + 1);  // its buffer was emptied by step i - 1 (the barrier below)
          ptx::mbar_wait(&st.staged[i & 1], (i >> 1) & 1);
          const int s = i % kRingStages, use = i / kRingStages;
          if (use > 0) wait_parity(&st.empty[s], (use - 1) & 1, true);
          const uint4* from = reinterpret_cast<const uint4*>(&st.staging[i & 1]);
          uint4* to = reinterpret_cast<uint4*>(&st.stage[s]);
          for (int k = pt; k < kPieces; k += 128) to[k] = from[k];
          ptx::fence_proxy_async_shared();
          ptx::mbar_arrive(&st.full[s]);
          asm volatile("bar.sync 1, 128;\n" ::: "memory");  // every producer thread is done with buffer i % 2
        }
        return;
      }
      for (int i = 0; i < steps; ++i) {
        const int s = i % kRingStages, use = i / kRingStages;
        if (use > 0) wait_parity(&st.empty[s], (use - 1) & 1, true);
        const uint4* src = img0 + static_cast<size_t>(i % g_n_images) * kPieces;
        unsigned char* dst = reinterpret_cast<unsigned char*>(&st.stage[s]);
        if constexpr ((kV & kTmaValues) != 0) {
          constexpr int kVt = static_cast<int>(offsetof(Stage, vt)), kAfterVt = static_cast<int>(offsetof(Stage, tp));
          constexpr int kTail = static_cast<int>(sizeof(Stage)) - kAfterVt;
          static_assert(kAfterVt == kVt + 2 * static_cast<int>(sizeof(Stage::vt[0])), "the values' tiles sit between");
          if (pt == 0) {
            ptx::mbar_arrive_expect_tx(&st.full[s], kVt + kTail + 2 * static_cast<int>(sizeof(Stage::vt[0])));
            ptx::bulk_copy_g2s(dst, src, kVt, &st.full[s]);
            ptx::bulk_copy_g2s(dst + kAfterVt, reinterpret_cast<const unsigned char*>(src) + kAfterVt, kTail,
                               &st.full[s]);
            if constexpr ((kV & kFourBulk) != 0) {
              constexpr int kTile = static_cast<int>(sizeof(Stage::vt[0]));
              ptx::bulk_copy_g2s(dst + kVt, reinterpret_cast<const unsigned char*>(src) + kVt, kTile, &st.full[s]);
              ptx::bulk_copy_g2s(dst + kVt + kTile, reinterpret_cast<const unsigned char*>(src) + kVt + kTile, kTile,
                                 &st.full[s]);
            } else {
              const int row = 16 * (static_cast<int>(blockIdx.x) * g_n_images + i % g_n_images);
              ptx::tma_load_2d(st.stage[s].vt[0].bytes, &vmap, 0, row, &st.full[s]);
              ptx::tma_load_2d(st.stage[s].vt[1].bytes, &vmap, 64, row, &st.full[s]);
            }
          }
        } else if constexpr ((kV & kMixed) != 0) {
          constexpr int kBulkBytes = static_cast<int>(offsetof(Stage, vt));  // wq, kr
          static_assert(kBulkBytes % 16 == 0 && offsetof(Stage, kr) < offsetof(Stage, vt), "wq and kr lead the stage");
          if (pt == 0) {
            ptx::mbar_arrive_expect_tx(&st.full[s], kBulkBytes);
            ptx::bulk_copy_g2s(dst, src, kBulkBytes, &st.full[s]);
          }
          for (int k = kBulkBytes / 16 + pt; k < kPieces; k += 128) ptx::cp_async_16_zfill(dst + 16 * k, src + k, true);
          ptx::cp_async_arrive_noinc(&st.full[s]);
        } else if constexpr ((kV & kBulk) != 0) {
          if (pt == 0) {
            ptx::mbar_arrive_expect_tx(&st.full[s], 16 * kPieces);
            ptx::bulk_copy_g2s(dst, src, 16 * kPieces, &st.full[s]);
          }
        } else {
          for (int k = pt; k < kPieces; k += 128) ptx::cp_async_16_zfill(dst + 16 * k, src + k, true);
          ptx::cp_async_arrive_noinc(&st.full[s]);
        }
      }
      return;
    }
  } else if constexpr ((kV & kMbar) != 0) {
    if (tid >= nthreads) {  // the producer warp: hands each stage over, copies nothing
      if (tid == nthreads) {
        constexpr int kStep = (kV & kPairWait) ? 2 : 1, kSlots = kRingStages / kStep;
        for (int i = 0; i < steps / kStep; ++i) {
          const int s = i % kSlots, use = i / kSlots;
          if (use > 0) wait_parity(&st.empty[s], (use - 1) & 1, !(kV & kNoHint));
          if constexpr ((kV & kProducerFence) != 0) ptx::fence_proxy_async_shared();
          ptx::mbar_arrive(&st.full[s]);
        }
      }
      return;
    }
  }
  if (tid >= nthreads) return;

  auto saddr = [](const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); };
  using S_t = tile::Acc<128>;
  using XO_t = tile::Acc<32>;
  S_t S;
  float g[S_t::kCount];
#pragma unroll
  for (int i = 0; i < S_t::kCount; ++i) {
    S.v[i] = s0[(64 * wg + S_t::row(t, i)) * 128 + S_t::col(t, i)];
    g[i] = st.stage[0].gamma[S_t::col(t, i)];
  }
  // Stage 0's descriptors, hoisted (the bare step).
  const uint64_t d_vt0 = tile::mnmajor_operand<VtTile>(0).at(saddr(st.stage[0].vt[wg].bytes));
  const uint64_t d_tp0 = tile::kmajor_operand<TpTile>(0).at(saddr(st.stage[0].tp.bytes));
  const uint64_t d_kr0 = tile::mnmajor_operand<KrTile>(0).at(saddr(st.stage[0].kr.bytes));
  const uint32_t wq0 = saddr(st.stage[0].wq.bytes);
  const int warp = tid >> 5, lane = tid & 31, wi = warp & 3;
  XO_t xo, uo;
  float acc = 0.0f;
  float2 gnext[S_t::kColPairs];
  bool ready = false;
  for (int step = 0; step < steps; ++step) {
    const int s = (kV & kRing) ? step % kRingStages : 0;
    Stage& sg = st.stage[s];
    if constexpr ((kV & kMbar) != 0) {
      if ((kV & kPairWait) != 0 && (step & 1) == 0) {
        const int pr = step / 2;
        wait_parity(&st.full[pr % (kRingStages / 2)], (pr / (kRingStages / 2)) & 1, !(kV & kNoHint));
        if constexpr ((kV & (kNoFence | kProducerFence)) == 0) ptx::fence_proxy_async_shared();
      } else if constexpr ((kV & kProbe) != 0) {
        if (!ready) wait_parity(&st.full[s], (step / kRingStages) & 1, !(kV & kNoHint));
        if constexpr ((kV & (kNoFence | kProducerFence)) == 0) ptx::fence_proxy_async_shared();
      } else if ((kV & kPairWait) == 0 && ((kV & kEarlyWait) == 0 || step == 0)) {
        if constexpr ((kV & kTestWait) != 0)
          test_wait_parity(&st.full[s], (step / kRingStages) & 1);
        else
          wait_parity(&st.full[s], (step / kRingStages) & 1, !(kV & kNoHint));
        if constexpr ((kV & (kNoFence | kProducerFence)) == 0) ptx::fence_proxy_async_shared();
      }
    }
    uint32_t sa[8][4];
#pragma unroll
    for (int k = 0; k < 8; ++k) S.to_a(k, sa[k]);
    float2 gm[S_t::kColPairs];
    if constexpr ((kV & kGammaEarly) != 0) {
      if (step == 0) S_t::load_col_factors(t, sg.gamma, gnext);
#pragma unroll
      for (int j = 0; j < S_t::kColPairs; ++j) gm[j] = gnext[j];
    } else if constexpr ((kV & kGammaSmem) != 0) {
      S_t::load_col_factors(t, sg.gamma, gm);
    }
    const uint32_t wq_addr = (kV & kRing) ? saddr(sg.wq.bytes) : wq0;
    uo.fence_operand();
    xo.fence_operand();
    ptx::wgmma_fence();
    if constexpr ((kV & kRing) != 0) {
      const uint64_t d_vt = tile::mnmajor_operand<VtTile>(0).at(saddr(sg.vt[wg].bytes));
      if constexpr ((kV & kTwoTp) != 0)
        uo.mma_ss<1, 0>(d_vt, tile::kmajor_operand<TpTile>(0).at(saddr(sg.tp_lo.bytes)), false);
      uo.mma_ss<1, 0>(d_vt, tile::kmajor_operand<TpTile>(0).at(saddr(sg.tp.bytes)), (kV & kTwoTp) != 0);
    } else {
      if constexpr ((kV & kTwoTp) != 0)
        uo.mma_ss<1, 0>(d_vt0, tile::kmajor_operand<TpTile>(0).at(saddr(st.stage[0].tp_lo.bytes)), false);
      uo.mma_ss<1, 0>(d_vt0, d_tp0, (kV & kTwoTp) != 0);
    }
#pragma unroll
    for (int k = 0; k < 8; ++k) xo.mma_rs<0>(sa[k], tile::kmajor_operand<WqTile>(k).at(wq_addr), k > 0);
    ptx::wgmma_commit_group();
    if constexpr ((kV & kMbar) != 0 && (kV & kProbe) != 0)
      ready = step + 1 < steps && test_wait_once(&st.full[(step + 1) % kRingStages], ((step + 1) / kRingStages) & 1);
    if constexpr (!kAfter) {
      // S·Diag(Γ) while the products run (S's bf16 copy is already taken).
#pragma unroll
      for (int i = 0; i < S_t::kCount; ++i) S.v[i] *= g[i];
    }
    ptx::wgmma_wait_group<0>();
    uo.fence_operand();
    xo.fence_operand();
    if constexpr ((kV & kGammaSmem) != 0) {
      S.mul_cols(gm);
    } else if constexpr (kAfter) {
#pragma unroll
      for (int i = 0; i < S_t::kCount; ++i) S.v[i] *= g[i];
    }
#pragma unroll
    for (int i = 0; i < XO_t::kCount; ++i) {
      if (XO_t::col(t, i) < 16)
        uo.v[i] -= xo.v[i];  // U
      else
        uo.v[i] += xo.v[i];  // O
    }
    uint32_t ua[4];
    uo.to_a(0, ua);
    const uint64_t d_kr = (kV & kRing) ? tile::mnmajor_operand<KrTile>(0).at(saddr(sg.kr.bytes)) : d_kr0;
    S.fence_operand();
    ptx::wgmma_fence();
    S.mma_rs<1>(ua, d_kr, true);
    ptx::wgmma_commit_group();
    if constexpr ((kV & kMbar) != 0 && (kV & kEarlyWait) != 0) {
      if (step + 1 < steps) {
        const int sn = (step + 1) % kRingStages;
        wait_parity(&st.full[sn], ((step + 1) / kRingStages) & 1, !(kV & kNoHint));
        if constexpr ((kV & (kNoFence | kProducerFence)) == 0) ptx::fence_proxy_async_shared();
        if constexpr ((kV & kGammaEarly) != 0) S_t::load_col_factors(t, st.stage[sn].gamma, gnext);
      }
    }
    if constexpr ((kV & kOut) != 0) {
      // The kernel's store_out_rows: this warp's 16 value rows x 16 tokens, transposed by stmatrix.
      const uint32_t r[4] = {ptx::pack_bf16x2(uo.v[8], uo.v[9]), ptx::pack_bf16x2(uo.v[10], uo.v[11]),
                             ptx::pack_bf16x2(uo.v[12], uo.v[13]), ptx::pack_bf16x2(uo.v[14], uo.v[15])};
      const int m = lane >> 3, rr = lane & 7;
      unsigned char* out_tile = st.out[warp];
      ptx::stmatrix_x4_trans(out_tile + sm90::ChunkRecord::small_chunk_byte(rr + 8 * (m >> 1), m & 1), r);
      __syncwarp();
      const int tok = lane >> 1, h = lane & 1;
      uint16_t* dst = o_buf + (static_cast<int64_t>(step & 63) * 16 + tok) * 128 + 64 * wg + 16 * wi + 8 * h;
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(out_tile + sm90::ChunkRecord::small_chunk_byte(tok, h));
    } else {
      // The output would be stored here; keep it live.
#pragma unroll
      for (int i = 0; i < XO_t::kCount; ++i)
        if (XO_t::col(t, i) >= 16) acc += uo.v[i];
    }
    ptx::wgmma_wait_group<0>();
    S.fence_operand();
    if constexpr ((kV & kMbar) != 0) {
      if constexpr ((kV & kWarpArrive) != 0) {
        __syncwarp();
        if (lane == 0) ptx::mbar_arrive(&st.empty[s]);
      } else if constexpr ((kV & kSinkArrive) != 0) {
        arrive_sink(&st.empty[s]);
      } else if constexpr ((kV & kPairWait) != 0) {
        if (step & 1) ptx::mbar_arrive(&st.empty[(step / 2) % (kRingStages / 2)]);
      } else {
        ptx::mbar_arrive(&st.empty[s]);
      }
    }
  }
  if (s_out != nullptr) {
#pragma unroll
    for (int i = 0; i < S_t::kCount; ++i) s_out[(64 * wg + S_t::row(t, i)) * 128 + S_t::col(t, i)] = S.v[i];
#pragma unroll
    for (int i = 0; i < XO_t::kCount; ++i)
      if (XO_t::col(t, i) >= 16) o_out[(64 * wg + XO_t::row(t, i)) * 16 + XO_t::col(t, i) - 16] = uo.v[i];
  }
  if (acc == 1234.5f) sink[tid] = acc;  // never true in practice; keeps the output products live
}

}  // namespace
