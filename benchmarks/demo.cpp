// flash_kda_demo: the library's main job end to end, through the public C API only.
// Generates a sample problem (random normal bf16 q/k/v/g/beta, A_log and dt_bias uniform [0, 1),
// lower_bound -5, fp32 initial and final states), runs it on the GPU with kda_fwd when a compute
// capability 9.0 GPU is present (else, or with --cpu, with kda_fwd_cpu(KDA_CPU_CHUNKED_F32)),
// and checks it against the float64 CPU oracle kda_fwd_cpu(KDA_CPU_RECURRENCE_F64): relative L2
// error of out and final_state, NaN/Inf, time. Exits 1 when out > 4e-3, final_state > 3e-3 or
// anything is not finite; 2 on a usage or API error.
//
//   flash_kda_demo [--B 1] [--T 1000] [--H 4] [--HV H] [--seed 0] [--cpu]
#include <cuda_runtime_api.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "flash_kda/flash_kda.h"

namespace {

constexpr int64_t D = 128;

struct Options {
  int64_t B = 1, T = 1000, H = 4, HV = 0;  // HV = 0: same as H
  uint64_t seed = 0;
  bool force_cpu = false;
};

bool parse_options(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](int64_t* dst) {
      if (i + 1 >= argc) return false;
      char* end = nullptr;
      *dst = std::strtoll(argv[++i], &end, 10);
      return end != argv[i] && *end == '\0';
    };
    int64_t seed = 0;
    if (a == "--cpu") o->force_cpu = true;
    else if (a == "--B") { if (!value(&o->B)) return false; }
    else if (a == "--T") { if (!value(&o->T)) return false; }
    else if (a == "--H") { if (!value(&o->H)) return false; }
    else if (a == "--HV") { if (!value(&o->HV)) return false; }
    else if (a == "--seed") { if (!value(&seed)) return false; o->seed = static_cast<uint64_t>(seed); }
    else return false;
  }
  if (o->HV == 0) o->HV = o->H;
  return o->B >= 1 && o->T >= 1 && o->H >= 1 && o->HV >= 1;
}

uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
float from_bf16(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Host buffers of the problem and the params describing them (host or device pointers).
struct Problem {
  Options o;
  std::vector<uint16_t> q, k, v, g, beta;
  std::vector<float> A_log, dt_bias, initial_state;

  kda_fwd_params params(const void* const* ptrs, void* out, void* final_state) const {
    kda_fwd_params p;
    kda_fwd_params_init(&p);  // bounded gate, lower_bound -5, scale 1/sqrt(128)
    const int64_t qk[4] = {o.B, o.T, o.H, D}, hv[4] = {o.B, o.T, o.HV, D}, st[4] = {o.B, o.HV, D, D};
    const int64_t a[1] = {o.HV}, db[2] = {o.HV, D};
    auto mut = [](const void* x) { return const_cast<void*>(x); };
    p.q = kda_tensor_contiguous(mut(ptrs[0]), KDA_DTYPE_BF16, 4, qk);
    p.k = kda_tensor_contiguous(mut(ptrs[1]), KDA_DTYPE_BF16, 4, qk);
    p.v = kda_tensor_contiguous(mut(ptrs[2]), KDA_DTYPE_BF16, 4, hv);
    p.g = kda_tensor_contiguous(mut(ptrs[3]), KDA_DTYPE_BF16, 4, hv);
    p.beta = kda_tensor_contiguous(mut(ptrs[4]), KDA_DTYPE_BF16, 3, hv);
    p.A_log = kda_tensor_contiguous(mut(ptrs[5]), KDA_DTYPE_F32, 1, a);
    p.dt_bias = kda_tensor_contiguous(mut(ptrs[6]), KDA_DTYPE_F32, 2, db);
    p.initial_state = kda_tensor_contiguous(mut(ptrs[7]), KDA_DTYPE_F32, 4, st);
    p.out = kda_tensor_contiguous(out, KDA_DTYPE_BF16, 4, hv);
    p.final_state = kda_tensor_contiguous(final_state, KDA_DTYPE_F32, 4, st);
    return p;
  }
  std::vector<const void*> host_ptrs() const {
    return {q.data(), k.data(), v.data(), g.data(), beta.data(), A_log.data(), dt_bias.data(), initial_state.data()};
  }
  std::vector<size_t> byte_sizes() const {
    return {q.size() * 2, k.size() * 2, v.size() * 2, g.size() * 2, beta.size() * 2,
            A_log.size() * 4, dt_bias.size() * 4, initial_state.size() * 4};
  }
  int64_t out_numel() const { return o.B * o.T * o.HV * D; }
  int64_t state_numel() const { return o.B * o.HV * D * D; }
};

Problem make_problem(const Options& o) {
  Problem p;
  p.o = o;
  std::mt19937_64 rng(o.seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  auto normal_bf16 = [&](int64_t count) {
    std::vector<uint16_t> r(static_cast<size_t>(count));
    for (auto& x : r) x = to_bf16(n(rng));
    return r;
  };
  p.q = normal_bf16(o.B * o.T * o.H * D);
  p.k = normal_bf16(o.B * o.T * o.H * D);
  p.v = normal_bf16(o.B * o.T * o.HV * D);
  p.g = normal_bf16(o.B * o.T * o.HV * D);
  p.beta = normal_bf16(o.B * o.T * o.HV);
  for (int64_t i = 0; i < o.HV; ++i) p.A_log.push_back(u(rng));
  for (int64_t i = 0; i < o.HV * D; ++i) p.dt_bias.push_back(u(rng));
  for (int64_t i = 0; i < p.state_numel(); ++i) p.initial_state.push_back(n(rng));
  return p;
}

bool has_sm90_gpu() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    return false;
  }
  int major = 0, minor = 0, device = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  return major == 9 && minor == 0;
}

#define CUDA_OK(expr)                                                                   \
  do {                                                                                  \
    cudaError_t e_ = (expr);                                                            \
    if (e_ != cudaSuccess) {                                                            \
      std::fprintf(stderr, "CUDA error %s at %s\n", cudaGetErrorString(e_), #expr);     \
      return false;                                                                     \
    }                                                                                   \
  } while (0)

// kda_fwd on the current GPU; *ms: time of one call (after a warm-up call), by CUDA events.
bool run_gpu(const Problem& pr, std::vector<uint16_t>* out, std::vector<float>* fin, double* ms) {
  const std::vector<const void*> host = pr.host_ptrs();
  const std::vector<size_t> bytes = pr.byte_sizes();
  std::vector<void*> dev(host.size(), nullptr);
  void *d_out = nullptr, *d_fin = nullptr, *ws = nullptr;
  for (size_t i = 0; i < host.size(); ++i) {
    CUDA_OK(cudaMalloc(&dev[i], bytes[i]));
    CUDA_OK(cudaMemcpy(dev[i], host[i], bytes[i], cudaMemcpyHostToDevice));
  }
  CUDA_OK(cudaMalloc(&d_out, out->size() * 2));
  CUDA_OK(cudaMalloc(&d_fin, fin->size() * 4));
  std::vector<const void*> cdev(dev.begin(), dev.end());
  const kda_fwd_params p = pr.params(cdev.data(), d_out, d_fin);
  size_t ws_bytes = 0;
  kda_status s = kda_fwd_workspace_size(&p, &ws_bytes);
  if (s.code != KDA_OK) return std::fprintf(stderr, "kda_fwd_workspace_size: %s\n", s.message), false;
  if (ws_bytes > 0) CUDA_OK(cudaMalloc(&ws, ws_bytes));
  cudaEvent_t start, stop;
  CUDA_OK(cudaEventCreate(&start));
  CUDA_OK(cudaEventCreate(&stop));
  s = kda_fwd(&p, ws, ws_bytes, nullptr);  // warm-up
  if (s.code != KDA_OK) return std::fprintf(stderr, "kda_fwd: %s\n", s.message), false;
  CUDA_OK(cudaEventRecord(start, nullptr));
  s = kda_fwd(&p, ws, ws_bytes, nullptr);
  CUDA_OK(cudaEventRecord(stop, nullptr));
  CUDA_OK(cudaEventSynchronize(stop));
  if (s.code != KDA_OK) return std::fprintf(stderr, "kda_fwd: %s\n", s.message), false;
  float t = 0;
  CUDA_OK(cudaEventElapsedTime(&t, start, stop));
  *ms = t;
  CUDA_OK(cudaMemcpy(out->data(), d_out, out->size() * 2, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(fin->data(), d_fin, fin->size() * 4, cudaMemcpyDeviceToHost));
  for (void* d : dev) cudaFree(d);
  cudaFree(d_out), cudaFree(d_fin), cudaFree(ws);
  cudaEventDestroy(start), cudaEventDestroy(stop);
  return true;
}

bool run_cpu(const Problem& pr, kda_cpu_algorithm algo, std::vector<uint16_t>* out, std::vector<float>* fin,
             double* ms) {
  const std::vector<const void*> host = pr.host_ptrs();
  const kda_fwd_params p = pr.params(host.data(), out->data(), fin->data());
  const auto t0 = std::chrono::steady_clock::now();
  const kda_status s = kda_fwd_cpu(&p, algo, 0);
  *ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (s.code != KDA_OK) std::fprintf(stderr, "kda_fwd_cpu: %s\n", s.message);
  return s.code == KDA_OK;
}

// Relative L2 error; counts non-finite elements of x into *bad.
template <class X, class F>
double rel_l2(const std::vector<X>& x, const std::vector<X>& ref, F to_double, size_t* bad) {
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double a = to_double(x[i]), b = to_double(ref[i]);
    if (!std::isfinite(a)) ++*bad;
    num += (a - b) * (a - b);
    den += b * b;
  }
  return std::sqrt(num / (den > 0 ? den : 1.0));
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse_options(argc, argv, &o)) {
    std::fprintf(stderr, "usage: %s [--B n] [--T n] [--H n] [--HV n] [--seed n] [--cpu]\n", argv[0]);
    return 2;
  }
  const Problem pr = make_problem(o);
  const bool gpu = !o.force_cpu && has_sm90_gpu();
  std::printf("flash_kda %s  B=%lld T=%lld H=%lld HV=%lld  lower_bound=-5, fp32 states\n", kda_version_string(),
              (long long)o.B, (long long)o.T, (long long)o.H, (long long)o.HV);

  std::vector<uint16_t> out(pr.out_numel()), ref_out(pr.out_numel());
  std::vector<float> fin(pr.state_numel()), ref_fin(pr.state_numel());
  double ms = 0, ref_ms = 0;
  const bool ok = gpu ? run_gpu(pr, &out, &fin, &ms) : run_cpu(pr, KDA_CPU_CHUNKED_F32, &out, &fin, &ms);
  if (!ok || !run_cpu(pr, KDA_CPU_RECURRENCE_F64, &ref_out, &ref_fin, &ref_ms)) return 2;

  size_t bad = 0;
  const double out_err = rel_l2(out, ref_out, from_bf16, &bad);
  const double fin_err = rel_l2(fin, ref_fin, [](float x) { return double(x); }, &bad);
  std::printf("%-34s %10.3f ms\n", gpu ? "kda_fwd (GPU)" : "kda_fwd_cpu (chunked f32)", ms);
  std::printf("%-34s %10.3f ms\n", "reference kda_fwd_cpu (f64)", ref_ms);
  std::printf("out         rel L2 error %.3e   (limit 4e-3; against the oracle's bf16 out, so the output\n"
              "                                   rounding, ~1.65e-3 against float64 values, is not counted)\n",
              out_err);
  std::printf("final_state rel L2 error %.3e   (limit 3e-3)\n", fin_err);
  std::printf("non-finite values: %zu\n", bad);
  const bool pass = out_err <= 4e-3 && fin_err <= 3e-3 && bad == 0;
  std::printf("%s\n", pass ? "PASS" : "FAIL");
  return pass ? 0 : 1;
}
