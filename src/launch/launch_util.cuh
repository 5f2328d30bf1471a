// What the SM90 launchers (fwd_sm90.cu, cp_sm90.cu) share: the kernel launch with programmatic
// dependent launch, the CUDA error status. CUDA host code; included by the launchers only.
#pragma once

#include <cuda_runtime.h>

#include "src/api/problem.h"

namespace kda::sm90 {

// Programmatic dependent launch: every kernel after the preparation may start (prologue: barrier
// setup, the caller's initial state) while its predecessor drains (src/ptx/grid_dependency.cuh).
#ifndef FLASH_KDA_PDL
#define FLASH_KDA_PDL 1
#endif

// Launches `kernel` on `stream`; `dependent`: as a programmatic dependent of the previous kernel.
template <typename Params>
cudaError_t launch_kernel(void (*kernel)(Params), dim3 grid, int threads, int smem, cudaStream_t stream,
                          bool dependent, const Params& params) {
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
  return cudaLaunchKernelEx(&cfg, kernel, params);
}

// Streaming multiprocessors of the current device (132 when the runtime cannot say).
inline int sm_count() {
  int device = 0, count = 132;
  if (cudaGetDevice(&device) == cudaSuccess) cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device);
  return count;
}

inline kda_status cuda_error(const char* what, cudaError_t err) {
  return make_error(KDA_ERROR_CUDA, "%s: CUDA error %s (%s)", what, cudaGetErrorName(err), cudaGetErrorString(err));
}

}  // namespace kda::sm90
