// The GPU kernels' operand roundings as the CPU emulation's flags (reference::ChunkedRounding, the
// float32 chunked algebra of docs/design.md §2 with chosen operands rounded to bf16 or carried as bf16
// hi + lo pairs): the emulation with these flags predicts a kernel's error against the float64
// recurrence (docs/design.md §2.5). Used by the golden CPU test (the emulated kernel within each
// case's pass rule), the precision study (tests/tools/rounding_study.cpp: one flag changed at a time
// from these) and the GPU's random configurations (each run's error against this prediction).
#pragma once

#include "reference/reference.h"

namespace kda::test {

// The record's Wd, Qp and Kr as one bf16 each, the state operand as a bf16 hi + lo pair, U as one
// bf16 (a hi + lo pair with the build knob FLASH_KDA_SPLIT_U=1); the preparation's A, Wd and Qp from
// one bf16 per operand, M from hi + lo pairs (version 21); P = M·Tb from hi + lo pairs of both
// (version 23; before it, P in float32); Tb and P carried as hi + lo pairs where they multiply V (not
// rounded); U and Kr as hi + lo pairs in each sequence's last update (2026-12-01), and in the one
// before where the last chunk holds fewer than 8 tokens (session 56). Before version 21 every
// preparation product came from hi + lo pairs.
inline reference::ChunkedRounding kernel_rounding() {
  reference::ChunkedRounding r;
  r.round_record = r.round_state_operand = r.split_state_operand = r.round_u = true;
  r.round_a_operands = r.round_wide_left = r.round_wide_kd = true;
  r.split_p_operands = true;
  r.split_update_last_chunks = 1;
  r.split_update_min_tokens = 8;
  return r;
}

}  // namespace kda::test
