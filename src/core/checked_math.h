// Overflow-safe size arithmetic for the host code (validation, kda_tensor_contiguous, the
// workspace layout and plan): every product or sum of sizes goes through these helpers, so that a
// huge shape gives a "too large" error instead of a wrapped value (signed overflow is undefined
// behaviour in C++; unsigned wrap-around gives a wrong size). Header-only, host-only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "flash_kda/flash_kda.h"

namespace kda {

// *r = a * b; false (and *r unspecified) when the exact product does not fit.
template <class T>
inline bool checked_mul(T a, T b, T* r) {
  return !__builtin_mul_overflow(a, b, r);
}
// *r = a + b; false when the exact sum does not fit.
template <class T>
inline bool checked_add(T a, T b, T* r) {
  return !__builtin_add_overflow(a, b, r);
}

// Adds the largest element offset of t, sum over d of (shape[d] - 1) * stride[d] (shapes and strides
// non-negative), to *reach. Returns -1 when every partial sum stays at or below `limit`; otherwise the
// dimension at which it first exceeded it (or overflowed int64), *reach then unspecified. Used by
// validation (2^62 bytes) and by the preparation's 32-bit offsets (plan.cpp, offsets_fit_int32).
inline int add_tensor_reach(const kda_tensor& t, int64_t limit, int64_t* reach) {
  for (int d = 0; d < t.ndim; ++d) {
    if (t.shape[d] <= 1 || t.stride[d] == 0) continue;
    int64_t span = 0;
    if (!checked_mul(t.shape[d] - 1, t.stride[d], &span) || !checked_add(*reach, span, reach) || *reach > limit)
      return d;
  }
  return -1;
}

// Saturating size_t arithmetic: SIZE_MAX stands for "does not fit" and stays SIZE_MAX.
inline size_t sat_mul(size_t a, size_t b) {
  size_t r;
  return __builtin_mul_overflow(a, b, &r) ? SIZE_MAX : r;
}
inline size_t sat_add(size_t a, size_t b) {
  size_t r;
  return __builtin_add_overflow(a, b, &r) ? SIZE_MAX : r;
}
// A non-negative int64 as size_t (negative values, which validation excludes, saturate).
inline size_t sat_size(int64_t x) { return x < 0 ? SIZE_MAX : static_cast<size_t>(x); }

// x rounded up to a multiple of 256 (workspace regions); SIZE_MAX stays SIZE_MAX.
inline size_t align256(size_t x) { return x >= SIZE_MAX - 255 ? SIZE_MAX : (x + 255) / 256 * 256; }

// The raw integer held by a 4-byte enum field of a caller's struct. Reading an out-of-range value
// through the enum type is undefined behaviour, so enum fields are validated as integers first.
template <class E>
inline int32_t raw_enum(const E& e) {
  static_assert(std::is_enum_v<E> && sizeof(E) == sizeof(int32_t), "4-byte enum");
  int32_t v;
  std::memcpy(&v, &e, sizeof(v));
  return v;
}

}  // namespace kda
