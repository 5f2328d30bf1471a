// SM90 decode launcher: the plan (decode_plan.h), the kernel's parameters, one launch; and the
// opt-in content check (decode_check_kernel.cuh, cu_seqlens_check_kernel.cuh) on a stream-ordered
// scratch allocation. The only host code that knows the decode kernels.
#include <cuda_runtime.h>

#include <algorithm>

#include "src/kernels/sm90/cu_seqlens_check_kernel.cuh"
#include "src/kernels/sm90/decode_bulk_kernel.cuh"
#include "src/kernels/sm90/decode_check_kernel.cuh"
#include "src/kernels/sm90/decode_kernel.cuh"
#include "src/launch/decode_launch.h"
#include "src/launch/decode_plan.h"
#include "src/launch/launch_util.cuh"

namespace kda::sm90 {
namespace {

// Programmatic dependent launch: the kernel may be scheduled while the previous kernel of the
// stream drains; it waits (griddepcontrol.wait) before touching memory, so only the launch latency
// overlaps. 0 turns it off.
#ifndef FLASH_KDA_DECODE_PDL
#define FLASH_KDA_DECODE_PDL 1
#endif

// Tokens prepared per block (decode_common.cuh): the longest sequence of a fixed batch, or for a
// packed batch the mean length rounded up (decode: 1; uniform verify: 1 + S), at most
// kDecodeMaxTokBlock; longer sequences loop over blocks.
int token_capacity(const Problem& pr) {
  int64_t cap = pr.varlen ? (pr.T_total + pr.N - 1) / (pr.N > 0 ? pr.N : 1) : pr.T;
  return static_cast<int>(cap < 1 ? 1 : (cap > kDecodeMaxTokBlock ? kDecodeMaxTokBlock : cap));
}

DecodeParams make_params(const DecodeProblem& dp) {
  const Problem& pr = dp.pr;
  const kda_fwd_params& a = dp.fwd;
  const kda_decode_params& d = *dp.params;
  DecodeParams p{};
  p.seq.cu_seqlens = pr.varlen ? a.cu_seqlens.data : nullptr;
  p.seq.cu_is_i64 = a.cu_seqlens.dtype == KDA_DTYPE_I64;
  p.seq.N = static_cast<int32_t>(pr.N);
  p.seq.T = static_cast<int32_t>(pr.T);
  p.seq.T_total = static_cast<int32_t>(pr.T_total);
  p.seq.num_vchunks = 0;
  p.q = static_cast<const uint16_t*>(a.q.data);
  p.k = static_cast<const uint16_t*>(a.k.data);
  p.v = static_cast<const uint16_t*>(a.v.data);
  p.g = a.g.data;
  p.beta = a.beta.data;
  p.out = static_cast<uint16_t*>(a.out.data);
  p.q_st = strides_of(a.q);
  p.k_st = strides_of(a.k);
  p.v_st = strides_of(a.v);
  p.g_st = strides_of(a.g);
  p.beta_st = strides_of(a.beta);
  p.out_st = strides_of(a.out);
  p.A_log = static_cast<const float*>(a.A_log.data);
  p.dt_bias = static_cast<const float*>(a.dt_bias.data);
  p.pool = d.state_pool.data;
  p.pool_stride = dp.pool_stride;
  p.slots = dp.slots;
  p.indices = dp.has_indices ? d.state_indices.data : nullptr;
  p.idx_stride_n = dp.idx_stride_n;
  p.idx_stride_t = dp.idx_stride_t;
  p.accepted = dp.has_accepted ? d.num_accepted_tokens.data : nullptr;
  p.accepted_stride = dp.accepted_stride;
  p.indices_i64 = dp.indices_i64;
  p.indices_2d = dp.indices_2d;
  p.idx_cols = static_cast<int32_t>(dp.idx_cols);
  p.accepted_i64 = dp.accepted_i64;
  p.H = static_cast<int32_t>(pr.H);
  p.HV = static_cast<int32_t>(pr.HV);
  p.group = static_cast<int32_t>(pr.group());
  p.g_is_f32 = a.g.dtype == KDA_DTYPE_F32;
  p.beta_is_f32 = a.beta.dtype == KDA_DTYPE_F32;
  p.beta_sigmoid = a.beta_sigmoid != 0;
  p.qk_l2norm = a.qk_l2norm != 0;
  p.allow_neg_eigval = a.allow_neg_eigval != 0;
  p.scale = static_cast<float>(a.scale);  // fp32 inside, as the forward pass
  p.lower_bound = static_cast<float>(a.lower_bound);
  p.tok_cap = token_capacity(pr);
  return p;
}

// Decode's shared memory depends on the token block (tok_cap). Past the default 48 KB (bulk slices
// with long verify blocks) the kernel's limit is raised once per device to its size at the largest
// block, kDecodeMaxTokBlock, and never lowered: set per call to each call's own size, calls of
// different blocks on several host threads could lower it between another call's setting and its
// launch (a spurious launch failure).
template <auto kKernel>
cudaError_t launch_decode_kernel(int64_t ctas, int threads, int smem, int smem_max, cudaStream_t stream,
                                 const DecodeParams& p) {
  const dim3 grid(static_cast<unsigned>(ctas));
  if (smem > 48 * 1024)
    return launch_with_smem_limit<kKernel>(grid, threads, smem, smem_max, stream, FLASH_KDA_DECODE_PDL != 0, nullptr, p);
  return launch_kernel(kKernel, grid, threads, smem, stream, FLASH_KDA_DECODE_PDL != 0, p);
}

template <int kConfig, bool kF32, GateKind kGate>
cudaError_t launch(const DecodeParams& p, int64_t ctas, cudaStream_t stream) {
  constexpr DecodeConfig c = kDecodeConfigs[kConfig - 1];
  if constexpr (c.bulk) {
    using L = DecodeBulkLayout<c.lanes, c.rows_per_thread, c.threads, kF32>;
    static_assert(L::kSlices == c.slices(), "plan and kernel agree");
    static_assert(L::bytes(kDecodeMaxTokBlock) <= 227 * 1024, "the largest token block fits in shared memory");
    return launch_decode_kernel<decode_bulk_kernel<c.lanes, c.rows_per_thread, c.threads, kF32, kGate>>(
        ctas, c.threads, L::bytes(p.tok_cap), L::bytes(kDecodeMaxTokBlock), stream, p);
  } else {
    static_assert(DecodeTile<c.lanes, c.rows_per_thread, c.threads>::kSlices == c.slices(), "plan and kernel agree");
    return launch_decode_kernel<decode_kernel<c.lanes, c.rows_per_thread, c.threads, kF32, kGate>>(
        ctas, c.threads, decode_vector_bytes(p.tok_cap), decode_vector_bytes(kDecodeMaxTokBlock), stream, p);
  }
}

template <int kConfig, bool kF32>
cudaError_t launch_gate(const DecodeParams& p, kda_gate gate, int64_t ctas, cudaStream_t stream) {
  switch (gate) {
    case KDA_GATE_BOUNDED:
      return launch<kConfig, kF32, GateKind::kBounded>(p, ctas, stream);
    case KDA_GATE_SOFTPLUS:
      return launch<kConfig, kF32, GateKind::kSoftplus>(p, ctas, stream);
    default:
      return launch<kConfig, kF32, GateKind::kPreactivated>(p, ctas, stream);
  }
}

template <int kConfig>
cudaError_t launch_config(const DecodeParams& p, bool f32, kda_gate gate, int64_t ctas, cudaStream_t stream) {
  return f32 ? launch_gate<kConfig, true>(p, gate, ctas, stream) : launch_gate<kConfig, false>(p, gate, ctas, stream);
}

}  // namespace

kda_status decode(const DecodeProblem& dp, kda_stream_t stream_handle) {
  const int64_t units = dp.pr.N * dp.pr.HV;
  if (units == 0) return make_ok();
  const DecodePlan plan =
      plan_decode(units, sm_count(), dp.params->kernel_config, dp.pool_f32, token_capacity(dp.pr) == 1);
  if (plan.ctas > 0x7fffffff)
    return make_error(KDA_ERROR_INVALID_ARGUMENT,
                      "q: N x HV = %lld (sequences x value heads) is too large for one grid",
                      static_cast<long long>(units));
  const DecodeParams p = make_params(dp);
  cudaStream_t stream = reinterpret_cast<cudaStream_t>(stream_handle);
  const kda_gate gate = dp.fwd.gate;
  cudaError_t err;
  switch (plan.config) {
    case 1:
      err = launch_config<1>(p, dp.pool_f32, gate, plan.ctas, stream);
      break;
    case 2:
      err = launch_config<2>(p, dp.pool_f32, gate, plan.ctas, stream);
      break;
    case 3:
      err = launch_config<3>(p, dp.pool_f32, gate, plan.ctas, stream);
      break;
    case 4:
      err = launch_config<4>(p, dp.pool_f32, gate, plan.ctas, stream);
      break;
    case 5:
      err = launch_config<5>(p, dp.pool_f32, gate, plan.ctas, stream);
      break;
    case 6:
      err = launch_config<6>(p, dp.pool_f32, gate, plan.ctas, stream);
      break;
    case 7:
      err = launch_config<7>(p, dp.pool_f32, gate, plan.ctas, stream);
      break;
    default:
      err = cudaErrorInvalidValue;
      break;
  }
  if (err != cudaSuccess) return cuda_error("decode_kernel launch", err);
  return make_ok();
}

kda_status decode_check(const DecodeProblem& dp, kda_stream_t stream_handle, DecodeCheckResult* result) {
  cudaStream_t stream = reinterpret_cast<cudaStream_t>(stream_handle);
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  cudaError_t err = cudaStreamIsCapturing(stream, &capture);
  if (err != cudaSuccess) return cuda_error("check_indices: cudaStreamIsCapturing", err);
  if (capture != cudaStreamCaptureStatusNone)
    return make_error(KDA_ERROR_INVALID_ARGUMENT,
                      "check_indices: expected 0 while the stream is captured into a CUDA graph (the check "
                      "synchronises), got 1");
  const DecodeParams p = make_params(dp);
  const size_t owner_bytes = static_cast<size_t>(dp.slots > 0 ? dp.slots : 1) * sizeof(int);
  const size_t bytes = sizeof(DecodeCheckDevice) + owner_bytes;
  void* scratch = nullptr;
  err = cudaMallocAsync(&scratch, bytes, stream);
  if (err != cudaSuccess) return cuda_error("check_indices: cudaMallocAsync", err);
  DecodeCheckDevice* r = static_cast<DecodeCheckDevice*>(scratch);
  int* owner = reinterpret_cast<int*>(static_cast<unsigned char*>(scratch) + sizeof(DecodeCheckDevice));
  err = cudaMemsetAsync(r, 0xff, sizeof(DecodeCheckDevice), stream);
  if (err == cudaSuccess) err = cudaMemsetAsync(owner, 0x7f, owner_bytes, stream);
  if (err == cudaSuccess) err = cudaMemsetAsync(r->cu, 0, sizeof(r->cu), stream);
  if (err == cudaSuccess) {
    const int64_t work = std::max<int64_t>(dp.pr.N * dp.idx_cols, dp.pr.N);
    const unsigned grid = static_cast<unsigned>(std::min<int64_t>(4096, std::max<int64_t>(1, (work + 255) / 256)));
    decode_check_entries_kernel<<<grid, 256, 0, stream>>>(p, owner, r);
    decode_check_duplicates_kernel<<<grid, 256, 0, stream>>>(p, owner, r);
    decode_check_details_kernel<<<1, 32, 0, stream>>>(p, owner, r);
    if (p.seq.cu_seqlens != nullptr) cu_seqlens_check_kernel<<<1, 256, 0, stream>>>(p.seq, r->cu);
    err = cudaGetLastError();
  }
  DecodeCheckDevice host;
  if (err == cudaSuccess) err = cudaMemcpyAsync(&host, r, sizeof(host), cudaMemcpyDeviceToHost, stream);
  const cudaError_t free_err = cudaFreeAsync(scratch, stream);
  if (err == cudaSuccess) err = free_err;
  if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
  if (err != cudaSuccess) return cuda_error("check_indices", err);

  for (int k = 0; k < kNumCheckKinds; ++k) {
    result->first[k] = host.first[k] == ~0ull ? -1 : static_cast<int64_t>(host.first[k]);
    result->value[k] = host.value[k];
    result->other[k] = host.other[k];
    result->other_t[k] = host.other_t[k];
  }
  // cu_seqlens_check_kernel: {kind, index, value, previous entry or T_total}
  result->cu_kind = host.cu[0];
  result->first[kCheckCuSeqlens] = host.cu[0] != 0 ? host.cu[1] : -1;
  result->value[kCheckCuSeqlens] = host.cu[2];
  result->other[kCheckCuSeqlens] = host.cu[3];
  return make_ok();
}

}  // namespace kda::sm90
