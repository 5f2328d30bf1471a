// ldmatrix wrappers: four 8x8 b16 matrices from shared memory into mma fragments.
//
// Each lane supplies one row address: lanes 8m..8m+7 give rows 0..7 of matrix m (m = 0..3), each
// row 16 contiguous bytes (8 bf16), 16-byte aligned. Result register m of lane l holds, without
// .trans, elements [l/4][2*(l%4) .. +1] of matrix m; with .trans, elements [2*(l%4) .. +1][l/4]
// (the matrix transposed). Hence, for a row-major tile X[r][c] in shared memory:
//   - B fragment (k x n) from X stored n-major (X[n][k]):   no .trans, matrices (n0-7,k0-7), (n0-7,k8-15)
//   - B fragment from X stored k-major (X[k][n]):           .trans,   matrices (k0-7,n0-7), (k8-15,n0-7)
//   - A fragment (m x k) from X stored m-major (X[m][k]):    no .trans, matrices (m0-7,k0-7), (m8-15,k0-7),
//                                                            (m0-7,k8-15), (m8-15,k8-15)
//   - A fragment from X stored k-major (X[k][m]):            .trans,   matrices (k0-7,m0-7), (k0-7,m8-15),
//                                                            (k8-15,m0-7), (k8-15,m8-15)
// tests/gpu/test_ptx.cu checks these four uses against a CPU matmul.
#pragma once

#include <cstdint>

namespace kda::ptx {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Four floats from shared memory (16-byte aligned) by a volatile load: ptxas keeps volatile loads
// in program order, so a sequence of them is not hoisted ahead of the work between them (what a
// kernel at the edge of its register budget may need: unit_lower_inverse.h). Same value as a plain load
// (tests/gpu/test_ptx.cu).
__device__ __forceinline__ float4 ld_shared_f32x4_ordered(const float* p) {
  float4 v;
  asm volatile("ld.volatile.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(smem_addr(p)));
  return v;
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(row_addr)));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(row_addr)));
}

}  // namespace kda::ptx

namespace kda::ptx {

// stmatrix.x4 (SM90): the inverse of ldmatrix_x4 (register m of lane l to row l/4, columns 2*(l%4),
// +1 of the matrix m whose rows lanes 8m..8m+7 address). Used by the single pass's preparation
// (warp_prep.cuh) and covered by its GPU tests.
__device__ __forceinline__ void stmatrix_x4(void* row_addr, const uint32_t (&r)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};\n" ::"r"(smem_addr(row_addr)),
               "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
#else
  __trap();  // stmatrix needs SM90: fail loudly elsewhere
#endif
}

// stmatrix.x4.trans (SM90): the inverse of ldmatrix_x4_trans. Register m of lane l holds elements
// [l/4][2*(l%4) .. +1] of matrix m; they are written to row 2*(l%4) (+1), column l/4 of the 8x8
// matrix whose rows lanes 8m..8m+7 address (16 contiguous bytes each).
__device__ __forceinline__ void stmatrix_x4_trans(void* row_addr, const uint32_t (&r)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1,%2,%3,%4};\n" ::"r"(smem_addr(row_addr)),
               "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
#else
  __trap();  // stmatrix needs SM90: fail loudly elsewhere
#endif
}

}  // namespace kda::ptx
