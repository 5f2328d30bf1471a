// Rules on the memory the tensors of a call occupy, checked on the host from addresses, shapes and
// strides only (no memory is read), for every entry point:
//  - every element of a written tensor has its own address (no zero or too-small stride makes rows
//    alias): kda_fwd's out; D and M (kda_segment_transition); start_states and end_state
//    (kda_combine_transitions); the decode pool's slots (validate_decode.cpp);
//  - each written tensor shares no byte with any other tensor of the call, with two exceptions:
//    kda_fwd's final_state may be exactly initial_state (same address and dtype: the state updated
//    in place), and D and M may be interleaved views of one buffer whose matrices share no byte
//    (the packed [.., HV, V + K, K] layout of flash_kda.h);
//  - the workspace shares no byte with any tensor (kda_fwd, kda_segment_transition,
//    kda_fwd_prepared).
// Overlap is judged conservatively on the byte interval each tensor can touch (first to last
// element): a written tensor interleaved with another inside one allocation is rejected even when
// the elements themselves would not collide (the D/M exception aside).
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/api/problem.h"

namespace kda {

// Bytes from the first to one past the last element of t (0 when it has no element). The tensor
// must have passed validation (rank, dtype, strides within the 2^62-byte limit).
size_t tensor_span_bytes(const kda_tensor& t);

// A written tensor (validated shape and strides): its index-to-address map is one-to-one.
// Sufficient rule: with the dimensions of size > 1 sorted by stride, each stride is at least the
// span of the dimensions before it. Needs no pointer; the message names `name`.
kda_status check_rows_distinct(const char* name, const kda_tensor& t);
inline kda_status check_out_rows_distinct(const kda_tensor& out) { return check_rows_distinct("out", out); }

// Bytes of [ptr, ptr + bytes) past the end of the address range [start, start + size) that ptr lies in
// (the pointer check's allocation test, api.cpp check_pointer): 0 when it ends inside the range, or when
// size is 0 (the range not known). 128-bit arithmetic, whatever the pointer holds; saturated at 2^64 - 1.
uint64_t bytes_past_range(uintptr_t ptr, size_t bytes, uintptr_t start, size_t size);

// A tensor of a call with the name its messages use.
struct NamedTensor {
  const char* name;
  const kda_tensor* t;
};

// Every tensor of a kda_fwd call (kda_fwd_prepared too), in the order messages name them.
struct FwdTensors {
  NamedTensor t[11];
  explicit FwdTensors(const kda_fwd_params& p);
};
// Every tensor of a kda_decode call, in the order messages name them.
struct DecodeTensors {
  NamedTensor t[12];
  explicit DecodeTensors(const kda_decode_params& p);
};

// Written tensors against every other tensor of the call (present ones with elements).
kda_status check_tensor_overlaps(const kda_fwd_params& p);

// The workspace [workspace, workspace + bytes) against every tensor of the call.
kda_status check_workspace_overlaps(const kda_fwd_params& p, const void* workspace, size_t bytes);

// The same against a list of tensors (absent ones and ones without elements are skipped).
kda_status check_workspace_disjoint(const void* workspace, size_t bytes, const NamedTensor* tensors, size_t count);

// kda_segment_transition: D and M (present and validated [N_t, HV, 128, 128] f32 matrices) each
// with distinct matrices (strides only: `with_data` = false for the shape-only query); with data, D and M against
// the shard's inputs in `p` (q, k, v, g, beta, A_log, dt_bias, cu_seqlens; out and the states are
// ignored) and against each other (disjoint, or interleaved views whose matrices share no byte).
kda_status check_transition_memory(const kda_fwd_params& p, const kda_tensor& D, const kda_tensor& M, bool with_data);
// The transition's workspace against the shard's inputs, D and M.
kda_status check_transition_workspace(const kda_fwd_params& p, const kda_tensor& D, const kda_tensor& M,
                                      const void* workspace, size_t bytes);

// kda_combine_transitions (validated tensors): start_states and end_state with distinct matrices
// (strides only), and with data, each disjoint from D, M, initial_state and the other output.
kda_status check_combine_memory(const kda_tensor& D, const kda_tensor& M, const kda_tensor& initial_state,
                                const kda_tensor& start_states, const kda_tensor& end_state, bool with_data);

// kda_decode (validated): out (its rows checked by kda_fwd's validation) and state_pool (written in
// place) each disjoint from every other tensor of the call and from each other.
kda_status check_decode_overlaps(const kda_decode_params& p);

}  // namespace kda
