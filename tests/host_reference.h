// The oracles of the tests that run host params (tests/random_problem.h's problems) on the GPU or on the
// CPU: the float64 recurrence's unrounded results, the CPU emulation of the kernels' roundings
// (tests/kernel_rounding.h), and the relative L2 errors of a run against the float64 results.
#pragma once

#include <cstddef>
#include <vector>

#include "flash_kda/flash_kda.h"
#include "reference/reference.h"
#include "tests/golden_io.h"
#include "tests/kernel_rounding.h"
#include "tests/random_problem.h"

namespace kda::test {

// The float64 recurrence's unrounded results for host params (their out / final_state buffers are
// written too): out as [B*T, HV, V] (rows outside every sequence are 0), final state [N, HV, V, K].
// Throws std::runtime_error when the params do not validate.
struct ExactReference {
  std::vector<double> out, final_state;
};
ExactReference reference_f64(const kda_fwd_params& host);

// The float32 chunked algebra (reference::fwd_chunked_f32) on host params with the operand roundings
// `rounding`, writing the params' out and final_state as kda_fwd does, and, where given, the
// unrounded results (out_exact [B*T, HV, V], state_exact [N, HV, V, K]). Every core. Throws
// std::runtime_error when the params do not validate.
void run_chunked_f32(const kda_fwd_params& host, const reference::ChunkedRounding& rounding,
                     float* out_exact = nullptr, float* state_exact = nullptr);

// The CPU emulation of the kernels' arithmetic: run_chunked_f32 with the kernels' operand roundings
// (kernel_rounding()), whose out and final_state predict the GPU's error.
void run_emulated_kernel(const kda_fwd_params& host);

// The CPU emulation of a sharded run (tests/gpu/cp_harness.h's run_sharded: host params split along
// tokens at `cuts`, fixed batches row by row, packed batches along the packed tokens), writing the
// params' out and final state: each sequence's pieces (its tokens in each shard, each chunked from its
// own start) run one after another with the kernels' roundings, each from the previous piece's fp32
// end state; U and Kr are split (kernel_rounding's split_update_last_chunks) only in the piece that
// ends the sequence, as on the GPU, where that piece's kda_fwd_prepared stores the final state and the
// earlier pieces' transitions have no final split. (Before session 56 the split covered the last chunk
// alone: where the last piece ended in a chunk of a few tokens, the final state kept the unsplit
// rounding of the chunk before, which one call over the whole sequence split.) An empty
// sequence's final state is its initial state (fp32 final states only). `rounding`: the kernels' by
// default (its split fields apply to the last piece only). Throws std::runtime_error when the params
// do not validate or the cuts do not run from 0 to the tokens' end.
void run_emulated_sharded(const kda_fwd_params& host, const std::vector<int64_t>& cuts,
                          const reference::ChunkedRounding& rounding = kernel_rounding());

// Relative L2 errors of a run's bf16 out and of its final state (by the spec's final-state dtype; in the
// initial-state buffers after an in-place run) against the float64 results, and the non-finite count.
struct RunErrors {
  double out = 0, state = 0;
  size_t non_finite = 0;
};
RunErrors errors_against(const RandomProblem& p, const ExactReference& exact, bool in_place = false);

// A golden case's run (`outs`, from make_host_outputs: bf16 out, fp32 final state) against the case's
// expected float64 values.
RunErrors golden_errors(const GoldenCase& c, const HostOutputs& outs);
// The float32 chunked algebra with `rounding` on golden case `c` (outputs prefilled with NaN, so an
// unwritten value counts as non-finite), against its expected values.
RunErrors rounded_golden_errors(const GoldenCase& c, const reference::ChunkedRounding& rounding);
// The same with the kernels' roundings (kernel_rounding()): the emulated kernel's errors.
RunErrors emulated_golden_errors(const GoldenCase& c);

}  // namespace kda::test
