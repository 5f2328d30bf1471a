// Argument rules of validate.cpp that the other validators share (validate_decode.cpp): one tensor's
// rank, shape, dtype, strides and index reach; 16-byte row alignment for the GPU path. Messages name
// the argument, the expectation and what was given.
#pragma once

#include <string>

#include "src/api/problem.h"

namespace kda {

// Rank `ndim`, shape `shape`, dtype dt0 or dt1 (KDA_DTYPE_NONE: only dt0), non-negative strides,
// last dimension contiguous, dense row-major when `contiguous`, largest offset below 2^62 elements.
kda_status check_tensor_rules(const char* name, const kda_tensor& t, int ndim, const int64_t* shape, kda_dtype dt0,
                              kda_dtype dt1, bool contiguous, const char* shape_hint);
// 16-byte aligned data pointer and every stride but the last a multiple of 16 bytes (bf16 / f32).
kda_status check_tensor_row_alignment(const char* name, const kda_tensor& t);
// A data pointer that is a multiple of the element size (host and device paths read every element
// through a pointer of its type); NULL passes.
kda_status check_tensor_element_alignment(const char* name, const kda_tensor& t);
// "[2, 3, 4]", or "[rank N]" for a rank outside 0..4.
std::string tensor_shape_string(const kda_tensor& t);
// A required tensor whose data pointer is NULL although it has elements.
bool tensor_missing(const kda_tensor& t);

}  // namespace kda
