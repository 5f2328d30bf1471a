// The SM90 path's safety contract, against the CPU float64 recurrence: output rows outside the sequences
// never written, CUDA-graph capture and replay, bad cu_seqlens contents (no fault; the opt-in check
// names them), wrong pointers and workspace (every kind of memory the pointer check tells apart, another
// GPU's memory, buffers too small for their shape), trusted pointers, bitwise repeatability. (The options: test_gpu_options.cpp.)
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "reference/common.h"
#include "tests/golden_io.h"
#include "tests/gpu/decode_harness.h"
#include "tests/gpu/gpu_harness.h"
#include "tests/random_decode.h"
#include "tests/random_problem.h"

namespace kda::test {
namespace {

TEST(GpuSafety, RowsOutsideSequencesAreNeverWritten) {
  KDA_SKIP_WITHOUT_SM90();
  ProblemSpec s;
  s.T = 96;
  s.H = s.HV = 2;
  s.cu_seqlens = {0, 5, 5, 40};  // tokens 40..95 belong to no sequence
  RandomProblem p = make_random_problem(s);
  std::fill(p.out.begin(), p.out.end(), 0xffff);
  ASSERT_EQ(run_on_gpu(p.params()).code, KDA_OK);
  for (int64_t t = 0; t < 96; ++t)
    for (int64_t x = 0; x < 2 * 128; ++x) {
      const uint16_t v = p.out[t * 256 + x];
      if (t >= 40) ASSERT_EQ(v, 0xffff) << "row " << t << " outside every sequence was written";
      else ASSERT_NE(v, 0xffff) << "row " << t << " inside a sequence was not written";
    }
}

TEST(GpuSafety, CudaGraphCaptureAndReplay) {
  KDA_SKIP_WITHOUT_SM90();
  ProblemSpec s;
  s.T = 300;
  s.H = s.HV = 4;
  s.cu_seqlens = {0, 100, 117, 300};
  check_graph_replay(s, "one pass");
}

TEST(GpuSafety, BadCuSeqlensContentsNeverFaultAndTheCheckNamesThem) {
  KDA_SKIP_WITHOUT_SM90();
  const std::vector<std::vector<int64_t>> bad = {
      {0, 50, 20, 64}, {0, 10, 1000, 64}, {5, 10, 20, 64}, {0, -7, 30, 64}, {0, 10, 20, 70}};
  // What the kernels make of each list (sequence_map.cuh): every entry clamped to [0, 64], and a
  // sequence whose end lies before its start empty. Where that gives a valid list, the unchecked call
  // must equal the call on it bit for bit (out and final states); {0, 50, 20, 64}'s sequence 1 is
  // empty, so its final state is its initial state. Without these comparisons a kernel that read and
  // wrote past the tensors for entries above T still passed (tests/mutants/25_seq_no_upper_clamp.patch).
  const std::vector<std::vector<int64_t>> clamped = {{}, {0, 10, 64, 64}, {}, {0, 0, 30, 64}, {0, 10, 20, 64}};
  for (size_t b = 0; b < bad.size(); ++b) {
    const std::vector<int64_t>& cu = bad[b];
    ProblemSpec s;
    s.T = 64;
    s.H = s.HV = 2;
    s.cu_seqlens = cu;
    RandomProblem p = make_random_problem(s);
    RandomProblem same = p;  // the same inputs and initial states on the clamped list
    // Unchecked: completes without a fault, and no access leaves a tensor.
    const kda_status st = run_on_gpu(p.params());
    EXPECT_EQ(st.code, KDA_OK) << st.message;
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    if (!clamped[b].empty()) {
      same.cu64 = clamped[b];
      const kda_status sc = run_on_gpu(same.params());
      EXPECT_EQ(sc.code, KDA_OK) << sc.message;
      EXPECT_TRUE(p.out == same.out) << "out of cu_seqlens list " << b << " differs from its clamped list's";
      EXPECT_TRUE(p.final_f32 == same.final_f32) << "final states of list " << b << " differ from its clamped list's";
    } else if (b == 0) {
      const size_t per = p.final_f32.size() / static_cast<size_t>(p.N);
      EXPECT_TRUE(std::equal(p.final_f32.begin() + per, p.final_f32.begin() + 2 * per, p.initial_f32.begin() + per))
          << "an empty sequence's final state is not its initial state";
    }
    // Checked: a clear error naming cu_seqlens, before any kernel of the forward pass runs.
    kda_fwd_params prm = p.params();
    prm.check_cu_seqlens = 1;
    DeviceProblem dp(prm);
    const kda_status chk = kda_fwd(&dp.params(), dp.workspace(), dp.workspace_bytes(), nullptr);
    EXPECT_EQ(chk.code, KDA_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(chk.message).find("cu_seqlens"), std::string::npos) << chk.message;
    std::printf("[ check ] %s\n", chk.message);
  }
}

// kda_fwd(params) on `workspace` (`workspace_bytes` of it) fails with `code`, its message containing
// `expected`.
void expect_refused_on(const kda_fwd_params& params, void* workspace, size_t workspace_bytes, int32_t code,
                       const std::string& expected) {
  const kda_status st = kda_fwd(&params, workspace, workspace_bytes, nullptr);
  EXPECT_EQ(st.code, code) << expected;
  EXPECT_NE(std::string(st.message).find(expected), std::string::npos) << st.message;
  std::printf("[ check ] %s\n", st.message);
}

// The same on dp's own workspace.
void expect_refused(DeviceProblem& dp, const kda_fwd_params& params, size_t workspace_bytes, int32_t code,
                    const std::string& expected) {
  expect_refused_on(params, dp.workspace(), workspace_bytes, code, expected);
}

TEST(GpuSafety, PointerAndWorkspaceErrors) {
  KDA_SKIP_WITHOUT_SM90();
  ProblemSpec s;
  s.T = 20;
  RandomProblem p = make_random_problem(s);
  DeviceProblem dp(p.params());
  expect_refused(dp, dp.params(), dp.workspace_bytes() - 1, KDA_ERROR_WORKSPACE_TOO_SMALL, "workspace");
  kda_fwd_params host_q = dp.params();
  host_q.q.data = p.q.data();  // a host pointer
  expect_refused(dp, host_q, dp.workspace_bytes(), KDA_ERROR_INVALID_ARGUMENT, "q: expected CUDA device memory");
}

// Every kind of memory the pointer check tells apart (api.cpp: the driver's quick answer for device
// memory of the current device, cudaPointerGetAttributes for everything else): a pointer inside a
// device allocation and managed memory run, with the same output bits as the plain device run;
// pinned and unregistered host memory are refused by name.
TEST(GpuSafety, PointerKinds) {
  KDA_SKIP_WITHOUT_SM90();
  ProblemSpec s;
  s.T = 40;
  RandomProblem p = make_random_problem(s);
  DeviceProblem dp(p.params());
  const size_t q_bytes = static_cast<size_t>(s.T) * s.H * 128 * 2;
  auto out_bits = [&](const kda_fwd_params& params) {
    EXPECT_EQ(cudaMemset(dp.params().out.data, 0xff, q_bytes), cudaSuccess);
    const kda_status st = kda_fwd(&params, dp.workspace(), dp.workspace_bytes(), nullptr);
    EXPECT_EQ(st.code, KDA_OK) << st.message;
    std::vector<uint16_t> bits(q_bytes / 2);
    EXPECT_EQ(cudaMemcpy(bits.data(), dp.params().out.data, q_bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    return bits;
  };
  const std::vector<uint16_t> reference = out_bits(dp.params());

  // q one token into a larger device allocation (an interior pointer).
  void* big = nullptr;
  ASSERT_EQ(cudaMalloc(&big, q_bytes + 256 * 2), cudaSuccess);
  void* interior = static_cast<unsigned char*>(big) + 256 * 2;
  ASSERT_EQ(cudaMemcpy(interior, dp.params().q.data, q_bytes, cudaMemcpyDeviceToDevice), cudaSuccess);
  kda_fwd_params a = dp.params();
  a.q.data = interior;
  EXPECT_TRUE(out_bits(a) == reference) << "q inside a larger allocation";

  // Managed memory.
  void* managed = nullptr;
  ASSERT_EQ(cudaMallocManaged(&managed, q_bytes), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(managed, dp.params().k.data, q_bytes, cudaMemcpyDeviceToDevice), cudaSuccess);
  a = dp.params();
  a.k.data = managed;
  EXPECT_TRUE(out_bits(a) == reference) << "k in managed memory";

  auto refused = [&](const kda_fwd_params& params, const char* expected) {
    expect_refused(dp, params, dp.workspace_bytes(), KDA_ERROR_INVALID_ARGUMENT, expected);
  };
  // Pinned host memory.
  void* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned, q_bytes), cudaSuccess);
  a = dp.params();
  a.v.data = pinned;
  int device = -1;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  const std::string on = "expected CUDA device memory on device " + std::to_string(device);
  refused(a, ("v: " + on + ", got pinned host memory").c_str());
  // Unregistered host memory.
  std::vector<uint16_t> host(q_bytes / 2);
  a = dp.params();
  a.g.data = host.data();
  refused(a, ("g: " + on + ", got unregistered host memory").c_str());
  // A freed device allocation and an address nothing maps: refused too. The runtime calls both
  // unregistered host memory (H200, CUDA 13.0, 2026-12-04); only the prefix is required, since that
  // answer is the runtime's, and the message is printed.
  void* freed = nullptr;
  ASSERT_EQ(cudaMalloc(&freed, q_bytes), cudaSuccess);
  ASSERT_EQ(cudaFree(freed), cudaSuccess);
  a = dp.params();
  a.beta.data = freed;
  refused(a, "beta: expected CUDA device memory");
  a = dp.params();
  a.out.data = reinterpret_cast<void*>(uintptr_t{0x1000});
  refused(a, "out: expected CUDA device memory");
  EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
  EXPECT_EQ(cudaFree(managed), cudaSuccess);
  EXPECT_EQ(cudaFree(big), cudaSuccess);
}

// A buffer too small for its declared shape (api.cpp, check_pointer: the bytes from the pointer to one
// past the last element must lie inside the allocation the pointer is in, as the driver reports it), for
// an input, the written out, a state, the workspace and kda_decode's state pool: refused by name, with the
// shortfall, before any kernel runs (out keeps its poison). Every buffer here is one 2 MiB allocation, so
// the driver's range is the allocation whatever granularity it rounds small ones to; a tensor that fills
// its allocation exactly runs (and PointerKinds' interior pointer ends exactly at its allocation's end).
TEST(GpuSafety, BuffersTooSmallForTheirShapeAreNamed) {
  KDA_SKIP_WITHOUT_SM90();
  constexpr size_t kAlloc = size_t{2} << 20;
  ProblemSpec s;
  s.T = 2048;
  s.H = s.HV = 4;  // q, k, v, g and out: 2048 x 4 x 128 bf16 = 2 MiB each
  RandomProblem p = make_random_problem(s);
  DeviceProblem dp(p.params());
  const size_t tensor_bytes = static_cast<size_t>(s.T) * s.H * 128 * 2;
  ASSERT_EQ(tensor_bytes, kAlloc);
  void* buf = nullptr;
  ASSERT_EQ(cudaMalloc(&buf, kAlloc), cudaSuccess);
  unsigned char* const base = static_cast<unsigned char*>(buf);
  ASSERT_EQ(cudaMemset(dp.params().out.data, 0xff, tensor_bytes), cudaSuccess);
  auto refused = [&](const kda_fwd_params& params, void* workspace, const char* name, size_t bytes, size_t short_by) {
    const std::string expected = std::string(name) + ": expected its " + std::to_string(bytes) + " bytes from ";
    const kda_status st = kda_fwd(&params, workspace, dp.workspace_bytes(), nullptr);
    EXPECT_EQ(st.code, KDA_ERROR_INVALID_ARGUMENT) << name;
    const std::string msg = st.message;
    EXPECT_NE(msg.find(expected), std::string::npos) << msg;
    EXPECT_NE(msg.find("got an allocation of " + std::to_string(kAlloc) + " bytes from "), std::string::npos) << msg;
    EXPECT_NE(msg.find("(" + std::to_string(short_by) + " bytes short)"), std::string::npos) << msg;
    std::printf("[ check ] %s\n", st.message);
  };
  // An input and the written out, each 1 KiB into the allocation: 1,024 bytes short.
  ASSERT_EQ(cudaMemcpy(base + 1024, dp.params().q.data, kAlloc - 1024, cudaMemcpyDeviceToDevice), cudaSuccess);
  kda_fwd_params a = dp.params();
  a.q.data = base + 1024;
  refused(a, dp.workspace(), "q", tensor_bytes, 1024);
  a = dp.params();
  a.out.data = base + 1024;
  refused(a, dp.workspace(), "out", tensor_bytes, 1024);
  // The initial state ([1, 4, 128, 128] f32, 256 KiB) 128 KiB before the allocation's end.
  const size_t state_bytes = static_cast<size_t>(s.HV) * 128 * 128 * 4;
  a = dp.params();
  ASSERT_NE(a.initial_state.data, nullptr);
  a.initial_state.data = base + kAlloc - state_bytes / 2;
  refused(a, dp.workspace(), "initial_state", state_bytes, state_bytes / 2);
  // The workspace 256 bytes before the allocation's end (still 256-byte aligned).
  ASSERT_GT(dp.workspace_bytes(), size_t{256});
  const size_t needed = dp.workspace_bytes();
  refused(dp.params(), base + kAlloc - 256, "workspace", needed, needed - 256);
  // None of the refused calls wrote out.
  std::vector<uint16_t> bits(tensor_bytes / 2);
  ASSERT_EQ(cudaMemcpy(bits.data(), dp.params().out.data, tensor_bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_TRUE(std::all_of(bits.begin(), bits.end(), [](uint16_t x) { return x == 0xffff; })) << "a refused call wrote out";
  // The same q filling the allocation exactly runs, with the bits of the plain run.
  ASSERT_EQ(cudaMemcpy(base, dp.params().q.data, kAlloc, cudaMemcpyDeviceToDevice), cudaSuccess);
  a = dp.params();
  a.q.data = base;
  kda_status st = kda_fwd(&a, dp.workspace(), dp.workspace_bytes(), nullptr);
  ASSERT_EQ(st.code, KDA_OK) << st.message;
  std::vector<uint16_t> exact(tensor_bytes / 2), plain(tensor_bytes / 2);
  ASSERT_EQ(cudaMemcpy(exact.data(), dp.params().out.data, tensor_bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  st = kda_fwd(&dp.params(), dp.workspace(), dp.workspace_bytes(), nullptr);
  ASSERT_EQ(st.code, KDA_OK) << st.message;
  ASSERT_EQ(cudaMemcpy(plain.data(), dp.params().out.data, tensor_bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_TRUE(exact == plain) << "q filling its allocation exactly";

  // kda_decode: a pool of 16 f32 slots of 2 x 128 x 128 (2 MiB) one slot into the allocation.
  DecodeSpec ds;
  ds.B = 4;
  ds.H = ds.HV = 2;
  ds.slots = 16;
  RandomDecode d = make_random_decode(ds);
  DeviceDecode dd(d);
  const size_t pool_bytes = static_cast<size_t>(ds.slots) * pool_slot_bytes(d);
  ASSERT_EQ(pool_bytes, kAlloc);
  kda_decode_params dprm = dd.params();
  dprm.state_pool.data = base + pool_slot_bytes(d);
  st = kda_decode(&dprm, nullptr);
  EXPECT_EQ(st.code, KDA_ERROR_INVALID_ARGUMENT);
  const std::string msg = st.message;
  EXPECT_NE(msg.find("state_pool: expected its " + std::to_string(pool_bytes) + " bytes from "), std::string::npos) << msg;
  EXPECT_NE(msg.find("(" + std::to_string(pool_slot_bytes(d)) + " bytes short)"), std::string::npos) << msg;
  std::printf("[ check ] %s\n", st.message);
  dprm.state_pool.data = base;  // filling it exactly: runs
  st = kda_decode(&dprm, nullptr);
  EXPECT_EQ(st.code, KDA_OK) << st.message;
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaFree(buf), cudaSuccess);
}

// Memory of another GPU (api.cpp, check_pointer's last check; the host mutants cannot reach it): q and then
// the workspace allocated on device 1 while device 0 is current, with and without peer access, are refused
// by name before any kernel runs (out keeps its poison). Needs two GPUs: skipped, saying so, with one
// (mutant 32 is run only where there are two: scripts/mutants.sh, "needs").
TEST(GpuSafety, MemoryOfAnotherDeviceIsNamed) {
  KDA_SKIP_WITHOUT_SM90();
  int count = 0, device = -1;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  if (count < 2) GTEST_SKIP() << "needs two GPUs, found " << count;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  const int other = device == 0 ? 1 : 0;
  ProblemSpec s;
  s.T = 40;
  RandomProblem p = make_random_problem(s);
  DeviceProblem dp(p.params());
  ASSERT_GT(dp.workspace_bytes(), 0u) << "the workspace's check needs a call that uses one";
  const size_t q_bytes = static_cast<size_t>(s.T) * s.H * 128 * 2;
  void* far_q = nullptr;
  void* far_ws = nullptr;
  ASSERT_EQ(cudaSetDevice(other), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&far_q, q_bytes), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&far_ws, dp.workspace_bytes()), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(device), cudaSuccess);
  ASSERT_EQ(cudaMemcpyPeer(far_q, other, dp.params().q.data, device, q_bytes), cudaSuccess);
  const std::string on = "expected memory on the current device " + std::to_string(device) + ", got memory of device " +
                         std::to_string(other);
  for (int peer = 0; peer < 2; ++peer) {
    if (peer == 1) {
      int can = 0;
      ASSERT_EQ(cudaDeviceCanAccessPeer(&can, device, other), cudaSuccess);
      if (!can) break;
      const cudaError_t e = cudaDeviceEnablePeerAccess(other, 0);
      ASSERT_TRUE(e == cudaSuccess || e == cudaErrorPeerAccessAlreadyEnabled) << cudaGetErrorString(e);
      cudaGetLastError();
    }
    SCOPED_TRACE(peer ? "peer access enabled" : "no peer access");
    ASSERT_EQ(cudaMemset(dp.params().out.data, 0xff, q_bytes), cudaSuccess);
    kda_fwd_params a = dp.params();
    a.q.data = far_q;
    expect_refused(dp, a, dp.workspace_bytes(), KDA_ERROR_INVALID_ARGUMENT, "q: " + on);
    expect_refused_on(dp.params(), far_ws, dp.workspace_bytes(), KDA_ERROR_INVALID_ARGUMENT, "workspace: " + on);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<uint16_t> bits(q_bytes / 2);
    ASSERT_EQ(cudaMemcpy(bits.data(), dp.params().out.data, q_bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_TRUE(std::all_of(bits.begin(), bits.end(), [](uint16_t b) { return b == 0xffff; }))
        << "out written by a refused call";
  }
  cudaDeviceDisablePeerAccess(other);
  cudaGetLastError();
  ASSERT_EQ(cudaSetDevice(other), cudaSuccess);
  EXPECT_EQ(cudaFree(far_q), cudaSuccess);
  EXPECT_EQ(cudaFree(far_ws), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(device), cudaSuccess);
}

// trusted_pointers = 1 skips only the pointer queries: the same results, bit for bit; a host pointer
// is still reported when the flag is 0 (above).
TEST(GpuSafety, TrustedPointersGiveTheSameResults) {
  KDA_SKIP_WITHOUT_SM90();
  ProblemSpec s;
  s.T = 300;
  s.H = s.HV = 4;
  RandomProblem a = make_random_problem(s);
  RandomProblem b = a;
  kda_fwd_params trusted = b.params();
  trusted.trusted_pointers = 1;
  ASSERT_EQ(run_on_gpu(a.params()).code, KDA_OK);
  ASSERT_EQ(run_on_gpu(trusted).code, KDA_OK);
  expect_identical(a, b, "trusted_pointers 1 vs 0");
}

TEST(GpuSafety, RepeatedRunsAreBitwiseIdentical) {
  KDA_SKIP_WITHOUT_SM90();
  ProblemSpec s;
  s.T = 1000;
  s.H = s.HV = 16;
  RandomProblem a = make_random_problem(s);
  RandomProblem b = a;
  ASSERT_EQ(run_on_gpu(a.params(), 1).code, KDA_OK);
  ASSERT_EQ(run_on_gpu(b.params(), 3).code, KDA_OK);
  expect_identical(a, b, "one run vs three");
}

}  // namespace
}  // namespace kda::test
