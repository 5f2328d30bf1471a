// Stream order with the caller's kernels: kda_fwd's first kernel (the preparation) is a
// programmatic dependent launch of whatever ran before it on the stream, so it may become resident
// while the caller's previous kernel still runs. The caller's kernel here lets its dependents launch
// at once (griddepcontrol.launch_dependents), then, ~200 us later, writes every input of the call
// (q, k, v, g, beta and the initial state, poisoned before). The output and the final state must be
// bit-identical to a run on inputs written long before; a preparation (or a recurrence prologue, which
// reads the initial state before its own wait) that read early would see the poison.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "src/ptx/grid_dependency.cuh"
#include "tests/gpu/gpu_harness.h"
#include "tests/random_problem.h"

namespace kda::test {
namespace {

__device__ __forceinline__ unsigned long long stream_order_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

struct Restore {
  const uint4* src[6];
  uint4* dst[6];
  int64_t vecs[6];
};

// Lets its dependents launch, waits ~200 us, copies every buffer back over its poisoned copy and
// records when it finished.
__global__ void slow_input_writer(Restore r, unsigned long long* done_ns) {
  ptx::launch_dependents();
  const unsigned long long t0 = stream_order_ns();
  while (stream_order_ns() - t0 < 200000) {
  }
  for (int b = 0; b < 6; ++b)
    for (int64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < r.vecs[b]; i += gridDim.x * blockDim.x)
      r.dst[b][i] = r.src[b][i];
  __syncthreads();
  if (threadIdx.x == 0) atomicMax(done_ns, stream_order_ns());
}

size_t bytes_of(const kda_tensor& t, size_t elem) {
  size_t n = elem;
  for (int d = 0; d < t.ndim; ++d) n *= static_cast<size_t>(t.shape[d]);
  return n;
}

void run_after_slow_writer(ProblemSpec s, const char* what) {
  RandomProblem a = make_random_problem(s);
  DeviceProblem dp(a.params());
  kda_fwd_params& p = dp.params();
  // Reference: inputs written long before the call.
  ASSERT_EQ(kda_fwd(&p, dp.workspace(), dp.workspace_bytes(), nullptr).code, KDA_OK);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const size_t out_bytes = bytes_of(p.out, 2), fin_bytes = bytes_of(p.final_state, 4);
  std::vector<unsigned char> out_ref(out_bytes), fin_ref(fin_bytes);
  ASSERT_EQ(cudaMemcpy(out_ref.data(), p.out.data, out_bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(fin_ref.data(), p.final_state.data, fin_bytes, cudaMemcpyDeviceToHost), cudaSuccess);

  // Saved copies of the inputs, restored by the slow writer.
  const kda_tensor* inputs[6] = {&p.q, &p.k, &p.v, &p.g, &p.beta, &p.initial_state};
  const size_t elem[6] = {2, 2, 2, 2, 2, 4};
  Restore r{};
  std::vector<void*> saved;
  for (int b = 0; b < 6; ++b) {
    const size_t bytes = bytes_of(*inputs[b], elem[b]);
    ASSERT_EQ(bytes % 16, 0u);
    void* copy = nullptr;
    ASSERT_EQ(cudaMalloc(&copy, bytes), cudaSuccess);
    saved.push_back(copy);
    ASSERT_EQ(cudaMemcpy(copy, inputs[b]->data, bytes, cudaMemcpyDeviceToDevice), cudaSuccess);
    r.src[b] = static_cast<const uint4*>(copy);
    r.dst[b] = static_cast<uint4*>(inputs[b]->data);
    r.vecs[b] = static_cast<int64_t>(bytes / 16);
  }
  unsigned long long* done = nullptr;
  ASSERT_EQ(cudaMalloc(&done, 8), cudaSuccess);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  for (int round = 1; round <= 3; ++round) {
    for (int b = 0; b < 6; ++b)  // 0x7f7f: bf16 3.4e38, fp32 3.4e38: a result read early is far off
      ASSERT_EQ(cudaMemset(inputs[b]->data, 0x7f, bytes_of(*inputs[b], elem[b])), cudaSuccess);
    ASSERT_EQ(cudaMemset(p.out.data, 0xff, out_bytes), cudaSuccess);
    ASSERT_EQ(cudaMemset(p.final_state.data, 0xff, fin_bytes), cudaSuccess);
    ASSERT_EQ(cudaMemset(done, 0, 8), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    slow_input_writer<<<8, 256, 0, stream>>>(r, done);
    const kda_status st = kda_fwd(&p, dp.workspace(), dp.workspace_bytes(), stream);
    ASSERT_EQ(st.code, KDA_OK) << st.message;
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    std::vector<unsigned char> out(out_bytes), fin(fin_bytes);
    ASSERT_EQ(cudaMemcpy(out.data(), p.out.data, out_bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(fin.data(), p.final_state.data, fin_bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_TRUE(out == out_ref) << what << ", round " << round << ": out differs from the reference run";
    EXPECT_TRUE(fin == fin_ref) << what << ", round " << round << ": final_state differs from the reference run";
  }
  std::printf("[ stream order ] %s: 3 rounds after a 200 us writer that lets dependents launch at once\n", what);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  for (void* c : saved) EXPECT_EQ(cudaFree(c), cudaSuccess);
  EXPECT_EQ(cudaFree(done), cudaSuccess);
}

TEST(GpuStreamOrder, ForwardWaitsForTheCallersPreviousKernel) {
  KDA_SKIP_WITHOUT_SM90();
  ProblemSpec one;  // one pass (a full grid of units)
  one.T = 100;
  one.H = one.HV = 96;
  run_after_slow_writer(one, "one pass, T=100 H=96");
  ProblemSpec warm;  // bounded warm-up: pass 1 preloads the initial state before its wait
  warm.T = 2048;
  warm.H = warm.HV = 4;
  run_after_slow_writer(warm, "warm-up plan, T=2048 H=4");
  ProblemSpec exact = warm;  // the exact combine
  exact.context_method = KDA_CONTEXT_EXACT;
  run_after_slow_writer(exact, "exact combine, T=2048 H=4");
}

}  // namespace
}  // namespace kda::test
