// Tensor maps (CUtensorMap) for the tensor copy engine (src/ptx/tma.cuh), built on the host.
// Host only, no kernels. cuTensorMapEncodeTiled is a driver function: it is fetched through the
// runtime (cudaGetDriverEntryPointByVersion), so the library does not link libcuda.
#pragma once

#include <cuda.h>  // CUtensorMap and its enums (types only)

#include <cstdint>

#include "flash_kda/flash_kda.h"
#include "src/tile/swizzle.h"

namespace kda::sm90 {

// A tensor map over the row-major bf16 matrix at `base` (device memory, 16-byte aligned): `rows` x
// `cols` elements, consecutive rows `row_stride` elements apart (>= cols; row_stride * 2 a multiple
// of 16), read and written in boxes of box_rows x box_cols elements (each 1..256; box_cols * 2 a
// multiple of 16 and, when swizzled, at most the swizzle's bytes) laid out in shared memory in
// `swizzle` (src/tile/swizzle.h gives the byte offsets). Coordinates in the copies: {col, row}.
// Out-of-range elements of a box read as zero. Errors: KDA_ERROR_INVALID_ARGUMENT naming the
// argument; KDA_ERROR_CUDA when the driver function cannot be fetched or rejects the map.
kda_status make_tensor_map_2d_bf16(CUtensorMap* map, const void* base, uint64_t rows, uint64_t cols,
                                   uint64_t row_stride, uint32_t box_rows, uint32_t box_cols, tile::Swizzle swizzle);

// A tensor map over a bf16 tensor of `rank` (1..5) dimensions, innermost first: dims[0] contiguous,
// dimension d >= 1 strides[d - 1] elements apart (each a multiple of 8, i.e. 16 bytes, in [8, 2^39)),
// read in boxes of box[d] elements (each 1..256; box[0] * 2 a multiple of 16 and, when swizzled, at
// most the swizzle's bytes), each box laid out in shared memory as box[0]-element rows in `swizzle`.
// Coordinates in the copies: innermost first. Out-of-range elements of a box read as zero. Errors as
// make_tensor_map_2d_bf16's, naming the dimension.
kda_status make_tensor_map_bf16(CUtensorMap* map, const void* base, int rank, const uint64_t* dims,
                                const uint64_t* strides, const uint32_t* box, tile::Swizzle swizzle);

// The driver's swizzle enum for a tile swizzle.
CUtensorMapSwizzle tensor_map_swizzle(tile::Swizzle swizzle);

// A [B, T, heads, 128] bf16 tensor (q, k, g, v) in boxes of 64 columns x 1 head x 16 tokens x 1 batch
// row with the 128B swizzle: the warp preparation's boxes and the wgmma stage's value tiles.
inline constexpr uint32_t kHeadBox[4] = {64, 1, 16, 1};
// The element strides of dims {128, heads, T, B} (innermost first) from the caller's strides of the
// heads, tokens and batch rows: a dimension of size 1 gets a dense stride (the caller's may be anything
// there). False for a broadcast dimension (a stride <= 0 over more than one element): no tensor map
// describes it.
bool head_box_strides(const uint64_t (&dims)[4], const int64_t (&given)[3], uint64_t (&strides)[3]);
// Whether make_head_box_map's own checks accept the tensor at `base` (non-null and 16-byte aligned,
// head_box_strides, every dimension in [1, 2^32], every stride a multiple of 8 elements in [8, 2^39)):
// host arithmetic only, no driver call (the workspace's size rests on it, fwd_workspace.h).
bool head_box_map_ok(const void* base, const uint64_t (&dims)[4], const int64_t (&given)[3]);
// head_box_map_ok, then the map in kHeadBox boxes (128B swizzle); false where either refuses. Maps are
// kept in a per-thread cache (tensor_map_cache.h): a call with a recent call's address, sizes and
// strides gets the same bytes without the driver's encode.
bool make_head_box_map(CUtensorMap* map, const void* base, const uint64_t (&dims)[4], const int64_t (&given)[3]);

}  // namespace kda::sm90
