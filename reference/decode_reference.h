// CPU decode / verify over an indexed state pool (kda_decode_cpu): the float64 recurrence of
// recurrence_f64.cpp (same per-token math, common.h) reading and writing pool slots.
#pragma once

#include "src/core/decode_problem.h"

namespace kda::reference {

// Per (sequence, value head): start slot from state_indices (and num_accepted_tokens), zeros in the
// output rows of a sequence whose start slot is invalid, the tokens in float64, states written back
// with the pool's dtype (per token for [N, T_idx] indices, once at the end for [N]). Host pointers.
// out_exact (optional, [T_total, HV, V] contiguous) receives the unrounded outputs.
kda_status decode_recurrence_f64(const DecodeProblem& problem, int num_threads, double* out_exact = nullptr);

}  // namespace kda::reference
