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
// Usage: flash_kda_bench_wgmma_step [--steps N]
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "benchmarks/bench_common.cuh"
#include "reference/common.h"
#include "src/ptx/tma.cuh"  // fence_proxy_async_shared
#include "src/ptx/wgmma.cuh"
#include "src/tile/fragments.cuh"
#include "src/tile/operand.h"
#include "src/tile/smem_layout.h"
#include "src/tile/swizzle.h"

namespace {

using namespace kda;
using tile::Swizzle;

using WqTile = tile::SwizzledTile<Swizzle::k128B, 32, 128>;  // [Wd; Qp]: N = 32 rows, K = 128 (K-major B)
using VtTile = tile::SwizzledTile<Swizzle::k128B, 16, 64>;   // V chunk: K = 16 tokens x M = 64 rows (MN-major A)
using TpTile = tile::SwizzledTile<Swizzle::k32B, 32, 16>;    // [Tb; P]: N = 32 x K = 16 tokens (K-major B)
using KrTile = tile::SwizzledTile<Swizzle::k128B, 16, 128>;  // Kr: K = 16 tokens x N = 128 (MN-major B)

struct Storage {
  tile::TileBuffer<WqTile> wq;
  tile::TileBuffer<KrTile> kr;
  tile::TileBuffer<VtTile> vt[2];  // one per warpgroup (its 64 value rows)
  tile::TileBuffer<TpTile> tp;
  float gamma[128];
};

// Operands in plain layouts: wq [32][128], kr [16][128], v [16][128] (token, value row), tp [32][16],
// gamma [128]; s0 / s_out [128][128] (value row, key column); o_out [128][16] (the last step's O).
__global__ void __launch_bounds__(256) wgmma_step_kernel(const uint16_t* wq, const uint16_t* kr, const uint16_t* v,
                                                         const uint16_t* tp, const float* gamma, const float* s0,
                                                         int steps, float* s_out, float* o_out, float* sink) {
  extern __shared__ unsigned char smem_raw[];
  Storage& st = *tile::smem_storage<Storage>(smem_raw);
  const int tid = threadIdx.x, wg = tid / 128, t = tid % 128;
  uint16_t* swq = reinterpret_cast<uint16_t*>(st.wq.bytes);
  uint16_t* skr = reinterpret_cast<uint16_t*>(st.kr.bytes);
  uint16_t* stp = reinterpret_cast<uint16_t*>(st.tp.bytes);
  for (int i = tid; i < 32 * 128; i += blockDim.x) swq[WqTile::index(i / 128, i % 128)] = wq[i];
  for (int i = tid; i < 16 * 128; i += blockDim.x) skr[KrTile::index(i / 128, i % 128)] = kr[i];
  for (int i = tid; i < 32 * 16; i += blockDim.x) stp[TpTile::index(i / 16, i % 16)] = tp[i];
  for (int i = tid; i < 2 * 16 * 64; i += blockDim.x) {
    const int w = i / (16 * 64), j = (i / 64) % 16, r = i % 64;
    reinterpret_cast<uint16_t*>(st.vt[w].bytes)[VtTile::index(j, r)] = v[j * 128 + 64 * w + r];
  }
  for (int i = tid; i < 128; i += blockDim.x) st.gamma[i] = gamma[i];
  ptx::fence_proxy_async_shared();
  __syncthreads();
  if (wg >= static_cast<int>(blockDim.x / 128)) return;

  const uint32_t wq_addr = static_cast<uint32_t>(__cvta_generic_to_shared(st.wq.bytes));
  const uint32_t kr_addr = static_cast<uint32_t>(__cvta_generic_to_shared(st.kr.bytes));
  const uint32_t vt_addr = static_cast<uint32_t>(__cvta_generic_to_shared(st.vt[wg].bytes));
  const uint32_t tp_addr = static_cast<uint32_t>(__cvta_generic_to_shared(st.tp.bytes));
  const uint64_t d_vt = tile::mnmajor_operand<VtTile>(0).at(vt_addr);
  const uint64_t d_tp = tile::kmajor_operand<TpTile>(0).at(tp_addr);
  const uint64_t d_kr = tile::mnmajor_operand<KrTile>(0).at(kr_addr);

  using S_t = tile::Acc<128>;
  using XO_t = tile::Acc<32>;
  S_t S;
  float g[S_t::kCount];
#pragma unroll
  for (int i = 0; i < S_t::kCount; ++i) {
    S.v[i] = s0[(64 * wg + S_t::row(t, i)) * 128 + S_t::col(t, i)];
    g[i] = st.gamma[S_t::col(t, i)];
  }
  XO_t xo, uo;
  float acc = 0.0f;
  for (int step = 0; step < steps; ++step) {
    uint32_t sa[8][4];
#pragma unroll
    for (int s = 0; s < 8; ++s) S.to_a(s, sa[s]);
    uo.fence_operand();
    xo.fence_operand();
    ptx::wgmma_fence();
    uo.mma_ss<1, 0>(d_vt, d_tp, false);
#pragma unroll
    for (int s = 0; s < 8; ++s) xo.mma_rs<0>(sa[s], tile::kmajor_operand<WqTile>(s).at(wq_addr), s > 0);
    ptx::wgmma_commit_group();
    // S·Diag(Γ) while the products run (S's bf16 copy is already taken).
#pragma unroll
    for (int i = 0; i < S_t::kCount; ++i) S.v[i] *= g[i];
    ptx::wgmma_wait_group<0>();
    uo.fence_operand();
    xo.fence_operand();
#pragma unroll
    for (int i = 0; i < XO_t::kCount; ++i) {
      if (XO_t::col(t, i) < 16)
        uo.v[i] -= xo.v[i];  // U
      else
        uo.v[i] += xo.v[i];  // O
    }
    uint32_t ua[4];
    uo.to_a(0, ua);
    S.fence_operand();
    ptx::wgmma_fence();
    S.mma_rs<1>(ua, d_kr, true);
    ptx::wgmma_commit_group();
    // The output would be stored here; keep it live.
#pragma unroll
    for (int i = 0; i < XO_t::kCount; ++i)
      if (XO_t::col(t, i) >= 16) acc += uo.v[i];
    ptx::wgmma_wait_group<0>();
    S.fence_operand();
  }
  if (s_out != nullptr) {
#pragma unroll
    for (int i = 0; i < S_t::kCount; ++i) s_out[(64 * wg + S_t::row(t, i)) * 128 + S_t::col(t, i)] = S.v[i];
#pragma unroll
    for (int i = 0; i < XO_t::kCount; ++i)
      if (XO_t::col(t, i) >= 16) o_out[(64 * wg + XO_t::row(t, i)) * 16 + XO_t::col(t, i) - 16] = uo.v[i];
  }
  if (acc == 1234.5f) sink[tid] = acc;  // never true in practice; keeps the output products live
}

// bf16 <-> float: the reference's (round to nearest even).
using kda::reference::bf16_to_float;
using kda::reference::float_to_bf16;
using kda::reference::round_bf16;

template <typename T>
T* to_device(const std::vector<T>& h) {
  T* d = nullptr;
  CUDA_OK(cudaMalloc(&d, h.size() * sizeof(T)));
  CUDA_OK(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

double rel_l2(const std::vector<float>& x, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    num += (x[i] - ref[i]) * (x[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / den);
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 4096;
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--steps" && i + 1 < argc) steps = std::atoi(argv[++i]);
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
  CUDA_OK(cudaMalloc(&ds_out, 128 * 128 * sizeof(float)));
  CUDA_OK(cudaMalloc(&do_out, 128 * 16 * sizeof(float)));
  CUDA_OK(cudaMalloc(&dsink, 256 * sizeof(float)));
  const int smem = static_cast<int>(tile::smem_bytes<Storage>());
  CUDA_OK(cudaFuncSetAttribute(wgmma_step_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));

  // 1. Correctness: 12 steps on one CTA of two warpgroups against the CPU emulation.
  const int check_steps = 12;
  wgmma_step_kernel<<<1, 256, smem>>>(dwq, dkr, dv, dtp, dgamma, ds0, check_steps, ds_out, do_out, dsink);
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<float> s_gpu(128 * 128), o_gpu(128 * 16);
  CUDA_OK(cudaMemcpy(s_gpu.data(), ds_out, s_gpu.size() * 4, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(o_gpu.data(), do_out, o_gpu.size() * 4, cudaMemcpyDeviceToHost));
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
  const double es = rel_l2(s_gpu, S), eo = rel_l2(o_gpu, O);
  const bool ok = es < 2e-3 && eo < 2e-3;
  std::printf("check (%d steps, 2 warpgroups vs CPU emulation): state rel L2 %.2e, out rel L2 %.2e: %s\n", check_steps,
              es, eo, ok ? "PASS" : "FAIL");

  // 2. Time per step: CTAs of 1 or 2 warpgroups, 1 or 2 CTAs per SM.
  cudaEvent_t e0, e1;
  CUDA_OK(cudaEventCreate(&e0));
  CUDA_OK(cudaEventCreate(&e1));
  std::printf("steps %d, %d SMs, %d bytes smem per CTA\n", steps, sms, smem);
  std::printf("%-34s %10s %12s %16s\n", "layout", "ms", "us/step", "rows*steps/us");
  const int configs[][2] = {{128, 1}, {256, 1}, {128, 2}, {256, 2}, {128, 4}};
  for (const auto& c : configs) {
    const int threads = c[0], per_sm = c[1], grid = sms * per_sm;
    wgmma_step_kernel<<<grid, threads, smem>>>(dwq, dkr, dv, dtp, dgamma, ds0, 64, nullptr, nullptr, dsink);
    CUDA_OK(cudaEventRecord(e0));
    wgmma_step_kernel<<<grid, threads, smem>>>(dwq, dkr, dv, dtp, dgamma, ds0, steps, nullptr, nullptr, dsink);
    CUDA_OK(cudaEventRecord(e1));
    CUDA_OK(cudaEventSynchronize(e1));
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
    const double us_step = 1000.0 * ms / steps;
    const double rows = static_cast<double>(grid) * (threads / 128) * 64;
    char name[64];
    std::snprintf(name, sizeof(name), "%d warpgroup(s) x %d CTA(s)/SM", threads / 128, per_sm);
    std::printf("%-34s %10.3f %12.4f %16.0f\n", name, ms, us_step, rows / us_step);
  }
  return ok ? 0 : 1;
}
