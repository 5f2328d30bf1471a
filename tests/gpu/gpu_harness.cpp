// GPU test harness (see gpu_harness.h).
#include "tests/gpu/gpu_harness.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "reference/common.h"
#include "src/api/problem.h"
#include "tests/golden_io.h"

namespace kda::test {

namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
}

kda_tensor* tensors(kda_fwd_params& p, int i) {
  kda_tensor* all[] = {&p.q,     &p.k,           &p.v,           &p.g,          &p.beta,      &p.out,
                       &p.A_log, &p.dt_bias,     &p.initial_state, &p.final_state, &p.cu_seqlens};
  return i < 11 ? all[i] : nullptr;
}
constexpr int kNumTensors = 11;
bool is_output(int i) { return i == 5 || i == 9; }

}  // namespace

std::string gpu_skip_reason() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    return "no CUDA GPU on this machine: GPU test skipped";
  }
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
  if (major != 9 || minor != 0)
    return "GPU of compute capability " + std::to_string(major) + "." + std::to_string(minor) +
           " (needs 9.0): GPU test skipped";
  return "";
}

size_t dtype_bytes(kda_dtype dtype) {
  switch (dtype) {
    case KDA_DTYPE_BF16: case KDA_DTYPE_F16: return 2;
    case KDA_DTYPE_F32: case KDA_DTYPE_I32: return 4;
    case KDA_DTYPE_I64: case KDA_DTYPE_F64: return 8;
    default: return 1;
  }
}

size_t tensor_extent(const kda_tensor& t) {
  size_t extent = 1;
  for (int d = 0; d < t.ndim; ++d) {
    if (t.shape[d] == 0) return 0;
    extent += static_cast<size_t>(t.shape[d] - 1) * static_cast<size_t>(t.stride[d]);
  }
  return extent;
}

DeviceProblem::DeviceProblem(const kda_fwd_params& host) : host_(host), dev_(host) {
  for (int i = 0; i < kNumTensors; ++i) {
    kda_tensor* h = tensors(host_, i);
    kda_tensor* d = tensors(dev_, i);
    if (h->data == nullptr) continue;
    // A host buffer shared by two tensors (final_state = initial_state: in place) is one device buffer.
    bool shared = false;
    for (int j = 0; j < i && !shared; ++j) {
      if (tensors(host_, j)->data == h->data) {
        d->data = tensors(dev_, j)->data;
        shared = true;
      }
    }
    if (shared) continue;
    const size_t bytes = std::max<size_t>(16, tensor_extent(*h) * dtype_bytes(h->dtype));
    void* ptr = nullptr;
    check(cudaMalloc(&ptr, bytes), "cudaMalloc");
    allocations_.push_back(ptr);
    check(cudaMemcpy(ptr, h->data, tensor_extent(*h) * dtype_bytes(h->dtype), cudaMemcpyHostToDevice), "upload");
    d->data = ptr;
  }
  if (dev_.single_pass == KDA_SINGLE_PASS_AUTO) dev_.single_pass = test_single_pass_mode(dev_);
  if (kda_fwd_workspace_size(&dev_, &workspace_bytes_).code == KDA_OK && workspace_bytes_ > 0)
    check(cudaMalloc(&workspace_, workspace_bytes_), "cudaMalloc workspace");
}

int32_t test_single_pass_mode(const kda_fwd_params& p) {
  static const char* env = std::getenv("FLASH_KDA_TEST_SINGLE_PASS");
  static const int32_t mode = env == nullptr                       ? KDA_SINGLE_PASS_AUTO
                              : std::strcmp(env, "always") == 0 ? KDA_SINGLE_PASS_ALWAYS
                              : std::strcmp(env, "never") == 0  ? KDA_SINGLE_PASS_NEVER
                                                                 : -1;
  if (mode < 0) {
    std::fprintf(stderr, "FLASH_KDA_TEST_SINGLE_PASS: expected always or never, got %s\n", env);
    std::abort();
  }
  if (mode != KDA_SINGLE_PASS_ALWAYS) return mode;
  // What the public header says the single pass takes: the bounded gate, g in bf16, and
  // q, k, g, v that a tensor map describes (innermost dimension contiguous, the other strides positive
  // multiples of 8 elements where the dimension has more than one element; device buffers aligned).
  auto mappable = [](const kda_tensor& t) {
    if (t.ndim != 4 || t.stride[3] != 1) return false;
    for (int d = 0; d < 3; ++d)
      if (t.shape[d] > 1 && (t.stride[d] <= 0 || t.stride[d] % 8 != 0)) return false;
    return true;
  };
  // Tests that choose a sequence-parallel plan are about the two kernels: left as they are.
  if (p.context_split != 0 || p.context_method != KDA_CONTEXT_AUTO || p.context_warmup_chunks != 0) return KDA_SINGLE_PASS_AUTO;
  const bool takes = p.gate == KDA_GATE_BOUNDED && p.g.dtype == KDA_DTYPE_BF16 &&
                     mappable(p.q) && mappable(p.k) && mappable(p.g) && mappable(p.v);
  return takes ? KDA_SINGLE_PASS_ALWAYS : KDA_SINGLE_PASS_AUTO;
}

DeviceProblem::~DeviceProblem() {
  for (void* p : allocations_) cudaFree(p);
  if (workspace_) cudaFree(workspace_);
}

void DeviceProblem::upload_inputs() {
  for (int i = 0; i < kNumTensors; ++i) {
    kda_tensor* h = tensors(host_, i);
    if (h->data == nullptr || is_output(i)) continue;
    check(cudaMemcpy(tensors(dev_, i)->data, h->data, tensor_extent(*h) * dtype_bytes(h->dtype),
                     cudaMemcpyHostToDevice), "upload");
  }
}

void DeviceProblem::download_outputs() {
  check(cudaDeviceSynchronize(), "kernel execution");
  for (int i : {5, 9}) {
    kda_tensor* h = tensors(host_, i);
    if (h->data == nullptr) continue;
    check(cudaMemcpy(h->data, tensors(dev_, i)->data, tensor_extent(*h) * dtype_bytes(h->dtype),
                     cudaMemcpyDeviceToHost), "download");
  }
}

void DeviceProblem::poison_workspace(int byte) {
  if (workspace_) check(cudaMemset(workspace_, byte, workspace_bytes_), "cudaMemset");
}

kda_status run_on_gpu(const kda_fwd_params& host, int repeats) {
  DeviceProblem dp(host);
  dp.poison_workspace(0xff);
  kda_status st{};
  for (int r = 0; r < repeats; ++r) {
    st = kda_fwd(&dp.params(), dp.workspace(), dp.workspace_bytes(), nullptr);
    if (st.code != KDA_OK) return st;
  }
  dp.download_outputs();
  return st;
}

ErrorBounds emulated_bounds(const RunErrors& emu) { return {1.5 * emu.out + 2e-4, 2.0 * emu.state + 1e-5}; }

GpuErrors errors_with_emulation(const RandomProblem& ran, const RandomProblem& inputs,
                                const std::function<void(kda_fwd_params&)>& adjust,
                                const std::function<void(const kda_fwd_params&)>& emulate) {
  RandomProblem ref = inputs, emu = inputs;
  kda_fwd_params rp = ref.params(), ep = emu.params();
  if (adjust) {
    adjust(rp);
    adjust(ep);
  }
  const ExactReference exact = reference_f64(rp);
  if (emulate)
    emulate(ep);
  else
    run_emulated_kernel(ep);
  GpuErrors e;
  static_cast<RunErrors&>(e) = errors_against(ran, exact);
  e.emulated = errors_against(emu, exact);
  e.has_emulated = true;
  return e;
}

GpuErrors gpu_vs_f64(RandomProblem& gpu, const std::function<void(kda_fwd_params&)>& adjust) {
  const RandomProblem inputs = gpu;
  kda_fwd_params gp = gpu.params();
  if (adjust) adjust(gp);
  const kda_status st = run_on_gpu(gp);
  if (st.code != KDA_OK) throw std::runtime_error(st.message);
  return errors_with_emulation(gpu, inputs, adjust);
}

void expect_as_emulated(const std::string& what, const RunErrors& e, const RunErrors& emu) {
  const ErrorBounds b = emulated_bounds(emu);
  EXPECT_LE(e.out, b.out) << what << " (out, against the emulated kernel's " << emu.out << ")";
  EXPECT_LE(e.state, b.state) << what << " (final state, against the emulated kernel's " << emu.state << ")";
}

void expect_close(const char* what, const GpuErrors& e, double out_tol, double state_tol) {
  if (!e.has_emulated) {
    std::printf("[ errors ] %-44s out %.3e final_state %.3e\n", what, e.out, e.state);
  } else {
    std::printf("[ errors ] %-44s out %.3e final_state %.3e (emulated kernel %.3e, %.3e)\n", what, e.out, e.state,
                e.emulated.out, e.emulated.state);
    expect_as_emulated(what, e, e.emulated);
  }
  EXPECT_EQ(e.non_finite, 0u) << what;
  EXPECT_LE(e.out, out_tol) << what;
  EXPECT_LE(e.state, state_tol) << what;
}

void expect_identical(const RandomProblem& a, const RandomProblem& b, const char* what) {
  EXPECT_EQ(a.out, b.out) << what;
  EXPECT_TRUE(a.final_f32.size() == b.final_f32.size() &&
              (a.final_f32.empty() || std::memcmp(a.final_f32.data(), b.final_f32.data(), a.final_f32.size() * 4) == 0))
      << what;
  EXPECT_EQ(a.final_bf16, b.final_bf16) << what;
}

void check_state_dtype_matrix(const ProblemSpec& base, const char* prefix, uint64_t seed0, double out_tol,
                              double state_tol) {
  const kda_dtype kinds[3] = {KDA_DTYPE_NONE, KDA_DTYPE_BF16, KDA_DTYPE_F32};
  for (kda_dtype in : kinds)
    for (kda_dtype out : kinds) {
      ProblemSpec s = base;
      s.initial_state = in;
      s.final_state = out;
      s.seed = seed0 + static_cast<uint64_t>(in) * 3 + static_cast<uint64_t>(out);
      RandomProblem p = make_random_problem(s);
      char name[96];
      std::snprintf(name, sizeof(name), "%sstate in %d out %d", prefix, in, out);
      expect_close(name, gpu_vs_f64(p), out_tol, out == KDA_DTYPE_BF16 ? 6e-3 : state_tol);
    }
}

void check_varlen_int32_matches_int64(ProblemSpec s, const char* what, double out_tol, double state_tol) {
  s.cu_dtype = KDA_DTYPE_I64;
  RandomProblem p64 = make_random_problem(s);
  s.cu_dtype = KDA_DTYPE_I32;
  RandomProblem p32 = make_random_problem(s);
  const std::string name = std::string(what) + ", int64 cu_seqlens";
  expect_close(name.c_str(), gpu_vs_f64(p64), out_tol, state_tol);
  ASSERT_EQ(run_on_gpu(p32.params()).code, KDA_OK);
  expect_identical(p32, p64, (std::string(what) + ": int32 vs int64 cu_seqlens").c_str());
}

CapturedFwd::CapturedFwd(DeviceProblem& dp) {
  auto step = [&](cudaError_t err, const char* what) {
    if (err != cudaSuccess && error_.empty()) error_ = std::string(what) + ": " + cudaGetErrorString(err);
    return err == cudaSuccess;
  };
  if (!step(cudaStreamCreate(&stream_), "cudaStreamCreate")) return;
  if (!step(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture")) return;
  status_ = kda_fwd(&dp.params(), dp.workspace(), dp.workspace_bytes(), reinterpret_cast<kda_stream_t>(stream_));
  if (!step(cudaStreamEndCapture(stream_, &graph_), "cudaStreamEndCapture")) return;
  step(cudaGraphInstantiate(&exec_, graph_, 0), "cudaGraphInstantiate");
}

CapturedFwd::~CapturedFwd() {
  if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
  if (graph_ != nullptr) cudaGraphDestroy(graph_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

cudaError_t CapturedFwd::replay(int times) {
  if (exec_ == nullptr) return cudaErrorInvalidValue;
  for (int i = 0; i < times; ++i) {
    const cudaError_t err = cudaGraphLaunch(exec_, stream_);
    if (err != cudaSuccess) return err;
  }
  return cudaStreamSynchronize(stream_);
}

RandomProblem replay_on_fresh_inputs(RandomProblem& p, DeviceProblem& dp, CapturedFwd& graph, const ProblemSpec& spec) {
  RandomProblem fresh = make_random_problem(spec);
  // (Assigned element by element into p's vectors of the same sizes: the captured pointers stay valid.)
  p.q = fresh.q;
  p.k = fresh.k;
  p.v = fresh.v;
  p.g = fresh.g;
  p.beta = fresh.beta;
  p.initial_f32 = fresh.initial_f32;
  p.A_log = fresh.A_log;
  p.dt_bias = fresh.dt_bias;
  dp.upload_inputs();
  EXPECT_EQ(graph.replay(), cudaSuccess);
  dp.download_outputs();
  return fresh;
}

void check_graph_replay(const ProblemSpec& s, const char* what) {
  RandomProblem p = make_random_problem(s);
  RandomProblem eager = p;
  ASSERT_EQ(run_on_gpu(eager.params()).code, KDA_OK);

  DeviceProblem dp(p.params());
  dp.poison_workspace(0xff);  // nothing the call reads from the workspace may predate it
  CapturedFwd graph(dp);
  ASSERT_EQ(graph.error(), "");
  ASSERT_EQ(graph.status().code, KDA_OK) << graph.status().message;
  ASSERT_EQ(graph.replay(2), cudaSuccess);
  dp.download_outputs();
  expect_identical(p, eager, (std::string(what) + ": graph replay vs eager").c_str());

  // New inputs into the same buffers, replay: equals an eager run on the new inputs.
  ProblemSpec t = s;
  t.seed = 99;
  RandomProblem fresh = replay_on_fresh_inputs(p, dp, graph, t);
  ASSERT_EQ(run_on_gpu(fresh.params()).code, KDA_OK);
  expect_identical(p, fresh, (std::string(what) + ": graph replay on new inputs vs eager").c_str());
}

}  // namespace kda::test
