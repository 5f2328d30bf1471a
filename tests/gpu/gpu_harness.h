// GPU test harness: detects an SM90 GPU (tests skip without one, saying so), mirrors a host
// kda_fwd_params (every tensor, with its strides) onto the device, runs kda_fwd (eagerly or
// through a captured CUDA graph) and copies out / final_state back into the host buffers.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "flash_kda/flash_kda.h"
#include "tests/host_reference.h"
#include "tests/random_problem.h"

namespace kda::test {

// Empty when a compute capability 9.0 GPU is present, else the reason to skip.
std::string gpu_skip_reason();

#define KDA_SKIP_WITHOUT_SM90()                                   \
  do {                                                            \
    const std::string kda_reason_ = ::kda::test::gpu_skip_reason(); \
    if (!kda_reason_.empty()) GTEST_SKIP() << kda_reason_;       \
  } while (0)

// Device copy of every tensor of a host params struct (same shapes and strides; tensors sharing a
// host buffer, as final_state = initial_state for an in-place update, share one device buffer).
class DeviceProblem {
 public:
  explicit DeviceProblem(const kda_fwd_params& host);
  ~DeviceProblem();
  DeviceProblem(const DeviceProblem&) = delete;
  DeviceProblem& operator=(const DeviceProblem&) = delete;

  kda_fwd_params& params() { return dev_; }
  void* workspace() { return workspace_; }
  size_t workspace_bytes() const { return workspace_bytes_; }
  // Re-uploads every input (not out / final_state) from the host params.
  void upload_inputs();
  // Copies out and final_state back into the host params' buffers.
  void download_outputs();
  // Fills the device workspace with a byte pattern (0xff: NaN-like garbage).
  void poison_workspace(int byte);

 private:
  kda_fwd_params host_;
  kda_fwd_params dev_;
  std::vector<void*> allocations_;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
};

// The kda_fwd_params.single_pass a DeviceProblem gives a call whose params leave it at
// KDA_SINGLE_PASS_AUTO: the environment's FLASH_KDA_TEST_SINGLE_PASS=always runs every problem the
// single pass takes (by the public header's rules) with KDA_SINGLE_PASS_ALWAYS, so that the whole GPU
// suite runs on it (scripts/gpu_verify.sh runs the suite both ways); =never, the two kernels.
int32_t test_single_pass_mode(const kda_fwd_params& p);

// One kda_fwd call on `dp` captured into a CUDA graph on a stream of its own (destroyed with it).
// error(): the CUDA step of the capture that failed, empty when the graph is ready; status(): the
// captured call's own status. replay(n): n graph launches, then a synchronisation of the stream.
class CapturedFwd {
 public:
  explicit CapturedFwd(DeviceProblem& dp);
  ~CapturedFwd();
  CapturedFwd(const CapturedFwd&) = delete;
  CapturedFwd& operator=(const CapturedFwd&) = delete;

  const std::string& error() const { return error_; }
  const kda_status& status() const { return status_; }
  cudaError_t replay(int times = 1);

 private:
  cudaStream_t stream_ = nullptr;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  std::string error_;
  kda_status status_{};
};

// Runs kda_fwd on the device for host params: uploads, runs `repeats` times, downloads.
kda_status run_on_gpu(const kda_fwd_params& host, int repeats = 1);

// Relative L2 errors of a GPU run against the float64 recurrence (host_reference.h's RunErrors;
// reference_f64 and ExactReference are there too) and, beside them, the errors of the CPU emulation
// of the kernels' arithmetic on the same inputs (run_emulated_kernel: the float32 chunked algebra
// with the kernels' bf16 roundings), which predict the GPU's.
struct GpuErrors : RunErrors {
  RunErrors emulated;
  bool has_emulated = false;
};

// What a GPU run's errors against float64 may be, given the emulated kernel's `emu`: out within
// 1.5x the emulated error + 2e-4, the final state within 2x + 1e-5. Measured: GPU / emulated
// 0.99-1.25 for out and 0.80-1.28 for final states (at least 1e-5 emulated; up to 2.1 below it,
// where float32 summation order alone moves errors of 2-6e-6) over GpuRandomMatrix's 1,240
// configurations (H100, 2026-12-05). The hand-written checks below (session 54) meet it: on an H100
// (2026-12-06 06:29 UTC, a2058e0, the whole suite by default and with the single pass forced) out at
// most 0.81 of its allowance, final states 0.65. The sharded runs are held to the emulation of the
// sharded run itself (host_reference.h, run_emulated_sharded; one call's emulation put the slow-decay
// case at 0.999): GPU / emulated 0.999-1.003 for out, 0.999-1.41 for final states.
struct ErrorBounds {
  double out = 0, state = 0;
};
ErrorBounds emulated_bounds(const RunErrors& emu);

// The errors of `ran` (its out / final state written by a run on `inputs`' inputs) against the
// float64 recurrence on `inputs`, and the emulated kernel's on `inputs` (has_emulated set); both
// oracles get params() passed through `adjust` when given (flags beyond ProblemSpec). `emulate`: the
// emulation to run (default run_emulated_kernel, one call; the sharded runs give run_emulated_sharded).
GpuErrors errors_with_emulation(const RandomProblem& ran, const RandomProblem& inputs,
                                const std::function<void(kda_fwd_params&)>& adjust = {},
                                const std::function<void(const kda_fwd_params&)>& emulate = {});

// Expects `e` within emulated_bounds(emu) (printing nothing).
void expect_as_emulated(const std::string& what, const RunErrors& e, const RunErrors& emu);

// Runs `gpu` on the GPU (writing its out / final state) and copies on the CPU float64 recurrence and
// the emulated kernel, all three with params() passed through `adjust` when given.
GpuErrors gpu_vs_f64(RandomProblem& gpu, const std::function<void(kda_fwd_params&)>& adjust = {});

// Prints the errors ("[ errors ] what ... (emulated kernel ...)") and expects no non-finite value,
// both errors within the fixed tolerances (the ceilings: the golden pass rule and the like) and, when
// the emulated kernel ran, within emulated_bounds: the per-input rule, the sharper one wherever the
// inputs are benign (a final state's 3e-3 ceiling against a prediction of ~5e-5).
void expect_close(const char* what, const GpuErrors& e, double out_tol = 5e-3, double state_tol = 5e-3);

// Bitwise equality of two runs' bf16 out and final state (fp32 or bf16).
void expect_identical(const RandomProblem& a, const RandomProblem& b, const char* what);

// Every combination of initial and final state dtype (none, bf16, fp32) on `base` (seeds seed0 +
// 3·in + out), each against the float64 recurrence: out within out_tol, an fp32 final state within
// state_tol, a bf16 one within 6e-3 (its own rounding, ~2^-9 relative, comes on top).
void check_state_dtype_matrix(const ProblemSpec& base, const char* prefix, uint64_t seed0, double out_tol,
                              double state_tol);

// `s` (varlen) with int64 cu_seqlens against the float64 recurrence, and with int32 cu_seqlens:
// bitwise identical to the int64 run.
void check_varlen_int32_matches_int64(ProblemSpec s, const char* what, double out_tol, double state_tol);

// `s` captured in a CUDA graph (poisoned workspace) and replayed: identical to an eager run; then
// new inputs (seed 99) uploaded into the same buffers and replayed: identical to an eager run on them.
void check_graph_replay(const ProblemSpec& s, const char* what);

// One replay of `graph` (captured on `dp`, made from p's params) on the inputs of a fresh problem drawn
// from `spec` (the same shapes): its inputs copied into p's buffers and uploaded, the graph replayed,
// p's out and final state downloaded. Returns the fresh problem, not yet run (the eager reference).
RandomProblem replay_on_fresh_inputs(RandomProblem& p, DeviceProblem& dp, CapturedFwd& graph, const ProblemSpec& spec);

// Element size of a dtype in bytes.
size_t dtype_bytes(kda_dtype dtype);
// Elements spanned by a strided view (0 when it has no elements).
size_t tensor_extent(const kda_tensor& t);

}  // namespace kda::test
