// flash_kda_bench: times kda_fwd on the benchmark cases of a cases.json (spec §7).
//
// Inputs as the anchors: q, k, v, g, beta ~ N(0, 1) bf16; A_log, dt_bias ~ U[0, 1) fp32; fp32
// initial and final states [N, H, V, K]; lower_bound -5; scale 1/sqrt(128). Inputs are generated on
// the device; when one set fits in L2 several sets are rotated so that timings do not measure L2.
// Per case, after the GPU has idled --idle-ms: median of --iters eager calls timed with CUDA events
// around the call (after warm-up), then the median of graph replays of the same call (kernel time
// without host overhead); the SM clock is probed before and after the eager calls. Writes
// one JSON object per case (--json PATH) for scripts/make_benchmark_md.py and prints a table.
//
// Usage: flash_kda_bench --cases cases.json [--json out.json] [--iters 50] [--filter NAME[,NAME...]]
//        (--filter: cases whose name contains a part; a part written =NAME selects that name only,
//                               benchmarks/case_filter.h)
//        [--context-split N]   (kda_fwd_params.context_split: 0 automatic, 1 off, N segments)
//        [--context-method M]  (kda_fwd_params.context_method: 0 automatic, 1 exact combine, 2 warm-up)
//        [--context-warmup-chunks W]  (kda_fwd_params.context_warmup_chunks, with --context-method 2: every
//                               piece warms up W chunks, the bound ignored; testing and measuring only)
//        [--single-pass S]     (kda_fwd_params.single_pass: 0 automatic, 1 never, 2 always, where a case
//                               the single pass does not take then fails with its message)
//        [--trusted-pointers]  (kda_fwd_params.trusted_pointers = 1: no per-tensor device queries;
//                               the published protocol measures the checked call, without it)
//        [--idle-ms N]         (default 300: the GPU idles N ms before each case's timed calls, so that
//                               no case runs at the clock that the previous case's power draw left;
//                               0: cases back to back, the protocol before 2026-12-01 16:00 UTC)
//        [--no-states]         (no initial and no final state: what the states' loads and stores cost;
//                               not part of the published protocol, which passes fp32 states)
//        [--diagnose]          (also, after the graph replays: the eager time again, and the eager
//                               call's GPU time alone, timed behind a 200 us kernel that keeps the
//                               GPU busy while the host enqueues the call: JSON eager_again_ms and
//                               eager_busy_ms; not part of the published protocol)
// Groups: prefill, prefill_small_heads, prefill_long_memory (the same random inputs except that every
// dt_bias_slow_every-th key channel of dt_bias is dt_bias_slow: slowly decaying channels).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "flash_kda/flash_kda.h"
#include "benchmarks/bench_common.cuh"
#include "tests/mini_json.h"

namespace {

bool g_no_states = false;  // --no-states

using namespace kda::bench;

// Keeps the GPU busy for about `ns` nanoseconds (one thread, ~2 clocks per ns).
__global__ void busy_wait(unsigned ns) {
  const unsigned long long t0 = clock64();
  while (clock64() - t0 < 2ull * ns) {
  }
}

// Every `every`-th key channel (k % every == 0) of a [H, 128] dt_bias set to `value`.
__global__ void set_slow_channels(float* dt_bias, int64_t n, int every, float value) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    if ((i % 128) % every == 0) dt_bias[i] = value;
}

struct Case {
  std::string group, name;
  std::vector<int64_t> seq_lens;
  int64_t B = 1, H = 1;
  int slow_every = 0;     // every slow_every-th key channel of dt_bias is slow_dt_bias (0: none)
  float slow_dt_bias = 0;
  double floor_ms = 0, flashkda_ms = 0, fla_ms = -1;
};

std::vector<Case> read_cases(const std::string& path) {
  std::string text, error;
  kda::test::Json root;
  if (!kda::test::read_file(path, &text) || !kda::test::parse_json(text, &root, &error)) {
    std::fprintf(stderr, "cannot read %s: %s\n", path.c_str(), error.c_str());
    std::exit(2);
  }
  std::vector<Case> cases;
  for (const char* group : {"prefill", "prefill_small_heads", "prefill_long_memory"}) {
    const kda::test::Json* list = root.get(group);
    if (list == nullptr) continue;
    for (const kda::test::Json& c : list->array) {
      Case k;
      k.group = group;
      k.name = c.get("name")->string;
      for (const kda::test::Json& s : c.get("seq_lens")->array) k.seq_lens.push_back(static_cast<int64_t>(s.number));
      k.B = static_cast<int64_t>(c.get("B")->number);
      k.H = static_cast<int64_t>(c.get("H")->number);
      k.floor_ms = c.get("floor_ms")->number;
      k.flashkda_ms = c.get("flashkda_ms")->number;
      if (const kda::test::Json* f = c.get("fla_ms")) k.fla_ms = f->number;
      if (const kda::test::Json* f = c.get("dt_bias_slow_every")) k.slow_every = static_cast<int>(f->number);
      if (const kda::test::Json* f = c.get("dt_bias_slow")) k.slow_dt_bias = static_cast<float>(f->number);
      cases.push_back(k);
    }
  }
  return cases;
}

struct InputSet {
  void *q, *k, *v, *g, *beta, *h0, *ht, *out;
};

struct Result {
  double eager_ms = 0, graph_ms = 0, host_us = 0;
  double sm_mhz_before = -1, sm_mhz_after = -1;  // the SM clock before and after the eager calls
  double eager_again_ms = -1, eager_busy_ms = -1;  // --diagnose
  unsigned long long non_finite = 0;
  int sets = 1;
};

Result run_case(const Case& c, int iters, int context_split, int context_method, int warmup_chunks, int single_pass,
                bool trusted_pointers, bool diagnose,
                int idle_ms) {
  const bool varlen = c.seq_lens.size() > 1;
  const int64_t B = varlen ? 1 : c.B;
  int64_t T = 0;
  for (int64_t s : c.seq_lens) T += s;
  const int64_t N = varlen ? static_cast<int64_t>(c.seq_lens.size()) : B;
  const int64_t H = c.H, D = 128;
  const size_t tok = static_cast<size_t>(B * T * H);
  const size_t state = static_cast<size_t>(N * H * D * D);
  const size_t set_bytes = tok * D * 2 * 5 + tok * 2 + state * 8;
  Result res;
  res.sets = static_cast<int>(std::min<size_t>(8, std::max<size_t>(1, (size_t(256) << 20) / set_bytes + 1)));

  std::vector<InputSet> sets(res.sets);
  for (int s = 0; s < res.sets; ++s) {
    InputSet& x = sets[s];
    CUDA_OK(cudaMalloc(&x.q, tok * D * 2));
    CUDA_OK(cudaMalloc(&x.k, tok * D * 2));
    CUDA_OK(cudaMalloc(&x.v, tok * D * 2));
    CUDA_OK(cudaMalloc(&x.g, tok * D * 2));
    CUDA_OK(cudaMalloc(&x.beta, tok * 2));
    CUDA_OK(cudaMalloc(&x.out, tok * D * 2));
    CUDA_OK(cudaMalloc(&x.h0, state * 4));
    CUDA_OK(cudaMalloc(&x.ht, state * 4));
    const uint64_t seed = 1000 * s + 1;
    fill_bf16<<<1024, 256>>>(static_cast<uint16_t*>(x.q), tok * D, seed + 1);
    fill_bf16<<<1024, 256>>>(static_cast<uint16_t*>(x.k), tok * D, seed + 2);
    fill_bf16<<<1024, 256>>>(static_cast<uint16_t*>(x.v), tok * D, seed + 3);
    fill_bf16<<<1024, 256>>>(static_cast<uint16_t*>(x.g), tok * D, seed + 4);
    fill_bf16<<<1024, 256>>>(static_cast<uint16_t*>(x.beta), tok, seed + 5);
    fill_f32<<<1024, 256>>>(static_cast<float*>(x.h0), state, seed + 6, true);
  }
  float *A_log, *dt_bias;
  CUDA_OK(cudaMalloc(&A_log, H * 4));
  CUDA_OK(cudaMalloc(&dt_bias, H * D * 4));
  fill_f32<<<1, 256>>>(A_log, H, 7, false);
  fill_f32<<<64, 256>>>(dt_bias, H * D, 8, false);
  if (c.slow_every > 0) set_slow_channels<<<64, 256>>>(dt_bias, H * D, c.slow_every, c.slow_dt_bias);
  int64_t* cu = nullptr;
  std::vector<int64_t> cu_host(1, 0);
  for (int64_t s : c.seq_lens) cu_host.push_back(cu_host.back() + s);
  if (varlen) {
    CUDA_OK(cudaMalloc(&cu, cu_host.size() * 8));
    CUDA_OK(cudaMemcpy(cu, cu_host.data(), cu_host.size() * 8, cudaMemcpyHostToDevice));
  }

  std::vector<kda_fwd_params> params(res.sets);
  const int64_t qk_shape[4] = {B, T, H, D}, beta_shape[3] = {B, T, H}, st_shape[4] = {N, H, D, D};
  const int64_t cu_shape[1] = {static_cast<int64_t>(cu_host.size())}, dt_shape[2] = {H, D};
  for (int s = 0; s < res.sets; ++s) {
    kda_fwd_params& p = params[s];
    kda_fwd_params_init(&p);
    p.q = kda_tensor_contiguous(sets[s].q, KDA_DTYPE_BF16, 4, qk_shape);
    p.k = kda_tensor_contiguous(sets[s].k, KDA_DTYPE_BF16, 4, qk_shape);
    p.v = kda_tensor_contiguous(sets[s].v, KDA_DTYPE_BF16, 4, qk_shape);
    p.g = kda_tensor_contiguous(sets[s].g, KDA_DTYPE_BF16, 4, qk_shape);
    p.beta = kda_tensor_contiguous(sets[s].beta, KDA_DTYPE_BF16, 3, beta_shape);
    p.out = kda_tensor_contiguous(sets[s].out, KDA_DTYPE_BF16, 4, qk_shape);
    p.A_log = kda_tensor_contiguous(A_log, KDA_DTYPE_F32, 1, &H);
    p.dt_bias = kda_tensor_contiguous(dt_bias, KDA_DTYPE_F32, 2, dt_shape);
    if (!g_no_states) {
      p.initial_state = kda_tensor_contiguous(sets[s].h0, KDA_DTYPE_F32, 4, st_shape);
      p.final_state = kda_tensor_contiguous(sets[s].ht, KDA_DTYPE_F32, 4, st_shape);
    }
    if (varlen) p.cu_seqlens = kda_tensor_contiguous(cu, KDA_DTYPE_I64, 1, cu_shape);
    p.lower_bound = -5.0f;
    p.scale = 1.0f / std::sqrt(128.0f);
    p.context_split = context_split;
    p.context_method = context_method;
    p.single_pass = single_pass;
    p.context_warmup_chunks = warmup_chunks;
    p.trusted_pointers = trusted_pointers ? 1 : 0;
  }
  size_t ws_bytes = 0;
  kda_status st = kda_fwd_workspace_size(&params[0], &ws_bytes);
  if (st.code != KDA_OK) {
    std::fprintf(stderr, "%s: %s\n", c.name.c_str(), st.message);
    std::exit(2);
  }
  void* ws = nullptr;
  CUDA_OK(cudaMalloc(&ws, ws_bytes));
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CUDA_OK(cudaDeviceSynchronize());

  auto call = [&](int i) {
    const kda_status s = kda_fwd(&params[i % res.sets], ws, ws_bytes, stream);
    if (s.code != KDA_OK) {
      std::fprintf(stderr, "%s: %s\n", c.name.c_str(), s.message);
      std::exit(2);
    }
  };
  cudaEvent_t e0, e1;
  CUDA_OK(cudaEventCreate(&e0));
  CUDA_OK(cudaEventCreate(&e1));
  double* probe;
  CUDA_OK(cudaMalloc(&probe, sizeof(double)));
  // The GPU idles before the case (its power management raises the clock again), then the warm-up.
  CUDA_OK(cudaDeviceSynchronize());
  if (idle_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(idle_ms));
  for (int i = 0; i < 10; ++i) call(i);
  CUDA_OK(cudaStreamSynchronize(stream));
  res.sm_mhz_before = sm_clock_mhz(stream, probe);
  // Median over `iters` of the CUDA-event time around launch(i); `busy`: behind a 200 us kernel, so
  // that the host has enqueued the call before the GPU reaches it (--diagnose).
  auto median_ms = [&](auto launch, bool busy = false) {
    std::vector<double> times;
    for (int i = 0; i < iters; ++i) {
      if (busy) busy_wait<<<1, 1, 0, stream>>>(200000);
      CUDA_OK(cudaEventRecord(e0, stream));
      launch(i);
      CUDA_OK(cudaEventRecord(e1, stream));
      CUDA_OK(cudaEventSynchronize(e1));
      float ms = 0;
      CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
      times.push_back(ms);
    }
    return median(times);
  };
  res.eager_ms = median_ms(call);
  res.sm_mhz_after = sm_clock_mhz(stream, probe);
  // Host time of one call (validation, plan, launches), the GPU kept busy: 20 calls back to back.
  {
    CUDA_OK(cudaStreamSynchronize(stream));
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 20; ++i) call(i);
    const auto t1 = std::chrono::steady_clock::now();
    res.host_us = std::chrono::duration<double, std::micro>(t1 - t0).count() / 20;
    CUDA_OK(cudaStreamSynchronize(stream));
  }

  // Kernel time: one graph per input set, replayed.
  std::vector<cudaGraphExec_t> execs(res.sets);
  for (int s = 0; s < res.sets; ++s) {
    cudaGraph_t graph;
    CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    call(s);
    CUDA_OK(cudaStreamEndCapture(stream, &graph));
    CUDA_OK(cudaGraphInstantiate(&execs[s], graph, 0));
    CUDA_OK(cudaGraphDestroy(graph));
  }
  for (int i = 0; i < 5; ++i) CUDA_OK(cudaGraphLaunch(execs[i % res.sets], stream));
  res.graph_ms = median_ms([&](int i) { CUDA_OK(cudaGraphLaunch(execs[i % res.sets], stream)); });

  if (diagnose) {
    res.eager_again_ms = median_ms(call);
    res.eager_busy_ms = median_ms(call, true);
  }

  unsigned long long* count;
  CUDA_OK(cudaMalloc(&count, 8));
  CUDA_OK(cudaMemset(count, 0, 8));
  count_non_finite_bf16<<<1024, 256, 0, stream>>>(static_cast<uint16_t*>(sets[0].out), tok * D, count);
  CUDA_OK(cudaMemcpy(&res.non_finite, count, 8, cudaMemcpyDeviceToHost));

  for (auto& e : execs) cudaGraphExecDestroy(e);
  cudaFree(count);
  cudaFree(probe);
  for (InputSet& x : sets)
    for (void* p : {x.q, x.k, x.v, x.g, x.beta, x.out, x.h0, x.ht}) cudaFree(p);
  cudaFree(A_log);
  cudaFree(dt_bias);
  cudaFree(cu);
  cudaFree(ws);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaStreamDestroy(stream);
  return res;
}

}  // namespace

int main(int argc, char** argv) {
  std::string cases_path, json_path, filter;
  int iters = 50, context_split = 0, context_method = 0, warmup_chunks = 0, single_pass = 0, idle_ms = 300;
  bool trusted_pointers = false, diagnose = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--cases") cases_path = next();
    else if (a == "--json") json_path = next();
    else if (a == "--iters") iters = std::max(5, std::atoi(next().c_str()));
    else if (a == "--filter") filter = next();
    else if (a == "--context-split") context_split = std::atoi(next().c_str());
    else if (a == "--context-method") context_method = std::atoi(next().c_str());
    else if (a == "--single-pass") single_pass = std::atoi(next().c_str());
    else if (a == "--context-warmup-chunks") warmup_chunks = std::atoi(next().c_str());
    else if (a == "--trusted-pointers") trusted_pointers = true;
    else if (a == "--diagnose") diagnose = true;
    else if (a == "--no-states") g_no_states = true;
    else if (a == "--idle-ms") idle_ms = std::max(0, std::atoi(next().c_str()));
    else {
      std::fprintf(stderr,
                   "usage: %s --cases cases.json [--json out.json] [--iters 50] [--filter NAME[,NAME...]] "
                   "[--context-split N] [--context-method M] [--context-warmup-chunks W] [--single-pass S] [--trusted-pointers] [--idle-ms N] [--no-states] [--diagnose]\n",
                   argv[0]);
      return 2;
    }
  }
  if (cases_path.empty()) {
    std::fprintf(stderr, "--cases is required\n");
    return 2;
  }
  cudaDeviceProp prop;
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s (%d SMs), flash_kda %s\n", prop.name, prop.multiProcessorCount, kda_version_string());
  std::printf("%-22s %9s %9s %8s %7s %9s %8s %8s %8s %7s\n", "case", "ms", "graph_ms", "floor", "xfloor", "flashkda", "speedup",
              "vs_fla", "host_us", "sm_mhz");
  std::ofstream json;
  if (!json_path.empty()) json.open(json_path);
  int bad = 0;
  // Geometric-mean speedup over FlashKDA and geometric-mean time, per group and over all cases.
  struct Mean {
    double log_speedup = 0, log_ms = 0;
    int n = 0;
  };
  std::vector<std::pair<std::string, Mean>> means;
  auto add = [&](const std::string& group, double speedup, double ms) {
    auto it = std::find_if(means.begin(), means.end(), [&](const auto& m) { return m.first == group; });
    if (it == means.end()) it = means.insert(means.end(), {group, Mean{}});
    it->second.log_speedup += std::log(speedup);
    it->second.log_ms += std::log(ms);
    ++it->second.n;
  };
  for (const Case& c : read_cases(cases_path)) {
    if (!matches(filter, c.name)) continue;
    const Result r =
        run_case(c, iters, context_split, context_method, warmup_chunks, single_pass, trusted_pointers, diagnose, idle_ms);
    const double speedup = c.flashkda_ms / r.eager_ms;
    add(c.group, speedup, r.eager_ms);
    add("all", speedup, r.eager_ms);
    std::printf("%-22s %9.4f %9.4f %8.4f %7.2f %9.3f %8.2f %8s %8.1f %7.0f%s\n", c.name.c_str(), r.eager_ms, r.graph_ms,
                c.floor_ms, r.eager_ms / c.floor_ms, c.flashkda_ms, speedup,
                c.fla_ms > 0 ? std::to_string(c.fla_ms / r.eager_ms).substr(0, 5).c_str() : "-", r.host_us,
                r.sm_mhz_after, r.non_finite ? "  NON-FINITE OUTPUT" : "");
    if (diagnose)
      std::printf("%-22s eager again %9.4f, eager behind a busy GPU %9.4f (graph %9.4f)\n", "", r.eager_again_ms,
                  r.eager_busy_ms, r.graph_ms);
    bad += r.non_finite != 0;
    if (json.is_open())
      json << "{\"group\":\"" << c.group << "\",\"name\":\"" << c.name << "\",\"ms\":" << r.eager_ms
           << ",\"graph_ms\":" << r.graph_ms << ",\"host_us\":" << r.host_us << ",\"floor_ms\":" << c.floor_ms << ",\"flashkda_ms\":" << c.flashkda_ms
           << ",\"fla_ms\":" << c.fla_ms << ",\"input_sets\":" << r.sets << ",\"non_finite\":" << r.non_finite
           << ",\"context_split\":" << context_split << ",\"context_method\":" << context_method << ",\"single_pass\":" << single_pass << ",\"context_warmup_chunks\":" << warmup_chunks
           << ",\"idle_ms\":" << idle_ms << ",\"sm_mhz_before\":" << r.sm_mhz_before
           << ",\"sm_mhz_after\":" << r.sm_mhz_after;
    if (json.is_open() && diagnose)
      json << ",\"eager_again_ms\":" << r.eager_again_ms << ",\"eager_busy_ms\":" << r.eager_busy_ms;
    if (json.is_open()) json << "}\n";
  }
  for (const auto& [group, m] : means)
    std::printf("geometric mean %-20s speedup over FlashKDA %.2fx, time %.4f ms, over %d cases\n", group.c_str(),
                std::exp(m.log_speedup / m.n), std::exp(m.log_ms / m.n), m.n);
  return bad ? 1 : 0;
}
