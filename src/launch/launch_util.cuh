// What the SM90 launchers (fwd_sm90.cu, prep_sm90.cu, cp_sm90.cu, decode_sm90.cu) share: the kernel launch with
// programmatic dependent launch, the CUDA error status, a tensor's strides. CUDA host code; included by the
// launchers only.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "src/core/problem.h"
#include "src/core/status.h"
#include "src/kernels/sm90/kernel_params.h"  // Strides4

namespace kda::sm90 {

// Programmatic dependent launch: every kernel after the preparation may start (prologue: barrier
// setup, the caller's initial state) while its predecessor drains (src/ptx/grid_dependency.cuh).
#ifndef FLASH_KDA_PDL
#define FLASH_KDA_PDL 1
#endif

// Launches `kernel` on `stream`; `dependent`: as a programmatic dependent of the previous kernel.
template <typename... Params, typename... Args>
cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, int threads, int smem, cudaStream_t stream,
                          bool dependent, const Args&... params) {
  static_assert(sizeof...(Params) == sizeof...(Args), "one argument per kernel parameter");
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(static_cast<unsigned>(threads));
  cfg.dynamicSmemBytes = static_cast<size_t>(smem);
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = (dependent && FLASH_KDA_PDL) ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, params...);
}

// A tensor's batch, token and head strides (elements; the last dimension is contiguous).
inline Strides4 strides_of(const kda_tensor& t) { return Strides4{t.stride[0], t.stride[1], t.stride[2]}; }

// Streaming multiprocessors of the current device (132 when the runtime cannot say).
inline int sm_count() {
  int device = 0, count = 132;
  if (cudaGetDevice(&device) == cudaSuccess) cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device);
  return count;
}

inline kda_status cuda_error(const char* what, cudaError_t err) {
  return make_error(KDA_ERROR_CUDA, "%s: CUDA error %s (%s)", what, cudaGetErrorName(err), cudaGetErrorString(err));
}

// Raises the dynamic shared-memory limit of kKernel (a per-device attribute) once per device: one
// atomic bit per device and kernel, no lock (threads racing on the first call may all set it; the
// call is idempotent). Devices past 63 set it on every call. `forget` clears the bit (the context
// was reset, see launch_with_smem).
template <auto kKernel>
cudaError_t set_smem_once(int bytes, bool forget = false) {
  static std::atomic<uint64_t> done{0};
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  const uint64_t bit = device >= 0 && device < 64 ? uint64_t{1} << device : 0;
  if (forget) done.fetch_and(~bit, std::memory_order_relaxed);
  if (bit != 0 && (done.load(std::memory_order_acquire) & bit) != 0) return cudaSuccess;
  err = cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (err == cudaSuccess) done.fetch_or(bit, std::memory_order_release);
  return err;
}

// Sets kKernel's shared-memory limit to `limit` bytes (once per device; limit >= smem) and launches
// it with `smem` bytes. A failed launch sets the attribute again and retries once: after a device
// reset the attribute is gone while the bit is not (a failed launch enqueues nothing). `*attribute_failed`
// (optional, may be nullptr) tells whether the error returned comes from the attribute or from the launch.
template <auto kKernel, typename... Params>
cudaError_t launch_with_smem_limit(dim3 grid, int threads, int smem, int limit, cudaStream_t stream, bool dependent,
                                   bool* attribute_failed, const Params&... params) {
  if (attribute_failed != nullptr) *attribute_failed = false;
  cudaError_t err = set_smem_once<kKernel>(limit);
  if (err == cudaSuccess) err = launch_kernel(kKernel, grid, threads, smem, stream, dependent, params...);
  if (err != cudaSuccess) {
    cudaGetLastError();
    err = set_smem_once<kKernel>(limit, /*forget=*/true);
    if (err != cudaSuccess) {
      if (attribute_failed != nullptr) *attribute_failed = true;
      return err;
    }
    err = launch_kernel(kKernel, grid, threads, smem, stream, dependent, params...);
  }
  return err;
}

// launch_with_smem_limit with the limit at the launch's own size (kernels whose shared memory does
// not vary between calls), errors as a status naming `name`.
template <auto kKernel, typename... Params>
kda_status launch_with_smem(const char* name, dim3 grid, int threads, int smem, cudaStream_t stream, bool dependent,
                            const Params&... params) {
  bool attribute_failed = false;
  const cudaError_t err =
      launch_with_smem_limit<kKernel>(grid, threads, smem, smem, stream, dependent, &attribute_failed, params...);
  if (err != cudaSuccess)
    return cuda_error((std::string(name) + (attribute_failed ? ": cudaFuncSetAttribute" : " launch")).c_str(), err);
  return make_ok();
}

}  // namespace kda::sm90
