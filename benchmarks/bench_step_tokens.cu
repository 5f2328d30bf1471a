// flash_kda_bench_step_tokens: the recurrence's chunk step on wgmma for chunks of 16, 32 and 64 tokens
// (step_tokens_kernel.cuh), each checked against a CPU emulation with the same bf16 roundings, then
// timed per step on every SM, with the stage handed over empty (the chain alone) and copied from
// global memory by a producer warpgroup (the chain with its bytes). Issue 10's "shorter chains" lead
// measured before it is built: a sequence of T tokens is T / C dependent steps, so what matters is
// the time per token of one chain (docs/performance_notes.md, "Chunks of 32 tokens in the
// recurrence, measured before they are built").
// Usage: flash_kda_bench_step_tokens [--tokens N] [--images N] [--reps N]
//   --tokens: tokens per timed chain (default 65536; steps = tokens / C)
//   --images: stage images per CTA for the copying runs (default 4: ~0.2-0.7 MB per CTA, from L2,
//             as a short call's records are; 64 reads them from DRAM)
//   --reps:   timed launches per configuration (default 3; the median is printed)
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "benchmarks/bench_common.cuh"
#include "benchmarks/step_tokens_kernel.cuh"
#include "reference/common.h"

namespace {

using kda::reference::bf16_to_float;
using kda::reference::float_to_bf16;
using kda::reference::round_bf16;

using kda::bench::to_device;

struct Options {
  int tokens = 65536, images = 4, reps = 3, sms = 0;
};

// One chunk size: random operands, the CPU emulation of `check_steps` steps, then every configuration.
template <int kC>
bool run_chunk(const Options& o) {
  std::mt19937 rng(7 + kC);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  // Wd and Kr scaled so that the map S -> S·Diag(Γ) - S·Wdᵀ·Kr has about the same size for every C.
  const float wk = 0.1f * std::pow(16.0f / kC, 0.25f);
  auto bf16_vec = [&](size_t n, float scale) {
    std::vector<uint16_t> x(n);
    for (auto& e : x) e = float_to_bf16(scale * u(rng));
    return x;
  };
  const std::vector<uint16_t> wq = bf16_vec(2 * kC * 128, wk), kr = bf16_vec(kC * 128, wk),
                              v = bf16_vec(kC * 128, 1.0f), tp = bf16_vec(2 * kC * kC, 0.25f * std::sqrt(16.0f / kC));
  std::vector<float> gamma(128), s0(128 * 128);
  for (auto& e : gamma) e = 0.7f + 0.2f * u(rng);
  for (auto& e : s0) e = u(rng);

  const int check_steps = 12;
  std::vector<double> S(s0.begin(), s0.end()), O(128 * kC);
  for (int step = 0; step < check_steps; ++step) {
    std::vector<double> Snew(128 * 128);
    for (int r = 0; r < 128; ++r) {
      std::vector<double> xo(2 * kC), uo(2 * kC);
      for (int n = 0; n < 2 * kC; ++n) {
        double x = 0, y = 0;
        for (int k = 0; k < 128; ++k)
          x += static_cast<double>(round_bf16(static_cast<float>(S[r * 128 + k]))) * bf16_to_float(wq[n * 128 + k]);
        for (int j = 0; j < kC; ++j) y += static_cast<double>(bf16_to_float(v[j * 128 + r])) * bf16_to_float(tp[n * kC + j]);
        xo[n] = x;
        uo[n] = y;
      }
      std::vector<float> ub(kC);
      for (int j = 0; j < kC; ++j) ub[j] = round_bf16(static_cast<float>(uo[j] - xo[j]));
      for (int j = 0; j < kC; ++j) O[r * kC + j] = uo[kC + j] + xo[kC + j];
      for (int k = 0; k < 128; ++k) {
        double s = S[r * 128 + k] * static_cast<double>(gamma[k]);
        for (int j = 0; j < kC; ++j) s += static_cast<double>(ub[j]) * bf16_to_float(kr[j * 128 + k]);
        Snew[r * 128 + k] = s;
      }
    }
    S.swap(Snew);
  }

  TokArgs a{};
  a.wq = to_device(wq);
  a.kr = to_device(kr);
  a.v = to_device(v);
  a.tp = to_device(tp);
  a.gamma = to_device(gamma);
  a.s0 = to_device(s0);
  CUDA_OK(cudaMalloc(&a.s_out, 128 * 128 * sizeof(float)));
  CUDA_OK(cudaMalloc(&a.o_out, 128 * kC * sizeof(float)));
  CUDA_OK(cudaMalloc(&a.o_buf, 64 * 128 * kC * sizeof(uint16_t)));
  cudaEvent_t e0, e1;
  CUDA_OK(cudaEventCreate(&e0));
  CUDA_OK(cudaEventCreate(&e1));
  bool ok = true;

  auto config = [&](auto wg_c, auto copies_c) {
    constexpr int kWG = decltype(wg_c)::value;
    constexpr bool kCopies = decltype(copies_c)::value;
    using St = TokStage<kC, kWG>;
    auto kernel = step_tokens_kernel<kC, kWG, kCopies>;
    const int smem = static_cast<int>(tile::smem_bytes<TokStorage<kC, kWG>>());
    const int threads = 128 * (kWG + 1);
    CUDA_OK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    TokArgs b = a;
    uint4* images = nullptr;
    if (kCopies) {  // every CTA's images: copies of a filled stage 0
      const size_t stage = sizeof(St), n = static_cast<size_t>(o.images) * o.sms;
      CUDA_OK(cudaMalloc(&images, stage * n));
      TokArgs d = a;
      d.dump = images;
      d.steps = 1;
      kernel<<<1, threads, smem>>>(d);
      CUDA_OK(cudaGetLastError());
      CUDA_OK(cudaDeviceSynchronize());
      for (size_t have = 1; have < n;) {
        const size_t m = std::min(have, n - have);
        CUDA_OK(cudaMemcpy(reinterpret_cast<char*>(images) + have * stage, images, m * stage, cudaMemcpyDeviceToDevice));
        have += m;
      }
      b.images = images;
      b.n_images = o.images;
    }
    // The check: one CTA, check_steps steps (kWG = 1: value rows 0-63 only).
    b.steps = check_steps;
    kernel<<<1, threads, smem>>>(b);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<float> s_gpu(128 * 128), o_gpu(128 * kC);
    CUDA_OK(cudaMemcpy(s_gpu.data(), b.s_out, s_gpu.size() * 4, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(o_gpu.data(), b.o_out, o_gpu.size() * 4, cudaMemcpyDeviceToHost));
    const int rows = 64 * kWG;
    const std::vector<float> s_part(s_gpu.begin(), s_gpu.begin() + rows * 128), o_part(o_gpu.begin(), o_gpu.begin() + rows * kC);
    const std::vector<double> s_ref(S.begin(), S.begin() + rows * 128), o_ref(O.begin(), O.begin() + rows * kC);
    const double es = bench::rel_l2(s_part, s_ref), eo = bench::rel_l2(o_part, o_ref);
    const bool pass = es < 2e-3 && eo < 2e-3 && std::isfinite(es) && std::isfinite(eo);
    ok = ok && pass;
    // Timed: one CTA per SM, tokens / C steps each; the median of o.reps launches.
    b.s_out = nullptr;
    b.steps = std::max(1, o.tokens / kC);
    std::vector<float> times;
    for (int r = 0; r <= o.reps; ++r) {  // launch 0 warms up
      CUDA_OK(cudaEventRecord(e0));
      kernel<<<o.sms, threads, smem>>>(b);
      CUDA_OK(cudaEventRecord(e1));
      CUDA_OK(cudaEventSynchronize(e1));
      CUDA_OK(cudaGetLastError());
      float ms = 0;
      CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
      if (r > 0) times.push_back(ms);
    }
    std::sort(times.begin(), times.end());
    const double ms = times[times.size() / 2];
    const double us_step = 1000.0 * ms / b.steps, ns_token = 1e6 * ms / (static_cast<double>(b.steps) * kC);
    std::printf("C=%2d WG=%d %-7s stages %d x %6zu B, smem %6d: check state %.2e out %.2e %s | %8.3f ms, "
                "%7.4f us/step, %6.2f ns/token/chain\n",
                kC, kWG, kCopies ? "copies" : "chain", TokStorage<kC, kWG>::kStages, sizeof(St), smem, es, eo,
                pass ? "PASS" : "FAIL", ms, us_step, ns_token);
    std::fflush(stdout);
    if (images != nullptr) CUDA_OK(cudaFree(images));
  };
  using std::integral_constant;
  config(integral_constant<int, 1>{}, std::false_type{});
  config(integral_constant<int, 1>{}, std::true_type{});
  if constexpr (kC <= 32) {  // two consumer warpgroups: 208+ registers each (kC = 64 would not fit)
    config(integral_constant<int, 2>{}, std::false_type{});
    config(integral_constant<int, 2>{}, std::true_type{});
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--tokens" && i + 1 < argc) o.tokens = std::atoi(argv[++i]);
    else if (arg == "--images" && i + 1 < argc) o.images = std::max(1, std::atoi(argv[++i]));
    else if (arg == "--reps" && i + 1 < argc) o.reps = std::max(1, std::atoi(argv[++i]));
    else {
      std::fprintf(stderr, "usage: flash_kda_bench_step_tokens [--tokens N] [--images N] [--reps N] (unknown: %s)\n",
                   arg.c_str());
      return 2;
    }
  }
  int dev = 0, major = 0, minor = 0;
  CUDA_OK(cudaGetDevice(&dev));
  CUDA_OK(cudaDeviceGetAttribute(&o.sms, cudaDevAttrMultiProcessorCount, dev));
  CUDA_OK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  CUDA_OK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  if (major != 9) {
    std::fprintf(stderr, "needs an SM90 GPU (found sm_%d%d)\n", major, minor);
    return 1;
  }
  std::printf("tokens per chain %d, images per CTA %d, %d SMs, median of %d launches\n", o.tokens, o.images, o.sms, o.reps);
  bool ok = run_chunk<16>(o);
  ok = run_chunk<32>(o) && ok;
  ok = run_chunk<64>(o) && ok;
  std::printf("%s\n", ok ? "ALL CHECKS PASS" : "SOME CHECK FAILED");
  return ok ? 0 : 1;
}
