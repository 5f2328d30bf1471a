// cu_seqlens_check_kernel: the opt-in content check of cu_seqlens (kda_fwd_params.check_cu_seqlens).
// One CTA scans the N + 1 raw entries and writes {kind, index, value, other} of the first
// violation (kind 0: none, 1: cu[0] != 0, 2: cu[i] < cu[i-1], 3: cu[i] > T_total, past the packed
// length) to `result`. Ending before T_total is valid: the tokens after belong to no sequence.
#pragma once

#include <cstdint>

#include "src/kernels/sm90/kernel_params.h"

namespace kda::sm90 {

static __global__ void cu_seqlens_check_kernel(SequenceLayout s, int64_t* result) {
  __shared__ unsigned long long first_bad;  // smallest bad index
  if (threadIdx.x == 0) first_bad = ~0ull;
  __syncthreads();
  auto raw = [&](int64_t i) -> int64_t {
    return s.cu_is_i64 ? static_cast<const int64_t*>(s.cu_seqlens)[i]
                       : static_cast<int64_t>(static_cast<const int32_t*>(s.cu_seqlens)[i]);
  };
  for (int64_t i = threadIdx.x; i <= s.N; i += blockDim.x) {
    bool bad = (i == 0) ? raw(0) != 0 : raw(i) < raw(i - 1);
    if (raw(i) > s.T_total) bad = true;
    if (bad) atomicMin(&first_bad, static_cast<unsigned long long>(i));
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int64_t kind = 0, idx = 0, value = 0, other = 0;
    if (first_bad != ~0ull) {
      idx = static_cast<int64_t>(first_bad);
      value = raw(idx);
      if (idx == 0 && value != 0) {
        kind = 1;
      } else if (idx > 0 && value < raw(idx - 1)) {
        kind = 2;
        other = raw(idx - 1);
      } else {
        kind = 3;
        other = s.T_total;
      }
    }
    result[0] = kind;
    result[1] = idx;
    result[2] = value;
    result[3] = other;
  }
}

}  // namespace kda::sm90
