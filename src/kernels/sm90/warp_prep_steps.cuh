// The warp preparation's two longest stages, which prep_warp_chunk (warp_prep.cuh) runs in order: the
// L2 norms of a chunk's q and k rows (warp_row_norms) and one key step of the elementwise pass
// (elem_key_step). Moved here unchanged from prep_warp_chunk (the generated code is the same: every
// kernel's .text section byte-identical in single_pass_sm90, bench_prep_warp and bench_fused_piece).
// The lane map and the boxes: warp_prep.cuh's top comment and warp_prep_layout.cuh.
#pragma once

#include <cstdint>

#include "src/kernels/sm90/chunk_record.cuh"
#include "src/kernels/sm90/gate_math.cuh"
#include "src/kernels/sm90/kernel_params.h"
#include "src/kernels/sm90/warp_prep_layout.cuh"
#include "src/kernels/sm90/warp_prep_parts.cuh"
#include "src/ptx/fast_math.cuh"
#include "src/ptx/ldmatrix.cuh"
#include "src/ptx/mma.cuh"

namespace kda::sm90::warp_prep {

// ---- L2 norms: diag(q·qᵀ), diag(k·kᵀ) on the tensor cores ----------------------------------------
// (A second round only where a row's sum of squares is not finite, after rescale_box_rows.)
// qinv / kinv: the lane's tokens 2qd, 2qd + 1, 2qd + 8, 2qd + 9 (q's carrying the output scale; 0 for a
// partial chunk's padding tokens, tok_valid).
template <bool kPartial>
__device__ __forceinline__ void warp_row_norms(const sm90::PrepParams& p, unsigned char (&in)[6][2048], int lane, int qd,
                                               const bool (&tok_valid)[4], float (&qinv)[4], float (&kinv)[4]) {
  float qs[4], ks_[4];
  uint32_t rescaled = 0;  // rows scaled (rescale_box_rows): their eps is dropped
#pragma unroll 1
  for (int round = 0;; ++round) {
    float gq[2][4] = {}, gkk[2][4] = {};
#pragma unroll
    for (int ks = 0; ks < 8; ++ks) {
      uint32_t a[4], c[4];
      ptx::ldmatrix_x4(a, in[kIn + (ks >> 2)] + box_row_offset(lane, ks));
      ptx::ldmatrix_x4(c, in[kInK + (ks >> 2)] + box_row_offset(lane, ks));
      const uint32_t a0[2] = {a[0], a[2]}, a1[2] = {a[1], a[3]}, c0[2] = {c[0], c[2]}, c1[2] = {c[1], c[3]};
      ptx::mma_m16n8k16_bf16_f32(gq[0], a, a0);
      ptx::mma_m16n8k16_bf16_f32(gq[1], a, a1);
      ptx::mma_m16n8k16_bf16_f32(gkk[0], c, c0);
      ptx::mma_m16n8k16_bf16_f32(gkk[1], c, c1);
    }
    // Token 2qd's diagonal is c[0] of n-tile 0 in lane 9qd, 2qd + 1's c[1] in lane 9qd + 4; +8: n-tile 1,
    // c[2] / c[3] of the same lanes.
    const int l0 = 9 * qd, l1 = 9 * qd + 4;
    qs[0] = __shfl_sync(0xffffffffu, gq[0][0], l0);
    qs[1] = __shfl_sync(0xffffffffu, gq[0][1], l1);
    qs[2] = __shfl_sync(0xffffffffu, gq[1][2], l0);
    qs[3] = __shfl_sync(0xffffffffu, gq[1][3], l1);
    ks_[0] = __shfl_sync(0xffffffffu, gkk[0][0], l0);
    ks_[1] = __shfl_sync(0xffffffffu, gkk[0][1], l1);
    ks_[2] = __shfl_sync(0xffffffffu, gkk[1][2], l0);
    ks_[3] = __shfl_sync(0xffffffffu, gkk[1][3], l1);
    bool fine = true;
#pragma unroll
    for (int e = 0; e < 4; ++e) fine = fine && qs[e] <= 0x1.fffffep127f && ks_[e] <= 0x1.fffffep127f;
    if (round == 1 || !__any_sync(0xffffffffu, p.qk_l2norm && !fine)) break;
    rescaled = rescale_box_rows(&in[0][0], lane);
  }
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int tok = 2 * qd + (e & 1) + 8 * (e >> 1);
    const float qeps = (rescaled >> tok) & 1 ? 0.0f : 1e-6f, keps = (rescaled >> (16 + tok)) & 1 ? 0.0f : 1e-6f;
    // (rsqrt.approx.ftz, computed unconditionally: rsqrtf's rescaling of subnormals, which no sum
    // here can be, and a branch on qk_l2norm per element cost 4% of the warp's samples.)
    const float rq = ptx::rsqrt_approx_ftz(qs[e] + qeps), rk = ptx::rsqrt_approx_ftz(ks_[e] + keps);
    qinv[e] = (p.qk_l2norm ? rq : 1.0f) * p.scale;
    kinv[e] = p.qk_l2norm ? rk : 1.0f;
    if constexpr (kPartial) {
      if (!tok_valid[e]) qinv[e] = kinv[e] = 0.0f;
    }
  }
}

// Key step ks, its boxes' rows at panel byte offset pofs = (ks / 4) * 2048 plus roff = off(ks), Kr's
// 16-byte column cb = (2 ks) % 8 (a rolled loop passes them precomputed: for_key_steps). kSplitKr:
// Kr's low part too (kr_lo: a sequence's last chunk), a separate instance so that the hot one issues
// none of its instructions (predicated off, they took 20 of the step's 372 issue slots).
// (in0: the six boxes; dtbv / dt_s: dt_bias in registers (kKeyUnroll 8) or shared memory; gamma, kr_base:
// where Γ and Kr go; accA, mhh, mlo: A and M's accumulators.)
template <bool kSplitKr, int kKeyUnroll, bool kToStage>
__device__ __forceinline__ void elem_key_step(unsigned char* const in0, int ks, uint32_t pofs, uint32_t roff, int cb,
                                              const float (&dtbv)[kKeyUnroll == 8 ? 16 : 1], const float* dt_s, int g8,
                                              int qd, const BoundedGateConstants& gk, uint32_t obase, float* gamma,
                                              const float (&qinv)[4], const float (&kinv)[4], float (&accA)[2][4],
                                              float (&mhh)[2][4], float (&mlo)[2][4], uint8_t* kr_base, uint32_t kr_lo) {
  uint32_t Q[4], K[4], Gr[4];
  unsigned char* qa = in0 + kIn * 2048 + pofs + roff;
  unsigned char* ka = in0 + kInK * 2048 + pofs + roff;
  unsigned char* ga = in0 + kInG * 2048 + pofs + roff;
  ptx::ldmatrix_x4_trans(Q, qa);
  ptx::ldmatrix_x4_trans(K, ka);
  ptx::ldmatrix_x4_trans(Gr, ga);
  // dt_bias of the step's two keys, loaded with the boxes (read where first used, it cost 3-4%).
  float dbk[2];
#pragma unroll
  for (int o = 0; o < 2; ++o) {
    if constexpr (kKeyUnroll == 8)
      dbk[o] = dtbv[2 * ks + o];
    else
      dbk[o] = dt_s[16 * ks + 8 * o + g8];
  }
  uint32_t kd_p[4], kr_p[4], krl_p[4], qh_p[4], ql_p[4], kih_p[4], kil_p[4];
#pragma unroll
  for (int o = 0; o < 2; ++o) {  // key 16 ks + 8 o + grp; registers 2o (tokens 2qd..), 2o + 1 (2qd + 8..)
    const int key = 16 * ks + 8 * o + g8;
    float x[4], qv[4], kv[4];
    unpack2(Gr[2 * o], x[0], x[1]);
    unpack2(Gr[2 * o + 1], x[2], x[3]);
    unpack2(Q[2 * o], qv[0], qv[1]);
    unpack2(Q[2 * o + 1], qv[2], qv[3]);
    unpack2(K[2 * o], kv[0], kv[1]);
    unpack2(K[2 * o + 1], kv[2], kv[3]);
    const float db = dbk[o];
    float a[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) a[e] = bounded_log2_decay(x[e], db, gk);
    // Cumulative sum over the 16 tokens: pairs in-lane, a scan over the quad's four lanes.
    const float slo = a[0] + a[1], shi = a[2] + a[3];
    // A butterfly over the quad: the pair sums, then the quad's (the same bits in its four lanes, each
    // addition's operands commuted), the inclusive prefix taken on the way.
    float ilo = slo, ihi = shi, tlo, thi;
    {
      const float ulo = __shfl_xor_sync(0xffffffffu, slo, 1), uhi = __shfl_xor_sync(0xffffffffu, shi, 1);
      const float plo = slo + ulo, phi = shi + uhi;  // the pair's sums
      if (qd & 1) ilo = plo, ihi = phi;
      const float vlo = __shfl_xor_sync(0xffffffffu, plo, 2), vhi = __shfl_xor_sync(0xffffffffu, phi, 2);
      if (qd & 2) ilo += vlo, ihi += vhi;
      tlo = plo + vlo;
      thi = phi + vhi;
    }
    float G[4];
    G[1] = ilo;
    G[0] = ilo - a[1];
    G[3] = tlo + ihi;
    G[2] = G[3] - a[3];
    const float gam = exp2_fast(tlo + thi);
    if (quad_leader_from_offset(obase)) gamma[key] = gam;  // (qd == 0, without a scratch register)
    float kd[4], qdv[4], ki[4], kr[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float d = exp2_fast(G[e]), inv = exp2_fast(-G[e]);
      const float kn = kv[e] * kinv[e], qn = qv[e] * qinv[e];
      kd[e] = kn * d;
      qdv[e] = qn * d;
      ki[e] = kn * inv;
      kr[e] = ki[e] * gam;
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = 2 * o + h;
      kd_p[r] = ptx::pack_bf16x2(kd[2 * h], kd[2 * h + 1]);
      if constexpr (kSplitKr)
        ptx::split_bf16x2_bits(kr[2 * h], kr[2 * h + 1], kr_p[r], krl_p[r]);
      else
        kr_p[r] = ptx::pack_bf16x2(kr[2 * h], kr[2 * h + 1]);
      ptx::split_bf16x2_bits(qdv[2 * h], qdv[2 * h + 1], qh_p[r], ql_p[r]);
      ptx::split_bf16x2_bits(ki[2 * h], ki[2 * h + 1], kih_p[r], kil_p[r]);
    }
  }
  // A = Kd·Kiᵀ and M = Qd·Kiᵀ over this key step: fragments with k = key by movmatrix.trans.
  {
    uint32_t kdA[4], qhA[4], qlA[4];
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      kdA[r] = ptx::movmatrix_trans(kd_p[r]);
      qhA[r] = ptx::movmatrix_trans(qh_p[r]);
      qlA[r] = ptx::movmatrix_trans(ql_p[r]);
    }
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      const uint32_t bh[2] = {ptx::movmatrix_trans(kih_p[nt]), ptx::movmatrix_trans(kih_p[nt + 2])};
      const uint32_t bl[2] = {ptx::movmatrix_trans(kil_p[nt]), ptx::movmatrix_trans(kil_p[nt + 2])};
      ptx::mma_m16n8k16_bf16_f32(accA[nt], kdA, bh);
      ptx::mma_m16n8k16_bf16_f32(mlo[nt], qlA, bh);
      ptx::mma_m16n8k16_bf16_f32(mlo[nt], qhA, bl);
      ptx::mma_m16n8k16_bf16_f32(mhh[nt], qhA, bh);
    }
  }
  // Kd, Qd hi, Qd lo wait for T where q, k, g were (the same addresses, transposed back).
  __syncwarp();
  ptx::stmatrix_x4_trans(qa, kd_p);
  ptx::stmatrix_x4_trans(ka, qh_p);
  ptx::stmatrix_x4_trans(ga, ql_p);
  // Kr (and its low part, Kr - bf16(Kr)): its panels have the boxes' layout, so into shared memory
  // (the park, a stage) it is stored as Kd is; into a global record (kGlobal) by 4-byte stores of
  // (token grp (+8), keys 2 qid, +1) after a transpose. (The shared path by movmatrix and 4-byte
  // stores cost the whole-sequence instances 1-4%.)
  if constexpr (kToStage) {
    ptx::stmatrix_x4_trans(kr_base + pofs + roff, kr_p);
    if constexpr (kSplitKr) ptx::stmatrix_x4_trans(__cvta_shared_to_generic(kr_lo + pofs + roff), krl_p);
  } else {
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int row = g8 + 8 * (r & 1), c = cb + (r >> 1);  // c < 8: no wrap
      *reinterpret_cast<uint32_t*>(kr_base + pofs + row * 128 + ((c ^ (row & 7)) << 4) + 4 * qd) =
          ptx::movmatrix_trans(kr_p[r]);
    }
    if constexpr (kSplitKr) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int row = g8 + 8 * (r & 1), c = cb + (r >> 1);
        *static_cast<uint32_t*>(__cvta_shared_to_generic(kr_lo + pofs + row * 128 + ((c ^ (row & 7)) << 4) + 4 * qd)) =
            ptx::movmatrix_trans(krl_p[r]);
      }
    }
  }
}

}  // namespace kda::sm90::warp_prep
