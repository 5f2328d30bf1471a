// Host side of the warp preparation (benchmarks/prep_warp_kernel.cuh): its parameters for one dense
// sequence as the library's launcher fills them, and the tensor maps of q, k, g (and v) in the boxes
// its tensor copies bring. Not a part of the library: a measurement.
#pragma once

#include <cuda.h>

#include <cmath>
#include <cstdint>

#include "flash_kda/flash_kda.h"
#include "src/kernels/sm90/fast_div.h"
#include "src/kernels/sm90/kernel_params.h"
#include "src/launch/tensor_map.h"
#include "src/tile/swizzle.h"

namespace kda::bench_prep {

// Host: the preparation's parameters for one dense [1, T, H, 128] sequence (bf16 q, k, g, beta; H
// value heads = q / k heads; the bounded gate's lower bound -5, sigmoid beta, L2 norm, scale
// 1/sqrt(128)), as the library's launcher fills them for such a problem; records left null.
inline sm90::PrepParams dense_prep_params(const uint16_t* q, const uint16_t* k, const uint16_t* g, const uint16_t* beta,
                                          const float* A_log, const float* dt_bias, int H, int64_t T) {
  sm90::PrepParams pp{};
  const int64_t nvc = (T + 15) / 16;
  pp.seq.cu_seqlens = nullptr;
  pp.seq.N = 1;
  pp.seq.T = static_cast<int32_t>(T);
  pp.seq.T_total = static_cast<int32_t>(T);
  pp.seq.num_vchunks = nvc;
  pp.seq.per_magic = sm90::fast_div_magic(static_cast<uint32_t>(nvc));
  pp.seq.per_fast = 1;
  pp.q = q;
  pp.k = k;
  pp.g = g;
  pp.beta = beta;
  const sm90::Strides4 st4{T * H * 128, H * 128, 128}, stb{T * H, H, 1};
  pp.q_st = pp.k_st = pp.g_st = st4;
  pp.beta_st = stb;
  pp.A_log = A_log;
  pp.dt_bias = dt_bias;
  pp.H = pp.HV = H;
  pp.group = 1;
  pp.group_magic = sm90::fast_div_magic(1);
  pp.beta_sigmoid = 1;
  pp.qk_l2norm = 1;
  pp.scale = 1.0f / std::sqrt(128.0f);  // as the benchmarks pass it to kda_fwd (bitwise comparisons)
  pp.lower_bound = -5.0f;
  return pp;
}

// Host: the tensor map of a dense [1, T, H, 128] bf16 tensor (T tokens, H heads) in boxes of 16 tokens x
// 64 columns of one head with the 128B swizzle (the boxes prep_warp_issue copies; for v, the VtTile).
inline kda_status make_box_map(const uint16_t* src, int H, int64_t T, CUtensorMap* map) {
  const uint64_t dims[4] = {128, static_cast<uint64_t>(H), static_cast<uint64_t>(T), 1};
  const uint64_t strides[3] = {128, static_cast<uint64_t>(H) * 128, static_cast<uint64_t>(H) * 128 * static_cast<uint64_t>(T)};
  const uint32_t box[4] = {64, 1, 16, 1};
  return sm90::make_tensor_map_bf16(map, src, 4, dims, strides, box, tile::Swizzle::k128B);
}

// Host: q, k and g's maps (make_box_map).
inline kda_status make_qkg_maps(const uint16_t* q, const uint16_t* k, const uint16_t* g, int H, int64_t T,
                                CUtensorMap* qmap, CUtensorMap* kmap, CUtensorMap* gmap) {
  const uint16_t* srcs[3] = {q, k, g};
  CUtensorMap* maps[3] = {qmap, kmap, gmap};
  for (int m = 0; m < 3; ++m) {
    const kda_status s = make_box_map(srcs[m], H, T, maps[m]);
    if (s.code != KDA_OK) return s;
  }
  kda_status ok{};
  ok.code = KDA_OK;
  return ok;
}

}  // namespace kda::bench_prep
