// flash_kda_bench_decode: times kda_decode on the `decode` cases of a cases.json (one token per
// sequence, fp32 pool) plus a bf16-pool twin of each and speculative-verify cases (T = 4 tokens,
// [N, 4] slot indices with num_accepted_tokens, a state written per token).
//
// Inputs as the anchors: q, k, v, g, beta ~ N(0, 1) bf16; A_log, dt_bias ~ U[0, 1) fp32; pool
// states ~ N(0, 1); lower_bound -5; scale 1/sqrt(128). The pool holds several disjoint sets of
// slots (randomly permuted) when one call's states would fit in L2, and consecutive calls rotate
// through them. Per case and kernel configuration (0 = the automatic plan, then every forced one):
// the median of --iters eager calls (CUDA events around the C API call, after warm-up), and the
// kernel time from CUDA-graph replay (--graph-calls calls captured in one graph, median replay time
// / calls). floor = state bytes read + written / 4.27 TB/s (cases.json's definition). Once per case,
// decode cases (T = 1) also time the same bytes moved by a plain streaming copy kernel (copy_kernel:
// one call's states into a separate buffer, in a graph of --graph-calls copies rotated over the same
// sets, timed as the calls): what a copy achieves at that size, the practical floor of a call that
// reads and writes every state once. (cudaMemcpyAsync is not the reference: it measured 1.58x the
// floor at B256 H32, far slower than a kernel, 2026-12-01.) Writes one JSON object per (case, configuration)
// (--json PATH) for scripts/make_benchmark_md.py.
//
// Usage: flash_kda_bench_decode --cases cases.json [--json out.json] [--iters 50] [--graph-calls 20]
//        [--filter NAME[,NAME...]] [--configs 0,1,2,3,4,5,6,7]
//        (--filter: as flash_kda_bench's, benchmarks/case_filter.h: substrings, or =NAME for one name)
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "flash_kda/flash_kda.h"
#include "benchmarks/bench_common.cuh"
#include "tests/mini_json.h"

namespace {

using namespace kda::bench;

constexpr double kBandwidth = 4.27e12;  // bytes/s, cases.json
constexpr int64_t D = 128;

struct Case {
  std::string name;
  int64_t B = 1, H = 8, T = 1;
  bool bf16_pool = false;
  double fla_us = -1, fla_graph_us = -1;  // cases.json anchors (fp32 decode cases only)
  double floor_us() const {
    const double states = static_cast<double>(B * H) * D * D * (bf16_pool ? 2 : 4);
    return states * (T == 1 ? 2 : 1 + T) / kBandwidth * 1e6;  // read once; written once per token slot
  }
};

std::vector<Case> make_cases(const std::string& path) {
  std::string text, error;
  kda::test::Json root;
  if (!kda::test::read_file(path, &text) || !kda::test::parse_json(text, &root, &error)) {
    std::fprintf(stderr, "cannot read %s: %s\n", path.c_str(), error.c_str());
    std::exit(2);
  }
  std::vector<Case> fp32, bf16;
  if (const kda::test::Json* list = root.get("decode"))
    for (const kda::test::Json& c : list->array) {
      Case k;
      k.name = c.get("name")->string;
      k.B = static_cast<int64_t>(c.get("B")->number);
      k.H = static_cast<int64_t>(c.get("H")->number);
      if (const kda::test::Json* f = c.get("fla_us")) k.fla_us = f->number;
      if (const kda::test::Json* f = c.get("fla_graph_us")) k.fla_graph_us = f->number;
      fp32.push_back(k);
      Case b = k;
      b.name += "_bf16";
      b.bf16_pool = true;
      b.fla_us = b.fla_graph_us = -1;
      bf16.push_back(b);
    }
  std::vector<Case> all = fp32;
  all.insert(all.end(), bf16.begin(), bf16.end());
  // Verify (1 + 3 speculative tokens) and the decode case it is compared with per token.
  for (int64_t B : {32, 256})
    for (int64_t H : {8, 32}) {
      Case v;
      v.B = B;
      v.H = H;
      v.T = 4;
      v.name = "verify4_B" + std::to_string(B) + "_H" + std::to_string(H);
      all.push_back(v);
    }
  Case extra;  // the decode twin of verify4_B32_H32 (not in cases.json)
  extra.name = "decode_B32_H32";
  extra.B = 32;
  extra.H = 32;
  all.push_back(extra);
  return all;
}

// The reference copy: 16-byte loads, four in flight per thread before their stores, grid-stride.
__global__ void copy_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, size_t n) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
    dst[i] = a;
    dst[i + stride] = b;
    dst[i + 2 * stride] = c;
    dst[i + 3 * stride] = d;
  }
  for (; i < n; i += stride) dst[i] = src[i];
}

struct Result {
  double eager_us = 0, graph_us = 0, copy_graph_us = 0;
  unsigned long long non_finite = 0;
  int sets = 1;
};

Result run_case(const Case& c, int config, int iters, int graph_calls, bool time_copy) {
  const int64_t N = c.B, H = c.H, T = c.T, cols = T;  // T = 1: [N] indices
  const size_t tok = static_cast<size_t>(N * T * H);
  const size_t state_bytes = static_cast<size_t>(N * H * D * D) * (c.bf16_pool ? 2 : 4) * static_cast<size_t>(cols);
  Result res;
  res.sets = static_cast<int>(std::min<size_t>(8, std::max<size_t>(1, (size_t(256) << 20) / state_bytes + 1)));
  const int64_t slots = N * cols * res.sets;

  uint16_t *q, *k, *v, *g, *beta, *out;
  float *A_log, *dt_bias;
  void* pool;
  CUDA_OK(cudaMalloc(&q, tok * D * 2));
  CUDA_OK(cudaMalloc(&k, tok * D * 2));
  CUDA_OK(cudaMalloc(&v, tok * D * 2));
  CUDA_OK(cudaMalloc(&g, tok * D * 2));
  CUDA_OK(cudaMalloc(&beta, tok * 2));
  CUDA_OK(cudaMalloc(&out, tok * D * 2));
  CUDA_OK(cudaMalloc(&A_log, H * 4));
  CUDA_OK(cudaMalloc(&dt_bias, H * D * 4));
  const size_t pool_elems = static_cast<size_t>(slots * H * D * D);
  CUDA_OK(cudaMalloc(&pool, pool_elems * (c.bf16_pool ? 2 : 4)));
  fill_bf16<<<1024, 256>>>(q, tok * D, 1);
  fill_bf16<<<1024, 256>>>(k, tok * D, 2);
  fill_bf16<<<1024, 256>>>(v, tok * D, 3);
  fill_bf16<<<1024, 256>>>(g, tok * D, 4);
  fill_bf16<<<1024, 256>>>(beta, tok, 5);
  fill_f32<<<1, 256>>>(A_log, H, 7, false);
  fill_f32<<<64, 256>>>(dt_bias, H * D, 8, false);
  if (c.bf16_pool)
    fill_bf16<<<4096, 256>>>(static_cast<uint16_t*>(pool), pool_elems, 6);
  else
    fill_f32<<<4096, 256>>>(static_cast<float*>(pool), pool_elems, 6, true);

  // Index sets: a random permutation of the slots, N x cols per set; every sequence accepted all
  // T tokens of its previous step (reads column T - 1).
  std::vector<int32_t> perm(static_cast<size_t>(slots));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(12345));
  int32_t* idx;
  int32_t* accepted;
  CUDA_OK(cudaMalloc(&idx, perm.size() * 4));
  CUDA_OK(cudaMemcpy(idx, perm.data(), perm.size() * 4, cudaMemcpyHostToDevice));
  std::vector<int32_t> acc(static_cast<size_t>(N), static_cast<int32_t>(T));
  CUDA_OK(cudaMalloc(&accepted, acc.size() * 4));
  CUDA_OK(cudaMemcpy(accepted, acc.data(), acc.size() * 4, cudaMemcpyHostToDevice));

  std::vector<kda_decode_params> params(res.sets);
  const int64_t qk_shape[4] = {N, T, H, D}, beta_shape[3] = {N, T, H}, dt_shape[2] = {H, D};
  const int64_t pool_shape[4] = {slots, H, D, D}, idx_shape[2] = {N, cols};
  for (int s = 0; s < res.sets; ++s) {
    kda_decode_params& p = params[s];
    kda_decode_params_init(&p);
    p.q = kda_tensor_contiguous(q, KDA_DTYPE_BF16, 4, qk_shape);
    p.k = kda_tensor_contiguous(k, KDA_DTYPE_BF16, 4, qk_shape);
    p.v = kda_tensor_contiguous(v, KDA_DTYPE_BF16, 4, qk_shape);
    p.g = kda_tensor_contiguous(g, KDA_DTYPE_BF16, 4, qk_shape);
    p.beta = kda_tensor_contiguous(beta, KDA_DTYPE_BF16, 3, beta_shape);
    p.out = kda_tensor_contiguous(out, KDA_DTYPE_BF16, 4, qk_shape);
    p.A_log = kda_tensor_contiguous(A_log, KDA_DTYPE_F32, 1, &H);
    p.dt_bias = kda_tensor_contiguous(dt_bias, KDA_DTYPE_F32, 2, dt_shape);
    p.state_pool = kda_tensor_contiguous(pool, c.bf16_pool ? KDA_DTYPE_BF16 : KDA_DTYPE_F32, 4, pool_shape);
    p.state_indices = kda_tensor_contiguous(idx + s * N * cols, KDA_DTYPE_I32, T == 1 ? 1 : 2, idx_shape);
    if (T > 1) p.num_accepted_tokens = kda_tensor_contiguous(accepted, KDA_DTYPE_I32, 1, &N);
    p.lower_bound = -5.0;
    p.kernel_config = config;
  }
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CUDA_OK(cudaDeviceSynchronize());
  auto call = [&](int i) {
    const kda_status st = kda_decode(&params[i % res.sets], stream);
    if (st.code != KDA_OK) {
      std::fprintf(stderr, "%s: %s\n", c.name.c_str(), st.message);
      std::exit(2);
    }
  };
  cudaEvent_t e0, e1;
  CUDA_OK(cudaEventCreate(&e0));
  CUDA_OK(cudaEventCreate(&e1));
  for (int i = 0; i < 10; ++i) call(i);
  CUDA_OK(cudaStreamSynchronize(stream));
  auto median_us = [&](int n, auto launch) {
    std::vector<double> times;
    for (int i = 0; i < n; ++i) {
      CUDA_OK(cudaEventRecord(e0, stream));
      launch(i);
      CUDA_OK(cudaEventRecord(e1, stream));
      CUDA_OK(cudaEventSynchronize(e1));
      float ms = 0;
      CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
      times.push_back(ms * 1e3);
    }
    return median(times);
  };
  res.eager_us = median_us(iters, call);
  // Time per issue(i) from replays of one graph holding graph_calls of them.
  auto graph_us = [&](auto issue) {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < graph_calls; ++i) issue(i);
    CUDA_OK(cudaStreamEndCapture(stream, &graph));
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    CUDA_OK(cudaGraphDestroy(graph));
    for (int i = 0; i < 3; ++i) CUDA_OK(cudaGraphLaunch(exec, stream));
    const double us =
        median_us(std::max(10, iters / 2), [&](int) { CUDA_OK(cudaGraphLaunch(exec, stream)); }) / graph_calls;
    CUDA_OK(cudaGraphExecDestroy(exec));
    return us;
  };
  if (graph_calls > 0) res.graph_us = graph_us(call);

  if (time_copy && graph_calls > 0 && T == 1) {
    // One call's state bytes as a contiguous copy from the pool's set s into a separate buffer
    // (read once, written once, as decode does), rotated over the sets like the calls; at most
    // 2,112 CTAs of 256 threads (16 per SM of an H200), grid-stride beyond that.
    const size_t one = static_cast<size_t>(N * H * D * D) * (c.bf16_pool ? 2 : 4);
    const size_t n16 = one / 16;
    char* dst;
    CUDA_OK(cudaMalloc(&dst, one * static_cast<size_t>(res.sets)));
    res.copy_graph_us = graph_us([&](int i) {
      const size_t s = static_cast<size_t>(i % res.sets);
      copy_kernel<<<static_cast<unsigned>(std::min<size_t>((n16 + 1023) / 1024, 132 * 16)), 256, 0, stream>>>(
          reinterpret_cast<const uint4*>(static_cast<const char*>(pool) + s * one), reinterpret_cast<uint4*>(dst + s * one),
          n16);
      CUDA_OK(cudaGetLastError());
    });
    CUDA_OK(cudaStreamSynchronize(stream));
    cudaFree(dst);
  }

  unsigned long long* count;
  CUDA_OK(cudaMalloc(&count, 8));
  CUDA_OK(cudaMemset(count, 0, 8));
  count_non_finite_bf16<<<1024, 256, 0, stream>>>(out, tok * D, count);
  CUDA_OK(cudaMemcpy(&res.non_finite, count, 8, cudaMemcpyDeviceToHost));
  cudaFree(count);
  for (void* p : {static_cast<void*>(q), static_cast<void*>(k), static_cast<void*>(v), static_cast<void*>(g),
                  static_cast<void*>(beta), static_cast<void*>(out), static_cast<void*>(A_log),
                  static_cast<void*>(dt_bias), pool, static_cast<void*>(idx), static_cast<void*>(accepted)})
    cudaFree(p);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaStreamDestroy(stream);
  return res;
}

}  // namespace

int main(int argc, char** argv) {
  std::string cases_path, json_path, filter, configs_arg = "0,1,2,3,4,5,6,7";
  int iters = 50, graph_calls = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--cases")
      cases_path = next();
    else if (a == "--json")
      json_path = next();
    else if (a == "--iters")
      iters = std::max(5, std::atoi(next().c_str()));
    else if (a == "--graph-calls")
      graph_calls = std::max(0, std::atoi(next().c_str()));
    else if (a == "--filter")
      filter = next();
    else if (a == "--configs")
      configs_arg = next();
    else {
      std::fprintf(stderr,
                   "usage: %s --cases cases.json [--json out.json] [--iters 50] [--graph-calls 20] "
                   "[--filter NAME[,NAME...]] [--configs 0,1,2,3,4,5,6,7]\n",
                   argv[0]);
      return 2;
    }
  }
  if (cases_path.empty()) {
    std::fprintf(stderr, "--cases is required\n");
    return 2;
  }
  std::vector<int> configs;
  for (size_t s = 0; s <= configs_arg.size();) {
    const size_t e = std::min(configs_arg.find(',', s), configs_arg.size());
    if (e > s) configs.push_back(std::atoi(configs_arg.substr(s, e - s).c_str()));
    s = e + 1;
  }
  cudaDeviceProp prop;
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s (%d SMs), flash_kda %s; times in us; graph = kernel time per call (%d calls per graph)\n",
              prop.name, prop.multiProcessorCount, kda_version_string(), graph_calls);
  std::printf("%-20s %4s %8s %8s %8s %7s %8s %7s %8s %8s %s\n", "case", "cfg", "us", "graph", "floor", "xfloor",
              "copy", "xcopy", "fla_grph", "vs_fla", "sets");
  std::ofstream json;
  if (!json_path.empty()) json.open(json_path);
  int bad = 0;
  for (const Case& c : make_cases(cases_path)) {
    if (!matches(filter, c.name)) continue;
    double copy_us = 0;  // timed with the first configuration of the case
    for (int config : configs) {
      const Result r = run_case(c, config, iters, graph_calls, copy_us == 0);
      if (copy_us == 0) copy_us = r.copy_graph_us;
      const double fl = c.floor_us();
      std::printf("%-20s %4d %8.2f %8.2f %8.2f %7.2f %8.2f %7.2f %8.1f %8s %d%s\n", c.name.c_str(), config, r.eager_us,
                  r.graph_us, fl, r.graph_us / fl, copy_us, copy_us > 0 ? r.graph_us / copy_us : 0.0, c.fla_graph_us,
                  c.fla_graph_us > 0 ? (std::to_string(c.fla_graph_us / r.graph_us).substr(0, 5) + "x").c_str() : "-",
                  r.sets, r.non_finite ? "  NON-FINITE OUTPUT" : "");
      std::fflush(stdout);
      bad += r.non_finite != 0;
      if (json.is_open())
        json << "{\"group\":\"decode\",\"name\":\"" << c.name << "\",\"B\":" << c.B << ",\"H\":" << c.H
             << ",\"T\":" << c.T << ",\"pool\":\"" << (c.bf16_pool ? "bf16" : "f32") << "\",\"config\":" << config
             << ",\"us\":" << r.eager_us << ",\"graph_us\":" << r.graph_us << ",\"floor_us\":" << fl
             << ",\"copy_graph_us\":" << copy_us
             << ",\"fla_us\":" << c.fla_us << ",\"fla_graph_us\":" << c.fla_graph_us << ",\"input_sets\":" << r.sets
             << ",\"non_finite\":" << r.non_finite << "}\n";
    }
  }
  return bad ? 1 : 0;
}
