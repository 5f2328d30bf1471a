// The warp preparation's parts (warp_prep.cuh): fragment moves a lane needs (movmatrix.trans,
// stmatrix.x4, bf16 pairs to floats), a chunk's coordinates, the tensor copies of its q, k and g into a
// warp's boxes (prep_warp_issue), where a record goes (RecordTo), and the L2 norms' rare path
// (rescale_box_rows), and a chunk's decay bound for the single pass's warm-up (chunk_decay_bound).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "src/kernels/sm90/gate_math.cuh"
#include "src/kernels/sm90/kernel_params.h"
#include "src/kernels/sm90/record_fragments.cuh"  // frag::load_a_f32
#include "src/kernels/sm90/warp_prep_layout.cuh"
#include "src/ptx/barrier.cuh"
#include "src/ptx/bulk_copy.cuh"
#include "src/ptx/ldmatrix.cuh"
#include "src/ptx/mma.cuh"
#include "src/ptx/tma.cuh"

namespace kda::sm90::warp_prep {

using sm90::ChunkRecord;

__device__ __forceinline__ void unpack2(uint32_t w, float& lo, float& hi) {
  lo = __uint_as_float(w << 16);
  hi = __uint_as_float(w & 0xffff0000u);
}

// A chunk: its batch row, first token and valid tokens (16 but in a sequence's partial last chunk).
struct ChunkCoords {
  int seq, tok0, len;
};
// Virtual chunk vc of a fixed-length batch: chunks per sequence ceil(T / 16), the last one partial when
// T is not a multiple of 16; kPartial = false: T a multiple of 16 (the whole-chunk code, no masks).
template <bool kPartial = false>
__device__ __forceinline__ ChunkCoords chunk_coords(const sm90::PrepParams& p, int64_t vc) {
  const int per = kPartial ? (p.seq.T + 15) / 16 : p.seq.T / 16;
  const int tok0 = static_cast<int>(vc % per) * 16;
  return ChunkCoords{static_cast<int>(vc / per), tok0, kPartial ? min(16, p.seq.T - tok0) : 16};
}

// The tensor copies of chunk cc's q, k (query head hq) and g (value head hv) into `in`, completing on `bar` (initialised by the
// caller, one arrival). The boxes' previous contents were read through the generic proxy: that is
// ordered before the copies here.
template <bool kPartial = false>
__device__ __forceinline__ void prep_warp_issue(unsigned char (&in)[6][2048], uint64_t* bar, const sm90::PrepParams& p,
                                                const CUtensorMap* qmap, const CUtensorMap* kmap,
                                                const CUtensorMap* gmap, ChunkCoords cc, int hv, int hq) {
  const int seq = cc.seq, tok0 = cc.tok0;
  ptx::fence_proxy_async_shared();
  __syncwarp();
  if ((threadIdx.x & 31) == 0) {
    ptx::mbar_arrive_expect_tx(bar, 6 * 2048);
#pragma unroll
    for (int pn = 0; pn < 2; ++pn) {
      ptx::tma_load_4d(in[kIn + pn], qmap, 64 * pn, hq, tok0, seq, bar);
      ptx::tma_load_4d(in[kInK + pn], kmap, 64 * pn, hq, tok0, seq, bar);
      ptx::tma_load_4d(in[kInG + pn], gmap, 64 * pn, hv, tok0, seq, bar);
    }
  }
}

// Where prep_warp_chunk writes its record.
enum class RecordTo {
  kGlobal,  // `rec` in global memory ([Wd; Qp] by bulk copies from the boxes, which the call waits to be read)
  kStage,   // `rec` a ring stage in shared memory (wgmma_stage.h: the record is its first bytes), taken by
            // the caller before the chunk
  kLate,    // a ring stage that `acquire()` returns once T and P exist (it waits for the stage to be free):
            // until then Kr and Γ go to `park` (WarpSmemLate), moved into the stage at the end
};

struct NoAcquire {
  __device__ __forceinline__ uint8_t* operator()() const { return nullptr; }
};

// prep_warp_chunk's check once the boxes have landed (kMayDrop): true skips the chunk's preparation.
struct NoSkip {
  __device__ __forceinline__ bool operator()() const { return false; }
};

// The rare path of the L2 norms (prep_fragments.cuh's rescale_row_norms for the boxes): lane l < 16
// sums the squares of q's token row l, lane 16 + l k's row l; a row whose sum is not finite (it
// overflowed float32, or holds a NaN / Inf) is scaled in its boxes by kL2RescaleFactor (a power of two:
// exact for bf16 unless an element underflows, negligible against a norm of at least 2^63). Returns
// the rows scaled (bit r: q's row r, bit 16 + r: k's row r), the same in every lane; the caller sums
// the norms again and drops those rows' eps. Called by the whole warp, only for such inputs.
__device__ __forceinline__ uint32_t rescale_box_rows(unsigned char* boxes, int lane) {
  const int row = lane & 15;
  unsigned char* const box = boxes + (lane < 16 ? kIn : kInK) * 2048;  // two panels of 2048 bytes
  float s = 0.0f;
  // Both loops unrolled by four, not fully: fully unrolled, this rare path was where the single pass's
  // partial and pieces instances spilled a word (their only spill; cuobjdump 2026-12-03); rolled
  // (#pragma unroll 1) it spilled nothing either, but that build ran the packed batches 3% slower
  // (the instances' code layout, as for version 50's nc); by four, as fast as before in three
  // alternated rounds (docs/performance_notes.md, version 51).
#pragma unroll 4
  for (int i = 0; i < 16; ++i) {
    const uint4 x = *reinterpret_cast<const uint4*>(box + (i >> 3) * 2048 + row * 128 + (((i & 7) ^ (row & 7)) << 4));
    const uint32_t w[4] = {x.x, x.y, x.z, x.w};
    for (int j = 0; j < 4; ++j) {
      float lo, hi;
      unpack2(w[j], lo, hi);
      s = fmaf(lo, lo, s);
      s = fmaf(hi, hi, s);
    }
  }
  const bool big = !(s <= 0x1.fffffep127f);
  if (big) {
#pragma unroll 4
    for (int i = 0; i < 16; ++i) {
      uint4* px = reinterpret_cast<uint4*>(box + (i >> 3) * 2048 + row * 128 + (((i & 7) ^ (row & 7)) << 4));
      uint4 x = *px;
      uint32_t* w = &x.x;
      for (int j = 0; j < 4; ++j) {
        float lo, hi;
        unpack2(w[j], lo, hi);
        w[j] = ptx::pack_bf16x2(lo * kL2RescaleFactor, hi * kL2RescaleFactor);
      }
      *px = x;
    }
  }
  const uint32_t rows = __ballot_sync(0xffffffffu, big);
  __syncwarp();  // the rows scaled in the boxes before anyone reads them
  return rows;
}

// The bounded warm-up's decay bound of one chunk (docs/design.md §3.2, the quantity chunk_prep_kernel
// records per chunk): log2 of (max_k Γ_k + Σ_i ‖Wd_i‖·‖Kr_i‖), rounded up by 2^-10 relative, or +inf
// where it bounds nothing (a decay above 1 or NaN, a b outside [0, 2]). For the single pass's candidate
// warm-up chunks (single_pass_kernel.cuh), from what the warp preparation leaves in its shared memory
// when it takes its stage (prep_warp_chunk's acquire): Kd in the q boxes (`kd_box`, the layout the
// stage's Wd product reads), Tb = T·Diag(b) in `tb` (row stride kTld; its diagonal is b, T being unit
// lower triangular), Kr and Γ in the park. Wd = Tb·Kd is computed here once more, by key steps (in
// float32, before its bf16 rounding, as chunk_prep_kernel sums it); Kr's norms from the park's bf16
// (what the recurrence multiplies). The whole warp calls it; the result is in every lane.
__device__ __forceinline__ float chunk_decay_bound(const unsigned char* kd_box, const float* tb,
                                                   const unsigned char* park_kr, const float* park_gamma) {
  const int lane = threadIdx.x & 31;
  uint32_t th[4];
  frag::load_a_f32(tb, WarpSmem::kTld, false, lane, th);
  // ‖Wd_i‖²: rows grp (ws0) and grp + 8 (ws1) of the m16n8 products, summed over the quad.
  float ws0 = 0.0f, ws1 = 0.0f;
#pragma unroll 1
  for (int ks = 0; ks < 8; ++ks) {
    uint32_t kdb[4];
    ptx::ldmatrix_x4_trans(kdb, kd_box + (ks >> 2) * 2048u + box_row_offset(lane, ks));
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t kb[2] = {kdb[2 * h], kdb[2 * h + 1]};
      float w[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      ptx::mma_m16n8k16_bf16_f32(w, th, kb);
      ws0 = fmaf(w[0], w[0], fmaf(w[1], w[1], ws0));
      ws1 = fmaf(w[2], w[2], fmaf(w[3], w[3], ws1));
    }
  }
  ws0 += __shfl_xor_sync(0xffffffffu, ws0, 1);
  ws0 += __shfl_xor_sync(0xffffffffu, ws0, 2);
  ws1 += __shfl_xor_sync(0xffffffffu, ws1, 1);
  ws1 += __shfl_xor_sync(0xffffffffu, ws1, 2);
  // ‖Kr_i‖²: lane 2i + h sums row i's 64 keys of panel h (a row's 128 bytes in its panel, swizzled by
  // 16-byte pieces: the order of the sum is all that changes).
  float ks2 = 0.0f;
  {
    const unsigned char* row = park_kr + (lane & 1) * 2048 + (lane >> 1) * 128;
#pragma unroll 2
    for (int i = 0; i < 8; ++i) {
      const uint4 x = *reinterpret_cast<const uint4*>(row + 16 * i);
      const uint32_t wv[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float lo, hi;
        unpack2(wv[j], lo, hi);
        ks2 = fmaf(lo, lo, fmaf(hi, hi, ks2));
      }
    }
    ks2 += __shfl_xor_sync(0xffffffffu, ks2, 1);
  }
  // Σ_i ‖Wd_i‖·‖Kr_i‖ over lanes i < 16.
  const float wa = __shfl_sync(0xffffffffu, ws0, 4 * (lane & 7)), wb = __shfl_sync(0xffffffffu, ws1, 4 * (lane & 7));
  const float kr = __shfl_sync(0xffffffffu, ks2, (2 * lane) & 31);
  const float x = (lane & 8 ? wb : wa) * kr;
  float mix = lane < 16 && x > 0.0f ? x * rsqrtf(x) : 0.0f;
  // max_k Γ_k, and whether anything is unbounded (Γ > 1 or NaN; b outside [0, 2]).
  const float4 g4 = reinterpret_cast<const float4*>(park_gamma)[lane];
  float gmax = fmaxf(fmaxf(g4.x, g4.y), fmaxf(g4.z, g4.w));
  const float b = lane < 16 ? tb[lane * WarpSmem::kTld + lane] : 0.0f;
  bool bad = !(g4.x <= 1.0f && g4.y <= 1.0f && g4.z <= 1.0f && g4.w <= 1.0f) || !(b >= 0.0f && b <= 2.0f);
#pragma unroll
  for (int off = 16; off >= 1; off >>= 1) {
    mix += __shfl_xor_sync(0xffffffffu, mix, off);
    gmax = fmaxf(gmax, __shfl_xor_sync(0xffffffffu, gmax, off));
  }
  bad = __any_sync(0xffffffffu, bad);
  const float y = (gmax + mix) * (1.0f + 0x1p-10f);
  return !bad && y <= 3.0e38f ? __log2f(y) : __int_as_float(0x7f800000);  // (NaN fails both tests)
}

}  // namespace kda::sm90::warp_prep
