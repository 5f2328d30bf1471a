// Golden test vectors (format in the shared contract, docs/spec.md §3): the repository's own
// generated cases (golden_gen.h, always there after a build) and the shared golden set (an extra,
// independent check when present): locating the folders, loading one case (meta.json + raw little-endian arrays) into host buffers, building the
// kda_fwd_params that describe it for given buffers (host or device), and the error metrics
// (relative L2 error, NaN/Inf check). Used by the CPU tests and the GPU tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "flash_kda/flash_kda.h"

namespace kda::test {

// One array of a case: dtype, shape and its raw bytes (bf16 as uint16 bit patterns).
struct HostArray {
  kda_dtype dtype = KDA_DTYPE_NONE;
  std::vector<int64_t> shape;
  std::vector<unsigned char> bytes;

  int64_t numel() const;
  const void* data() const { return bytes.data(); }
  std::vector<double> to_f64() const;  // every element converted exactly to double
};

struct GoldenCase {
  std::string name, dir, note;
  int64_t B = 0, T = 0, H = 0, HV = 0, K = 0, V = 0, N = 0;
  double scale = 0.0;
  bool has_lower_bound = false;  // false: lower_bound null (the softplus gate)
  double lower_bound = 0.0;
  bool gate_in_kernel = true, beta_sigmoid = true, qk_l2norm = true;
  // Inputs (q, k, v, g, beta, A_log, dt_bias, initial_state, cu_seqlens) and expected_o,
  // expected_final_state, as listed in meta.json ("files"). cu_seqlens is also built from the
  // meta.json list when there is no file for it.
  std::map<std::string, HostArray> arrays;

  const HostArray* find(const std::string& name) const;  // nullptr when absent
  int64_t out_numel() const { return B * T * HV * V; }
  int64_t state_numel() const { return N * HV * V * K; }
};

// The shared golden folder (the contract's independent float64 vectors, outside the repository): a
// copy named by $FLASH_KDA_GOLDEN_DIR if set, else <source dir>/.gpu_data/golden (git-ignored, written
// by scripts/prepare_gpu_data.sh --shared DIR).
// *named_by_env (optional): whether the environment named it (a missing folder is then a failure,
// not a skip).
std::string golden_dir(bool* named_by_env = nullptr);
// The repository's generated golden folder: $FLASH_KDA_REPO_GOLDEN_DIR if set, else
// <build>/tests/golden (written by the build, target flash_kda_golden_data).
std::string repo_golden_dir();
// True when `dir`/index.json exists.
bool golden_available(const std::string& dir);
// Case names of `dir`/index.json (empty on error, with *error set).
std::vector<std::string> golden_case_names(const std::string& dir, std::string* error);
// The shared golden cases for a test, with *dir set to golden_dir(). Empty with *skip set when the
// folder is absent and nobody asked for it (the test skips: the in-repo cases still run); empty with
// *failure set when FLASH_KDA_GOLDEN_DIR names a folder without index.json or the index lists no case
// (the test fails).
std::vector<std::string> shared_golden_cases(std::string* dir, std::string* skip, std::string* failure);
// Loads case `name` of `dir`; false with *error on any problem (missing file, size mismatch...).
bool load_golden_case(const std::string& dir, const std::string& name, GoldenCase* out, std::string* error);

// Where the tensors of a call live (host or device pointers). Inputs that are null are absent.
struct FwdPointers {
  const void *q = nullptr, *k = nullptr, *v = nullptr, *g = nullptr, *beta = nullptr;
  const void *A_log = nullptr, *dt_bias = nullptr, *initial_state = nullptr, *cu_seqlens = nullptr;
  void* out = nullptr;                       // bf16 [B, T, HV, V]
  void* final_state = nullptr;               // [N, HV, V, K]; null: not requested
  kda_dtype final_state_dtype = KDA_DTYPE_F32;
};

// Pointers to the case's own host arrays (inputs only; out and final_state left null).
FwdPointers host_input_pointers(const GoldenCase& c);

// Contiguous params for the case with the given pointers: gate from the flags (gate_in_kernel
// false: PREACTIVATED; lower_bound null: SOFTPLUS; else BOUNDED), beta_sigmoid and qk_l2norm
// from the flags, dtypes and shapes from the case's arrays.
kda_fwd_params make_params(const GoldenCase& c, const FwdPointers& ptrs);

// The project's pass rule for a GPU-precision result on case `name` (golden/tolerances.json):
// out <= max(4e-3, FLA's out error), final_state <= max(3e-3, FLA's state error). Falls back to
// 4e-3 / 3e-3 when the file or the case is missing.
void golden_tolerance(const std::string& dir, const std::string& name, double* out_tol, double* state_tol);

// Host outputs of a run: bf16 out and an fp32 final state, filled with `fill`.
struct HostOutputs {
  std::vector<uint16_t> out;
  std::vector<float> final_state;
};
HostOutputs make_host_outputs(const GoldenCase& c, uint16_t out_fill = 0, float state_fill = 0.0f);
// make_params with the case's host inputs and `outs`.
kda_fwd_params make_host_params(const GoldenCase& c, HostOutputs* outs);

// ||x - ref||_2 / ||ref||_2 (absolute error when ref is all zero). Sizes must match.
double rel_l2(const std::vector<double>& x, const std::vector<double>& ref);
// Conversions for the metrics.
std::vector<double> bf16_to_f64(const std::vector<uint16_t>& bits);
std::vector<double> f32_to_f64(const std::vector<float>& x);
// Number of NaN or Inf elements.
size_t count_non_finite(const std::vector<double>& x);

}  // namespace kda::test
