// CPU implementations of the KDA forward pass, behind the public API (kda_fwd_cpu).
// They see only the public header and the validated problem description: never kernel code.
#pragma once

#include "src/api/problem.h"

namespace kda::reference {

// Rounding the chunked path applies to its operands, to predict the GPU kernel's error on the CPU.
// The default (all false) is plain float32 arithmetic.
struct ChunkedRounding {
  bool round_record = false;     // Wd, Q', Kr rounded to bf16 (as stored in the kernel's chunk record)
  bool round_state_operand = false;  // S rounded to bf16 where it multiplies Wd and Q'
  bool split_state_operand = false;  // ... or split into bf16 hi + lo (overrides round_state_operand)
  bool round_u = false;          // U rounded to bf16 in the state update
  bool round_small = false;      // Tbeta and P rounded to bf16 where they multiply V
};

// Token-by-token recurrence in float64. Inputs must be host pointers. `num_threads` <= 0: all cores.
kda_status fwd_recurrence_f64(const Problem& problem, int num_threads);

// The chunked algebra of the GPU kernel (docs/design.md, chunk 16) in float32.
kda_status fwd_chunked_f32(const Problem& problem, const ChunkedRounding& rounding, int num_threads);

}  // namespace kda::reference
