// A validated forward problem: the caller's params plus the sizes derived from them. Produced by
// kda::validate (src/api/problem.h, validate.cpp); consumed by the GPU launcher and the CPU
// reference. Data only, host only.
#pragma once

#include <cstdint>

#include "flash_kda/flash_kda.h"

namespace kda {

inline constexpr int64_t kHeadDim = 128;  // K = V = 128 (the only supported head size)
inline constexpr int64_t kChunk = 16;     // tokens per chunk of the chunked algorithm

struct Problem {
  const kda_fwd_params* params = nullptr;
  int64_t B = 0, T = 0, H = 0, HV = 0, K = 0, V = 0;
  int64_t N = 0;        // number of sequences: B, or cu_seqlens.shape[0] - 1
  int64_t T_total = 0;  // B * T tokens (the packed length when varlen)
  bool varlen = false;
  bool has_A_log = false, has_dt_bias = false;
  bool has_initial_state = false, has_final_state = false;

  int64_t group() const { return HV / H; }  // value heads per q/k head
  int64_t qk_head(int64_t hv) const { return hv / group(); }
};

}  // namespace kda
