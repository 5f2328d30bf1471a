// flash_kda_bench_host: where the host time of one kda_fwd / kda_decode call goes (the part of an
// eager call's time that the GPU spends waiting for the host). Per line: the median over --reps
// repetitions of the mean host time of --calls back-to-back calls (std::chrono around the calls;
// the GPU queue is drained between repetitions, so launches never block on a full queue).
//
// Measured: the CUDA calls the entry points make or could make (the pointer query per tensor: the
// runtime's cudaPointerGetAttributes against the driver's cuPointerGetAttributes for the two
// attributes the check needs; cudaGetDevice and two device attributes; the launch of an empty
// kernel with a 384-byte parameter block by cudaLaunchKernelEx and by the driver's cuLaunchKernelEx
// (through the runtime's driver entry point), each with and without the programmatic-dependent-
// launch attribute; the alternatives interleaved three times, so that none is favoured by its place
// in the run), kda_fwd_workspace_size (validation of the shapes and the plan, no device query), and
// one tensor map's encoding (a single-pass call encodes four), whole kda_fwd / kda_decode calls on
// small cases (one on the single pass), with and without trusted_pointers (the pointer
// queries skipped, as the PyTorch binding does). Also one call's worth of pointer queries: 13
// distinct allocations among 100, by the driver's query for 5 (the check's: type, device, managed flag and the
// allocation's range), 3, 2 and 1 attributes and the runtime's.
//
// Usage: flash_kda_bench_host [--reps 21] [--calls 20]
#include <cuda.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "flash_kda/flash_kda.h"
#include "benchmarks/bench_common.cuh"
#include "src/launch/tensor_map.h"

namespace {

using namespace kda::bench;

// A kernel parameter block of the launchers' size (PrepParams, RecurrenceParams: a few hundred bytes).
struct Blob {
  int64_t w[48];
};
__global__ void empty_kernel(Blob) {}

using LaunchEx = CUresult (*)(const CUlaunchConfig*, CUfunction, void**, void**);

int g_reps = 21, g_calls = 20;

template <typename F>
double host_us(F&& f) {
  std::vector<double> t;
  for (int r = 0; r < g_reps; ++r) {
    CUDA_OK(cudaDeviceSynchronize());
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < g_calls; ++i) f(i);
    const auto t1 = std::chrono::steady_clock::now();
    t.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / g_calls);
  }
  CUDA_OK(cudaDeviceSynchronize());
  return median(t);
}

void ok(const kda_status& s, const char* what) {
  if (s.code != KDA_OK) {
    std::fprintf(stderr, "%s: %s\n", what, s.message);
    std::exit(2);
  }
}

std::vector<void*> g_allocations;  // freed at the end of main

void* dev(size_t bytes) {
  void* p = nullptr;
  CUDA_OK(cudaMalloc(&p, bytes));
  CUDA_OK(cudaMemset(p, 0, bytes));
  g_allocations.push_back(p);
  return p;
}

// The token tensors kda_fwd and kda_decode share: q, k, v, g, out [B, T, H, 128] and beta bf16,
// A_log and dt_bias fp32 (zeros: host time does not depend on the values).
template <typename Params>
void token_tensors(Params& p, int64_t B, int64_t T, int64_t H) {
  const int64_t D = 128;
  const size_t tok = static_cast<size_t>(B * T * H);
  const int64_t qk_shape[4] = {B, T, H, D}, beta_shape[3] = {B, T, H}, dt_shape[2] = {H, D};
  p.q = kda_tensor_contiguous(dev(tok * D * 2), KDA_DTYPE_BF16, 4, qk_shape);
  p.k = kda_tensor_contiguous(dev(tok * D * 2), KDA_DTYPE_BF16, 4, qk_shape);
  p.v = kda_tensor_contiguous(dev(tok * D * 2), KDA_DTYPE_BF16, 4, qk_shape);
  p.g = kda_tensor_contiguous(dev(tok * D * 2), KDA_DTYPE_BF16, 4, qk_shape);
  p.beta = kda_tensor_contiguous(dev(tok * 2), KDA_DTYPE_BF16, 3, beta_shape);
  p.out = kda_tensor_contiguous(dev(tok * D * 2), KDA_DTYPE_BF16, 4, qk_shape);
  p.A_log = kda_tensor_contiguous(dev(H * 4), KDA_DTYPE_F32, 1, &H);
  p.dt_bias = kda_tensor_contiguous(dev(H * D * 4), KDA_DTYPE_F32, 2, dt_shape);
  p.lower_bound = -5.0;
}

// kda_fwd on [1, T, H, 128] bf16 inputs, fp32 states, the benchmark's gate options.
void fwd_case(const char* name, int64_t T, int64_t H, cudaStream_t stream) {
  const int64_t D = 128, B = 1;
  const int64_t st_shape[4] = {B, H, D, D};
  kda_fwd_params p;
  kda_fwd_params_init(&p);
  token_tensors(p, B, T, H);
  p.initial_state = kda_tensor_contiguous(dev(B * H * D * D * 4), KDA_DTYPE_F32, 4, st_shape);
  p.final_state = kda_tensor_contiguous(dev(B * H * D * D * 4), KDA_DTYPE_F32, 4, st_shape);
  p.scale = 1.0 / std::sqrt(128.0);
  size_t ws_bytes = 0;
  ok(kda_fwd_workspace_size(&p, &ws_bytes), name);
  void* ws = ws_bytes ? dev(ws_bytes) : nullptr;
  size_t sink = 0;
  const double plan = host_us([&](int) { kda_fwd_workspace_size(&p, &sink); });
  const double call = host_us([&](int) { ok(kda_fwd(&p, ws, ws_bytes, stream), name); });
  kda_fwd_params trusted = p;
  trusted.trusted_pointers = 1;
  const double call_trusted = host_us([&](int) { ok(kda_fwd(&trusted, ws, ws_bytes, stream), name); });
  std::printf("%-34s %8.2f us   (trusted_pointers = 1: %.2f us; kda_fwd_workspace_size: validation + plan %.2f us)\n",
              (std::string("kda_fwd ") + name).c_str(), call, call_trusted, plan);
}

void decode_case(const char* name, int64_t N, int64_t H, cudaStream_t stream) {
  const int64_t D = 128;
  const int64_t pool_shape[4] = {N, H, D, D};
  kda_decode_params p;
  kda_decode_params_init(&p);
  token_tensors(p, N, 1, H);
  p.state_pool = kda_tensor_contiguous(dev(N * H * D * D * 4), KDA_DTYPE_F32, 4, pool_shape);
  std::vector<int32_t> idx(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i) idx[i] = static_cast<int32_t>(i);
  void* d_idx = dev(idx.size() * 4);
  CUDA_OK(cudaMemcpy(d_idx, idx.data(), idx.size() * 4, cudaMemcpyHostToDevice));
  p.state_indices = kda_tensor_contiguous(d_idx, KDA_DTYPE_I32, 1, &N);
  const double call = host_us([&](int) { ok(kda_decode(&p, stream), name); });
  kda_decode_params trusted = p;
  trusted.trusted_pointers = 1;
  const double call_trusted = host_us([&](int) { ok(kda_decode(&trusted, stream), name); });
  std::printf("%-34s %8.2f us   (trusted_pointers = 1: %.2f us)\n", (std::string("kda_decode ") + name).c_str(), call,
              call_trusted);
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) g_reps = std::max(3, std::atoi(argv[++i]));
    else if (a == "--calls" && i + 1 < argc) g_calls = std::max(1, std::atoi(argv[++i]));
    else {
      std::fprintf(stderr, "usage: %s [--reps 21] [--calls 20]\n", argv[0]);
      return 2;
    }
  }
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::printf("flash_kda %s; host time per call, median of %d repetitions of %d calls\n", kda_version_string(), g_reps,
              g_calls);
  void* p = dev(1 << 20);
  cudaPointerAttributes attr;
  std::printf("%-34s %8.2f us\n", "cudaPointerGetAttributes",
              host_us([&](int) { CUDA_OK(cudaPointerGetAttributes(&attr, p)); }));
  {
    // The driver's query for only the two attributes the entry points check (memory type, device
    // ordinal), against the runtime's (every attribute); interleaved, three times each.
    using GetAttrs = CUresult (*)(unsigned, CUpointer_attribute*, void**, CUdeviceptr);
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q;
    CUDA_OK(cudaGetDriverEntryPointByVersion("cuPointerGetAttributes", &fn, 12000, cudaEnableDefault, &q));
    if (q == cudaDriverEntryPointSuccess && fn != nullptr) {
      const GetAttrs get = reinterpret_cast<GetAttrs>(fn);
      CUpointer_attribute which[2] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
      unsigned type = 0;
      int ordinal = -1;
      void* data[2] = {&type, &ordinal};
      for (int r = 0; r < 3; ++r) {
        std::printf("%-34s %8.2f us\n", "cudaPointerGetAttributes", host_us([&](int) {
                      CUDA_OK(cudaPointerGetAttributes(&attr, p));
                    }));
        std::printf("%-34s %8.2f us\n", "cuPointerGetAttributes (2 attrs)", host_us([&](int) {
                      if (get(2, which, data, reinterpret_cast<CUdeviceptr>(p)) != CUDA_SUCCESS) std::exit(2);
                    }));
      }
    }
  }
  {
    // One call's worth of queries: 13 distinct allocations (among 100 live ones), each queried once
    // per call, as kda_fwd's check does; the driver's query for 5, 3, 2 and 1 attributes and the
    // runtime's, interleaved three times. Per call (13 queries).
    using GetAttrs = CUresult (*)(unsigned, CUpointer_attribute*, void**, CUdeviceptr);
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q;
    CUDA_OK(cudaGetDriverEntryPointByVersion("cuPointerGetAttributes", &fn, 12000, cudaEnableDefault, &q));
    std::vector<void*> bufs;
    for (int i = 0; i < 100; ++i) bufs.push_back(dev(size_t{1} << (16 + i % 6)));
    if (q == cudaDriverEntryPointSuccess && fn != nullptr) {
      const GetAttrs get = reinterpret_cast<GetAttrs>(fn);
      // The first three are the check's until 2026-12-06; all five are its query since (the allocation's
      // range, against buffers too small for their shape).
      CUpointer_attribute which[5] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                      CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                      CU_POINTER_ATTRIBUTE_RANGE_SIZE};
      unsigned type = 0, managed = 0;
      int ordinal = -1;
      CUdeviceptr start = 0;
      size_t size = 0;
      void* data[5] = {&type, &ordinal, &managed, &start, &size};
      auto call = [&](unsigned n) {
        return [&, n](int c) {
          for (int t = 0; t < 13; ++t)
            if (get(n, which, data, reinterpret_cast<CUdeviceptr>(bufs[(7 * t + 13 * c) % 100])) != CUDA_SUCCESS)
              std::exit(2);
        };
      };
      for (int r = 0; r < 3; ++r) {
        std::printf("%-34s %8.2f us\n", "13 distinct: cuPointerGetAttributes 5", host_us(call(5)));
        std::printf("%-34s %8.2f us\n", "13 distinct: cuPointerGetAttributes 3", host_us(call(3)));
        std::printf("%-34s %8.2f us\n", "13 distinct: cuPointerGetAttributes 2", host_us(call(2)));
        std::printf("%-34s %8.2f us\n", "13 distinct: cuPointerGetAttributes 1", host_us(call(1)));
        std::printf("%-34s %8.2f us\n", "13 distinct: cudaPointerGetAttributes", host_us([&](int c) {
                      for (int t = 0; t < 13; ++t) CUDA_OK(cudaPointerGetAttributes(&attr, bufs[(7 * t + 13 * c) % 100]));
                    }));
        std::printf("%-34s %8.2f us\n", "13 same: cuPointerGetAttributes 3", host_us([&](int) {
                      for (int t = 0; t < 13; ++t)
                        if (get(3, which, data, reinterpret_cast<CUdeviceptr>(bufs[0])) != CUDA_SUCCESS) std::exit(2);
                    }));
      }
    }
  }  // (bufs are freed with the other allocations at the end)
  std::printf("%-34s %8.2f us\n", "cudaGetDevice + 2 attributes", host_us([&](int) {
                int d = 0, a = 0, b = 0;
                CUDA_OK(cudaGetDevice(&d));
                CUDA_OK(cudaDeviceGetAttribute(&a, cudaDevAttrComputeCapabilityMajor, d));
                CUDA_OK(cudaDeviceGetAttribute(&b, cudaDevAttrComputeCapabilityMinor, d));
              }));
  {
    // The four launch paths, interleaved three times (a path measured later in a run is not favoured).
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q;
    CUDA_OK(cudaGetDriverEntryPointByVersion("cuLaunchKernelEx", &fn, 12000, cudaEnableDefault, &q));
    cudaFunction_t f;
    CUDA_OK(cudaGetFuncBySymbol(&f, reinterpret_cast<const void*>(empty_kernel)));
    const LaunchEx launch = q == cudaDriverEntryPointSuccess ? reinterpret_cast<LaunchEx>(fn) : nullptr;
    for (int r = 0; r < 3; ++r) {
      for (int pdl = 0; pdl < 2; ++pdl) {
        cudaLaunchAttribute la[1];
        la[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        la[0].val.programmaticStreamSerializationAllowed = 1;
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(132);
        cfg.blockDim = dim3(128);
        cfg.stream = stream;
        cfg.attrs = la;
        cfg.numAttrs = pdl;
        std::printf("%-34s %8.2f us\n", pdl ? "cudaLaunchKernelEx (PDL attribute)" : "cudaLaunchKernelEx",
                    host_us([&](int) { CUDA_OK(cudaLaunchKernelEx(&cfg, empty_kernel, Blob{})); }));
      }
      if (launch == nullptr) continue;
      for (int pdl = 0; pdl < 2; ++pdl) {
        CUlaunchAttribute la[1];
        la[0].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        la[0].value.programmaticStreamSerializationAllowed = 1;
        CUlaunchConfig cfg = {};
        cfg.gridDimX = 132;
        cfg.gridDimY = cfg.gridDimZ = 1;
        cfg.blockDimX = 128;
        cfg.blockDimY = cfg.blockDimZ = 1;
        cfg.hStream = reinterpret_cast<CUstream>(stream);
        cfg.attrs = la;
        cfg.numAttrs = pdl;
        Blob b{};
        void* args[1] = {&b};
        std::printf("%-34s %8.2f us\n", pdl ? "cuLaunchKernelEx (PDL attribute)" : "cuLaunchKernelEx",
                    host_us([&](int) {
                      if (launch(&cfg, reinterpret_cast<CUfunction>(f), args, nullptr) != CUDA_SUCCESS) std::exit(2);
                    }));
      }
    }
  }
  {
    // One tensor map of the single pass (q as [1, T, H, 128] in 16 x 64 boxes, 128-byte swizzle): a
    // single-pass call encodes four before its launch (single_pass_sm90.cu).
    const int64_t T = 8192, H = 64;
    void* q = dev(static_cast<size_t>(T * H * 128 * 2));
    const uint64_t dims[4] = {128, static_cast<uint64_t>(H), static_cast<uint64_t>(T), 1};
    const int64_t given[3] = {128, H * 128, T * H * 128};  // head, token, batch strides (elements)
    CUtensorMap map;
    std::printf("%-34s %8.2f us\n", "tensor map encode (one head box)", host_us([&](int) {
                  if (!kda::sm90::make_head_box_map(&map, q, dims, given)) std::exit(2);
                }));
  }
  fwd_case("T512_H32", 512, 32, stream);
  fwd_case("T256_H96 (single pass)", 256, 96, stream);
  fwd_case("T2048_H12", 2048, 12, stream);
  fwd_case("T1024_H4", 1024, 4, stream);
  decode_case("B1_H8", 1, 8, stream);
  decode_case("B32_H8", 32, 8, stream);
  CUDA_OK(cudaStreamSynchronize(stream));
  for (void* a : g_allocations) CUDA_OK(cudaFree(a));
  CUDA_OK(cudaStreamDestroy(stream));
  return 0;
}
