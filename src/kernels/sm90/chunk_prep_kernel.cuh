// chunk_prep_kernel: everything of a chunk that does not depend on the state (docs/design.md §2.1).
//
// Grid:   (num_vchunks, HV); one CTA per (virtual chunk, value head). CTAs of unowned virtual
//         chunks exit at once.
// Block:  128 threads (4 warps), no warp roles: phases separated by __syncthreads.
// Phases: 1. load q, k, g rows (thread = 8 columns of one row, two rows), L2-normalise q and k
//            (16-lane shuffle reduction), gate -> per-row log2-decay; beta
//         2. (thread = key column) cumulative sum G, Γ, Kr; Kd, Qd (and Ki for the bounded gate) as
//            bf16 hi + lo tiles, Qd also in float32
//         3. A (strictly lower) and M (lower): bounded gate, tensor cores (warp w sums key columns
//            [32w, 32w+32) of hi·hi + lo·hi + hi·lo, partial sums reduced through shared memory);
//            unbounded gates, float32 dot products with pairwise exponents (never overflow)
//         4. T = (I + A)^-1 by forward substitution (warp 0, lane = column), Tb = T·Diag(b)
//         5. P = M·Tb (CUDA cores); Tb and P as bf16 hi/lo pairs; Wd = Tb·Kd (tensor cores, warp w
//            owns key columns [32w, 32w+32), three hi/lo passes)
//         6. Qp = Qd − P·Kd (idem)
//         Records go straight to global memory (layout: chunk_record.cuh).
// Shared memory: K̂, Q̂ (aliased by the phase-3 partial sums), G, Qd: 4 x [16][132] float;
//         Kd, Qd, Ki hi/lo: 6 x [16][128] bf16 (record layout); A, M, Tb, P: 4 x [16][17]; b: 16.
// Every product carries ~16 significant bits or more (hi/lo splits); the record's Wd, Qp and Kr
// are rounded to bf16 once, at the end.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "src/kernels/sm90/chunk_record.cuh"
#include "src/kernels/sm90/gate_math.cuh"
#include "src/kernels/sm90/kernel_params.h"
#include "src/kernels/sm90/record_fragments.cuh"
#include "src/kernels/sm90/sequence_map.cuh"
#include "src/ptx/mma.cuh"

namespace kda::sm90 {

struct PrepSmem {
  static constexpr int kLd = 132;  // padded row length of the [16][128] float tiles
  static constexpr int kSmallLd = 17;
  static constexpr int kTile = 16 * 128;  // bf16 elements of a record-layout tile
  float khat[16 * kLd];
  union {
    float qhat[16 * kLd];
    float partial[2][4][256];  // bounded gate, phase 3: per-warp partial A and M
  };
  float G[16 * kLd];  // per-row log2-decay, then its inclusive cumulative sum
  float qd[16 * kLd];
  uint16_t kd_hi[kTile], kd_lo[kTile], qd_hi[kTile], qd_lo[kTile], ki_hi[kTile], ki_lo[kTile];
  float A[16 * kSmallLd];
  float M[16 * kSmallLd];
  float Tb[16 * kSmallLd];
  float P[16 * kSmallLd];
  float b[16];
};

namespace prep_detail {

__device__ __forceinline__ float bf16_bits_to_float(uint32_t bits16) { return __uint_as_float(bits16 << 16); }

// Eight consecutive elements of a bf16 row (16-byte load) as floats.
__device__ __forceinline__ void load8_bf16(const uint16_t* p, float (&x)[8]) {
  const uint4 u = *reinterpret_cast<const uint4*>(p);
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    x[2 * e] = bf16_bits_to_float(w[e] & 0xffffu);
    x[2 * e + 1] = bf16_bits_to_float(w[e] >> 16);
  }
}

__device__ __forceinline__ void load8_f32(const float* p, float (&x)[8]) {
  const float4 a = *reinterpret_cast<const float4*>(p);
  const float4 c = *reinterpret_cast<const float4*>(p + 4);
  x[0] = a.x; x[1] = a.y; x[2] = a.z; x[3] = a.w;
  x[4] = c.x; x[5] = c.y; x[6] = c.z; x[7] = c.w;
}

__device__ __forceinline__ uint16_t float_to_bf16_bits(float x) {
  __nv_bfloat16 h = __float2bfloat16_rn(x);
  return *reinterpret_cast<uint16_t*>(&h);
}

// x as a bf16 hi + lo pair, stored at element `idx` of two tiles.
__device__ __forceinline__ void store_split(uint16_t* hi, uint16_t* lo, uint32_t idx, float x) {
  const uint16_t h = float_to_bf16_bits(x);
  hi[idx] = h;
  lo[idx] = float_to_bf16_bits(x - bf16_bits_to_float(h));
}

__device__ __forceinline__ float load_scalar(const void* p, int64_t idx, bool is_f32) {
  return is_f32 ? static_cast<const float*>(p)[idx]
                : bf16_bits_to_float(static_cast<const uint16_t*>(p)[idx]);
}

}  // namespace prep_detail

// out[:, 32w .. 32w+32) = X·Kd (+ Qd when kAddQd) for a 16x16 X given as an A-fragment hi/lo pair,
// Kd from its hi/lo tiles: three passes (lo·hi, hi·lo, hi·hi), stored as bf16 in the record.
template <bool kAddQd>
__device__ __forceinline__ void wide_product(const uint32_t (&xh)[4], const uint32_t (&xl)[4], const PrepSmem& sm,
                                             int warp, int lane, uint16_t* out) {
#pragma unroll
  for (int pp = 0; pp < 2; ++pp) {
    const int p = 2 * warp + pp;
    uint32_t kh[4], kl[4];
    frag::load_b_kmajor(kh, reinterpret_cast<const unsigned char*>(sm.kd_hi), p, lane);
    frag::load_b_kmajor(kl, reinterpret_cast<const unsigned char*>(sm.kd_lo), p, lane);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int nt = 2 * p + h;
      float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      if constexpr (kAddQd) {
#pragma unroll
        for (int r = 0; r < 4; ++r)
          c[r] = sm.qd[ptx::Frag::c_row(lane, r) * PrepSmem::kLd + nt * 8 + ptx::Frag::c_col(lane, r)];
      }
      const uint32_t bh[2] = {kh[2 * h], kh[2 * h + 1]}, bl[2] = {kl[2 * h], kl[2 * h + 1]};
      ptx::mma_m16n8k16_bf16_f32(c, xl, bh);
      ptx::mma_m16n8k16_bf16_f32(c, xh, bl);
      ptx::mma_m16n8k16_bf16_f32(c, xh, bh);
      frag::store_c_wide_bf16(out, c, nt, lane);
    }
  }
}

template <GateKind kGate>
__global__ void __launch_bounds__(128) chunk_prep_kernel(PrepParams p) {
  using namespace prep_detail;
  constexpr int kLd = PrepSmem::kLd;
  constexpr int kSld = PrepSmem::kSmallLd;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  PrepSmem& sm = *reinterpret_cast<PrepSmem*>(smem_raw);

  const int tid = threadIdx.x;
  const int hv = blockIdx.y;
  int32_t seq, chunk;
  if (!locate_chunk(p.seq, blockIdx.x, &seq, &chunk)) return;
  const SequenceSpan span = sequence_span(p.seq, seq);
  const int tok0 = span.t0 + chunk * 16;  // first token of the chunk within its batch row
  const int L = min(16, span.len - chunk * 16);
  const int hq = hv / p.group;
  uint8_t* rec = p.records + (static_cast<int64_t>(hv) * p.seq.num_vchunks + blockIdx.x) * ChunkRecord::kBytes;

  // ---- Phase 1: rows of q, k, g -------------------------------------------------------------
  const float exp_a_log = p.A_log != nullptr ? expf(p.A_log[hv]) : 1.0f;
  const int vec = tid & 15;  // 8 columns [8*vec, 8*vec + 8)
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = (tid >> 4) + 8 * half;
    const bool valid = r < L;
    const int64_t t = tok0 + r;
    float qx[8], kx[8], gx[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) qx[e] = kx[e] = gx[e] = 0.0f;
    if (valid) {
      load8_bf16(p.q + span.batch * p.q_st.b + t * p.q_st.t + hq * p.q_st.h + 8 * vec, qx);
      load8_bf16(p.k + span.batch * p.k_st.b + t * p.k_st.t + hq * p.k_st.h + 8 * vec, kx);
      const int64_t goff = span.batch * p.g_st.b + t * p.g_st.t + hv * p.g_st.h + 8 * vec;
      if (p.g_is_f32) load8_f32(static_cast<const float*>(p.g) + goff, gx);
      else load8_bf16(static_cast<const uint16_t*>(p.g) + goff, gx);
    }
    float qss = 0.0f, kss = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      qss = fmaf(qx[e], qx[e], qss);
      kss = fmaf(kx[e], kx[e], kss);
    }
#pragma unroll
    for (int off = 8; off >= 1; off >>= 1) {  // reduce over the 16 lanes holding this row
      qss += __shfl_xor_sync(0xffffffffu, qss, off);
      kss += __shfl_xor_sync(0xffffffffu, kss, off);
    }
    const float qinv = p.qk_l2norm ? rsqrtf(qss + 1e-6f) : 1.0f;
    const float kinv = p.qk_l2norm ? rsqrtf(kss + 1e-6f) : 1.0f;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int c = 8 * vec + e;
      float a = 0.0f;
      if (valid) {
        float x = gx[e];
        if constexpr (kGate != GateKind::kPreactivated) {
          if (p.dt_bias != nullptr) x += p.dt_bias[hv * 128 + c];
        }
        a = gate_log_decay<kGate>(x, exp_a_log, p.lower_bound) * kLog2e;
      }
      sm.qhat[r * kLd + c] = qx[e] * qinv;
      sm.khat[r * kLd + c] = kx[e] * kinv;
      sm.G[r * kLd + c] = a;
    }
  }
  if (tid < 16) {
    float b = 0.0f;
    if (tid < L) {
      const int64_t off = span.batch * p.beta_st.b + static_cast<int64_t>(tok0 + tid) * p.beta_st.t + hv * p.beta_st.h;
      b = beta_activation(load_scalar(p.beta, off, p.beta_is_f32), p.beta_sigmoid != 0, p.allow_neg_eigval != 0);
    }
    sm.b[tid] = b;
  }
  __syncthreads();

  // ---- Phase 2: thread = key column ---------------------------------------------------------
  {
    const int c = tid;
    float Gc = 0.0f;
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      Gc += sm.G[i * kLd + c];
      sm.G[i * kLd + c] = Gc;
    }
    const float G15 = Gc;
    reinterpret_cast<float*>(rec + ChunkRecord::kGammaOffset)[c] = exp2f(G15);
    uint16_t* kr = reinterpret_cast<uint16_t*>(rec + ChunkRecord::kKrOffset);
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const float G = sm.G[i * kLd + c];
      const float e = exp2f(G);
      const float kh = sm.khat[i * kLd + c];
      const float qd = p.scale * sm.qhat[i * kLd + c] * e;
      const uint32_t idx = ChunkRecord::wide_index(i, c);
      sm.qd[i * kLd + c] = qd;
      store_split(sm.kd_hi, sm.kd_lo, idx, kh * e);
      store_split(sm.qd_hi, sm.qd_lo, idx, qd);
      kr[idx] = float_to_bf16_bits(kh * exp2f(G15 - G));
      if constexpr (kGate == GateKind::kBounded) store_split(sm.ki_hi, sm.ki_lo, idx, kh * exp2f(-G));
    }
  }
  __syncthreads();

  // ---- Phase 3: A = Diag(b)·strict_lower(...), M = lower(...) --------------------------------
  const int warp = tid >> 5, lane = tid & 31;
  if constexpr (kGate == GateKind::kBounded) {
    // 2^{G_i - G_j} = 2^{G_i} · 2^{-G_j}: |G| <= 115.4 keeps both factors finite.
    float a[2][4] = {}, m[2][4] = {};
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
      const int ks = 2 * warp + kk;
      uint32_t kdh[4], kdl[4], qdh[4], qdl[4], kih[4], kil[4];
      frag::load_a_mmajor(kdh, reinterpret_cast<const unsigned char*>(sm.kd_hi), ks, lane);
      frag::load_a_mmajor(kdl, reinterpret_cast<const unsigned char*>(sm.kd_lo), ks, lane);
      frag::load_a_mmajor(qdh, reinterpret_cast<const unsigned char*>(sm.qd_hi), ks, lane);
      frag::load_a_mmajor(qdl, reinterpret_cast<const unsigned char*>(sm.qd_lo), ks, lane);
      frag::load_b_nmajor(kih, reinterpret_cast<const unsigned char*>(sm.ki_hi), ks, lane);
      frag::load_b_nmajor(kil, reinterpret_cast<const unsigned char*>(sm.ki_lo), ks, lane);
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        const uint32_t bh[2] = {kih[2 * nt], kih[2 * nt + 1]}, bl[2] = {kil[2 * nt], kil[2 * nt + 1]};
        ptx::mma_m16n8k16_bf16_f32(a[nt], kdl, bh);
        ptx::mma_m16n8k16_bf16_f32(a[nt], kdh, bl);
        ptx::mma_m16n8k16_bf16_f32(a[nt], kdh, bh);
        ptx::mma_m16n8k16_bf16_f32(m[nt], qdl, bh);
        ptx::mma_m16n8k16_bf16_f32(m[nt], qdh, bl);
        ptx::mma_m16n8k16_bf16_f32(m[nt], qdh, bh);
      }
    }
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int e = ptx::Frag::c_row(lane, r) * 16 + nt * 8 + ptx::Frag::c_col(lane, r);
        sm.partial[0][warp][e] = a[nt][r];
        sm.partial[1][warp][e] = m[nt][r];
      }
    __syncthreads();
    const int i = tid >> 3;
#pragma unroll
    for (int jj = 0; jj < 2; ++jj) {
      const int j = (tid & 7) * 2 + jj, e = i * 16 + j;
      const float sa = sm.partial[0][0][e] + sm.partial[0][1][e] + sm.partial[0][2][e] + sm.partial[0][3][e];
      const float smq = sm.partial[1][0][e] + sm.partial[1][1][e] + sm.partial[1][2][e] + sm.partial[1][3][e];
      sm.A[i * kSld + j] = j < i ? sm.b[i] * sa : 0.0f;
      sm.M[i * kSld + j] = j <= i ? smq : 0.0f;
    }
  } else {
    // Unbounded decay: form each exponent G_i - G_j <= 0 directly (never overflows).
    const int i = tid >> 3;
    const int j0 = (tid & 7) * 2;
    float a[2] = {0.0f, 0.0f}, m[2] = {0.0f, 0.0f};
    if (j0 <= i) {
      for (int c = 0; c < 128; ++c) {
        const float gi = sm.G[i * kLd + c];
        const float ki_ = sm.khat[i * kLd + c];
        const float qi = sm.qhat[i * kLd + c];
#pragma unroll
        for (int jj = 0; jj < 2; ++jj) {
          const int j = j0 + jj;
          const float w = sm.khat[j * kLd + c] * exp2f(gi - sm.G[j * kLd + c]);
          a[jj] = fmaf(ki_, w, a[jj]);
          m[jj] = fmaf(qi, w, m[jj]);
        }
      }
    }
#pragma unroll
    for (int jj = 0; jj < 2; ++jj) {
      const int j = j0 + jj;
      sm.A[i * kSld + j] = j < i ? sm.b[i] * a[jj] : 0.0f;
      sm.M[i * kSld + j] = j <= i ? p.scale * m[jj] : 0.0f;
    }
  }
  __syncthreads();

  // ---- Phase 4: T = (I + A)^-1, lane c of warp 0 owns column c -------------------------------
  if (tid < 16) {
    const int c = tid;
    float col[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      float acc = (i == c) ? 1.0f : 0.0f;
#pragma unroll
      for (int j = 0; j < i; ++j) acc = fmaf(-sm.A[i * kSld + j], col[j], acc);
      col[i] = acc;
    }
    const float bc = sm.b[c];
#pragma unroll
    for (int i = 0; i < 16; ++i) sm.Tb[i * kSld + c] = col[i] * bc;
  }
  __syncthreads();

  // ---- Phase 5: P = M·Tb (thread = two entries), Tb and P as hi/lo pairs; Wd = Tb·Kd ----------
  {
    const int i = tid >> 3;
    const int j0 = (tid & 7) * 2;
    uint16_t* tb_hi = reinterpret_cast<uint16_t*>(rec + ChunkRecord::kTbHiOffset);
    uint16_t* tb_lo = reinterpret_cast<uint16_t*>(rec + ChunkRecord::kTbLoOffset);
    uint16_t* p_hi = reinterpret_cast<uint16_t*>(rec + ChunkRecord::kPHiOffset);
    uint16_t* p_lo = reinterpret_cast<uint16_t*>(rec + ChunkRecord::kPLoOffset);
#pragma unroll
    for (int jj = 0; jj < 2; ++jj) {
      const int j = j0 + jj;
      float acc = 0.0f;
      for (int l = j; l <= i; ++l) acc = fmaf(sm.M[i * kSld + l], sm.Tb[l * kSld + j], acc);
      sm.P[i * kSld + j] = acc;
      const float tb = sm.Tb[i * kSld + j];
      const uint16_t tbh = float_to_bf16_bits(tb);
      const uint16_t ph = float_to_bf16_bits(acc);
      tb_hi[ChunkRecord::small_index(i, j)] = tbh;
      tb_lo[ChunkRecord::small_index(i, j)] = float_to_bf16_bits(tb - bf16_bits_to_float(tbh));
      p_hi[ChunkRecord::small_index(i, j)] = ph;
      p_lo[ChunkRecord::small_index(i, j)] = float_to_bf16_bits(acc - bf16_bits_to_float(ph));
    }
  }
  // Wd = Tb·Kd: warp w owns n-tiles [4w, 4w + 4) (key columns [32w, 32w + 32)).
  {
    uint32_t th[4], tl[4];
    frag::load_a_f32_split(sm.Tb, kSld, false, lane, th, tl);
    wide_product<false>(th, tl, sm, warp, lane, reinterpret_cast<uint16_t*>(rec + ChunkRecord::kWdOffset));
  }
  __syncthreads();

  // ---- Phase 6: Qp = Qd − P·Kd ---------------------------------------------------------------
  {
    uint32_t ph[4], pl[4];
    frag::load_a_f32_split(sm.P, kSld, true, lane, ph, pl);
    wide_product<true>(ph, pl, sm, warp, lane, reinterpret_cast<uint16_t*>(rec + ChunkRecord::kQpOffset));
  }
}

}  // namespace kda::sm90
