// A validated decode problem (kda_decode_params, include/flash_kda/flash_kda.h): the token tensors
// as a forward problem without states (so that kda_fwd's validation and the CPU reference's
// per-token math apply unchanged) plus the state pool and its slot indices; host reads of the index
// tensors; the result of the opt-in content check. Produced by kda::validate_decode
// (src/api/decode_problem.h); consumed by the GPU launcher (src/launch/decode_sm90.cu), the CPU
// reference (reference/decode_f64.cpp) and the content check. Data only, host only.
#pragma once

#include <cstdint>

#include "src/core/problem.h"

namespace kda {

struct DecodeProblem {
  const kda_decode_params* params = nullptr;
  kda_fwd_params fwd{};  // q, k, v, g, beta, out, A_log, dt_bias, cu_seqlens and the options; no states
  Problem pr;            // validated sizes of `fwd` (pr.params == &fwd): B, T, H, HV, N, T_total, varlen
  int64_t slots = 0;
  int64_t pool_stride = 0;  // elements from one slot to the next
  bool pool_f32 = true;
  bool has_indices = false;  // absent: sequence n uses slot n
  bool indices_2d = false;   // [N, idx_cols]: one slot per token
  bool indices_i64 = false;
  int64_t idx_cols = 1;                        // T_idx (1 for [N] indices)
  int64_t idx_stride_n = 1, idx_stride_t = 1;  // elements
  bool has_accepted = false, accepted_i64 = false;
  int64_t accepted_stride = 1;

  DecodeProblem() = default;
  DecodeProblem(const DecodeProblem&) = delete;  // pr.params points into this object
  DecodeProblem& operator=(const DecodeProblem&) = delete;
};

// ---- Host reads of the index tensors (CPU path, host content check) ---------------------------

// Entry (n, t) of state_indices (t = 0 for [N] indices); n itself when the indices are absent.
inline int64_t host_slot_index(const DecodeProblem& dp, int64_t n, int64_t t) {
  if (!dp.has_indices) return n;
  const int64_t off = n * dp.idx_stride_n + t * dp.idx_stride_t;
  const void* data = dp.params->state_indices.data;
  return dp.indices_i64 ? static_cast<const int64_t*>(data)[off] : static_cast<const int32_t*>(data)[off];
}
inline int64_t host_accepted(const DecodeProblem& dp, int64_t n) {
  const void* data = dp.params->num_accepted_tokens.data;
  const int64_t off = n * dp.accepted_stride;
  return dp.accepted_i64 ? static_cast<const int64_t*>(data)[off] : static_cast<const int32_t*>(data)[off];
}
// The column of state_indices holding sequence n's start slot: a - 1 with a = num_accepted_tokens[n]
// clamped to [1, T_idx] (0 reads column 0, never column -1), or 0.
inline int64_t host_read_column(const DecodeProblem& dp, int64_t n) {
  if (!dp.has_accepted) return 0;
  const int64_t a = host_accepted(dp, n);
  return (a < 1 ? 1 : (a > dp.idx_cols ? dp.idx_cols : a)) - 1;
}
inline bool valid_slot(const DecodeProblem& dp, int64_t slot) { return slot >= 0 && slot < dp.slots; }

// ---- Contents of state_indices, num_accepted_tokens and cu_seqlens (the opt-in check) ----------
//
// first[kind]: the first bad entry of each kind (-1: none); the details say what it holds.
enum DecodeCheckKind : int {
  kCheckSlotRange = 0,  // entry e = n * T_idx + t with idx >= slots (value = idx)
  kCheckAccepted = 1,   // sequence n with num_accepted_tokens[n] outside [0, T_idx] (value = a)
  kCheckCuSeqlens = 2,  // cu_seqlens: cu_kind 1 (first != 0), 2 (decreasing), 3 (past T_total); entry index
  kCheckLength = 3,     // sequence n longer than T_idx tokens with 2-D indices (value = length)
  kCheckDuplicate = 4,  // entry e naming slot `value` already named by sequence `other` (entry other_t)
  kNumCheckKinds = 5
};
struct DecodeCheckResult {
  int64_t first[kNumCheckKinds];
  int64_t value[kNumCheckKinds];
  int64_t other[kNumCheckKinds];
  int64_t other_t[kNumCheckKinds];
  int64_t cu_kind;  // kCheckCuSeqlens: 1, 2 or 3
};

}  // namespace kda
