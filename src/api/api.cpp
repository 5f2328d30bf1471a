// Entry points of the public C API: validate, check the device, dispatch to the SM90 launcher or to
// the CPU reference. The only host code that talks to the CUDA runtime outside src/launch.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>

#include "flash_kda/flash_kda.h"
#include "flash_kda_commit.h"  // FLASH_KDA_GIT_COMMIT, generated at build time (cmake/flash_kda_commit.cmake)
#include "reference/reference.h"
#include "src/core/checked_math.h"
#include "src/api/device_checks.h"
#include "src/api/memory_rules.h"
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

// The driver's pointer query, resolved once through the runtime (nullptr when the driver does not
// provide it). cudaPointerGetAttributes fills every attribute: 0.08 us per pointer on the H200 host
// against 0.04 us for the driver's query of three (flash_kda_bench_host, 2026-12-01), ~0.5 us of each
// call's 13 checks, before the first launch; the check's five (query_pointer) cost 0.01-0.025 us more
// per pointer (H100 host, 2026-12-06: docs/performance_notes.md, "The short-buffer check's host cost").
using PointerQuery = CUresult (*)(unsigned, CUpointer_attribute*, void**, CUdeviceptr);
PointerQuery pointer_query() {
  static const PointerQuery fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuPointerGetAttributes", &f, 12000, cudaEnableDefault, &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      f = nullptr;
    }
    return reinterpret_cast<PointerQuery>(f);
  }();
  return fn;
}

// What the driver says of a pointer in one query: its memory type, device and managed flag, and the
// address range it lies in (the allocation; for virtual-memory mappings the whole reserved range,
// cuda.h's CU_POINTER_ATTRIBUTE_RANGE_START_ADDR). range_size 0: not known.
struct PointerFacts {
  unsigned int type = 0;
  int ordinal = -1;
  unsigned int managed = 0;
  CUdeviceptr range_start = 0;
  size_t range_size = 0;
};

bool query_pointer(const void* ptr, PointerFacts* f) {
  const PointerQuery query = pointer_query();
  if (query == nullptr) return false;
  CUpointer_attribute which[5] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                  CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                  CU_POINTER_ATTRIBUTE_RANGE_SIZE};
  void* data[5] = {&f->type, &f->ordinal, &f->managed, &f->range_start, &f->range_size};
  if (query(5, which, data, reinterpret_cast<CUdeviceptr>(ptr)) == CUDA_SUCCESS) return true;
  *f = PointerFacts{};
  return false;
}

// The pointer must be device (or managed) memory of `device`, and the `bytes` from it (the tensor's first
// to one past its last element; the workspace's size) must lie inside the allocation it points into: a
// buffer too small for its declared shape would otherwise be read or written past its end. The common
// case is one driver query (query_pointer); anything else (other memory, another device, a query that
// fails) goes through cudaPointerGetAttributes, which gives the answer and the message.
kda_status check_pointer(const char* name, const void* ptr, size_t bytes, int device) {
  if (ptr == nullptr) return make_ok();
  PointerFacts f;
  const bool known = query_pointer(ptr, &f);
  if (known && (f.type == CU_MEMORYTYPE_DEVICE || f.managed != 0) && f.ordinal == device) {
    const uint64_t past = kda::bytes_past_range(reinterpret_cast<uintptr_t>(ptr), bytes,
                                                static_cast<uintptr_t>(f.range_start), f.range_size);
    if (past == 0) return make_ok();
    return make_error(KDA_ERROR_INVALID_ARGUMENT,
                      "%s: expected its %zu bytes from %p to lie inside the allocation it points into, got an "
                      "allocation of %zu bytes from %p (%llu bytes short)",
                      name, bytes, ptr, f.range_size, reinterpret_cast<void*>(static_cast<uintptr_t>(f.range_start)),
                      static_cast<unsigned long long>(past));
  }
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
  // Reached when the driver's query is missing, failed or disagreed with the runtime's, and the runtime's
  // says device memory of this device: its range not checked.
  return make_ok();
}

// Contents of a host cu_seqlens (kda_fwd_cpu). Always: non-decreasing entries, since a decreasing
// entry makes two sequences cover the same tokens (their rows of out would be written twice, in
// an order that depends on the thread schedule). `full` (check_cu_seqlens): also cu_seqlens[0] = 0
// and every entry <= B*T, with the first bad entry reported as the GPU check reports it.
kda_status check_cu_seqlens_host(const kda::Problem& pr, bool full) {
  const kda_tensor& cu = pr.params->cu_seqlens;
  const bool i32 = kda::raw_enum(cu.dtype) == KDA_DTYPE_I32;
  auto entry = [&](int64_t i) -> long long {
    return i32 ? static_cast<const int32_t*>(cu.data)[i] : static_cast<const int64_t*>(cu.data)[i];
  };
  for (int64_t i = 0; i <= pr.N; ++i) {
    const long long x = entry(i);
    if (full && i == 0 && x != 0)
      return make_error(KDA_ERROR_INVALID_ARGUMENT, "cu_seqlens: expected cu_seqlens[0] = 0, got %lld", x);
    if (i > 0 && x < entry(i - 1))
      return make_error(KDA_ERROR_INVALID_ARGUMENT,
                        "cu_seqlens: expected non-decreasing entries (a decreasing entry makes sequences overlap), "
                        "got cu_seqlens[%lld] = %lld < cu_seqlens[%lld] = %lld",
                        static_cast<long long>(i), x, static_cast<long long>(i - 1), entry(i - 1));
    if (full && x > pr.T_total)
      return make_error(KDA_ERROR_INVALID_ARGUMENT,
                        "cu_seqlens: expected entries <= the packed length B*T = %lld, got cu_seqlens[%lld] = %lld",
                        static_cast<long long>(pr.T_total), static_cast<long long>(i), x);
  }
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
  std::memcpy(&t.dtype, &dtype, sizeof(dtype));  // any integer a C caller passed, copied as bytes
  // A rank outside [0, 4], or a NULL shape with a positive rank, gives rank -1: every entry point
  // rejects it, naming the tensor ("expected a 4-D tensor ..., got -1-D").
  if (ndim < 0 || ndim > 4 || (shape == nullptr && ndim > 0)) {
    t.ndim = -1;
    return t;
  }
  t.ndim = ndim;
  // Row-major strides; a product past int64 saturates to INT64_MAX, which validation reports as
  // "sizes too large to index" (no signed overflow).
  int64_t stride = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    t.shape[d] = shape[d];
    t.stride[d] = stride;
    if (stride != INT64_MAX && !kda::checked_mul(stride, shape[d] < 0 ? int64_t{0} : shape[d], &stride))
      stride = INT64_MAX;
  }
  return t;
}

namespace {

// Workspace bytes for a validated problem, or an error when they do not fit in size_t (the
// launcher's sizes saturate at SIZE_MAX).
kda_status workspace_bytes(const kda::Problem& problem, const kda::sm90::RecurrencePlan& plan, size_t* bytes) {
  *bytes = kda::sm90::fwd_workspace_bytes(problem, plan);
  if (*bytes == SIZE_MAX)
    return make_error(KDA_ERROR_INVALID_ARGUMENT,
                      "workspace: sizes too large: N = %lld sequences x HV = %lld value heads of B*T = %lld tokens "
                      "(context_split %d) need more workspace bytes than size_t holds",
                      static_cast<long long>(problem.N), static_cast<long long>(problem.HV),
                      static_cast<long long>(problem.T_total), problem.params->context_split);
  return make_ok();
}

}  // namespace

kda_status kda_fwd_workspace_size(const kda_fwd_params* params, size_t* bytes) {
  if (bytes == nullptr) return make_error(KDA_ERROR_INVALID_ARGUMENT, "bytes: expected a non-null pointer, got NULL");
  kda::Problem problem;
  KDA_RETURN_IF_ERROR(kda::validate(params, kda::ValidateMode::kShapesOnly, &problem));
  size_t needed = 0;
  KDA_RETURN_IF_ERROR(workspace_bytes(problem, kda::sm90::fwd_plan(problem), &needed));
  *bytes = needed;
  return make_ok();
}

kda_status kda_fwd(const kda_fwd_params* params, void* workspace, size_t workspace_bytes_given, kda_stream_t stream) {
  // Everything the host can check comes first (arguments, memory rules, workspace), then the device.
  kda::Problem problem;
  KDA_RETURN_IF_ERROR(kda::validate(params, kda::ValidateMode::kDevice, &problem));
  const kda::sm90::RecurrencePlan plan = kda::sm90::fwd_plan(problem);
  size_t needed = 0;
  KDA_RETURN_IF_ERROR(workspace_bytes(problem, plan, &needed));
  if (workspace_bytes_given < needed)
    return make_error(KDA_ERROR_WORKSPACE_TOO_SMALL, "workspace: expected at least %zu bytes (kda_fwd_workspace_size), got %zu",
                      needed, workspace_bytes_given);
  if (needed > 0) {
    if (workspace == nullptr)
      return make_error(KDA_ERROR_INVALID_ARGUMENT, "workspace: expected %zu bytes of device memory, got NULL", needed);
    if (reinterpret_cast<uintptr_t>(workspace) % 256 != 0)
      return make_error(KDA_ERROR_INVALID_ARGUMENT, "workspace: expected a 256-byte aligned pointer, got %p", workspace);
    KDA_RETURN_IF_ERROR(kda::check_workspace_overlaps(*params, workspace, needed));
  }
  int device = -1;
  KDA_RETURN_IF_ERROR(check_device(&device));
  if (!params->trusted_pointers) {
    const kda::FwdTensors tensors(*params);
    KDA_RETURN_IF_ERROR(kda::check_device_tensors(tensors.t, std::size(tensors.t), device));
    if (needed > 0) KDA_RETURN_IF_ERROR(check_pointer("workspace", workspace, needed, device));
  }
  if (params->check_cu_seqlens && problem.varlen)
    KDA_RETURN_IF_ERROR(kda::sm90::check_cu_seqlens(problem, plan, false, workspace, stream));
  return kda::sm90::fwd(problem, plan, workspace, stream);
}

kda_status kda_fwd_cpu(const kda_fwd_params* params, kda_cpu_algorithm algorithm, int32_t num_threads) {
  kda::Problem problem;
  KDA_RETURN_IF_ERROR(kda::validate(params, kda::ValidateMode::kHost, &problem));
  const int32_t algo = kda::raw_enum(algorithm);  // any integer may arrive here
  if (algo != KDA_CPU_RECURRENCE_F64 && algo != KDA_CPU_CHUNKED_F32)
    return make_error(KDA_ERROR_INVALID_ARGUMENT,
                      "algorithm: expected KDA_CPU_RECURRENCE_F64 (0) or KDA_CPU_CHUNKED_F32 (1), got %d", algo);
  // Host memory: cu_seqlens is read here at no cost. Decreasing entries (sequences that overlap)
  // are always rejected; the whole opt-in check (starts at 0, ends within B*T) when requested.
  if (problem.varlen) KDA_RETURN_IF_ERROR(check_cu_seqlens_host(problem, params->check_cu_seqlens != 0));
  if (algo == KDA_CPU_RECURRENCE_F64) return kda::reference::fwd_recurrence_f64(problem, num_threads);
  return kda::reference::fwd_chunked_f32(problem, kda::reference::ChunkedRounding{}, num_threads);
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

// ---- Shared with the other entry points (src/api/device_checks.h; api_decode.cpp, api_cp.cpp) ----
namespace kda {
kda_status check_sm90_device(int* device) { return check_device(device); }
kda_status check_device_pointer(const char* name, const void* ptr, size_t bytes, int device) {
  return check_pointer(name, ptr, bytes, device);
}
kda_status check_device_tensors(const NamedTensor* tensors, size_t count, int device) {
  for (size_t i = 0; i < count; ++i)
    KDA_RETURN_IF_ERROR(check_pointer(tensors[i].name, tensors[i].t->data, tensor_span_bytes(*tensors[i].t), device));
  return make_ok();
}
}  // namespace kda
