// flash_kda_bench_wgmma_step: the recurrence's chunk step on wgmma, alone (issue 10's feasibility
// question: how long is one 16-token step of a 64-row chain when the state lives in wgmma
// accumulators?). Not a kernel of the library: a measurement built from the tile layer
// (src/tile, src/ptx/wgmma.cuh) with the chunk's operands fixed in shared memory, so that only the
// chain's own latency and issue remain (no memory traffic, no preparation).
//
// One warpgroup owns 64 value rows of the float32 state S [64 x 128] (Acc<128>, 64 registers per
// thread) and per step computes, as the recurrence does (docs/design.md §2.2):
//   [X | Oin] = bf16(S) · [Wd; Qp]ᵀ     8 k-steps of m64n32k16, S as register A (no smem round trip)
//   [U0 | O0] = Vᵀ · [Tb; P]ᵀ           1 m64n32k16, both operands in smem (independent of S)
//   U = U0 − X,  O = O0 + Oin,  S ← S·Diag(Γ) + bf16(U)·Kr     (1 m64n128k16, U as register A)
// The first check runs a few steps against a CPU emulation with the same bf16 roundings; then
// every SM runs CTAs of 1 or 2 warpgroups for many steps: time per step = elapsed / steps.
// --variants: the same with the library kernel's parts added one at a time (wgmma_step_variants.cuh),
// each checked against the same emulation.
// Usage: flash_kda_bench_wgmma_step [--steps N] [--variants [--images N]]
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "benchmarks/bench_common.cuh"
#include "benchmarks/wgmma_step_kernel.cuh"
#include "reference/common.h"
#include "src/launch/tensor_map.h"

namespace {

// bf16 <-> float: the reference's (round to nearest even).
using kda::reference::bf16_to_float;
using kda::reference::float_to_bf16;
using kda::reference::round_bf16;

using kda::bench::to_device;

}  // namespace

int main(int argc, char** argv) {
  int steps = 4096;
  bool variants = false;
  int images_per_cta = 64;  // --variants' copy variants: stage images per CTA (64: from DRAM; 4: from L2)
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--steps" && i + 1 < argc) steps = std::atoi(argv[++i]);
    if (std::string(argv[i]) == "--variants") variants = true;
    if (std::string(argv[i]) == "--images" && i + 1 < argc) images_per_cta = std::atoi(argv[++i]);
  }
  int dev = 0, sms = 0, major = 0, minor = 0;
  CUDA_OK(cudaGetDevice(&dev));
  CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CUDA_OK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  CUDA_OK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  if (major != 9) {
    std::fprintf(stderr, "needs an SM90 GPU (found sm_%d%d)\n", major, minor);
    return 1;
  }

  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto bf16_vec = [&](size_t n, float scale) {
    std::vector<uint16_t> x(n);
    for (auto& e : x) e = float_to_bf16(scale * u(rng));
    return x;
  };
  const std::vector<uint16_t> wq = bf16_vec(32 * 128, 0.1f), kr = bf16_vec(16 * 128, 0.1f),
                              v = bf16_vec(16 * 128, 1.0f), tp = bf16_vec(32 * 16, 0.25f);
  std::vector<float> gamma(128), s0(128 * 128);
  for (auto& e : gamma) e = 0.7f + 0.2f * u(rng);
  for (auto& e : s0) e = u(rng);

  uint16_t *dwq = to_device(wq), *dkr = to_device(kr), *dv = to_device(v), *dtp = to_device(tp);
  float *dgamma = to_device(gamma), *ds0 = to_device(s0);
  float *ds_out = nullptr, *do_out = nullptr, *dsink = nullptr;
  uint16_t* dobuf = nullptr;
  CUDA_OK(cudaMalloc(&ds_out, 128 * 128 * sizeof(float)));
  CUDA_OK(cudaMalloc(&do_out, 128 * 16 * sizeof(float)));
  CUDA_OK(cudaMalloc(&dsink, 288 * sizeof(float)));
  CUDA_OK(cudaMalloc(&dobuf, 64 * 16 * 128 * sizeof(uint16_t)));

  // The CPU emulation of check_steps steps (same bf16 roundings).
  const int check_steps = 12;
  std::vector<double> S(s0.begin(), s0.end()), O(128 * 16);
  for (int step = 0; step < check_steps; ++step) {
    std::vector<double> Snew(128 * 128);
    for (int r = 0; r < 128; ++r) {
      double xo[32], uo[32];
      for (int n = 0; n < 32; ++n) {
        double x = 0, y = 0;
        for (int k = 0; k < 128; ++k) x += static_cast<double>(round_bf16(static_cast<float>(S[r * 128 + k]))) * bf16_to_float(wq[n * 128 + k]);
        for (int j = 0; j < 16; ++j) y += static_cast<double>(bf16_to_float(v[j * 128 + r])) * bf16_to_float(tp[n * 16 + j]);
        xo[n] = x;
        uo[n] = y;
      }
      float ub[16];
      for (int j = 0; j < 16; ++j) ub[j] = round_bf16(static_cast<float>(uo[j] - xo[j]));
      for (int j = 0; j < 16; ++j) O[r * 16 + j] = uo[16 + j] + xo[16 + j];
      for (int k = 0; k < 128; ++k) {
        double s = S[r * 128 + k] * static_cast<double>(gamma[k]);
        for (int j = 0; j < 16; ++j) s += static_cast<double>(ub[j]) * bf16_to_float(kr[j * 128 + k]);
        Snew[r * 128 + k] = s;
      }
    }
    S.swap(Snew);
  }

  cudaEvent_t e0, e1;
  CUDA_OK(cudaEventCreate(&e0));
  CUDA_OK(cudaEventCreate(&e1));
  bool ok = true;
  CUtensorMap vmap{};  // kTmaValues' values tensor (made below, before those variants run)
  // One variant: the check (one CTA of two warpgroups, check_steps steps), then the time per step
  // for each layout of `configs` (threads of consumers, CTAs per SM).
  auto run = [&](auto kVc, const char* label, std::initializer_list<std::array<int, 2>> configs) {
    constexpr int kV = decltype(kVc)::value;
    auto kernel = wgmma_step_kernel<kV>;
    const int smem = static_cast<int>(tile::smem_bytes<Storage<kV>>());
    CUDA_OK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    const int extra = (kV & kCopies) ? 128 : (kV & kMbar) ? 32 : 0;
    kernel<<<1, 256 + extra, smem>>>(dwq, dkr, dv, dtp, dgamma, ds0, check_steps, ds_out, do_out, dsink, dobuf, 2, vmap);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<float> s_gpu(128 * 128), o_gpu(128 * 16);
    CUDA_OK(cudaMemcpy(s_gpu.data(), ds_out, s_gpu.size() * 4, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(o_gpu.data(), do_out, o_gpu.size() * 4, cudaMemcpyDeviceToHost));
    const double es = bench::rel_l2(s_gpu, S), eo = bench::rel_l2(o_gpu, O);
    const bool pass = es < 2e-3 && eo < 2e-3;
    ok = ok && pass;
    std::printf("variant %2d %-44s check (%d steps vs CPU emulation): state %.2e, out %.2e: %s; %d bytes smem\n", kV,
                label, check_steps, es, eo, pass ? "PASS" : "FAIL", smem);
    for (const auto& c : configs) {
      const int threads = c[0], per_sm = c[1], grid = sms * per_sm, wgs = threads / 128;
      kernel<<<grid, threads + extra, smem>>>(dwq, dkr, dv, dtp, dgamma, ds0, 64, nullptr, nullptr, dsink, dobuf, wgs, vmap);
      CUDA_OK(cudaEventRecord(e0));
      kernel<<<grid, threads + extra, smem>>>(dwq, dkr, dv, dtp, dgamma, ds0, steps, nullptr, nullptr, dsink, dobuf,
                                              wgs, vmap);
      CUDA_OK(cudaEventRecord(e1));
      CUDA_OK(cudaEventSynchronize(e1));
      float ms = 0;
      CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
      const double us_step = 1000.0 * ms / steps;
      const double rows = static_cast<double>(grid) * wgs * 64;
      std::printf("  %d warpgroup(s) x %d CTA(s)/SM%s %10.3f ms %10.4f us/step %12.0f rows*steps/us\n", wgs, per_sm,
                  extra ? " + producer warp" : "", ms, us_step, rows / us_step);
    }
  };
  std::printf("steps %d, %d SMs\n", steps, sms);
  using std::integral_constant;
  run(integral_constant<int, 0>{}, "bare step", {{{128, 1}}, {{256, 1}}, {{128, 2}}, {{256, 2}}, {{128, 4}}});
  if (variants) {
    // Each of the kernel's additions alone (with the decay after the wait where it needs it), then together.
    const std::initializer_list<std::array<int, 2>> one = {{{128, 1}}, {{256, 1}}};
    run(integral_constant<int, kCap>{}, "+ the kernel's cap of 168 registers", one);
    run(integral_constant<int, kDecayAfter>{}, "+ decay after the wait", one);
    run(integral_constant<int, kGammaSmem>{}, "+ decay after, Gamma from smem", one);
    run(integral_constant<int, kRing>{}, "+ ring of stages, descriptors per step", one);
    run(integral_constant<int, kTwoTp>{}, "+ two [U0|O0] products", one);
    run(integral_constant<int, kOut>{}, "+ output stores", one);
    run(integral_constant<int, kRing | kMbar>{}, "+ ring, mbarrier hand-off", one);
    run(integral_constant<int, kGammaSmem | kRing>{}, "Gamma from smem + ring", one);
    run(integral_constant<int, kGammaSmem | kRing | kTwoTp | kOut>{}, "all but the hand-off", one);
    run(integral_constant<int, kGammaSmem | kRing | kTwoTp | kOut | kMbar>{}, "all (the kernel's step, no copies)", one);
    constexpr int kH = kRing | kMbar;  // the hand-off's parts
    run(integral_constant<int, kH | kNoFence>{}, "hand-off, no proxy fence", one);
    run(integral_constant<int, kH | kWarpArrive>{}, "hand-off, one arrival per warp", one);
    run(integral_constant<int, kH | kNoHint>{}, "hand-off, try_wait without hint", one);
    run(integral_constant<int, kH | kProducerFence>{}, "hand-off, the fence in the producer", one);
    run(integral_constant<int, kH | kSinkArrive>{}, "hand-off, arrivals without state", one);
    run(integral_constant<int, kH | kNoFence | kWarpArrive>{}, "hand-off, no fence, warp arrival", one);
    constexpr int kAll = kGammaSmem | kRing | kTwoTp | kOut | kMbar;
    run(integral_constant<int, kAll | kProducerFence>{}, "all, the fence in the producer", one);
    run(integral_constant<int, kAll | kProducerFence | kWarpArrive>{}, "all, producer fence, warp arrival", one);
    run(integral_constant<int, kAll | kNoFence | kWarpArrive | kNoHint>{}, "all, no fence, warp arrival, no hint", one);
    run(integral_constant<int, kH | kEarlyWait>{}, "hand-off, the next stage waited for early", one);
    run(integral_constant<int, kAll | kEarlyWait>{}, "all, the next stage waited for early", one);
    run(integral_constant<int, kAll | kEarlyWait | kGammaEarly>{}, "all, early wait, next Gamma loaded early", one);
    run(integral_constant<int, kAll | kEarlyWait | kProducerFence>{}, "all, early wait, producer fence", one);
    run(integral_constant<int, kH | kPairWait>{}, "hand-off per pair of steps", one);
    run(integral_constant<int, kAll | kPairWait>{}, "all, hand-off per pair of steps", one);
    run(integral_constant<int, kH | kProbe>{}, "hand-off, next stage probed during the batch", one);
    run(integral_constant<int, kAll | kProbe>{}, "all, next stage probed during the batch", one);
    run(integral_constant<int, kH | kTestWait>{}, "hand-off, test_wait polling", one);
    run(integral_constant<int, kAll | kTestWait>{}, "all, test_wait polling", one);
    // The kernel's data path: stage images copied from global memory (--images per CTA; 64: ~160 MB in
    // all, from DRAM, as a long sequence's records are; 4: ~10 MB, from L2, as a short call's records
    // are), built from the filled stage 0 of one CTA.
    {
      const size_t stage_bytes = sizeof(Stage), n_img = static_cast<size_t>(std::max(1, images_per_cta)),
                   ctas = static_cast<size_t>(2 * sms);
      uint4 *dump = nullptr, *images = nullptr;
      CUDA_OK(cudaMalloc(&dump, stage_bytes));
      CUDA_OK(cudaMalloc(&images, stage_bytes * n_img * ctas));
      CUDA_OK(cudaMemcpyToSymbol(g_dump, &dump, sizeof(dump)));
      auto k0 = wgmma_step_kernel<0>;
      const int smem0 = static_cast<int>(tile::smem_bytes<Storage<0>>());
      k0<<<1, 256, smem0>>>(dwq, dkr, dv, dtp, dgamma, ds0, 1, nullptr, nullptr, dsink, dobuf, 2, vmap);
      CUDA_OK(cudaGetLastError());
      CUDA_OK(cudaDeviceSynchronize());
      uint4* none = nullptr;
      CUDA_OK(cudaMemcpyToSymbol(g_dump, &none, sizeof(none)));
      CUDA_OK(cudaMemcpy(images, dump, stage_bytes, cudaMemcpyDeviceToDevice));
      for (size_t have = 1; have < n_img * ctas;) {  // doubling copies: 1, 2, 4, ... images
        const size_t n = std::min(have, n_img * ctas - have);
        CUDA_OK(cudaMemcpy(reinterpret_cast<char*>(images) + have * stage_bytes, images, n * stage_bytes,
                           cudaMemcpyDeviceToDevice));
        have += n;
      }
      const int ni = static_cast<int>(n_img);
      CUDA_OK(cudaMemcpyToSymbol(g_images, &images, sizeof(images)));
      CUDA_OK(cudaMemcpyToSymbol(g_n_images, &ni, sizeof(ni)));
      // The values tensor of kTmaValues: [n_img x ctas x 16 tokens][128] bf16, every block the chunk's v.
      uint16_t* vtensor = nullptr;
      CUDA_OK(cudaMalloc(&vtensor, n_img * ctas * v.size() * 2));
      CUDA_OK(cudaMemcpy(vtensor, v.data(), v.size() * 2, cudaMemcpyHostToDevice));
      for (size_t have = 1; have < n_img * ctas;) {
        const size_t n = std::min(have, n_img * ctas - have);
        CUDA_OK(cudaMemcpy(vtensor + have * v.size(), vtensor, n * v.size() * 2, cudaMemcpyDeviceToDevice));
        have += n;
      }
      const kda_status ms = sm90::make_tensor_map_2d_bf16(&vmap, vtensor, n_img * ctas * 16, 128, 128, 16, 64,
                                                          tile::Swizzle::k128B);
      if (ms.code != KDA_OK) {
        std::fprintf(stderr, "tensor map: %s\n", ms.message);
        return 2;
      }
      run(integral_constant<int, kH | kCopies>{}, "hand-off with the copies (a producer warpgroup)", one);
      run(integral_constant<int, kAll | kCopies>{}, "all with the copies: the kernel's step", one);
      run(integral_constant<int, kAll | kCopies | kProbe>{}, "all with the copies, probed", one);
      run(integral_constant<int, kH | kCopies | kBulk>{}, "hand-off, the stage by one bulk copy", one);
      run(integral_constant<int, kAll | kCopies | kBulk>{}, "all, the stage by one bulk copy", one);
      run(integral_constant<int, kAll | kCopies | kBulk | kMixed>{}, "all, 12 KB bulk + 6.9 KB cp.async", one);
      run(integral_constant<int, kAll | kCopies | kTmaValues>{}, "all, record by 2 bulk copies + values by TMA", one);
      run(integral_constant<int, kAll | kCopies | kTmaValues | kFourBulk>{}, "all, four bulk copies", one);
      run(integral_constant<int, kAll | kCopies | kRelayout>{}, "all, bulk to staging + placed by the producer", one);
    }
  }
  return ok ? 0 : 1;
}
