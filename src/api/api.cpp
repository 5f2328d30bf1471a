// Entry points of the public C API: validate, check the device, dispatch to the SM90 launcher or to
// the CPU reference. The only host code that talks to the CUDA runtime outside src/launch.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>

#include "flash_kda/flash_kda.h"
#include "reference/reference.h"
#include "src/api/problem.h"
#include "src/launch/launch.h"

namespace {

using kda::make_error;
using kda::make_ok;

// Compute capability 9.0 on the current device, with a message that says what was found.
kda_status check_device(int* device_out) {
  int device = -1;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return make_error(KDA_ERROR_UNSUPPORTED_DEVICE, "device: requires a CUDA GPU of compute capability 9.0, found none (%s)",
                      cudaGetErrorString(err));
  }
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  if (major != 9 || minor != 0)
    return make_error(KDA_ERROR_UNSUPPORTED_DEVICE,
                      "device: requires compute capability 9.0 (Hopper, sm_90a), found %d.%d on device %d", major, minor,
                      device);
  *device_out = device;
  return make_ok();
}

// The pointer must be device (or managed) memory of `device`.
kda_status check_pointer(const char* name, const void* ptr, int device) {
  if (ptr == nullptr) return make_ok();
  cudaPointerAttributes attr;
  cudaError_t err = cudaPointerGetAttributes(&attr, ptr);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return make_error(KDA_ERROR_INVALID_ARGUMENT, "%s: expected CUDA device memory, got a pointer the runtime does not know (%s)",
                      name, cudaGetErrorString(err));
  }
  if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged)
    return make_error(KDA_ERROR_INVALID_ARGUMENT, "%s: expected CUDA device memory on device %d, got %s memory", name,
                      device, attr.type == cudaMemoryTypeHost ? "pinned host" : "unregistered host");
  if (attr.device != device)
    return make_error(KDA_ERROR_INVALID_ARGUMENT, "%s: expected memory on the current device %d, got memory of device %d",
                      name, device, attr.device);
  return make_ok();
}

kda_status check_pointers(const kda_fwd_params& p, int device) {
  const struct {
    const char* name;
    const kda_tensor* t;
  } all[] = {{"q", &p.q},
             {"k", &p.k},
             {"v", &p.v},
             {"g", &p.g},
             {"beta", &p.beta},
             {"out", &p.out},
             {"A_log", &p.A_log},
             {"dt_bias", &p.dt_bias},
             {"initial_state", &p.initial_state},
             {"final_state", &p.final_state},
             {"cu_seqlens", &p.cu_seqlens}};
  for (const auto& e : all) KDA_RETURN_IF_ERROR(check_pointer(e.name, e.t->data, device));
  return make_ok();
}

}  // namespace

extern "C" {

void kda_fwd_params_init(kda_fwd_params* params) {
  if (params == nullptr) return;
  std::memset(params, 0, sizeof(*params));
  params->struct_size = sizeof(kda_fwd_params);
  params->scale = 1.0 / std::sqrt(128.0);
  params->lower_bound = -5.0;
  params->gate = KDA_GATE_BOUNDED;
  params->beta_sigmoid = 1;
  params->qk_l2norm = 1;
}

kda_tensor kda_tensor_contiguous(void* data, kda_dtype dtype, int32_t ndim, const int64_t* shape) {
  kda_tensor t;
  std::memset(&t, 0, sizeof(t));
  t.data = data;
  t.dtype = dtype;
  t.ndim = ndim;
  int64_t stride = 1;
  for (int d = ndim - 1; d >= 0 && d < 4; --d) {
    t.shape[d] = shape[d];
    t.stride[d] = stride;
    stride *= shape[d];
  }
  return t;
}

kda_status kda_fwd_workspace_size(const kda_fwd_params* params, size_t* bytes) {
  if (bytes == nullptr) return make_error(KDA_ERROR_INVALID_ARGUMENT, "bytes: expected a non-null pointer, got NULL");
  kda::Problem problem;
  KDA_RETURN_IF_ERROR(kda::validate(params, kda::ValidateMode::kShapesOnly, &problem));
  *bytes = kda::sm90::fwd_workspace_bytes(problem, kda::sm90::fwd_plan(problem));
  return make_ok();
}

kda_status kda_fwd(const kda_fwd_params* params, void* workspace, size_t workspace_bytes, kda_stream_t stream) {
  kda::Problem problem;
  KDA_RETURN_IF_ERROR(kda::validate(params, kda::ValidateMode::kDevice, &problem));
  int device = -1;
  KDA_RETURN_IF_ERROR(check_device(&device));
  KDA_RETURN_IF_ERROR(check_pointers(*params, device));
  const kda::sm90::RecurrencePlan plan = kda::sm90::fwd_plan(problem);
  const size_t needed = kda::sm90::fwd_workspace_bytes(problem, plan);
  if (workspace_bytes < needed)
    return make_error(KDA_ERROR_WORKSPACE_TOO_SMALL, "workspace: expected at least %zu bytes (kda_fwd_workspace_size), got %zu",
                      needed, workspace_bytes);
  if (needed > 0) {
    if (workspace == nullptr)
      return make_error(KDA_ERROR_INVALID_ARGUMENT, "workspace: expected %zu bytes of device memory, got NULL", needed);
    if (reinterpret_cast<uintptr_t>(workspace) % 256 != 0)
      return make_error(KDA_ERROR_INVALID_ARGUMENT, "workspace: expected a 256-byte aligned pointer, got %p", workspace);
    KDA_RETURN_IF_ERROR(check_pointer("workspace", workspace, device));
  }
  if (params->check_cu_seqlens && problem.varlen)
    KDA_RETURN_IF_ERROR(kda::sm90::check_cu_seqlens(problem, workspace, stream));
  return kda::sm90::fwd(problem, plan, workspace, stream);
}

kda_status kda_fwd_cpu(const kda_fwd_params* params, kda_cpu_algorithm algorithm, int32_t num_threads) {
  kda::Problem problem;
  KDA_RETURN_IF_ERROR(kda::validate(params, kda::ValidateMode::kHost, &problem));
  switch (algorithm) {
    case KDA_CPU_RECURRENCE_F64:
      return kda::reference::fwd_recurrence_f64(problem, num_threads);
    case KDA_CPU_CHUNKED_F32:
      return kda::reference::fwd_chunked_f32(problem, kda::reference::ChunkedRounding{}, num_threads);
  }
  return make_error(KDA_ERROR_INVALID_ARGUMENT,
                    "algorithm: expected KDA_CPU_RECURRENCE_F64 (0) or KDA_CPU_CHUNKED_F32 (1), got %d",
                    static_cast<int>(algorithm));
}

const char* kda_status_code_name(int32_t code) {
  switch (code) {
    case KDA_OK: return "KDA_OK";
    case KDA_ERROR_INVALID_ARGUMENT: return "KDA_ERROR_INVALID_ARGUMENT";
    case KDA_ERROR_UNSUPPORTED: return "KDA_ERROR_UNSUPPORTED";
    case KDA_ERROR_UNSUPPORTED_DEVICE: return "KDA_ERROR_UNSUPPORTED_DEVICE";
    case KDA_ERROR_WORKSPACE_TOO_SMALL: return "KDA_ERROR_WORKSPACE_TOO_SMALL";
    case KDA_ERROR_CUDA: return "KDA_ERROR_CUDA";
  }
  return "KDA_ERROR_UNKNOWN";
}

#define KDA_STR2(x) #x
#define KDA_STR(x) KDA_STR2(x)

const char* kda_version_string(void) {
  return KDA_STR(FLASH_KDA_VERSION_MAJOR) "." KDA_STR(FLASH_KDA_VERSION_MINOR) "." KDA_STR(
      FLASH_KDA_VERSION_PATCH) "+" FLASH_KDA_GIT_COMMIT;
}

int32_t kda_build_cuda_version(void) { return CUDART_VERSION; }

const char* kda_build_architectures(void) { return FLASH_KDA_ARCHS; }

}  // extern "C"

// ---- Shared with the other entry points (src/api/device_checks.h; api_decode.cpp) ----
namespace kda {
kda_status check_sm90_device(int* device) { return check_device(device); }
kda_status check_device_pointer(const char* name, const void* ptr, int device) {
  return check_pointer(name, ptr, device);
}
}  // namespace kda
