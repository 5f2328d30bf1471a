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
// ahead; w8c2: eight warps), and the same with idle consumers (wprep, dprep, w8prep); the late form
// (prep_warp_kernel.cuh RecordTo::kLate: a warp takes its stage once T and P exist) with four or eight
// warps (l4c2, l8c2, l4prep, l8prep), and its variants on the lines below each row (fused_warp_kernel's
// kFlags: one consumer warpgroup with both halves in registers l8c1 / l4c1, key loops unrolled 2 or 1
// l8c1u2 / l8c1u1 / l8c1u4 / l4c2u2, consumers first, L2 prefetch, the chain alone, a 104 / 152 register split,
// 3 stages). --warp-only: kda_fwd and those alone; --only a,b: only the named warp layouts (the
// names in the check column, or the timed variables of the idle and chain-alone runs; the others print 0).
//
// Checked against kda_fwd on the same inputs (its two kernels in one pass: context_split = 1, single_pass
// never): with prepare_chunk the
// outputs must be bitwise equal (the same preparation and step arithmetic; this holds where kda_fwd
// steps 128-row slices on wgmma, as with the default H = 132: with a few heads its plan takes narrower
// slices on other instructions, and those layouts then report differences: use --warp-only there); with the warp preparation,
// whose records differ from prepare_chunk's by bf16 roundings, within 3e-3 relative L2. The final states differ by about the
// accuracy of a plain last update (2.2e-3 relative L2 on random inputs): the library's last update
// carries U and Kr as hi + lo pairs (FLASH_KDA_FINAL_SPLIT), this one does not; required < 4e-3.
// Timed against kda_fwd as CUDA-graph replays (medians), H = 132 heads (one CTA per SM) and several
// sequence lengths: the per-SM work of a warm-up plan's pass with pieces of n chunks.
// Usage: flash_kda_bench_fused_piece [--chunks n,n,...] [--heads H] [--warp-only] [--only layout,...]
//        [--tail r] (T = 16 n - r: a partial last chunk; only the layouts that take one run: prepare_chunk's,
//        l8c1u2p and l4c2u2p)
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
#include "benchmarks/fused_warp_kernel.cuh"
#include "benchmarks/prep_warp_host.h"
#include "flash_kda/flash_kda.h"
#include "src/kernels/sm90/fast_div.h"
#include "src/launch/tensor_map.h"

int main(int argc, char** argv) {
  std::vector<int> chunk_counts = {3, 8, 13, 17, 33, 64};
  int H = 132;
  bool warp_only = false;  // only kda_fwd and the warp-preparation layouts
  int tail = 0;            // --tail r: T = 16 n - r (the last chunk partial)
  std::string only;        // --only a,b,...: only these warp layouts (check names, or the idle timings' variables)
  auto selected = [&](const char* name) { return only.empty() || ("," + only + ",").find("," + std::string(name) + ",") != std::string::npos; };
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--heads" && i + 1 < argc) H = std::atoi(argv[++i]);
    if (std::string(argv[i]) == "--warp-only") warp_only = true;
    if (std::string(argv[i]) == "--tail" && i + 1 < argc) tail = std::atoi(argv[++i]) & 15;
    if (std::string(argv[i]) == "--only" && i + 1 < argc) {
      only = argv[++i];
      warp_only = true;
    }
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
  std::printf("%-7s %-6s %10s %10s %10s %10s %10s %9s %9s %9s %9s %9s %10s %9s %9s %10s %9s %9s %10s %9s %9s %10s %9s %9s %10s %9s %9s  %s\n", "chunks", "heads", "kda_fwd",
              "p1c2", "p2c2", "p2c1", "p3c1", "best/x", "prep1", "prep2", "prep3", "prep4", "w4c2", "w4c2/x", "wprep", "d4c2", "d4c2/x", "dprep", "w8c2", "w8c2/x", "w8prep",
              "l4c2", "l4c2/x", "l4prep", "l8c2", "l8c2/x", "l8prep", "check (all times ms)");
  for (int n : chunk_counts) {
    const int64_t T = 16 * n - tail;
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

    // The library on its two kernels, one pass (context_split = 1, single_pass never).
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
    // The two kernels (the pieces here are what they would run; the library's single pass, which the
    // automatic choice takes from 93 heads on, is the l8c1u2 layout: docs/design.md §3.5).
    p.single_pass = KDA_SINGLE_PASS_NEVER;
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
      kda_status ms = bench_prep::make_qkg_maps(q, k, g, H, T, &fa.qmap, &fa.kmap, &fa.gmap);
      if (ms.code == KDA_OK) ms = bench_prep::make_box_map(v, H, T, &fa.vmap);
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
    // The warp preparation's layouts (kIdle, kDouble, kPW, kLate, kFlags).
    auto launch_warp = [&](auto kI, auto kD, auto kW, auto kL, auto kF) {
      constexpr bool I = decltype(kI)::value, Dbl = decltype(kD)::value, Lt = decltype(kL)::value;
      constexpr int W = decltype(kW)::value, F = decltype(kF)::value;
      launch_kernel(fused_warp_kernel<I, Dbl, W, Lt, F>, kFusedWarpThreads<W, F>,
                    static_cast<int>(tile::smem_bytes<FusedWarpStorage<Dbl, W, Lt, (F & kThreeStages) ? 3 : 8>>()));
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
    // With a partial last chunk (--tail) only the layouts that take one: prepare_chunk's and the late
    // form with kPartialChunks (names ending in "p").
    auto takes_tail = [&](const char* name) {
      const std::string nm(name);
      return tail == 0 || nm[0] == 'p' || (nm.size() > 1 && nm.back() == 'p' && nm[0] == 'l');
    };
    auto run = [&](const char* name, auto enqueue, bool exact = true) -> double {
      if (!selected(name) || !takes_tail(name)) return 0.0;
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
    // A layout timed without its check (idle consumers, or the chain alone), when selected.
    auto idle = [&](const char* name, auto enqueue) -> double {
      return selected(name) && tail == 0 ? graph_ms(stream, enqueue) : 0.0;
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
    using No = std::false_type;
    using F0 = integral_constant<int, 0>;
    using Yes = std::true_type;
    // The late form (kLate) with W warps and flags F: checked and timed (busy), its preparation alone
    // (idle consumers), or timed without a check (busy_timed: the chain-alone and timing-only flags).
    auto late_busy = [&](const char* name, auto kW, auto kF) {
      return run(name, [&] { launch_warp(Busy{}, No{}, kW, Yes{}, kF); }, false);
    };
    auto late_idle = [&](const char* name, auto kW, auto kF) {
      return idle(name, [&] { launch_warp(Idle{}, No{}, kW, Yes{}, kF); });
    };
    auto late_busy_timed = [&](const char* name, auto kW, auto kF) {
      return idle(name, [&] { launch_warp(Busy{}, No{}, kW, Yes{}, kF); });
    };
    const double w4 = run("w4c2", [&] { launch_warp(Busy{}, No{}, W4{}, No{}, F0{}); }, false);
    const double wi = idle("wi", [&] { launch_warp(Idle{}, No{}, W4{}, No{}, F0{}); });
    const double d4 = run("d4c2", [&] { launch_warp(Busy{}, Yes{}, W4{}, No{}, F0{}); }, false);
    const double di = idle("di", [&] { launch_warp(Idle{}, Yes{}, W4{}, No{}, F0{}); });
    const double w8 = run("w8c2", [&] { launch_warp(Busy{}, No{}, W8{}, No{}, F0{}); }, false);
    const double w8i = idle("w8i", [&] { launch_warp(Idle{}, No{}, W8{}, No{}, F0{}); });
    const double l4 = late_busy("l4c2", W4{}, F0{});
    const double l4i = late_idle("l4i", W4{}, F0{});
    const double l8 = late_busy("l8c2", W8{}, F0{});
    const double l8i = late_idle("l8i", W8{}, F0{});

    // The late eight-warp form's variants (kFlags): consumers first (cf), next chunk prefetched into L2
    // (pf), both; the chain alone in this layout (skip: the warps only take stages and copy values).
    using F1 = integral_constant<int, kConsumersFirst>;
    using F2 = integral_constant<int, kPrefetchNext>;
    using F3 = integral_constant<int, kConsumersFirst | kPrefetchNext>;
    using F4 = integral_constant<int, kSkipPrep>;
    using F5 = integral_constant<int, kSkipPrep | kConsumersFirst>;
    const double v_cf = late_busy("l8c2cf", W8{}, F1{});
    const double v_pf = late_busy("l8c2pf", W8{}, F2{});
    const double v_cfpf = late_busy("l8c2cfpf", W8{}, F3{});
    const double v_pfi = late_idle("v_pfi", W8{}, F2{});
    const double v_skip = late_busy_timed("v_skip", W8{}, F4{});
    const double v_skipcf = late_busy_timed("v_skipcf", W8{}, F5{});
    using F8 = integral_constant<int, kConsumerRegs152>;
    using F12 = integral_constant<int, kSkipPrep | kConsumerRegs152>;
    const double v_w = late_busy("l8c2w", W8{}, F8{});
    const double v_skipw = late_busy_timed("v_skipw", W8{}, F12{});
    using F16 = integral_constant<int, kOneConsumer>;
    using F20 = integral_constant<int, kOneConsumer | kSkipPrep>;
    const double o8 = late_busy("l8c1", W8{}, F16{});
    const double o8i = late_idle("o8i", W8{}, F16{});
    const double o8skip = late_busy_timed("o8skip", W8{}, F20{});
    const double o4 = late_busy("l4c1", W4{}, F16{});
    const double o4skip = late_busy_timed("o4skip", W4{}, F20{});
    using F48 = integral_constant<int, kOneConsumer | kUnroll2>;
    using F80 = integral_constant<int, kOneConsumer | kUnroll1>;
    using F32 = integral_constant<int, kUnroll2>;
    const double u8c1_2 = late_busy("l8c1u2", W8{}, F48{});
    const double u8c1_2i = late_idle("u8c1_2i", W8{}, F48{});
    const double u8c1_1 = late_busy("l8c1u1", W8{}, F80{});
    const double u8c1_1i = late_idle("u8c1_1i", W8{}, F80{});
    const double u4c2_2 = late_busy("l4c2u2", W4{}, F32{});
    const double u4c2_2i = late_idle("u4c2_2i", W4{}, F32{});
    const double u4c1_2 = late_busy("l4c1u2", W4{}, F48{});
    using F176 = integral_constant<int, kOneConsumer | kUnroll2 | kThreeStages>;
    using F528 = integral_constant<int, kOneConsumer | kUnroll4>;
    const double u8c1_4 = late_busy("l8c1u4", W8{}, F528{});
    using F1072 = integral_constant<int, kOneConsumer | kUnroll2 | kOverlapUpdate>;
    using F1044 = integral_constant<int, kOneConsumer | kSkipPrep | kOverlapUpdate>;
    const double ov = late_busy("l8c1u2ov", W8{}, F1072{});
    const double ovskip = late_busy_timed("ovskip", W8{}, F1044{});
    using F2096 = integral_constant<int, kOneConsumer | kUnroll2 | kPartialChunks>;
    using F2080 = integral_constant<int, kUnroll2 | kPartialChunks>;
    const double u8p = late_busy("l8c1u2p", W8{}, F2096{});
    const double u4p = late_busy("l4c2u2p", W4{}, F2080{});
    using F304 = integral_constant<int, kOneConsumer | kUnroll2 | kHalfChain>;
    const double u8half = late_busy_timed("u8half", W8{}, F304{});
    const double u4c1_3 = late_busy("l4c1u2s3", W4{}, F176{});
    const double l4pf = late_busy("l4c2pf", W4{}, F2{});
    const double l4cfpf = late_busy("l4c2cfpf", W4{}, F3{});
    const double l4skip = late_busy_timed("l4skip", W4{}, F4{});

    std::printf("%-7d %-6d %10.4f %10.4f %10.4f %10.4f %10.4f %9.3f %9.4f %9.4f %9.4f %9.4f %10.4f %9.3f %9.4f %10.4f %9.3f %9.4f %10.4f %9.3f %9.4f %10.4f %9.3f %9.4f %10.4f %9.3f %9.4f  %s\n", n,
                H, t_lib, f12, f22, f21, f31, std::min(std::min(f12, f22), std::min(f21, f31)) / t_lib, i1, i2, i3, i4, w4,
                w4 / t_lib, wi, d4, d4 / t_lib, di, w8, w8 / t_lib, w8i, l4, l4 / t_lib, l4i, l8, l8 / t_lib, l8i, check.c_str());
    std::printf("        one consumer warpgroup, both halves in registers (ms): l8c1 %.4f (%.3fx kda_fwd), l8c1 prep alone %.4f, "
                "l8c1 chain alone %.4f; l4c1 %.4f, l4c1 chain alone %.4f\n",
                o8, o8 / t_lib, o8i, o8skip, o4, o4skip);
    std::printf("        key loops rolled (ms): l8c1 unroll 2 %.4f (%.3fx kda_fwd; prep alone %.4f), unroll 1 %.4f (%.3fx; %.4f); "
                "l4c2 unroll 2 %.4f (%.3fx; %.4f); l4c1 unroll 2 %.4f (%.3fx), the same on 3 stages %.4f; "
                "l8c1u2 stepping half 0 only %.4f; l8c1 unroll 4 %.4f (%.3fx); l8c1u2 with half 0's update "
                "overlapped %.4f (%.3fx), its chain alone %.4f; with partial chunks allowed: l8c1u2p %.4f (%.3fx), "
                "l4c2u2p %.4f (%.3fx)\n",
                u8c1_2, u8c1_2 / t_lib, u8c1_2i, u8c1_1, u8c1_1 / t_lib, u8c1_1i, u4c2_2, u4c2_2 / t_lib, u4c2_2i, u4c1_2,
                u4c1_2 / t_lib, u4c1_3, u8half, u8c1_4, u8c1_4 / t_lib, ov, ov / t_lib, ovskip, u8p, u8p / t_lib, u4p,
                u4p / t_lib);
    std::printf("        late form variants (ms): l8c2 cf %.4f pf %.4f cf+pf %.4f, l8prep pf %.4f, l8 chain alone %.4f (cf %.4f); "
                "regs 104/152: l8c2 %.4f, chain alone %.4f; l4c2 pf %.4f cf+pf %.4f, l4 chain alone %.4f\n",
                v_cf, v_pf, v_cfpf, v_pfi, v_skip, v_skipcf, v_w, v_skipw, l4pf, l4cfpf, l4skip);
    for (void* ptr : {(void*)q, (void*)k, (void*)v, (void*)g, (void*)beta, (void*)out_ref, (void*)out, (void*)h0,
                      (void*)ht_ref, (void*)ht, (void*)A_log, (void*)dt_bias, ws})
      CUDA_OK(cudaFree(ptr));
  }
  return ok ? 0 : 1;
}
