// Tensor maps for TMA: argument checks, then cuTensorMapEncodeTiled through the runtime's driver
// entry point (see tensor_map.h).
#include "src/launch/tensor_map.h"

#include <cuda_runtime.h>

#include "src/core/problem.h"
#include "src/core/status.h"
#include "src/launch/tensor_map_cache.h"

// Head-box maps from a per-thread cache (tensor_map_cache.h); 0 encodes every one (a build knob, for
// measuring it: docs/performance_notes.md).
#ifndef FLASH_KDA_TENSOR_MAP_CACHE
#define FLASH_KDA_TENSOR_MAP_CACHE 1
#endif

namespace kda::sm90 {
namespace {

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

struct EncodeEntry {
  EncodeTiled fn = nullptr;
  cudaError_t err = cudaSuccess;
  cudaDriverEntryPointQueryResult query = cudaDriverEntryPointSuccess;
};

// Fetched once per process (the driver does not change under a running process).
const EncodeEntry& encode_entry() {
  static const EncodeEntry entry = [] {
    EncodeEntry e;
    void* fn = nullptr;
    e.err = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &e.query);
    if (e.err == cudaSuccess && e.query == cudaDriverEntryPointSuccess) e.fn = reinterpret_cast<EncodeTiled>(fn);
    return e;
  }();
  return entry;
}

constexpr const char* kWhat = "make_tensor_map_2d_bf16";
constexpr uint64_t kMaxDim = uint64_t{1} << 32;
constexpr uint64_t kMaxStrideBytes = uint64_t{1} << 40;

// The checks both forms share: the map and the base pointer.
kda_status check_map_and_base(const CUtensorMap* map, const void* base, const char* what) {
  if (map == nullptr) return make_error(KDA_ERROR_INVALID_ARGUMENT, "%s: map is NULL", what);
  if (base == nullptr) return make_error(KDA_ERROR_INVALID_ARGUMENT, "%s: base is NULL", what);
  if (reinterpret_cast<uintptr_t>(base) % 16 != 0)
    return make_error(KDA_ERROR_INVALID_ARGUMENT, "%s: base %p is not 16-byte aligned", what, base);
  return make_ok();
}

// The swizzle: a tile::Swizzle whose span holds the box's inner extent (`box_name` = box_inner elements).
kda_status check_swizzle(tile::Swizzle swizzle, uint32_t box_inner, const char* box_name, const char* what) {
  if (swizzle != tile::Swizzle::kNone && swizzle != tile::Swizzle::k32B && swizzle != tile::Swizzle::k64B &&
      swizzle != tile::Swizzle::k128B)
    return make_error(KDA_ERROR_INVALID_ARGUMENT, "%s: swizzle = %d is not a tile::Swizzle", what,
                      static_cast<int>(swizzle));
  if (swizzle != tile::Swizzle::kNone && static_cast<int>(box_inner * 2) > tile::swizzle_bytes(swizzle))
    return make_error(KDA_ERROR_INVALID_ARGUMENT, "%s: %s = %u (%u bytes) exceeds the %d-byte swizzle span", what,
                      box_name, box_inner, box_inner * 2, tile::swizzle_bytes(swizzle));
  return make_ok();
}

// cuTensorMapEncodeTiled on checked arguments (strides in elements of dimensions 1..rank-1).
kda_status encode_bf16(CUtensorMap* map, const void* base, int rank, const uint64_t* dims, const uint64_t* strides,
                       const uint32_t* box, tile::Swizzle swizzle, const char* what) {
  const EncodeEntry& entry = encode_entry();
  if (entry.fn == nullptr)
    return make_error(KDA_ERROR_CUDA,
                      "%s: cudaGetDriverEntryPointByVersion(cuTensorMapEncodeTiled) failed: CUDA error %s, query "
                      "result %d",
                      what, cudaGetErrorName(entry.err), static_cast<int>(entry.query));
  cuuint64_t gdims[5], gstrides[4];
  cuuint32_t gbox[5], element_strides[5];
  for (int d = 0; d < rank; ++d) {
    gdims[d] = dims[d];
    gbox[d] = box[d];
    element_strides[d] = 1;
    if (d >= 1) gstrides[d - 1] = strides[d - 1] * 2;  // bytes
  }
  const CUresult r = entry.fn(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, static_cast<cuuint32_t>(rank),
                              const_cast<void*>(base), gdims, gstrides, gbox, element_strides,
                              CU_TENSOR_MAP_INTERLEAVE_NONE, tensor_map_swizzle(swizzle),
                              CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return make_error(KDA_ERROR_CUDA, "%s: cuTensorMapEncodeTiled rejected the map (CUresult %d)", what,
                      static_cast<int>(r));
  return make_ok();
}

}  // namespace

CUtensorMapSwizzle tensor_map_swizzle(tile::Swizzle swizzle) {
  switch (swizzle) {
    case tile::Swizzle::k32B: return CU_TENSOR_MAP_SWIZZLE_32B;
    case tile::Swizzle::k64B: return CU_TENSOR_MAP_SWIZZLE_64B;
    case tile::Swizzle::k128B: return CU_TENSOR_MAP_SWIZZLE_128B;
    default: return CU_TENSOR_MAP_SWIZZLE_NONE;
  }
}

kda_status make_tensor_map_2d_bf16(CUtensorMap* map, const void* base, uint64_t rows, uint64_t cols,
                                   uint64_t row_stride, uint32_t box_rows, uint32_t box_cols, tile::Swizzle swizzle) {
  KDA_RETURN_IF_ERROR(check_map_and_base(map, base, kWhat));
  if (rows < 1 || rows > kMaxDim)
    return make_error(KDA_ERROR_INVALID_ARGUMENT, "%s: rows = %llu, must be in [1, 2^32]", kWhat,
                      static_cast<unsigned long long>(rows));
  if (cols < 1 || cols > kMaxDim)
    return make_error(KDA_ERROR_INVALID_ARGUMENT, "%s: cols = %llu, must be in [1, 2^32]", kWhat,
                      static_cast<unsigned long long>(cols));
  if (row_stride < cols || row_stride >= kMaxStrideBytes / 2 || (row_stride * 2) % 16 != 0)
    return make_error(KDA_ERROR_INVALID_ARGUMENT,
                      "%s: row_stride = %llu elements, must be >= cols (%llu), below 2^39 and a multiple of 8 "
                      "(16 bytes)",
                      kWhat, static_cast<unsigned long long>(row_stride), static_cast<unsigned long long>(cols));
  if (box_rows < 1 || box_rows > 256)
    return make_error(KDA_ERROR_INVALID_ARGUMENT, "%s: box_rows = %u, must be in [1, 256]", kWhat, box_rows);
  if (box_cols < 1 || box_cols > 256 || (box_cols * 2) % 16 != 0)
    return make_error(KDA_ERROR_INVALID_ARGUMENT, "%s: box_cols = %u, must be in [1, 256] and a multiple of 8",
                      kWhat, box_cols);
  KDA_RETURN_IF_ERROR(check_swizzle(swizzle, box_cols, "box_cols", kWhat));

  const uint64_t dims[2] = {cols, rows};
  const uint64_t strides[1] = {row_stride};
  const uint32_t box[2] = {box_cols, box_rows};
  return encode_bf16(map, base, 2, dims, strides, box, swizzle, kWhat);
}

kda_status make_tensor_map_bf16(CUtensorMap* map, const void* base, int rank, const uint64_t* dims,
                                const uint64_t* strides, const uint32_t* box, tile::Swizzle swizzle) {
  constexpr const char* kName = "make_tensor_map_bf16";
  KDA_RETURN_IF_ERROR(check_map_and_base(map, base, kName));
  if (rank < 1 || rank > 5)
    return make_error(KDA_ERROR_INVALID_ARGUMENT, "%s: rank = %d, must be in [1, 5]", kName, rank);
  if (dims == nullptr || box == nullptr || (rank > 1 && strides == nullptr))
    return make_error(KDA_ERROR_INVALID_ARGUMENT, "%s: dims, box (and, for rank > 1, strides) must not be NULL",
                      kName);
  for (int d = 0; d < rank; ++d) {
    if (dims[d] < 1 || dims[d] > kMaxDim)
      return make_error(KDA_ERROR_INVALID_ARGUMENT, "%s: dims[%d] = %llu, must be in [1, 2^32]", kName, d,
                        static_cast<unsigned long long>(dims[d]));
    if (box[d] < 1 || box[d] > 256)
      return make_error(KDA_ERROR_INVALID_ARGUMENT, "%s: box[%d] = %u, must be in [1, 256]", kName, d, box[d]);
    if (d >= 1 && (strides[d - 1] < 8 || strides[d - 1] >= kMaxStrideBytes / 2 || strides[d - 1] % 8 != 0))
      return make_error(KDA_ERROR_INVALID_ARGUMENT,
                        "%s: strides[%d] = %llu elements, must be a multiple of 8 (16 bytes) in [8, 2^39)", kName,
                        d - 1, static_cast<unsigned long long>(strides[d - 1]));
  }
  if ((box[0] * 2) % 16 != 0)
    return make_error(KDA_ERROR_INVALID_ARGUMENT, "%s: box[0] = %u, must be a multiple of 8", kName, box[0]);
  KDA_RETURN_IF_ERROR(check_swizzle(swizzle, box[0], "box[0]", kName));
  return encode_bf16(map, base, rank, dims, strides, box, swizzle, kName);
}

bool head_box_strides(const uint64_t (&dims)[4], const int64_t (&given)[3], uint64_t (&strides)[3]) {
  uint64_t dense = 128;  // elements spanned by the dimensions inside
  for (int d = 0; d < 3; ++d) {
    if (dims[d + 1] > 1 && given[d] <= 0) return false;
    strides[d] = dims[d + 1] == 1 ? dense : static_cast<uint64_t>(given[d]);
    dense = strides[d] * dims[d + 1];
  }
  return true;
}

namespace {
// head_box_map_ok's checks, giving the resolved strides where they pass.
bool head_box_checked_strides(const void* base, const uint64_t (&dims)[4], const int64_t (&given)[3],
                              uint64_t (&strides)[3]) {
  if (base == nullptr || reinterpret_cast<uintptr_t>(base) % 16 != 0 || !head_box_strides(dims, given, strides))
    return false;
  for (uint64_t d : dims)
    if (d < 1 || d > kMaxDim) return false;
  for (uint64_t s : strides)
    if (s < 8 || s >= kMaxStrideBytes / 2 || s % 8 != 0) return false;
  return true;
}
}  // namespace

bool head_box_map_ok(const void* base, const uint64_t (&dims)[4], const int64_t (&given)[3]) {
  uint64_t strides[3];
  return head_box_checked_strides(base, dims, given, strides);
}

bool make_head_box_map(CUtensorMap* map, const void* base, const uint64_t (&dims)[4], const int64_t (&given)[3]) {
  uint64_t strides[3];
  if (!head_box_checked_strides(base, dims, given, strides)) return false;
#if FLASH_KDA_TENSOR_MAP_CACHE
  // The last maps this thread built (tensor_map_cache.h): a hit is the map the encoder would give.
  thread_local HeadBoxMapCache<> cache;
  HeadBoxKey key;
  key.base = reinterpret_cast<uintptr_t>(base);
  for (int d = 0; d < 4; ++d) key.dims[d] = dims[d];
  for (int d = 0; d < 3; ++d) key.strides[d] = strides[d];
  if (const CUtensorMap* hit = cache.find(key)) {
    *map = *hit;
    return true;
  }
#endif
  if (make_tensor_map_bf16(map, base, 4, dims, strides, kHeadBox, tile::Swizzle::k128B).code != KDA_OK) return false;
#if FLASH_KDA_TENSOR_MAP_CACHE
  cache.put(key, *map);
#endif
  return true;
}

}  // namespace kda::sm90
