// flash_kda_bench_fused_piece: issue 10's single pass, measured before it is built. One CTA per value
// head runs a whole sequence of n chunks with the preparation inside the CTA: kPrepWG preparation
// warpgroups run the library's prepare_chunk (prep_chunk.cuh, through an environment that makes its
// barriers named barriers of the warpgroup and sends its record stores to a shared-memory ring
// stage in the layout wgmma reads, wgmma_stage.h) and copy the chunk's values, while one or two
// consumer warpgroups run the wgmma recurrence's chunk step (chunk_recurrence_wgmma_kernel.cuh) on
// those stages: no record in global memory, no second launch. Not a kernel of the library: a
// measurement (docs/performance_notes.md, "Issue 10 measured before it is built").
//
// Also the warp preparation (benchmarks/prep_warp_kernel.cuh) in the same place: four independent
// preparation warps beside the two consumer warpgroups (w4c2; d4c2: each warp loads its next chunk
// ahead; w8c2: eight warps), and the same with idle consumers (wprep, dprep, w8prep). --warp-only:
// kda_fwd and those alone.
//
// Checked against kda_fwd on the same inputs (one pass, context_split = 1): with prepare_chunk the
// outputs must be bitwise equal (the same preparation and step arithmetic); with the warp preparation,
// whose records differ from prepare_chunk's by bf16 roundings, within 3e-3 relative L2. The final states differ by about the
// accuracy of a plain last update (2.2e-3 relative L2 on random inputs): the library's last update
// carries U and Kr as hi + lo pairs (FLASH_KDA_FINAL_SPLIT), this one does not; required < 4e-3.
// Timed against kda_fwd as CUDA-graph replays (medians), H = 132 heads (one CTA per SM) and several
// sequence lengths: the per-SM work of a warm-up plan's pass with pieces of n chunks.
// Usage: flash_kda_bench_fused_piece [--chunks n,n,...] [--heads H] [--warp-only]
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "benchmarks/bench_common.cuh"
#include "benchmarks/fused_piece_kernel.cuh"
#include "flash_kda/flash_kda.h"
#include "src/kernels/sm90/fast_div.h"
#include "src/launch/tensor_map.h"

int main(int argc, char** argv) {
  std::vector<int> chunk_counts = {3, 8, 13, 17, 33, 64};
  int H = 132;
  bool warp_only = false;  // only kda_fwd and the warp-preparation layouts
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--heads" && i + 1 < argc) H = std::atoi(argv[++i]);
    if (std::string(argv[i]) == "--warp-only") warp_only = true;
    if (std::string(argv[i]) == "--chunks" && i + 1 < argc) {
      chunk_counts.clear();
      for (char* tok = std::strtok(argv[++i], ","); tok; tok = std::strtok(nullptr, ",")) chunk_counts.push_back(std::atoi(tok));
    }
  }
  using namespace kda::bench;
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const int64_t D = 128;
  bool ok = true;
  // pPcC: P preparation warpgroups and C consumer warpgroups (C = 1: one warpgroup steps both 64-row
  // halves); best/x: the fastest of them over kda_fwd; prepP: P preparation warpgroups with idle
  // consumers (the preparation alone). Check: outputs that differ from kda_fwd's (bitwise), and the
  // final state's relative L2 difference.
  std::printf("%-7s %-6s %10s %10s %10s %10s %10s %9s %9s %9s %9s %9s %10s %9s %9s %10s %9s %9s %10s %9s %9s  %s\n", "chunks", "heads", "kda_fwd",
              "p1c2", "p2c2", "p2c1", "p3c1", "best/x", "prep1", "prep2", "prep3", "prep4", "w4c2", "w4c2/x", "wprep", "d4c2", "d4c2/x", "dprep", "w8c2", "w8c2/x", "w8prep",
              "check (all times ms)");
  for (int n : chunk_counts) {
    const int64_t T = 16 * n;
    const size_t tok = static_cast<size_t>(T * H);
    uint16_t *q, *k, *v, *g, *beta, *out_ref, *out;
    float *h0, *ht_ref, *ht, *A_log, *dt_bias;
    CUDA_OK(cudaMalloc(&q, tok * D * 2));
    CUDA_OK(cudaMalloc(&k, tok * D * 2));
    CUDA_OK(cudaMalloc(&v, tok * D * 2));
    CUDA_OK(cudaMalloc(&g, tok * D * 2));
    CUDA_OK(cudaMalloc(&beta, tok * 2));
    CUDA_OK(cudaMalloc(&out_ref, tok * D * 2));
    CUDA_OK(cudaMalloc(&out, tok * D * 2));
    CUDA_OK(cudaMalloc(&h0, H * D * D * 4));
    CUDA_OK(cudaMalloc(&ht_ref, H * D * D * 4));
    CUDA_OK(cudaMalloc(&ht, H * D * D * 4));
    CUDA_OK(cudaMalloc(&A_log, H * 4));
    CUDA_OK(cudaMalloc(&dt_bias, H * D * 4));
    fill_bf16<<<1024, 256>>>(q, tok * D, 11);
    fill_bf16<<<1024, 256>>>(k, tok * D, 12);
    fill_bf16<<<1024, 256>>>(v, tok * D, 13);
    fill_bf16<<<1024, 256>>>(g, tok * D, 14);
    fill_bf16<<<1024, 256>>>(beta, tok, 15);
    fill_f32<<<1024, 256>>>(h0, H * D * D, 16, true);
    fill_f32<<<1, 256>>>(A_log, H, 17, false);
    fill_f32<<<64, 256>>>(dt_bias, H * D, 18, false);
    CUDA_OK(cudaDeviceSynchronize());

    // The library, one pass (context_split = 1).
    kda_fwd_params p;
    kda_fwd_params_init(&p);
    const int64_t qk_shape[4] = {1, T, H, D}, beta_shape[3] = {1, T, H}, st_shape[4] = {1, H, D, D};
    const int64_t h64 = H, dt_shape[2] = {H, D};
    p.q = kda_tensor_contiguous(q, KDA_DTYPE_BF16, 4, qk_shape);
    p.k = kda_tensor_contiguous(k, KDA_DTYPE_BF16, 4, qk_shape);
    p.v = kda_tensor_contiguous(v, KDA_DTYPE_BF16, 4, qk_shape);
    p.g = kda_tensor_contiguous(g, KDA_DTYPE_BF16, 4, qk_shape);
    p.beta = kda_tensor_contiguous(beta, KDA_DTYPE_BF16, 3, beta_shape);
    p.out = kda_tensor_contiguous(out_ref, KDA_DTYPE_BF16, 4, qk_shape);
    p.A_log = kda_tensor_contiguous(A_log, KDA_DTYPE_F32, 1, &h64);
    p.dt_bias = kda_tensor_contiguous(dt_bias, KDA_DTYPE_F32, 2, dt_shape);
    p.initial_state = kda_tensor_contiguous(h0, KDA_DTYPE_F32, 4, st_shape);
    p.final_state = kda_tensor_contiguous(ht_ref, KDA_DTYPE_F32, 4, st_shape);
    p.lower_bound = -5.0f;
    p.scale = 1.0f / std::sqrt(128.0f);
    p.context_split = 1;
    size_t ws_bytes = 0;
    kda_status s = kda_fwd_workspace_size(&p, &ws_bytes);
    if (s.code != KDA_OK) {
      std::fprintf(stderr, "%s\n", s.message);
      return 2;
    }
    void* ws = nullptr;
    CUDA_OK(cudaMalloc(&ws, ws_bytes));
    auto call = [&] {
      const kda_status r = kda_fwd(&p, ws, ws_bytes, reinterpret_cast<kda_stream_t>(stream));
      if (r.code != KDA_OK) {
        std::fprintf(stderr, "%s\n", r.message);
        std::exit(2);
      }
    };

    // The fused kernel's arguments: the preparation's, as the launcher fills them for this problem.
    FusedArgs fa{};
    PrepParams& pp = fa.pp;
    pp = bench_prep::dense_prep_params(q, k, g, beta, A_log, dt_bias, H, T);
    const Strides4 st4{T * H * D, H * D, D};
    pp.records = reinterpret_cast<uint8_t*>(uintptr_t{1} << 20);  // never dereferenced (StageEnv::at)
    fa.v = v;
    fa.v_st = st4;
    fa.h0 = h0;
    fa.ht = ht;
    fa.out = out;
    fa.out_st = st4;
    fa.chunks = n;
    {  // the warp preparation's tensor maps
      const kda_status ms = bench_prep::make_qkg_maps(q, k, g, H, T, &fa.qmap, &fa.kmap, &fa.gmap);
      if (ms.code != KDA_OK) {
        std::fprintf(stderr, "tensor map: %s\n", ms.message);
        return 2;
      }
    }
    // `kernel` on H CTAs of `threads`, `smem` bytes of dynamic shared memory, on the stream.
    auto launch_kernel = [&](auto kernel, int threads, int smem) {
      CUDA_OK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      kernel<<<H, threads, smem, stream>>>(fa);
      CUDA_OK(cudaGetLastError());
    };
    // The warp preparation's layouts (kIdle, kDouble, kPW).
    auto launch_warp = [&](auto kI, auto kD, auto kW) {
      constexpr bool I = decltype(kI)::value, Dbl = decltype(kD)::value;
      constexpr int W = decltype(kW)::value;
      launch_kernel(fused_warp_kernel<I, Dbl, W>, 32 * W + 256,
                    static_cast<int>(tile::smem_bytes<FusedWarpStorage<Dbl, W>>()));
    };
    // One prepare_chunk layout (kPrepWG, kConsumerWG, kIdle).
    auto launch = [&](auto kP, auto kC, auto kI) {
      constexpr int P = decltype(kP)::value, Cw = decltype(kC)::value;
      constexpr bool I = decltype(kI)::value;
      launch_kernel(fused_piece_kernel<P, Cw, I>, FusedConfig<P, Cw, I>::kThreads,
                    static_cast<int>(tile::smem_bytes<FusedStorage<P, Cw>>()));
    };
    using std::integral_constant;
    using I1 = integral_constant<int, 1>;
    using I2 = integral_constant<int, 2>;
    using I3 = integral_constant<int, 3>;
    using I4 = integral_constant<int, 4>;
    using Busy = std::false_type;
    using Idle = std::true_type;

    call();
    CUDA_OK(cudaStreamSynchronize(stream));
    std::vector<uint16_t> o_ref(tok * D), o(tok * D);
    std::vector<float> s_ref(H * D * D), s_f(H * D * D);
    CUDA_OK(cudaMemcpy(o_ref.data(), out_ref, tok * D * 2, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(s_ref.data(), ht_ref, H * D * D * 4, cudaMemcpyDeviceToHost));
    std::string check;
    // The four computing layouts: checked, then timed.
    // exact: outputs bitwise equal to kda_fwd's (prepare_chunk's records); otherwise (the warp
    // preparation, whose records differ from prepare_chunk's by roundings) a relative L2 difference of
    // the outputs below 3e-3, about one bf16 unit on a few percent of them.
    auto run = [&](const char* name, auto enqueue, bool exact = true) {
      CUDA_OK(cudaMemset(out, 0xff, tok * D * 2));
      enqueue();
      CUDA_OK(cudaStreamSynchronize(stream));
      CUDA_OK(cudaMemcpy(o.data(), out, tok * D * 2, cudaMemcpyDeviceToHost));
      CUDA_OK(cudaMemcpy(s_f.data(), ht, H * D * D * 4, cudaMemcpyDeviceToHost));
      size_t diff = 0;
      double num = 0.0, den = 0.0;
      for (size_t i = 0; i < o.size(); ++i) {
        diff += o[i] != o_ref[i];
        const double x = bf16_bits_value(o[i]), r = bf16_bits_value(o_ref[i]);
        num += (x - r) * (x - r);
        den += r * r;
      }
      const double eo = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
      const double es = rel_l2(s_f, s_ref);
      const bool pass = (exact ? diff == 0 : eo < 3e-3) && es < 4e-3;
      ok = ok && pass;
      char b[192];
      std::snprintf(b, sizeof(b), "%s%s: %zu differ (out %.1e), %.2e %s", check.empty() ? "" : "; ", name, diff, eo, es,
                    pass ? "PASS" : "FAIL");
      check += b;
      return graph_ms(stream, enqueue);
    };
    const double t_lib = graph_ms(stream, call);
    const double f12 = warp_only ? 0.0 : run("p1c2", [&] { launch(I1{}, I2{}, Busy{}); });
    const double f22 = warp_only ? 0.0 : run("p2c2", [&] { launch(I2{}, I2{}, Busy{}); });
    const double f21 = warp_only ? 0.0 : run("p2c1", [&] { launch(I2{}, I1{}, Busy{}); });
    const double f31 = warp_only ? 0.0 : run("p3c1", [&] { launch(I3{}, I1{}, Busy{}); });
    const double i1 = warp_only ? 0.0 : graph_ms(stream, [&] { launch(I1{}, I2{}, Idle{}); });
    const double i2 = warp_only ? 0.0 : graph_ms(stream, [&] { launch(I2{}, I2{}, Idle{}); });
    const double i3 = warp_only ? 0.0 : graph_ms(stream, [&] { launch(I3{}, I2{}, Idle{}); });
    const double i4 = warp_only ? 0.0 : graph_ms(stream, [&] { launch(I4{}, I2{}, Idle{}); });
    using W4 = integral_constant<int, 4>;
    using W8 = integral_constant<int, 8>;
    const double w4 = run("w4c2", [&] { launch_warp(Busy{}, std::false_type{}, W4{}); }, false);
    const double wi = graph_ms(stream, [&] { launch_warp(Idle{}, std::false_type{}, W4{}); });
    const double d4 = run("d4c2", [&] { launch_warp(Busy{}, std::true_type{}, W4{}); }, false);
    const double di = graph_ms(stream, [&] { launch_warp(Idle{}, std::true_type{}, W4{}); });
    const double w8 = run("w8c2", [&] { launch_warp(Busy{}, std::false_type{}, W8{}); }, false);
    const double w8i = graph_ms(stream, [&] { launch_warp(Idle{}, std::false_type{}, W8{}); });

    std::printf("%-7d %-6d %10.4f %10.4f %10.4f %10.4f %10.4f %9.3f %9.4f %9.4f %9.4f %9.4f %10.4f %9.3f %9.4f %10.4f %9.3f %9.4f %10.4f %9.3f %9.4f  %s\n", n,
                H, t_lib, f12, f22, f21, f31, std::min(std::min(f12, f22), std::min(f21, f31)) / t_lib, i1, i2, i3, i4, w4,
                w4 / t_lib, wi, d4, d4 / t_lib, di, w8, w8 / t_lib, w8i, check.c_str());
    for (void* ptr : {(void*)q, (void*)k, (void*)v, (void*)g, (void*)beta, (void*)out_ref, (void*)out, (void*)h0,
                      (void*)ht_ref, (void*)ht, (void*)A_log, (void*)dt_bias, ws})
      CUDA_OK(cudaFree(ptr));
  }
  return ok ? 0 : 1;
}
