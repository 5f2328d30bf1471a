// GPU harness of the decode tests (see decode_harness.h).
#include "tests/gpu/decode_harness.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "reference/common.h"
#include "tests/gpu/gpu_harness.h"

namespace kda::test {

namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
}

constexpr int kNumTensors = 12;
kda_tensor* tensor(kda_decode_params& p, int i) {
  kda_tensor* all[kNumTensors] = {&p.q,
                                  &p.k,
                                  &p.v,
                                  &p.g,
                                  &p.beta,
                                  &p.out,
                                  &p.A_log,
                                  &p.dt_bias,
                                  &p.state_pool,
                                  &p.state_indices,
                                  &p.num_accepted_tokens,
                                  &p.cu_seqlens};
  return all[i];
}
constexpr int kOut = 5, kPool = 8;

size_t bytes_of(const kda_tensor& t) { return tensor_extent(t) * dtype_bytes(t.dtype); }

double rel(const std::vector<double>& x, const std::vector<double>& ref, size_t* non_finite) {
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i])) ++*non_finite;
    num += (x[i] - ref[i]) * (x[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

std::vector<double> bf16_values(const std::vector<uint16_t>& x) {
  std::vector<double> r(x.size());
  for (size_t i = 0; i < x.size(); ++i) r[i] = reference::bf16_to_float(x[i]);
  return r;
}

}  // namespace

DeviceDecode::DeviceDecode(RandomDecode& host) : host_(host), host_params_(host.params()), dev_(host_params_) {
  for (int i = 0; i < kNumTensors; ++i) {
    const kda_tensor* h = tensor(host_params_, i);
    if (h->data == nullptr) continue;
    void* ptr = nullptr;
    check(cudaMalloc(&ptr, std::max<size_t>(16, bytes_of(*h))), "cudaMalloc");
    allocations_.push_back(ptr);
    tensor(dev_, i)->data = ptr;
  }
  upload();
}

DeviceDecode::~DeviceDecode() {
  for (void* p : allocations_) cudaFree(p);
}

void DeviceDecode::upload() {
  host_params_ = host_.params();
  for (int i = 0; i < kNumTensors; ++i) {
    const kda_tensor* h = tensor(host_params_, i);
    if (h->data == nullptr) continue;
    check(cudaMemcpy(tensor(dev_, i)->data, h->data, bytes_of(*h), cudaMemcpyHostToDevice), "upload");
  }
}

void DeviceDecode::download() {
  check(cudaDeviceSynchronize(), "kernel execution");
  host_params_ = host_.params();
  for (int i : {kOut, kPool}) {
    const kda_tensor* h = tensor(host_params_, i);
    check(cudaMemcpy(h->data, tensor(dev_, i)->data, bytes_of(*h), cudaMemcpyDeviceToHost), "download");
  }
}

kda_status run_decode_gpu(RandomDecode& d, int config, int repeats, int check_indices, int trusted_pointers) {
  DeviceDecode dd(d);
  dd.params().kernel_config = config;
  dd.params().check_indices = check_indices;
  dd.params().trusted_pointers = trusted_pointers;
  kda_status st{};
  for (int r = 0; r < repeats; ++r) {
    st = kda_decode(&dd.params(), nullptr);
    if (st.code != KDA_OK) return st;
  }
  dd.download();
  return st;
}

kda_status run_decode_cpu(RandomDecode& d, int check_indices) {
  kda_decode_params p = d.params();
  p.check_indices = check_indices;
  return kda_decode_cpu(&p, 0);
}

std::vector<double> pool_values(const RandomDecode& d) {
  if (d.spec.pool == KDA_DTYPE_F32) return std::vector<double>(d.pool_f32.begin(), d.pool_f32.end());
  return bf16_values(d.pool_bf16);
}

DecodeErrors decode_gpu_vs_cpu(RandomDecode& d, int config) {
  RandomDecode ref = d;
  const kda_status st = run_decode_gpu(d, config);
  if (st.code != KDA_OK) throw std::runtime_error(st.message);
  const kda_status st2 = run_decode_cpu(ref);
  if (st2.code != KDA_OK) throw std::runtime_error(st2.message);
  DecodeErrors e;
  e.out = rel(bf16_values(d.out), bf16_values(ref.out), &e.non_finite);
  e.pool = rel(pool_values(d), pool_values(ref), &e.non_finite);
  return e;
}

void expect_decode_close(const std::string& what, const DecodeErrors& e, double out_tol, double pool_tol) {
  std::printf("[ errors ] %-52s out %.3e pool %.3e\n", what.c_str(), e.out, e.pool);
  EXPECT_EQ(e.non_finite, 0u) << what;
  EXPECT_LE(e.out, out_tol) << what;
  EXPECT_LE(e.pool, pool_tol) << what;
}

}  // namespace kda::test
