// The warp preparation's parts (warp_prep.cuh): fragment moves a lane needs (movmatrix.trans,
// stmatrix.x4, bf16 pairs to floats), a chunk's coordinates, the tensor copies of its q, k and g into a
// warp's boxes (prep_warp_issue), where a record goes (RecordTo), and the L2 norms' rare path
// (rescale_box_rows).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "src/kernels/sm90/gate_math.cuh"
#include "src/kernels/sm90/kernel_params.h"
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

}  // namespace kda::sm90::warp_prep
