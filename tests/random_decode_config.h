// Random configurations of kda_decode's option matrix, drawn from a seed, and the rule their results
// are held to: the GPU's (tests/gpu/test_gpu_decode_random.cpp, GpuDecodeRandomMatrix) and the CPU's
// (tests/test_decode_random_cpu.cpp, CpuDecodeRandomMatrix, in CI).
//
// What a configuration holds: batch rows or packed sequences (empty ones, and ones longer than a block
// of kDecodeMaxTokBlock = 16 tokens), grouped value heads, the three gates with and without A_log and
// dt_bias, f32 or bf16 pools, the index forms (none, [N], [N, T_idx] with num_accepted_tokens, int32 or
// int64, padding entries), beta as logits or probabilities, the in-kernel L2 norm or unit-norm inputs,
// allow_neg_eigval, the output scale, the kernel configuration (automatic or forced), trusted pointers,
// and one more way to run it (DecodeVariant).
//
// The rule (correct rounding up to float32's error): the decode kernels keep every value in float32
// between bf16 inputs and the stored results, so each stored value must be the exact (float64) result
// rounded once, up to float32 arithmetic's error: |got - exact| <= half a unit in the last place of
// the stored dtype at `exact` + a slack of the row's root mean square (a row: the 128 values of one
// output row of a token and head, or of one state row): kDecodeOutSlack for outputs, kDecodeStateSlack
// for states. A result rounded the wrong way (truncated bf16) or an intermediate rounded to bf16 breaks
// it; the hand-written decode tests' fixed tolerances of the time (4e-3 relative L2 on out, 3e-3 on f32
// pools, 6e-3 on bf16 pools) allowed both (tests/mutants/README.md).
//
// Reproducible: FLASH_KDA_RANDOM_SEED, FLASH_KDA_RANDOM_CONFIGS and FLASH_KDA_RANDOM_ONLY as for
// random_config.h (env_u64, random_draw); every configuration prints its index and what was drawn.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "flash_kda/flash_kda.h"
#include "tests/random_config.h"
#include "tests/random_decode.h"

namespace kda::test {

// The second way a GPU test runs a configuration, which must give the first run's bits: a CUDA
// graph's replay, another kernel configuration (with the other trusted_pointers value), or the same
// call again.
enum class DecodeVariant { kGraph, kOtherConfig, kAgain };

struct DecodeConfig {
  DecodeSpec spec;
  bool beta_probs = false;  // beta_sigmoid = 0, beta holding sigmoid values
  bool unit_qk = false;     // qk_l2norm = 0, q and k given unit-norm
  bool neg = false;         // allow_neg_eigval
  double scale = 1.0 / std::sqrt(128.0);
  int32_t kernel_config = 0;        // 0: automatic, else forced
  int32_t other_config = 0;         // the variant kOtherConfig's
  bool trusted = false;
  std::vector<int64_t> padding;     // sequences whose start slot is -1 (zeros out, no state access)
  std::vector<int64_t> no_write;    // [N, T_idx] entries set to -1 (no state written after that token)
  std::vector<int64_t> accepted;    // num_accepted_tokens (with spec.with_accepted), 0..T_idx + 1
  DecodeVariant variant = DecodeVariant::kAgain;
  std::string text;
};

// The rule's slacks, relative to the row's root mean square. Outputs get more: an output is a
// projection, where cancellation makes float32's error large against the row (a throwaway probe of
// 2026-12-05, the same float32 recurrence unrounded, found outputs up to 2.2e-4 off and states 9.7e-6,
// over 1,000 configurations of seed 7). What float32 adds beyond the final rounding (`residual` below)
// stayed at 1.3e-5 (out) and 6.2e-6 (states) for run_decode_f32 (CpuDecodeRandomMatrix, seed 2026 x 200)
// and at 1.2e-5 and 8.2e-6 on an H100 (1,260 configurations). Both slacks stay below half a unit of
// bf16 at the row's rms (2^-9 = 2.0e-3), so a truncated store still fails.
inline constexpr double kDecodeOutSlack = 1e-3;
inline constexpr double kDecodeStateSlack = 1e-4;

// Configuration i of the draw of `seed` (each from its own seed).
DecodeConfig draw_decode_config(uint64_t seed, uint64_t index);

// Runs `check` on every configuration of the draw (or its `only` one); returns how many ran.
int for_each_decode_config(const RandomDraw& d, const std::function<void(int index, const DecodeConfig& c)>& check);

// The problem of a configuration: inputs adjusted to the flags, padding and no-write entries, accepted
// counts.
RandomDecode make_decode(const DecodeConfig& c);

// d's params with the configuration's flags (beta_sigmoid, qk_l2norm, allow_neg_eigval, scale,
// kernel_config, trusted_pointers).
kda_decode_params decode_params_of(const DecodeConfig& c, RandomDecode& d);

// The float64 results of a problem (host pointers, not modified): out [T_total, HV, V] unrounded, and
// pool [slots, HV, V, K] unrounded where the call writes a state, NaN where it writes none.
struct DecodeExact {
  std::vector<double> out, pool;
};
DecodeExact decode_exact(const kda_decode_params& host);

// The problem run by the float32 transcription of the recurrence (reference/decode_reference.h's test
// hook): what the rule's slacks must admit.
RandomDecode run_decode_f32(const DecodeConfig& c, const RandomDecode& base);

// How far stored values are from the rule: over rows of `row` values, the largest
// |got - exact| / (half ulp of the dtype at exact + slack x rms(exact row)) (`worst`, <= 1 passes; where
// the allowance is 0, an exact zero, any difference counts as infinite), the element it is at, and
// how many values are not finite; `residual`, the largest (|got - exact| - half ulp) / rms(exact row):
// what float32 arithmetic adds beyond the final rounding (<= 0 where every value is rounded correctly).
struct RoundingExcess {
  double worst = 0;
  int64_t at = -1;
  double residual = -std::numeric_limits<double>::infinity();
  size_t non_finite = 0;
};
RoundingExcess rounding_excess_bf16(const std::vector<uint16_t>& got, const std::vector<double>& exact, int64_t row,
                                    double slack);
RoundingExcess rounding_excess_f32(const std::vector<float>& got, const std::vector<double>& exact, int64_t row,
                                   double slack);

// A decode run's results against its float64 results: out by the rule; the pool by the rule where the
// call writes a state, bitwise equal to `before` (the pool before the call) elsewhere. slack_scale
// multiplies both slacks (0: correct rounding with no float32 error at all, the CPU oracle's stores).
struct DecodeCheck {
  RoundingExcess out, pool;
  size_t untouched_changed = 0;  // elements of unwritten slot-heads that differ from `before`
  size_t written = 0;            // elements the call writes (a configuration that writes none says so)
};
DecodeCheck check_decode(const RandomDecode& got, const RandomDecode& before, const DecodeExact& exact,
                         double slack_scale = 1.0);

}  // namespace kda::test
