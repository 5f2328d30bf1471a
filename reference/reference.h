// CPU implementations of the KDA forward pass, behind the public API (kda_fwd_cpu).
// They see only the public header and the validated problem description: never kernel code.
#pragma once

#include "src/core/problem.h"
#include "src/core/status.h"

#include <cstdint>

namespace kda::reference {

// Rounding the chunked path applies to its operands, to predict the GPU kernel's error on the CPU.
// The default (all false) is plain float32 arithmetic.
struct ChunkedRounding {
  bool round_record = false;     // Wd, Q', Kr rounded to bf16 (as stored in the kernel's chunk record)
  bool round_state_operand = false;  // S rounded to bf16 where it multiplies Wd and Q'
  bool split_state_operand = false;  // ... or split into bf16 hi + lo (overrides round_state_operand)
  bool round_u = false;          // U rounded to bf16 in the state update
  bool round_small = false;      // Tbeta and P rounded to bf16 where they multiply V
  // Operand precision of the preparation's products and of the state update, for choosing where a
  // kernel needs a bf16 hi + lo split (docs/performance_notes.md, "Where precision matters"). Today's
  // kernel splits all three preparation operands (so it matches false) and stores U and Kr as one
  // bf16 each (round_u, round_record).
  bool round_a_operands = false;   // Kd, Ki as one bf16 each in A = Kd·Kiᵀ (bounded gate)
  bool round_m_operands = false;   // Qd, Ki as one bf16 each in M = Qd·Kiᵀ (bounded gate)
  bool round_wide_left = false;    // Tb and P as one bf16 each in Wd = Tb·Kd and Qp = Qd − P·Kd
  bool round_wide_kd = false;      // Kd as one bf16 in Wd = Tb·Kd and Qp = Qd − P·Kd
  bool split_u = false;            // U as a bf16 hi + lo pair in the update (overrides round_u)
  bool split_kr = false;           // Kr as a bf16 hi + lo pair in the update (overrides round_record for Kr)
  bool split_p_operands = false;   // M and Tb as bf16 hi + lo pairs in P = M·Tb (the kernel since version 23)
  // A candidate, not the kernel (docs/performance_notes.md "Where precision matters"): Kd, Qd and Ki
  // as tf32 (10-bit mantissa, rounded to nearest, ties away, as cvt.rna.tf32.f32) in A and M (bounded
  // gate: tf32 tensor-core products instead of M's bf16 hi + lo pairs), and Qd as that tf32 where
  // Qp = Qd − P·Kd adds it (overrides round_a_operands and round_m_operands).
  bool tf32_am_operands = false;
  // U and Kr as bf16 hi + lo pairs only in the last n chunks of each sequence (the chunks whose
  // rounding the final state keeps; 0: none): what a kernel could spend on the final state alone.
  int split_update_last_chunks = 0;
  // ... and more of the last chunks, until they hold at least this many tokens (0: no more): with 8,
  // a sequence whose last chunk holds fewer than 8 tokens has the chunk before split too (the kernels
  // since session 56, kernel_params.h's final_split_chunks).
  int split_update_min_tokens = 0;
};

// How many of a sequence's last chunks (of len tokens, chunks of 16 from its start) carry U and Kr as
// hi + lo pairs under `r` (split_update_last_chunks, extended to split_update_min_tokens tokens); 0: none.
// With the kernels' flags it is the kernels' final_split_chunks (tests/test_rounding_flags.cpp checks).
int64_t split_update_chunks(int64_t len, const ChunkedRounding& r);

// Token-by-token recurrence in float64. Inputs must be host pointers. `num_threads` <= 0: all cores.
kda_status fwd_recurrence_f64(const Problem& problem, int num_threads);

// The chunked algebra of the GPU kernel (docs/design.md, chunk 16) in float32.
kda_status fwd_chunked_f32(const Problem& problem, const ChunkedRounding& rounding, int num_threads);

}  // namespace kda::reference
