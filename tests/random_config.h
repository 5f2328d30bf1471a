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
#include <random>
#include <string>
#include <vector>

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
// The same over indices, the line tagged `tag` (random_decode_config.h's draw uses it too).
int for_each_index(const RandomDraw& d, const char* tag, const std::function<void(uint64_t index)>& run);

// A configuration's dice (each configuration is drawn from its own seed).
class Dice {
 public:
  explicit Dice(uint64_t seed) : r_(seed) {}
  int pick(int n) { return static_cast<int>(r_() % static_cast<uint64_t>(n)); }  // [0, n)
  bool chance(int percent) { return pick(100) < percent; }
  uint64_t next() { return r_(); }

 private:
  std::mt19937_64 r_;
};

// The gate of a draw (ProblemSpec or DecodeSpec): bounded 60%, softplus 20%, pre-activated 20%; the
// lower bound; A_log and dt_bias each present 80%.
template <typename Spec>
void draw_gate(Dice& d, Spec& s) {
  const int gate = d.pick(10);
  s.gate = gate < 6 ? KDA_GATE_BOUNDED : gate < 8 ? KDA_GATE_SOFTPLUS : KDA_GATE_PREACTIVATED;
  static const float kLower[] = {-5.0f, -5.0f, -3.0f, -1.0f, -0.25f};
  s.lower_bound = kLower[d.pick(5)];
  s.with_A_log = d.chance(80);
  s.with_dt_bias = d.chance(80);
}

// The flags both option matrices set, on kda_fwd_params or kda_decode_params.
template <typename Params>
void set_shared_flags(Params& p, bool beta_probs, bool unit_qk, bool neg, double scale, bool trusted) {
  p.beta_sigmoid = !beta_probs;
  p.qk_l2norm = !unit_qk;
  p.allow_neg_eigval = neg;
  p.scale = scale;
  p.trusted_pointers = trusted;
}

// Token inputs adjusted to the flags: beta as probabilities (sigmoid of the drawn logits, in bf16),
// q and k unit-norm rows.
void adjust_token_inputs(bool beta_probs, bool unit_qk, std::vector<uint16_t>* beta, std::vector<uint16_t>* q,
                         std::vector<uint16_t>* k);

// Configuration i of the draw of `seed` (each from its own seed, so that one can be drawn again alone).
Config draw_config(uint64_t seed, uint64_t index);

// The problem of a configuration, its inputs adjusted to the flags (beta as probabilities, unit-norm
// q and k: the values the CPU and GPU both read).
RandomProblem make_problem(const Config& c);

// p's params with the configuration's flags (beta_sigmoid, qk_l2norm, allow_neg_eigval, scale,
// single_pass, trusted_pointers).
kda_fwd_params params_of(const Config& c, RandomProblem& p);

}  // namespace kda::test
