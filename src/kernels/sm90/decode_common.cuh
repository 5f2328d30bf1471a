// What the decode kernels share (decode_kernel.cuh: state in registers; decode_bulk_kernel.cuh:
// state slice copied to shared memory by the copy engine): the shared-memory vectors of a block of
// tokens, the column layout of a row group, the token preparation (gate math of the forward pass),
// the per-token row step and the state row loads and stores.
//
// Row groups: kLanes (8 or 16) consecutive lanes own one state row (128 fp32 over K), each lane
// 128/kLanes columns in chunks of 4. fp32 rows: chunk m of lane li covers columns
// 4·(li + kLanes·m) .. +3, one 16-byte access each; bf16 rows: 16-byte accesses of 8 columns,
// 8·(li + kLanes·j) .. +7 (chunks 2j and 2j + 1). A row group reads 8·kLanes or 16·kLanes contiguous
// bytes per instruction (coalesced). A lane sums its columns in two halves, exactly the columns a
// 16-lane row group gives lanes li and li + 8, so 8- and 16-lane groups add in the same order: all
// kernel configurations give bitwise-identical results.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

#include "src/kernels/sm90/decode_params.h"
#include "src/kernels/sm90/gate_math.cuh"
#include "src/kernels/sm90/sequence_map.cuh"

namespace kda::sm90 {

// Tokens prepared per barrier: at most kDecodeMaxTokBlock (longer sequences loop over blocks); the
// launcher sizes the vectors for min(tokens per sequence, kDecodeMaxTokBlock).
inline constexpr int kDecodeMaxTokBlock = 16;

// Bytes of the prepared vectors of `cap` tokens in dynamic shared memory (16-byte multiple).
__host__ __device__ constexpr int decode_vector_bytes(int cap) { return cap * (4 * 128 * 4 + 16); }

// The prepared vectors of a block of tokens (views into dynamic shared memory): token slot w holds
// d = e^a, k̂ and scale·q̂ (128 floats each, chunk-permuted: decode_chunk), the values v (by row),
// b, and with [N, T_idx] indices the slot receiving the state after the token (-1: none).
struct DecodeVectors {
  float* d;
  float* k;
  float* q;
  float* v;
  float* b;
  int64_t* wslot;
  __device__ static DecodeVectors carve(unsigned char* base, int cap) {
    DecodeVectors x;
    x.d = reinterpret_cast<float*>(base);
    x.k = x.d + cap * 128;
    x.q = x.k + cap * 128;
    x.v = x.q + cap * 128;
    x.wslot = reinterpret_cast<int64_t*>(x.v + cap * 128);
    x.b = reinterpret_cast<float*>(x.wslot + cap);
    return x;
  }
};

// Column layout of a row group of kLanes lanes over a state row of fp32 (kF32) or bf16 values.
template <int kLanes, bool kF32>
struct DecodeCols {
  static_assert(kLanes == 8 || kLanes == 16, "8 or 16 lanes per row");
  static constexpr int kElems = 128 / kLanes;                 // values per lane
  static constexpr int kChunks = kElems / 4;                  // 4-column chunks per lane
  static constexpr int kVecs = kF32 ? kChunks : kChunks / 2;  // 16-byte accesses per lane
  // First column of chunk m of lane li.
  __host__ __device__ static constexpr int col(int li, int m) {
    return kF32 ? 4 * (li + kLanes * m) : 8 * (li + kLanes * (m >> 1)) + 4 * (m & 1);
  }
  // First column of 16-byte access i of lane li.
  __host__ __device__ static constexpr int vec_col(int li, int i) { return col(li, kF32 ? i : 2 * i); }
  // Reduction half of chunk m: with 8 lanes, half h holds the columns of lane li + 8h of a 16-lane group.
  __host__ __device__ static constexpr int half(int m) { return kLanes == 16 ? 0 : (kF32 ? (m & 1) : (m >> 1)); }
};

// Physical float4 slot of the 4-column chunk c (0..31) of a shared vector: bf16 row groups read
// chunks 2 apart per lane, so even and odd chunks go to separate halves (conflict-free reads).
template <bool kF32>
__host__ __device__ constexpr int decode_chunk(int c) {
  return kF32 ? c : (c & 1) * 16 + (c >> 1);
}

namespace decode_detail {

__device__ __forceinline__ float bf16_lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

__device__ __forceinline__ uint16_t to_bf16_bits(float x) {
  const __nv_bfloat16 h = __float2bfloat16_rn(x);
  return *reinterpret_cast<const uint16_t*>(&h);
}

__device__ __forceinline__ int64_t load_index(const void* p, bool i64, int64_t off) {
  return i64 ? static_cast<const int64_t*>(p)[off] : static_cast<int64_t>(static_cast<const int32_t*>(p)[off]);
}

// Slot of token column t of sequence n (n itself without indices).
__device__ __forceinline__ int64_t slot_at(const DecodeParams& p, int n, int t) {
  if (p.indices == nullptr) return n;
  return load_index(p.indices, p.indices_i64 != 0, n * p.idx_stride_n + t * p.idx_stride_t);
}

// The column holding the start slot: num_accepted_tokens[n] − 1, clamped to [0, T_idx − 1]
// (0 accepted tokens reads column 0, never column −1).
__device__ __forceinline__ int read_column(const DecodeParams& p, int n) {
  if (p.accepted == nullptr) return 0;
  const int64_t a = load_index(p.accepted, p.accepted_i64 != 0, n * p.accepted_stride);
  return static_cast<int>((a < 1 ? 1 : (a > p.idx_cols ? p.idx_cols : a)) - 1);
}

// The start slot of sequence n as the index tensors read before the previous grid has completed
// (a programmatic dependent launch): a guess for an L2 prefetch, never used to read or write the
// pool. Loads bypass L1 (ld.global.cg), so the reads after griddepcontrol.wait find no stale line.
__device__ __forceinline__ int64_t guess_start_slot(const DecodeParams& p, int n) {
  if (p.indices == nullptr) return n;
  auto load = [](const void* q, bool i64, int64_t off) -> int64_t {
    return i64 ? static_cast<int64_t>(__ldcg(static_cast<const long long*>(q) + off))
               : static_cast<int64_t>(__ldcg(static_cast<const int*>(q) + off));
  };
  int t = 0;
  if (p.accepted != nullptr) {
    const int64_t a = load(p.accepted, p.accepted_i64 != 0, n * p.accepted_stride);
    t = static_cast<int>((a < 1 ? 1 : (a > p.idx_cols ? p.idx_cols : a)) - 1);
  }
  return load(p.indices, p.indices_i64 != 0, n * p.idx_stride_n + t * p.idx_stride_t);
}

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int off = 16; off >= 1; off >>= 1) x += __shfl_xor_sync(0xffffffffu, x, off);
  return x;
}

// A lane's raw inputs of one token: key columns [4·lane, 4·lane + 4) of q, k, g, dt_bias and values
// [4·lane, +4) of v, and beta. Loaded separately from the math (finish_token) so that a kernel can
// issue these loads before it waits for the slot index.
struct TokenRaw {
  uint2 q, k, v;
  float g[4], dtb[4];
  float beta, a_log;
};

template <GateKind kGate>
__device__ __forceinline__ TokenRaw load_token(const DecodeParams& p, const SequenceSpan& span, int t, int hv,
                                               int lane) {
  TokenRaw x;
  const int hq = hv / p.group;
  const int64_t tok = span.t0 + t;
  const int c0 = 4 * lane;
  x.q = *reinterpret_cast<const uint2*>(p.q + span.batch * p.q_st.b + tok * p.q_st.t + hq * p.q_st.h + c0);
  x.k = *reinterpret_cast<const uint2*>(p.k + span.batch * p.k_st.b + tok * p.k_st.t + hq * p.k_st.h + c0);
  x.v = *reinterpret_cast<const uint2*>(p.v + span.batch * p.v_st.b + tok * p.v_st.t + hv * p.v_st.h + c0);
  const int64_t goff = span.batch * p.g_st.b + tok * p.g_st.t + hv * p.g_st.h + c0;
  if (p.g_is_f32) {
    const float4 g = *reinterpret_cast<const float4*>(static_cast<const float*>(p.g) + goff);
    x.g[0] = g.x;
    x.g[1] = g.y;
    x.g[2] = g.z;
    x.g[3] = g.w;
  } else {
    const uint2 g = *reinterpret_cast<const uint2*>(static_cast<const uint16_t*>(p.g) + goff);
    x.g[0] = bf16_lo(g.x);
    x.g[1] = bf16_hi(g.x);
    x.g[2] = bf16_lo(g.y);
    x.g[3] = bf16_hi(g.y);
  }
  x.dtb[0] = x.dtb[1] = x.dtb[2] = x.dtb[3] = 0.0f;
  if (kGate != GateKind::kPreactivated && p.dt_bias != nullptr) {
    const float4 d = *reinterpret_cast<const float4*>(p.dt_bias + hv * 128 + c0);
    x.dtb[0] = d.x;
    x.dtb[1] = d.y;
    x.dtb[2] = d.z;
    x.dtb[3] = d.w;
  }
  const int64_t boff = span.batch * p.beta_st.b + tok * p.beta_st.t + hv * p.beta_st.h;
  x.beta =
      p.beta_is_f32 ? static_cast<const float*>(p.beta)[boff] : bf16_lo(static_cast<const uint16_t*>(p.beta)[boff]);
  x.a_log = p.A_log != nullptr ? p.A_log[hv] : 0.0f;  // exp() in finish_token
  return x;
}

// Warp-wide: the prepared vectors of token t (raw inputs `x`) into token slot w, with the fp32 math
// of chunk_prep_kernel (gate_math.cuh; log2-domain decay).
template <GateKind kGate, bool kF32>
__device__ __forceinline__ void finish_token(const DecodeParams& p, const DecodeVectors& sm, int w, const TokenRaw& x,
                                             int t, int n, int lane) {
  const float exp_a_log = p.A_log != nullptr ? expf(x.a_log) : 1.0f;
  const float q[4] = {bf16_lo(x.q.x), bf16_hi(x.q.x), bf16_lo(x.q.y), bf16_hi(x.q.y)};
  const float k[4] = {bf16_lo(x.k.x), bf16_hi(x.k.x), bf16_lo(x.k.y), bf16_hi(x.k.y)};
  float qss = 0.0f, kss = 0.0f;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    qss = fmaf(q[e], q[e], qss);
    kss = fmaf(k[e], k[e], kss);
  }
  qss = warp_sum(qss);
  kss = warp_sum(kss);
  // q carries the output scale (as in the forward pass).
  const float qinv = (p.qk_l2norm ? rsqrtf(qss + 1e-6f) : 1.0f) * p.scale;
  const float kinv = p.qk_l2norm ? rsqrtf(kss + 1e-6f) : 1.0f;
  const BoundedGateConstants gk = bounded_gate_constants(exp_a_log, p.lower_bound);
  float d[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    float a;  // log2-decay
    if constexpr (kGate == GateKind::kBounded)
      a = bounded_log2_decay(x.g[e], x.dtb[e], gk);
    else
      a = gate_log_decay<kGate>(x.g[e] + x.dtb[e], exp_a_log, p.lower_bound) * kLog2e;
    d[e] = exp2_fast(a);  // underflows to 0 for very negative a (never Inf or NaN)
  }
  const int slot4 = 4 * decode_chunk<kF32>(lane);
  *reinterpret_cast<float4*>(sm.d + w * 128 + slot4) = make_float4(d[0], d[1], d[2], d[3]);
  *reinterpret_cast<float4*>(sm.k + w * 128 + slot4) = make_float4(k[0] * kinv, k[1] * kinv, k[2] * kinv, k[3] * kinv);
  *reinterpret_cast<float4*>(sm.q + w * 128 + slot4) = make_float4(q[0] * qinv, q[1] * qinv, q[2] * qinv, q[3] * qinv);
  *reinterpret_cast<float4*>(sm.v + w * 128 + 4 * lane) =
      make_float4(bf16_lo(x.v.x), bf16_hi(x.v.x), bf16_lo(x.v.y), bf16_hi(x.v.y));
  if (lane == 0) {
    sm.b[w] = beta_activation(x.beta, p.beta_sigmoid != 0, p.allow_neg_eigval != 0);
    int64_t ws = -1;
    if (p.indices_2d && t < p.idx_cols) {
      ws = slot_at(p, n, t);
      if (ws < 0 || ws >= p.slots) ws = -1;
    }
    sm.wslot[w] = ws;
  }
}

template <GateKind kGate, bool kF32>
__device__ __forceinline__ void prepare_token(const DecodeParams& p, const DecodeVectors& sm, int w,
                                              const SequenceSpan& span, int t, int n, int hv, int lane) {
  finish_token<kGate, kF32>(p, sm, w, load_token<kGate>(p, span, t, hv, lane), t, n, lane);
}

// Prepares the tokens [tb, tb + block_len) of the sequence into token slots 0.. (warp w: tokens
// tb + w, tb + w + warps, ...). With use_first, the warp's first token is finished from `first`
// (its raw inputs, loaded early by the caller). Call from every thread; a barrier must follow
// before the vectors are read.
template <GateKind kGate, bool kF32>
__device__ __forceinline__ void prepare_block(const DecodeParams& p, const DecodeVectors& sm, const SequenceSpan& span,
                                              int tb, int block_len, int n, int hv, int warp, int warps, int lane,
                                              const TokenRaw& first, bool use_first) {
  int w = warp;
  if (use_first && w < block_len) {
    finish_token<kGate, kF32>(p, sm, w, first, tb + w, n, lane);
    w += warps;
  }
  for (; w < block_len; w += warps) prepare_token<kGate, kF32>(p, sm, w, span, tb + w, n, hv, lane);
}

// Sum over the row group of a lane's two half sums, in the order of a 16-lane row group.
template <int kLanes>
__device__ __forceinline__ float group_sum(const float (&h)[2]) {
  float x;
  if constexpr (kLanes == 8) {
    x = h[0] + h[1];
  } else {
    x = h[0];
    x += __shfl_xor_sync(0xffffffffu, x, 8);
  }
  x += __shfl_xor_sync(0xffffffffu, x, 4);
  x += __shfl_xor_sync(0xffffffffu, x, 2);
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x;
}

__device__ __forceinline__ float4 lds4(const float* vec, int chunk_slot) {
  return *reinterpret_cast<const float4*>(vec + 4 * chunk_slot);
}

// Token w of the prepared block on the kRows rows `rows` (indices within the head) a thread holds
// as lane li of their row groups: s ← s ⊙ d; u = b (v − s·k̂); s ← s + u k̂; o = s·(scale q̂).
// Every lane of the warp must call it (shuffle reductions).
template <int kLanes, int kRows, bool kF32>
__device__ __forceinline__ void token_step(float (&s)[kRows][128 / kLanes], const DecodeVectors& sm, int w, int li,
                                           const int (&rows)[kRows], float (&o)[kRows]) {
  using Cols = DecodeCols<kLanes, kF32>;
  const float* dv = sm.d + w * 128;
  const float* kv = sm.k + w * 128;
  const float* qv = sm.q + w * 128;
  float sk[kRows][2];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    sk[r][0] = sk[r][1] = 0.0f;
#pragma unroll
    for (int m = 0; m < Cols::kChunks; ++m) {
      const int cs = decode_chunk<kF32>(Cols::col(li, m) / 4);
      const float4 d4 = lds4(dv, cs), k4 = lds4(kv, cs);
      const float dd[4] = {d4.x, d4.y, d4.z, d4.w}, kk[4] = {k4.x, k4.y, k4.z, k4.w};
      const int h = Cols::half(m);
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        s[r][4 * m + c] = s[r][4 * m + c] * dd[c];
        sk[r][h] = fmaf(s[r][4 * m + c], kk[c], sk[r][h]);
      }
    }
  }
  const float b = sm.b[w];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const float u = b * (sm.v[w * 128 + rows[r]] - group_sum<kLanes>(sk[r]));
    float sq[2] = {0.0f, 0.0f};
#pragma unroll
    for (int m = 0; m < Cols::kChunks; ++m) {
      const int cs = decode_chunk<kF32>(Cols::col(li, m) / 4);
      const float4 k4 = lds4(kv, cs), q4 = lds4(qv, cs);
      const float kk[4] = {k4.x, k4.y, k4.z, k4.w}, qq[4] = {q4.x, q4.y, q4.z, q4.w};
      const int h = Cols::half(m);
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        s[r][4 * m + c] = fmaf(u, kk[c], s[r][4 * m + c]);
        sq[h] = fmaf(s[r][4 * m + c], qq[c], sq[h]);
      }
    }
    o[r] = group_sum<kLanes>(sq);
  }
}

// A lane's part of a state row at `row` (element pointer of the row's first column, global or
// shared): raw 16-byte words, then floats.
template <int kLanes, bool kF32, typename Elem>
__device__ __forceinline__ void load_row_raw(const Elem* row, int li, uint4 (&raw)[DecodeCols<kLanes, kF32>::kVecs]) {
  using Cols = DecodeCols<kLanes, kF32>;
#pragma unroll
  for (int i = 0; i < Cols::kVecs; ++i) raw[i] = *reinterpret_cast<const uint4*>(row + Cols::vec_col(li, i));
}

template <int kLanes, bool kF32>
__device__ __forceinline__ void raw_to_float(const uint4 (&raw)[DecodeCols<kLanes, kF32>::kVecs],
                                             float (&s)[128 / kLanes]) {
  using Cols = DecodeCols<kLanes, kF32>;
#pragma unroll
  for (int i = 0; i < Cols::kVecs; ++i) {
    const uint32_t w[4] = {raw[i].x, raw[i].y, raw[i].z, raw[i].w};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if constexpr (kF32) {
        s[4 * i + e] = __uint_as_float(w[e]);
      } else {
        s[8 * i + 2 * e] = bf16_lo(w[e]);
        s[8 * i + 2 * e + 1] = bf16_hi(w[e]);
      }
    }
  }
}

// Stores a lane's part of a state row (fp32 as is, bf16 rounded to nearest even).
template <int kLanes, bool kF32, typename Elem>
__device__ __forceinline__ void store_row(Elem* row, int li, const float (&s)[128 / kLanes]) {
  using Cols = DecodeCols<kLanes, kF32>;
#pragma unroll
  for (int i = 0; i < Cols::kVecs; ++i) {
    uint4 u;
    if constexpr (kF32) {
      u = make_uint4(__float_as_uint(s[4 * i]), __float_as_uint(s[4 * i + 1]), __float_as_uint(s[4 * i + 2]),
                     __float_as_uint(s[4 * i + 3]));
    } else {
      const float* x = &s[8 * i];
      u = make_uint4(pack_bf16x2(x[0], x[1]), pack_bf16x2(x[2], x[3]), pack_bf16x2(x[4], x[5]),
                     pack_bf16x2(x[6], x[7]));
    }
    *reinterpret_cast<uint4*>(row + Cols::vec_col(li, i)) = u;
  }
}

// Element pointer of row `row` of value head hv in pool slot `slot`.
template <bool kF32>
__device__ __forceinline__ auto pool_row(const DecodeParams& p, int64_t slot, int hv, int row) {
  using Elem = typename std::conditional<kF32, float, uint16_t>::type;
  return static_cast<Elem*>(p.pool) + slot * p.pool_stride + static_cast<int64_t>(hv) * (128 * 128) + row * 128;
}

// Output rows [row0, row0 + rows) of every token of a padding sequence: zeros.
__device__ __forceinline__ void zero_outputs(const DecodeParams& p, int64_t out_base, int len, int row0, int rows,
                                             int tid, int threads) {
  for (int i = tid; i < len * rows; i += threads) {
    const int t = i / rows;
    p.out[out_base + t * p.out_st.t + row0 + i % rows] = 0;
  }
}

}  // namespace decode_detail
}  // namespace kda::sm90
