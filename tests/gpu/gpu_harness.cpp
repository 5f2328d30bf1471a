// GPU test harness (see gpu_harness.h).
#include "tests/gpu/gpu_harness.h"

#include <cstring>
#include <stdexcept>

#include "reference/common.h"
#include "src/api/problem.h"
#include "tests/golden_io.h"

namespace kda::test {

namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
}

kda_tensor* tensors(kda_fwd_params& p, int i) {
  kda_tensor* all[] = {&p.q,     &p.k,           &p.v,           &p.g,          &p.beta,      &p.out,
                       &p.A_log, &p.dt_bias,     &p.initial_state, &p.final_state, &p.cu_seqlens};
  return i < 11 ? all[i] : nullptr;
}
constexpr int kNumTensors = 11;
bool is_output(int i) { return i == 5 || i == 9; }

}  // namespace

std::string gpu_skip_reason() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    return "no CUDA GPU on this machine: GPU test skipped";
  }
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
  if (major != 9 || minor != 0)
    return "GPU of compute capability " + std::to_string(major) + "." + std::to_string(minor) +
           " (needs 9.0): GPU test skipped";
  return "";
}

size_t dtype_bytes(kda_dtype dtype) {
  switch (dtype) {
    case KDA_DTYPE_BF16: case KDA_DTYPE_F16: return 2;
    case KDA_DTYPE_F32: case KDA_DTYPE_I32: return 4;
    case KDA_DTYPE_I64: case KDA_DTYPE_F64: return 8;
    default: return 1;
  }
}

size_t tensor_extent(const kda_tensor& t) {
  size_t extent = 1;
  for (int d = 0; d < t.ndim; ++d) {
    if (t.shape[d] == 0) return 0;
    extent += static_cast<size_t>(t.shape[d] - 1) * static_cast<size_t>(t.stride[d]);
  }
  return extent;
}

DeviceProblem::DeviceProblem(const kda_fwd_params& host) : host_(host), dev_(host) {
  for (int i = 0; i < kNumTensors; ++i) {
    kda_tensor* h = tensors(host_, i);
    kda_tensor* d = tensors(dev_, i);
    if (h->data == nullptr) continue;
    const size_t bytes = std::max<size_t>(16, tensor_extent(*h) * dtype_bytes(h->dtype));
    void* ptr = nullptr;
    check(cudaMalloc(&ptr, bytes), "cudaMalloc");
    allocations_.push_back(ptr);
    check(cudaMemcpy(ptr, h->data, tensor_extent(*h) * dtype_bytes(h->dtype), cudaMemcpyHostToDevice), "upload");
    d->data = ptr;
  }
  if (kda_fwd_workspace_size(&dev_, &workspace_bytes_).code == KDA_OK && workspace_bytes_ > 0)
    check(cudaMalloc(&workspace_, workspace_bytes_), "cudaMalloc workspace");
}

DeviceProblem::~DeviceProblem() {
  for (void* p : allocations_) cudaFree(p);
  if (workspace_) cudaFree(workspace_);
}

void DeviceProblem::upload_inputs() {
  for (int i = 0; i < kNumTensors; ++i) {
    kda_tensor* h = tensors(host_, i);
    if (h->data == nullptr || is_output(i)) continue;
    check(cudaMemcpy(tensors(dev_, i)->data, h->data, tensor_extent(*h) * dtype_bytes(h->dtype),
                     cudaMemcpyHostToDevice), "upload");
  }
}

void DeviceProblem::download_outputs() {
  check(cudaDeviceSynchronize(), "kernel execution");
  for (int i : {5, 9}) {
    kda_tensor* h = tensors(host_, i);
    if (h->data == nullptr) continue;
    check(cudaMemcpy(h->data, tensors(dev_, i)->data, tensor_extent(*h) * dtype_bytes(h->dtype),
                     cudaMemcpyDeviceToHost), "download");
  }
}

void DeviceProblem::poison_workspace(int byte) {
  if (workspace_) check(cudaMemset(workspace_, byte, workspace_bytes_), "cudaMemset");
}

kda_status run_on_gpu(const kda_fwd_params& host, int repeats) {
  DeviceProblem dp(host);
  dp.poison_workspace(0xff);
  kda_status st{};
  for (int r = 0; r < repeats; ++r) {
    st = kda_fwd(&dp.params(), dp.workspace(), dp.workspace_bytes(), nullptr);
    if (st.code != KDA_OK) return st;
  }
  dp.download_outputs();
  return st;
}

GpuErrors gpu_vs_f64(RandomProblem& gpu, const std::function<void(kda_fwd_params&)>& adjust) {
  RandomProblem ref = gpu;
  kda_fwd_params gp = gpu.params(), rp = ref.params();
  if (adjust) {
    adjust(gp);
    adjust(rp);
  }
  const kda_status st = run_on_gpu(gp);
  if (st.code != KDA_OK) throw std::runtime_error(st.message);
  const ExactReference exact = reference_f64(rp);
  GpuErrors e;
  const std::vector<double> out = bf16_to_f64(gpu.out);
  e.out = rel_l2(out, exact.out);  // rows outside every sequence are 0 on both sides
  e.non_finite = count_non_finite(out);
  if (gpu.spec.final_state == KDA_DTYPE_F32) {
    const std::vector<double> state = f32_to_f64(gpu.final_f32);
    e.state = rel_l2(state, exact.final_state);
    e.non_finite += count_non_finite(state);
  } else if (gpu.spec.final_state == KDA_DTYPE_BF16) {
    const std::vector<double> state = bf16_to_f64(gpu.final_bf16);
    e.state = rel_l2(state, exact.final_state);
    e.non_finite += count_non_finite(state);
  }
  return e;
}

ExactReference reference_f64(const kda_fwd_params& host) {
  Problem pr;
  const kda_status st = validate(&host, ValidateMode::kHost, &pr);
  if (st.code != KDA_OK) throw std::runtime_error(st.message);
  ExactReference r;
  r.out.assign(static_cast<size_t>(pr.T_total * pr.HV * pr.V), 0.0);
  r.final_state.assign(static_cast<size_t>(pr.N * pr.HV * pr.V * pr.K), 0.0);
  const kda_status st2 = reference::fwd_recurrence_f64_ex(pr, 0, r.out.data(), r.final_state.data());
  if (st2.code != KDA_OK) throw std::runtime_error(st2.message);
  return r;
}

}  // namespace kda::test
