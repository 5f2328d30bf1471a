// GPU harness for context parallelism across GPUs (see cp_harness.h).
#include "tests/gpu/cp_harness.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

#include "src/api/problem.h"
#include "tests/gpu/gpu_harness.h"

namespace kda::test {
namespace {

constexpr int64_t D = 128;
constexpr int64_t kMat = D * D;

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
}

struct DeviceBuffer {
  void* ptr = nullptr;
  explicit DeviceBuffer(size_t bytes) { check(cudaMalloc(&ptr, std::max<size_t>(bytes, 256)), "cudaMalloc"); }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  float* f32() const { return static_cast<float*>(ptr); }
};

// Token t0 onwards of a [B, T, heads, ...] view, t1 - t0 tokens.
kda_tensor token_slice(kda_tensor t, int64_t t0, int64_t t1) {
  const int64_t elem = t.dtype == KDA_DTYPE_F32 ? 4 : 2;
  t.data = static_cast<char*>(t.data) + t0 * t.stride[1] * elem;
  t.shape[1] = t1 - t0;
  return t;
}

// [rows, HV, 128, 128] matrices at `data` with the given row and head strides (elements).
kda_tensor matrices(float* data, int64_t rows, int64_t HV, int64_t s0, int64_t s1) {
  const int64_t shape[4] = {rows, HV, D, D};
  kda_tensor t = kda_tensor_contiguous(data, KDA_DTYPE_F32, 4, shape);
  t.stride[0] = s0;
  t.stride[1] = s1;
  return t;
}

kda_tensor state_rows(const kda_tensor& states, int64_t row0, int64_t rows) {
  kda_tensor t = states;
  t.data = static_cast<char*>(t.data) + row0 * t.stride[0] * (t.dtype == KDA_DTYPE_F32 ? 4 : 2);
  t.shape[0] = rows;
  return t;
}

struct Shard {
  int64_t t0 = 0, t1 = 0;
  int64_t n_lo = 0, n_hi = 0;  // global sequences [n_lo, n_hi) with tokens here
  bool continued = false;      // the first one started on an earlier shard
  bool continues = false;      // the last one goes on in a later shard
  int64_t chain0 = 0;          // packed: the first shard of the first sequence
  std::vector<int64_t> cu;     // packed: local cu_seqlens
};

}  // namespace

kda_status run_sharded(const kda_fwd_params& host, const std::vector<int64_t>& cuts, const ShardedOptions& o) {
  Problem pr;
  KDA_RETURN_IF_ERROR(validate(&host, ValidateMode::kHost, &pr));
  const int64_t R = static_cast<int64_t>(cuts.size()) - 1;
  const int64_t HV = pr.HV;
  DeviceProblem dp(host);
  const kda_fwd_params full = dp.params();

  // The shards: tokens, local sequences, chains.
  std::vector<int64_t> cu;
  if (pr.varlen) {
    for (int64_t i = 0; i <= pr.N; ++i)
      cu.push_back(host.cu_seqlens.dtype == KDA_DTYPE_I32 ? static_cast<const int32_t*>(host.cu_seqlens.data)[i]
                                                          : static_cast<const int64_t*>(host.cu_seqlens.data)[i]);
    if (host.final_state.data != nullptr && host.final_state.dtype != KDA_DTYPE_F32)
      throw std::runtime_error("run_sharded: packed batches need an fp32 final state");
  }
  if (o.in_place && host.final_state.data != nullptr && host.final_state.dtype != KDA_DTYPE_F32)
    throw std::runtime_error("run_sharded: in_place needs an fp32 final state");
  std::vector<Shard> shards(static_cast<size_t>(R));
  std::vector<int64_t> first_shard(static_cast<size_t>(pr.N), -1);
  for (int64_t r = 0; r < R; ++r) {
    Shard& s = shards[static_cast<size_t>(r)];
    s.t0 = cuts[static_cast<size_t>(r)];
    s.t1 = cuts[static_cast<size_t>(r) + 1];
    if (!pr.varlen) {
      s.n_lo = 0, s.n_hi = pr.N;
      s.continued = r > 0;
      s.continues = r + 1 < R;
      continue;
    }
    s.n_lo = pr.N, s.n_hi = 0;
    for (int64_t n = 0; n < pr.N; ++n)
      if (std::min(cu[n + 1], s.t1) > std::max(cu[n], s.t0)) s.n_lo = std::min(s.n_lo, n), s.n_hi = n + 1;
    s.cu.push_back(0);
    for (int64_t n = s.n_lo; n < s.n_hi; ++n) {
      if (first_shard[n] < 0) first_shard[n] = r;
      s.cu.push_back(std::min(cu[n + 1], s.t1) - s.t0);
    }
    s.continued = cu[s.n_lo] < s.t0;
    s.continues = cu[s.n_hi] > s.t1;
    s.chain0 = first_shard[s.n_lo];
  }

  // Buffers: the stacked transitions [R][N_x][HV][V + K][K], start states, per-shard workspaces,
  // local cu_seqlens, local initial and final states.
  const int64_t Nx = pr.varlen ? 1 : pr.N;
  const int64_t blk_head = 2 * kMat, blk_row = HV * blk_head;
  DeviceBuffer blocks(static_cast<size_t>(R * Nx * blk_row) * 4);
  DeviceBuffer starts(static_cast<size_t>(R * pr.N * HV * kMat) * 4);
  std::vector<std::unique_ptr<DeviceBuffer>> owned;
  auto alloc = [&](size_t bytes) {
    owned.push_back(std::make_unique<DeviceBuffer>(bytes));
    return owned.back()->ptr;
  };
  std::vector<kda_fwd_params> params(static_cast<size_t>(R));
  std::vector<kda_tensor> Dv(static_cast<size_t>(R)), Mv(static_cast<size_t>(R));
  std::vector<void*> ws(static_cast<size_t>(R));
  std::vector<size_t> ws_bytes(static_cast<size_t>(R));
  std::vector<kda_tensor> local_final(static_cast<size_t>(R));
  for (int64_t r = 0; r < R; ++r) {
    const Shard& s = shards[static_cast<size_t>(r)];
    kda_fwd_params& p = params[static_cast<size_t>(r)];
    p = full;
    p.context_method = o.method;
    p.context_split = o.split;
    p.q = token_slice(full.q, s.t0, s.t1);
    p.k = token_slice(full.k, s.t0, s.t1);
    p.v = token_slice(full.v, s.t0, s.t1);
    p.g = token_slice(full.g, s.t0, s.t1);
    p.beta = token_slice(full.beta, s.t0, s.t1);
    p.out = token_slice(full.out, s.t0, s.t1);
    p.initial_state = p.final_state = kda_tensor{};
    const int64_t n_loc = s.n_hi - s.n_lo;
    if (pr.varlen) {
      void* lcu = alloc(s.cu.size() * 8);
      check(cudaMemcpy(lcu, s.cu.data(), s.cu.size() * 8, cudaMemcpyHostToDevice), "upload cu");
      const int64_t shape[1] = {static_cast<int64_t>(s.cu.size())};
      p.cu_seqlens = kda_tensor_contiguous(lcu, KDA_DTYPE_I64, 1, shape);
      if (full.final_state.data != nullptr) {
        const int64_t shape4[4] = {n_loc, HV, D, D};
        local_final[static_cast<size_t>(r)] = kda_tensor_contiguous(alloc(static_cast<size_t>(n_loc * HV * kMat) * 4), KDA_DTYPE_F32, 4, shape4);
      }
    }
    if (s.continues) {
      float* base = blocks.f32() + r * Nx * blk_row;
      Dv[static_cast<size_t>(r)] = matrices(base, Nx, HV, blk_row, blk_head);
      Mv[static_cast<size_t>(r)] = matrices(base + kMat, Nx, HV, blk_row, blk_head);
    }
    KDA_RETURN_IF_ERROR(kda_segment_transition_workspace_size(&p, Dv[static_cast<size_t>(r)], Mv[static_cast<size_t>(r)],
                                                             &ws_bytes[static_cast<size_t>(r)]));
    ws[static_cast<size_t>(r)] = alloc(ws_bytes[static_cast<size_t>(r)]);
  }
  const int64_t state_shape[4] = {R * pr.N, HV, D, D};
  const kda_tensor starts_t = kda_tensor_contiguous(starts.ptr, KDA_DTYPE_F32, 4, state_shape);

  // Everything the ranks would enqueue, in stream order.
  auto enqueue = [&](cudaStream_t stream) -> kda_status {
    kda_stream_t st = reinterpret_cast<kda_stream_t>(stream);
    for (int64_t r = 0; r < R; ++r) {
      const size_t i = static_cast<size_t>(r);
      KDA_RETURN_IF_ERROR(kda_segment_transition(&params[i], Dv[i], Mv[i], ws[i], ws_bytes[i], st));
    }
    // Start states: fixed batches, S(1..R-1) of every sequence in one combine; packed, per shard
    // whose first sequence continues, the chain of that sequence's shards (one block each).
    if (!pr.varlen && R > 1) {
      const kda_tensor Dall = matrices(blocks.f32(), (R - 1) * Nx, HV, blk_row, blk_head);
      const kda_tensor Mall = matrices(blocks.f32() + kMat, (R - 1) * Nx, HV, blk_row, blk_head);
      KDA_RETURN_IF_ERROR(kda_combine_transitions(R - 1, Dall, Mall, full.initial_state, state_rows(starts_t, 0, (R - 1) * pr.N),
                                                  state_rows(starts_t, (R - 1) * pr.N, pr.N), st));
    }
    for (int64_t r = 0; r < R; ++r) {
      const Shard& s = shards[static_cast<size_t>(r)];
      kda_fwd_params p = params[static_cast<size_t>(r)];
      const int64_t n_loc = s.n_hi - s.n_lo;
      if (!pr.varlen) {
        p.initial_state = r == 0 ? full.initial_state : state_rows(starts_t, r * pr.N, pr.N);  // S(r)
        p.final_state = r + 1 == R ? full.final_state : kda_tensor{};
        if (o.in_place && r > 0 && r + 1 == R && full.final_state.data != nullptr) p.final_state = p.initial_state;
      } else {
        // Local start states: rows of the caller's (as fp32) in starts rows [r*N, r*N + n_loc),
        // the first one from the chain when it continues.
        const kda_tensor local = state_rows(starts_t, r * pr.N, n_loc);
        const size_t row_bytes = static_cast<size_t>(HV * kMat) * 4;
        if (full.initial_state.data != nullptr && full.initial_state.dtype == KDA_DTYPE_F32)
          check(cudaMemcpyAsync(local.data, static_cast<float*>(full.initial_state.data) + s.n_lo * HV * kMat,
                                row_bytes * static_cast<size_t>(n_loc), cudaMemcpyDeviceToDevice, stream), "copy init");
        else if (full.initial_state.data == nullptr)
          check(cudaMemsetAsync(local.data, 0, row_bytes * static_cast<size_t>(n_loc), stream), "zero init");
        else
          throw std::runtime_error("run_sharded: packed batches need an fp32 initial state (or none)");
        if (s.continued) {
          const int64_t j0 = s.chain0;
          const kda_tensor Dc = matrices(blocks.f32() + j0 * blk_row, r - j0, HV, blk_row, blk_head);
          const kda_tensor Mc = matrices(blocks.f32() + j0 * blk_row + kMat, r - j0, HV, blk_row, blk_head);
          const kda_tensor init = full.initial_state.data == nullptr ? kda_tensor{} : state_rows(full.initial_state, s.n_lo, 1);
          KDA_RETURN_IF_ERROR(kda_combine_transitions(r - j0, Dc, Mc, init, kda_tensor{}, state_rows(local, 0, 1), st));
        }
        p.initial_state = local;
        p.final_state = o.in_place && full.final_state.data != nullptr ? local : local_final[static_cast<size_t>(r)];
      }
      KDA_RETURN_IF_ERROR(kda_fwd_prepared(&p, ws[static_cast<size_t>(r)], ws_bytes[static_cast<size_t>(r)], st));
      if (!pr.varlen && p.final_state.data != nullptr && p.final_state.data != full.final_state.data)  // in place
        check(cudaMemcpyAsync(full.final_state.data, p.final_state.data, static_cast<size_t>(pr.N * HV * kMat) * 4,
                              cudaMemcpyDeviceToDevice, stream), "copy in-place final");
      // Packed: the final states of the sequences that end here.
      if (pr.varlen && p.final_state.data != nullptr) {
        const int64_t owned_rows = s.continues ? n_loc - 1 : n_loc;
        if (owned_rows > 0)
          check(cudaMemcpyAsync(static_cast<float*>(full.final_state.data) + s.n_lo * HV * kMat, p.final_state.data,
                                static_cast<size_t>(owned_rows * HV * kMat) * 4, cudaMemcpyDeviceToDevice, stream),
                "copy final");
      }
    }
    // Packed: empty sequences keep their initial state.
    if (pr.varlen && full.final_state.data != nullptr)
      for (int64_t n = 0; n < pr.N; ++n) {
        if (cu[n + 1] > cu[n]) continue;
        float* dst = static_cast<float*>(full.final_state.data) + n * HV * kMat;
        const size_t bytes = static_cast<size_t>(HV * kMat) * 4;
        if (full.initial_state.data == nullptr)
          check(cudaMemsetAsync(dst, 0, bytes, stream), "zero final");
        else
          check(cudaMemcpyAsync(dst, static_cast<float*>(full.initial_state.data) + n * HV * kMat, bytes,
                                cudaMemcpyDeviceToDevice, stream), "copy final");
      }
    return make_ok();
  };

  cudaStream_t stream;
  check(cudaStreamCreate(&stream), "cudaStreamCreate");
  kda_status result = make_ok();
  if (!o.graph) {
    for (int i = 0; i < o.repeats && result.code == KDA_OK; ++i) result = enqueue(stream);
  } else {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "begin capture");
    result = enqueue(stream);
    check(cudaStreamEndCapture(stream, &graph), "end capture");
    if (result.code == KDA_OK) {
      check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
      for (int i = 0; i < 2; ++i) check(cudaGraphLaunch(exec, stream), "graph launch");
      check(cudaGraphExecDestroy(exec), "destroy exec");
    }
    check(cudaGraphDestroy(graph), "destroy graph");
  }
  check(cudaStreamSynchronize(stream), "run");
  check(cudaStreamDestroy(stream), "cudaStreamDestroy");
  if (result.code == KDA_OK) dp.download_outputs();
  return result;
}

kda_status gpu_transitions(const kda_fwd_params& host, int64_t num_transitions, std::vector<float>* Dh,
                           std::vector<float>* Mh) {
  Problem pr;
  KDA_RETURN_IF_ERROR(validate(&host, ValidateMode::kHost, &pr));
  DeviceProblem dp(host);
  const size_t elems = static_cast<size_t>(num_transitions * pr.HV * kMat);
  DeviceBuffer Dd(elems * 4), Md(elems * 4);
  const kda_tensor Dt = matrices(Dd.f32(), num_transitions, pr.HV, pr.HV * kMat, kMat);
  const kda_tensor Mt = matrices(Md.f32(), num_transitions, pr.HV, pr.HV * kMat, kMat);
  size_t bytes = 0;
  KDA_RETURN_IF_ERROR(kda_segment_transition_workspace_size(&dp.params(), Dt, Mt, &bytes));
  DeviceBuffer ws(bytes);
  check(cudaMemset(ws.ptr, 0xff, bytes), "poison workspace");
  check(cudaMemset(Dd.ptr, 0xff, elems * 4), "poison D");
  check(cudaMemset(Md.ptr, 0xff, elems * 4), "poison M");
  KDA_RETURN_IF_ERROR(kda_segment_transition(&dp.params(), Dt, Mt, ws.ptr, bytes, nullptr));
  check(cudaDeviceSynchronize(), "kda_segment_transition");
  Dh->resize(elems);
  Mh->resize(elems);
  check(cudaMemcpy(Dh->data(), Dd.ptr, elems * 4, cudaMemcpyDeviceToHost), "download D");
  check(cudaMemcpy(Mh->data(), Md.ptr, elems * 4, cudaMemcpyDeviceToHost), "download M");
  return make_ok();
}

}  // namespace kda::test
