// Rules on the memory the tensors of a call occupy, checked on the host from addresses, shapes and
// strides only (no memory is read):
//  - every element of `out` has its own address (no zero or too-small stride makes rows alias);
//  - each written tensor (out, final_state) shares no byte with any other tensor, except that
//    final_state may be exactly initial_state (same address and dtype: the state updated in place);
//  - the workspace shares no byte with any tensor.
// Overlap is judged conservatively on the byte interval each tensor can touch (first to last
// element): a written tensor interleaved with another inside one allocation is rejected even when
// the elements themselves would not collide.
#pragma once

#include <cstddef>

#include "src/api/problem.h"

namespace kda {

// Bytes from the first to one past the last element of t (0 when it has no element). The tensor
// must have passed validation (rank, dtype, strides within the 2^62-byte limit).
size_t tensor_span_bytes(const kda_tensor& t);

// `out` (validated shape and strides): its index-to-address map is one-to-one. Sufficient rule:
// with the dimensions of size > 1 sorted by stride, each stride is at least the span of the
// dimensions before it. Needs no pointer.
kda_status check_out_rows_distinct(const kda_tensor& out);

// Written tensors against every other tensor of the call (present ones with elements).
kda_status check_tensor_overlaps(const kda_fwd_params& p);

// The workspace [workspace, workspace + bytes) against every tensor of the call.
kda_status check_workspace_overlaps(const kda_fwd_params& p, const void* workspace, size_t bytes);

}  // namespace kda
