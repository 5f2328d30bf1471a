// The recurrence's chunk step on warpgroup MMA (wgmma), for one consumer warpgroup's 64 value rows
// whose state S is in its fp32 accumulators (tile::Acc<128>, 64 registers per thread), reading a
// ring stage of WgmmaRecurrenceLayout<kWG> (wgmma_stage.h) or a layout with the same tiles: the
// products of chunk_recurrence_wgmma_kernel.cuh's step, of the single pass's (single_pass_kernel.cuh)
// and of benchmarks/fused_piece_kernel.cuh, which times them.
//
// Per chunk and warpgroup (docs/design.md §6; benchmarks/bench_wgmma_step.cu measures this chain):
//   [X | Oin] = bf16(S)·[Wd; Qp]ᵀ    8 k-steps of m64n32k16, S as register A from its accumulator
//   [U0 | O0] = Vᵀ·[Tb; P]ᵀ          two m64n32k16 (Tb, P as their hi and lo parts), shared memory
//   (one batch, one wait), then S ← S·Diag(Γ) on the registers, U = U0 − X, O = O0 + Oin,
//   S += bf16(U)·Kr                   one m64n128k16, U as register A
// ptxas serialises the wgmma (it waits for each before the next: C7518/C7520, a WARPGROUP.DEPBAR per
// HGMMA in the SASS) when the accumulators are written under a branch, or when S·Diag(Γ) runs
// inside the first batch with a factor computed in the same step (a shared load, even one consumed
// before the batch, or anything derived from the step index; a loop-invariant factor, or one
// carried from the previous step, is accepted, but the carried form ran 3.5% slower:
// docs/performance_notes.md, version 29). The output's stores between the update's commit and its
// wait are fine. Check `-Xptxas -v` for those notes and for spills after any change here (CI:
// .ci/check_wgmma_serialization.sh).
// The state operand is one bf16 (no hi/lo pair: +3% out error, the state unchanged, per the
// rounding emulation, docs/performance_notes.md "Where precision matters").
#pragma once

#include <cstdint>

#include "src/ptx/wgmma.cuh"
#include "src/tile/fragments.cuh"
#include "src/tile/operand.h"

namespace kda::sm90 {

namespace wgmma_recurrence_detail {

__device__ __forceinline__ uint32_t smem_addr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

// A chunk step's first batch on stage `stg` (L::Stage): [U0 | O0] = Vᵀ·[Tb; P] with Vᵀ the value tile
// stg.vt[vt] ([Tb; P] lo, then hi) and [X | Oin] = S·[Wd; Qp] with S as the bf16 A operands `sa`;
// committed and waited for. No branch and no register write inside the batch (ptxas would serialise
// it, C7510-C7520). chunk_recurrence_wgmma_kernel's step and benchmarks/fused_piece_kernel.cuh (which
// times it) share it.
template <class L, class XO_t>
__device__ __forceinline__ void step_products(const uint32_t (&sa)[8][4], typename L::Stage& stg, int vt, XO_t& uo,
                                              XO_t& xo) {
  const uint32_t wq_addr = smem_addr(stg.wq.bytes);
  uo.fence_operand();
  xo.fence_operand();
  ptx::wgmma_fence();
  {
    const uint64_t d_vt = tile::mnmajor_operand<typename L::VtTile>(0).at(smem_addr(stg.vt[vt].bytes));
    uo.template mma_ss<1, 0>(d_vt, tile::kmajor_operand<typename L::TpTile>(0).at(smem_addr(stg.tp_lo.bytes)), false);
    uo.template mma_ss<1, 0>(d_vt, tile::kmajor_operand<typename L::TpTile>(0).at(smem_addr(stg.tp_hi.bytes)), true);
  }
#pragma unroll
  for (int ks = 0; ks < 8; ++ks)
    xo.template mma_rs<0>(sa[ks], tile::kmajor_operand<typename L::WqTile>(ks).at(wq_addr), ks > 0);
  ptx::wgmma_commit_group();
  ptx::wgmma_wait_group<0>();
  uo.fence_operand();
  xo.fence_operand();
}

// A chunk step up to the update's operand: S as bf16 A operands, thread t's Γ loaded before the batch
// (so that S·Diag(Γ) after it does not wait for shared memory), the first batch (step_products),
// then S·Diag(Γ) once the products are done (inside the batch ptxas serialises it, C7518, even with
// Γ loaded before it; see the top of the file) and U = U0 − X in uo's columns 0..15 (n-blocks 0, 1).
// chunk_recurrence_wgmma_kernel's step, the single pass's and benchmarks/fused_piece_kernel.cuh share it.
template <class L, class S_t, class XO_t>
__device__ __forceinline__ void step_batch(S_t& S, int t, typename L::Stage& stg, int vt, XO_t& uo, XO_t& xo) {
  uint32_t sa[8][4];
#pragma unroll
  for (int ks = 0; ks < 8; ++ks) S.to_a(ks, sa[ks]);
  float2 gm[S_t::kColPairs];
  S_t::load_col_factors(t, stg.gamma, gm);
  step_products<L>(sa, stg, vt, uo, xo);
  S.mul_cols(gm);
#pragma unroll
  for (int e = 0; e < 8; ++e) uo.v[e] -= xo.v[e];
}

// The update after step_batch, committed and not waited for: S += bf16(U)·Kr with U as register A
// from uo's columns 0..15; kFinal: the last update of a stored final state, U and Kr as hi + lo pairs
// (U_lo·Kr + U·Kr_lo + U·Kr, the small terms first; Kr's low part at kr_lo, the KrTile layout); kSplitU:
// U as a pair (U_lo·Kr + U·Kr, FLASH_KDA_SPLIT_U). The recurrence kernel's step and the single pass
// (single_pass_kernel.cuh) share it.
template <class L, bool kFinal, bool kSplitU, class S_t, class XO_t>
__device__ __forceinline__ void step_update(S_t& S, const XO_t& uo, typename L::Stage& stg, const unsigned char* kr_lo) {
  uint32_t ua[4];
  const uint64_t d_kr = tile::mnmajor_operand<typename L::KrTile>(0).at(smem_addr(stg.kr.bytes));
  if constexpr (kFinal) {
    uint32_t ul[4];
    uo.to_a_split(0, ua, ul);
    const uint64_t d_kr_lo = tile::mnmajor_operand<typename L::KrTile>(0).at(smem_addr(kr_lo));
    S.fence_operand();
    ptx::wgmma_fence();
    S.template mma_rs<1>(ul, d_kr, true);  // the small terms first
    S.template mma_rs<1>(ua, d_kr_lo, true);
    S.template mma_rs<1>(ua, d_kr, true);
  } else if constexpr (kSplitU) {
    uint32_t ul[4];
    uo.to_a_split(0, ua, ul);
    S.fence_operand();
    ptx::wgmma_fence();
    S.template mma_rs<1>(ul, d_kr, true);  // the small term first
    S.template mma_rs<1>(ua, d_kr, true);
  } else {
    uo.to_a(0, ua);
    S.fence_operand();
    ptx::wgmma_fence();
    S.template mma_rs<1>(ua, d_kr, true);
  }
  ptx::wgmma_commit_group();
}

}  // namespace wgmma_recurrence_detail

}  // namespace kda::sm90
