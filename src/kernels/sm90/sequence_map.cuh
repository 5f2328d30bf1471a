// Sequences and chunks on the device. Every sequence is clamped to [0, T_total], so whatever
// cu_seqlens holds, no index leaves its tensor. Virtual chunks give each sequence a private range
// of chunk records without a prefix sum over lengths: sequence n owns records
// [base(n), base(n) + ceil(len/16)) with base(n) = floor(bos/16) + n (varlen) or n * ceil(T/16)
// (fixed). For valid cu_seqlens the ranges are disjoint and base() is strictly increasing; in all
// cases they stay inside [0, num_vchunks) with num_vchunks = ceil(T_total/16) + N (varlen).
#pragma once

#include <cstdint>

#include "src/kernels/sm90/fast_div.h"
#include "src/kernels/sm90/kernel_params.h"

namespace kda::sm90 {

struct SequenceSpan {
  int32_t batch;   // batch row of the tensors (0 in varlen mode)
  int32_t t0;      // first token within that row
  int32_t len;     // number of tokens
  int64_t vbase;   // first virtual chunk
};

__device__ __forceinline__ int64_t load_cu(const SequenceLayout& s, int32_t i) {
  int64_t x = s.cu_is_i64 ? static_cast<const int64_t*>(s.cu_seqlens)[i]
                          : static_cast<int64_t>(static_cast<const int32_t*>(s.cu_seqlens)[i]);
  return x < 0 ? 0 : (x > s.T_total ? s.T_total : x);
}

__device__ __forceinline__ SequenceSpan sequence_span(const SequenceLayout& s, int32_t n) {
  SequenceSpan span;
  if (s.cu_seqlens == nullptr) {
    span.batch = n;
    span.t0 = 0;
    span.len = s.T;
    span.vbase = static_cast<int64_t>(n) * ((s.T + 15) / 16);
  } else {
    const int64_t bos = load_cu(s, n);
    int64_t eos = load_cu(s, n + 1);
    if (eos < bos) eos = bos;
    span.batch = 0;
    span.t0 = static_cast<int32_t>(bos);
    span.len = static_cast<int32_t>(eos - bos);
    span.vbase = bos / 16 + n;
  }
  return span;
}

// The sequence owning virtual chunk vc and the chunk's index in it; false when no sequence owns it.
__device__ __forceinline__ bool locate_chunk(const SequenceLayout& s, int64_t vc, int32_t* seq, int32_t* chunk) {
  int32_t n;
  if (s.cu_seqlens == nullptr) {
    const int64_t per = (s.T + 15) / 16;
    if (per == 0) return false;
    n = s.per_fast ? static_cast<int32_t>(fast_div(static_cast<uint32_t>(vc), s.per_magic))
                   : static_cast<int32_t>(vc / per);
  } else {
    // Largest n with base(n) <= vc (base is non-decreasing for valid cu_seqlens; for invalid
    // contents the search still ends inside [0, N)).
    int32_t lo = 0, hi = s.N - 1;
    while (lo < hi) {
      const int32_t mid = lo + (hi - lo + 1) / 2;
      if (load_cu(s, mid) / 16 + mid <= vc) lo = mid; else hi = mid - 1;
    }
    n = lo;
  }
  if (n >= s.N) return false;
  const SequenceSpan span = sequence_span(s, n);
  const int64_t c = vc - span.vbase;
  if (c < 0 || c * 16 >= span.len) return false;
  *seq = n;
  *chunk = static_cast<int32_t>(c);
  return true;
}

// locate_chunk and sequence_span in one, for prepare_chunk's prologue: fixed-length batches in 32-bit
// arithmetic (vc < num_vchunks < 2^31, every chunk index below a row's chunk count owned, so no bound
// to check but the sequence's), varlen batches as those two. Same results as the pair.
__device__ __forceinline__ bool locate_chunk_span(const SequenceLayout& s, int32_t vc, int32_t* seq, int32_t* chunk,
                                                  SequenceSpan* span) {
  if (s.cu_seqlens != nullptr) {
    if (!locate_chunk(s, vc, seq, chunk)) return false;
    *span = sequence_span(s, *seq);
    return true;
  }
  const int32_t per = (s.T + 15) >> 4;  // chunks per batch row (T >= 0)
  if (per == 0) return false;
  const int32_t n = s.per_fast ? static_cast<int32_t>(fast_div(static_cast<uint32_t>(vc), s.per_magic)) : vc / per;
  if (n >= s.N) return false;
  *seq = n;
  *chunk = vc - n * per;
  span->batch = n;
  span->t0 = 0;
  span->len = s.T;
  span->vbase = static_cast<int64_t>(n) * per;
  return true;
}

}  // namespace kda::sm90
