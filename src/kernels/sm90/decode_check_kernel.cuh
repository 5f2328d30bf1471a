// The opt-in content check of kda_decode (kda_decode_params.check_indices), three small kernels on
// a scratch buffer (src/launch/decode_sm90.cu): the first bad entry of each kind, as
// src/api/decode_check.cpp defines them (the host version of the same check):
//   range      entry e = n·T_idx + t of state_indices with idx >= slots
//   accepted   sequence n with num_accepted_tokens[n] outside [0, T_idx]
//   length     sequence n longer than T_idx tokens (cu_seqlens, 2-D indices)
//   duplicate  entry e naming a valid slot that a smaller sequence names too
// decode_check_entries_kernel records range errors and, per valid slot, the smallest sequence
// naming it (owner[slot], atomicMin); decode_check_duplicates_kernel then finds entries whose slot
// has another owner; decode_check_details_kernel (one thread) reads back what each first entry
// holds. Grid-stride loops; every index is bounds-checked.
#pragma once

#include <cstdint>

#include "src/kernels/sm90/decode_kernel.cuh"
#include "src/kernels/sm90/decode_params.h"
#include "src/kernels/sm90/sequence_map.cuh"

namespace kda::sm90 {

inline constexpr int kDecodeCheckKinds = 5;  // range, accepted, cu_seqlens (unused here), length, duplicate

struct DecodeCheckDevice {
  unsigned long long first[kDecodeCheckKinds];  // ~0: none
  int64_t value[kDecodeCheckKinds], other[kDecodeCheckKinds], other_t[kDecodeCheckKinds];
  int64_t cu[4];  // cu_seqlens_check_kernel's {kind, index, value, other}
};

namespace check_detail {

__device__ __forceinline__ int64_t entries(const DecodeParams& p) { return static_cast<int64_t>(p.seq.N) * p.idx_cols; }
__device__ __forceinline__ int64_t entry_slot(const DecodeParams& p, int64_t e) {
  return decode_detail::slot_at(p, static_cast<int>(e / p.idx_cols), static_cast<int>(e % p.idx_cols));
}

}  // namespace check_detail

__global__ void decode_check_entries_kernel(const __grid_constant__ DecodeParams p, int* owner, DecodeCheckDevice* r) {
  using namespace check_detail;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p.indices != nullptr)
    for (int64_t e = first; e < entries(p); e += stride) {
      const int64_t s = entry_slot(p, e);
      if (s >= p.slots) atomicMin(&r->first[0], static_cast<unsigned long long>(e));
      if (s >= 0 && s < p.slots) atomicMin(&owner[s], static_cast<int>(e / p.idx_cols));
    }
  for (int64_t n = first; n < p.seq.N; n += stride) {
    if (p.accepted != nullptr) {
      const int64_t a = decode_detail::load_index(p.accepted, p.accepted_i64 != 0, n * p.accepted_stride);
      if (a < 0 || a > p.idx_cols) atomicMin(&r->first[1], static_cast<unsigned long long>(n));
    }
    if (p.indices_2d && p.seq.cu_seqlens != nullptr && sequence_span(p.seq, static_cast<int32_t>(n)).len > p.idx_cols)
      atomicMin(&r->first[3], static_cast<unsigned long long>(n));
  }
}

__global__ void decode_check_duplicates_kernel(const __grid_constant__ DecodeParams p, const int* owner,
                                               DecodeCheckDevice* r) {
  using namespace check_detail;
  if (p.indices == nullptr) return;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < entries(p); e += stride) {
    const int64_t s = entry_slot(p, e);
    if (s >= 0 && s < p.slots && owner[s] != e / p.idx_cols)
      atomicMin(&r->first[4], static_cast<unsigned long long>(e));
  }
}

__global__ void decode_check_details_kernel(const __grid_constant__ DecodeParams p, const int* owner,
                                            DecodeCheckDevice* r) {
  using namespace check_detail;
  if (threadIdx.x != 0) return;
  constexpr unsigned long long kNone = ~0ull;
  if (r->first[0] != kNone) r->value[0] = entry_slot(p, static_cast<int64_t>(r->first[0]));
  if (r->first[1] != kNone)
    r->value[1] = decode_detail::load_index(p.accepted, p.accepted_i64 != 0,
                                            static_cast<int64_t>(r->first[1]) * p.accepted_stride);
  if (r->first[3] != kNone) r->value[3] = sequence_span(p.seq, static_cast<int32_t>(r->first[3])).len;
  if (r->first[4] != kNone) {
    const int64_t s = entry_slot(p, static_cast<int64_t>(r->first[4]));
    const int n1 = owner[s];
    r->value[4] = s;
    r->other[4] = n1;
    r->other_t[4] = -1;
    for (int t = 0; t < p.idx_cols; ++t)
      if (decode_detail::slot_at(p, n1, t) == s) {
        r->other_t[4] = t;
        break;
      }
  }
}

}  // namespace kda::sm90
