// Random configurations of kda_fwd's option matrix, drawn from a seed: the GPU's
// (tests/gpu/test_gpu_random_matrix.cpp, GpuRandomMatrix: each run against the float64 recurrence and
// the emulated kernels) and the CPU's (tests/test_random_matrix_cpu.cpp, CpuRandomMatrix: the chunked
// algebra and its emulation across the same matrix, in CI). What a configuration holds: shapes (batch
// rows or packed sequences with empty, one-token and partial-chunk members), grouped value heads, the
// three gate forms with and without A_log and dt_bias, slow key channels, state dtypes in and out, beta
// as logits or probabilities, the in-kernel L2 norm or unit-norm inputs, allow_neg_eigval, the output
// scale, the path (single pass forced, two kernels forced or automatic), the context plan (automatic, or
// a forced count with each method), trusted pointers, and one more way to run it (Variant).
//
// Reproducible: FLASH_KDA_RANDOM_SEED and FLASH_KDA_RANDOM_CONFIGS set a draw (random_draw()), every
// configuration has a text that names what was drawn, and FLASH_KDA_RANDOM_ONLY=i runs configuration i
// alone.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>

#include "flash_kda/flash_kda.h"
#include "tests/random_problem.h"

namespace kda::test {

// The second way a GPU test runs a configuration, which must give the first run's result: a CUDA
// graph's replay, strided views into one fused projection row, the state updated in place, int32
// offsets for int64 ones, g and beta as f32 tensors of the same values (two kernels only).
enum class Variant { kGraph, kStrided, kInPlace, kCuInt32, kNone, kF32GateBeta };

struct Config {
  ProblemSpec spec;
  bool beta_probs = false;  // beta_sigmoid = 0, beta holding sigmoid values
  bool unit_qk = false;     // qk_l2norm = 0, q and k given unit-norm
  bool neg = false;         // allow_neg_eigval
  double scale = 1.0 / std::sqrt(128.0);
  int32_t single_pass = KDA_SINGLE_PASS_AUTO;
  bool trusted = false;
  Variant variant = Variant::kNone;
  std::string text;
};

// The random matrices' ceiling on any run's relative L2 error against float64 (out and final state):
// GpuRandomMatrix's bound never exceeds it, CpuRandomMatrix holds the emulated kernel to it.
inline constexpr double kRandomMatrixCeiling = 1e-2;

// A non-negative integer from the environment, or `fallback` when unset (aborts on anything else).
uint64_t env_u64(const char* name, uint64_t fallback);

// The draw the environment asks for: FLASH_KDA_RANDOM_SEED (default `seed`), FLASH_KDA_RANDOM_CONFIGS
// (default `count`), FLASH_KDA_RANDOM_ONLY (only that index; -1: all).
struct RandomDraw {
  uint64_t seed = 0, count = 0;
  int64_t only = -1;
};
RandomDraw random_draw(uint64_t seed, uint64_t count);

// Runs `check` on every configuration of the draw (or on its `only` one), after a line naming the draw;
// returns how many ran (a test asserts that some did).
int for_each_config(const RandomDraw& d, const std::function<void(int index, const Config& c)>& check);

// Configuration i of the draw of `seed` (each from its own seed, so that one can be drawn again alone).
Config draw_config(uint64_t seed, uint64_t index);

// The problem of a configuration, its inputs adjusted to the flags (beta as probabilities, unit-norm
// q and k: the values the CPU and GPU both read).
RandomProblem make_problem(const Config& c);

// p's params with the configuration's flags (beta_sigmoid, qk_l2norm, allow_neg_eigval, scale,
// single_pass, trusted_pointers).
kda_fwd_params params_of(const Config& c, RandomProblem& p);

}  // namespace kda::test
