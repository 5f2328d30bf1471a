// Tensor maps for TMA: argument checks, then cuTensorMapEncodeTiled through the runtime's driver
// entry point (see tensor_map.h).
#include "src/launch/tensor_map.h"

#include <cuda_runtime.h>

#include "src/core/problem.h"
#include "src/core/status.h"

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
  constexpr uint64_t kMaxDim = uint64_t{1} << 32;
  constexpr uint64_t kMaxStrideBytes = uint64_t{1} << 40;
  if (map == nullptr) return make_error(KDA_ERROR_INVALID_ARGUMENT, "%s: map is NULL", kWhat);
  if (base == nullptr) return make_error(KDA_ERROR_INVALID_ARGUMENT, "%s: base is NULL", kWhat);
  if (reinterpret_cast<uintptr_t>(base) % 16 != 0)
    return make_error(KDA_ERROR_INVALID_ARGUMENT, "%s: base %p is not 16-byte aligned", kWhat, base);
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
  if (swizzle != tile::Swizzle::kNone && swizzle != tile::Swizzle::k32B && swizzle != tile::Swizzle::k64B &&
      swizzle != tile::Swizzle::k128B)
    return make_error(KDA_ERROR_INVALID_ARGUMENT, "%s: swizzle = %d is not a tile::Swizzle", kWhat,
                      static_cast<int>(swizzle));
  if (swizzle != tile::Swizzle::kNone && static_cast<int>(box_cols * 2) > tile::swizzle_bytes(swizzle))
    return make_error(KDA_ERROR_INVALID_ARGUMENT, "%s: box_cols = %u (%u bytes) exceeds the %d-byte swizzle span",
                      kWhat, box_cols, box_cols * 2, tile::swizzle_bytes(swizzle));

  const EncodeEntry& entry = encode_entry();
  if (entry.fn == nullptr)
    return make_error(KDA_ERROR_CUDA,
                      "%s: cudaGetDriverEntryPointByVersion(cuTensorMapEncodeTiled) failed: CUDA error %s, query "
                      "result %d",
                      kWhat, cudaGetErrorName(entry.err), static_cast<int>(entry.query));
  const cuuint64_t dims[2] = {cols, rows};
  const cuuint64_t strides[1] = {row_stride * 2};  // bytes, dimension 1 (dimension 0 is contiguous)
  const cuuint32_t box[2] = {box_cols, box_rows};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult r = entry.fn(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(base), dims, strides, box,
                              element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, tensor_map_swizzle(swizzle),
                              CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return make_error(KDA_ERROR_CUDA, "%s: cuTensorMapEncodeTiled rejected the map (CUresult %d)", kWhat,
                      static_cast<int>(r));
  return make_ok();
}

}  // namespace kda::sm90
