// CPU decode / verify over an indexed state pool (kda_decode_cpu): the float64 recurrence of
// recurrence_f64.cpp (same per-token math, common.h) reading and writing pool slots.
#pragma once

#include "src/core/decode_problem.h"

namespace kda::reference {

// Per (sequence, value head): start slot from state_indices (and num_accepted_tokens), zeros in the
// output rows of a sequence whose start slot is invalid, the tokens in float64, states written back
// with the pool's dtype (per token for [N, T_idx] indices, once at the end for [N]). Host pointers.
// out_exact (optional, [T_total, HV, V] contiguous) receives the unrounded outputs; pool_exact
// (optional, [slots, HV, V, K] contiguous) the unrounded state of every slot-head the call writes, at
// each write (elements of slots it does not write are left as they were).
kda_status decode_recurrence_f64(const DecodeProblem& problem, int num_threads, double* out_exact = nullptr,
                                 double* pool_exact = nullptr);

// Test hook: the same recurrence in float32 (float gate math, sequential sums; stores rounded to
// nearest from float32), a transcription of the decode kernels' arithmetic that the tests' rounding
// rule must admit (tests/random_decode_config.h).
kda_status decode_recurrence_f32(const DecodeProblem& problem, int num_threads);

}  // namespace kda::reference
