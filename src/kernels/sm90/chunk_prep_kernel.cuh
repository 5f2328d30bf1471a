// chunk_prep_kernel: everything of a chunk that does not depend on the state (docs/design.md §2.1).
//
// Grid:   (num_vchunks, HV); one CTA per (virtual chunk, value head). CTAs of unowned virtual
//         chunks exit at once.
// Block:  128 threads (4 warps), no warp roles: phases separated by __syncthreads.
// Phases: 1. load q, k, g rows (thread = 8 columns of one row, two rows), L2-normalise q and k
//            (16-lane shuffle reduction), gate -> per-row log2-decay; beta
//         2. (thread = key column) cumulative sum G, Γ; Kd, Qd, Kr (and Ki for the bounded gate)
//         3. A (strictly lower) and M (lower) as 16x16 float32 dot products over K
//         4. T = (I + A)^-1 by forward substitution (warp 0, lane = column), Tb = T·Diag(b)
//         5. P = M·Tb; Wd = Tb·Kd; record Tb and P as bf16 hi/lo pairs
//         6. Qp = Qd − P·Kd
//         Records go straight to global memory (layout: chunk_record.cuh).
// Shared memory (float32, rows padded to 132): K̂ (or Ki), Q̂, G, Kd, Qd: 5 x 16 x 132;
//         A, M, Tb, P: 4 x 16 x 17; b: 16.
// All arithmetic is float32 on CUDA cores: this kernel is bound by memory traffic, not arithmetic.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "src/kernels/sm90/chunk_record.cuh"
#include "src/kernels/sm90/gate_math.cuh"
#include "src/kernels/sm90/kernel_params.h"
#include "src/kernels/sm90/sequence_map.cuh"
#include "src/ptx/mma.cuh"

namespace kda::sm90 {

struct PrepSmem {
  static constexpr int kLd = 132;  // padded row length of the [16][128] float tiles
  static constexpr int kSmallLd = 17;
  float khat[16 * kLd];  // k̂, then Ki = k̂ ⊙ 2^-G (bounded gate)
  float qhat[16 * kLd];
  float G[16 * kLd];     // per-row log2-decay, then its inclusive cumulative sum
  float kd[16 * kLd];
  float qd[16 * kLd];
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

__device__ __forceinline__ float load_scalar(const void* p, int64_t idx, bool is_f32) {
  return is_f32 ? static_cast<const float*>(p)[idx]
                : bf16_bits_to_float(static_cast<const uint16_t*>(p)[idx]);
}

}  // namespace prep_detail

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
      sm.kd[i * kLd + c] = kh * e;
      sm.qd[i * kLd + c] = p.scale * sm.qhat[i * kLd + c] * e;
      kr[ChunkRecord::wide_index(i, c)] = float_to_bf16_bits(kh * exp2f(G15 - G));
      if constexpr (kGate == GateKind::kBounded) sm.khat[i * kLd + c] = kh * exp2f(-G);  // Ki
    }
  }
  __syncthreads();

  // ---- Phase 3: A = Diag(b)·strict_lower(...), M = lower(...) --------------------------------
  {
    const int i = tid >> 3;
    const int j0 = (tid & 7) * 2;
    float a[2] = {0.0f, 0.0f}, m[2] = {0.0f, 0.0f};
    if (j0 <= i) {
      if constexpr (kGate == GateKind::kBounded) {
        // 2^{G_i - G_j} = 2^{G_i} · 2^{-G_j}: |G| <= 115.4 keeps both factors finite.
        for (int c = 0; c < 128; c += 4) {
          const float4 kdi = *reinterpret_cast<const float4*>(&sm.kd[i * kLd + c]);
          const float4 qdi = *reinterpret_cast<const float4*>(&sm.qd[i * kLd + c]);
#pragma unroll
          for (int jj = 0; jj < 2; ++jj) {
            const float4 ki = *reinterpret_cast<const float4*>(&sm.khat[(j0 + jj) * kLd + c]);
            a[jj] += kdi.x * ki.x + kdi.y * ki.y + kdi.z * ki.z + kdi.w * ki.w;
            m[jj] += qdi.x * ki.x + qdi.y * ki.y + qdi.z * ki.z + qdi.w * ki.w;
          }
        }
      } else {
        // Unbounded decay: form each exponent G_i - G_j <= 0 directly (never overflows).
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
        m[0] *= p.scale;
        m[1] *= p.scale;
      }
    }
#pragma unroll
    for (int jj = 0; jj < 2; ++jj) {
      const int j = j0 + jj;
      sm.A[i * kSld + j] = j < i ? sm.b[i] * a[jj] : 0.0f;
      sm.M[i * kSld + j] = j <= i ? m[jj] : 0.0f;
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
  {
    const int c = tid;
    uint16_t* wd = reinterpret_cast<uint16_t*>(rec + ChunkRecord::kWdOffset);
    float kdc[16];
#pragma unroll
    for (int j = 0; j < 16; ++j) kdc[j] = sm.kd[j * kLd + c];
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      float acc = 0.0f;
#pragma unroll
      for (int j = 0; j <= i; ++j) acc = fmaf(sm.Tb[i * kSld + j], kdc[j], acc);
      wd[ChunkRecord::wide_index(i, c)] = float_to_bf16_bits(acc);
    }
  }
  __syncthreads();

  // ---- Phase 6: Qp = Qd − P·Kd ---------------------------------------------------------------
  {
    const int c = tid;
    uint16_t* qp = reinterpret_cast<uint16_t*>(rec + ChunkRecord::kQpOffset);
    float kdc[16];
#pragma unroll
    for (int j = 0; j < 16; ++j) kdc[j] = sm.kd[j * kLd + c];
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      float acc = sm.qd[i * kLd + c];
#pragma unroll
      for (int j = 0; j <= i; ++j) acc = fmaf(-sm.P[i * kSld + j], kdc[j], acc);
      qp[ChunkRecord::wide_index(i, c)] = float_to_bf16_bits(acc);
    }
  }
}

}  // namespace kda::sm90
