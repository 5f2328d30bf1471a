// CPU float64 reference of context parallelism across GPUs (docs/design.md §3.4): the affine map of
// a piece of a sequence, S_end = S_start·Mᵀ + D, and the combine of consecutive pieces. Sees only
// the public header and the validated problem description, like the rest of reference/.
#pragma once

#include <cstdint>

#include "src/core/problem.h"
#include "src/core/status.h"

namespace kda::reference {

// (D, M) of tokens [t0, t1) of sequence n (offsets within the sequence, clamped to its length) and
// value head hv, in float64: D [V][K] the end state from a zero start (the recurrence of
// recurrence_f64.cpp), M [K][K] row-major with S_end = S_start·Mᵀ + D for every start state (the
// same recurrence run on the rows of the identity with zero values gives Mᵀ).
void transition_f64(const Problem& problem, int64_t n, int64_t hv, int64_t t0, int64_t t1, double* D, double* M);

// S <- S·Mᵀ + D for one [V][K] state (V = K = 128), in float64.
void apply_transition_f64(const double* D, const double* M, double* S);

}  // namespace kda::reference
