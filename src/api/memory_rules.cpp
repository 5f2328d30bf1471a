// Memory rules of the calls (memory_rules.h): a written tensor's elements distinct, written tensors
// disjoint from the others (kda_fwd's final_state may be exactly initial_state; the transition's D
// and M may be interleaved views of one buffer), the workspace disjoint from every tensor.
#include "src/api/memory_rules.h"

#include <utility>
#include <cstdint>
#include <string>

#include "src/core/checked_math.h"

namespace kda {

namespace {

// A byte interval [lo, hi) of the address space, in 128-bit arithmetic (no wrap-around whatever the
// pointer holds).
struct Range {
  unsigned __int128 lo = 0, hi = 0;
  bool empty() const { return hi <= lo; }
};

bool overlap(const Range& a, const Range& b) { return !a.empty() && !b.empty() && a.lo < b.hi && b.lo < a.hi; }

Range range_of(const void* data, size_t bytes) {
  Range r;
  r.lo = reinterpret_cast<uintptr_t>(data);
  r.hi = r.lo + bytes;
  return r;
}

using Named = NamedTensor;

Range range_of(const kda_tensor& t) { return range_of(t.data, tensor_span_bytes(t)); }

// A dimension of a strided view: its size and its stride (in whatever unit the caller uses).
struct Dim {
  int64_t size;
  unsigned __int128 stride;
  int index;  // the tensor's dimension (for messages)
};

// Sorts dims by stride (stable) and checks that each stride is at least the span of the dimensions
// before it, starting from `span` (the extent of one element): then the index-to-address map of the
// view is one-to-one, and no two elements share a unit. Returns the sorted position of the first
// stride that falls short (its required span in *need), or -1.
int first_short_stride(Dim* dims, int n, unsigned __int128 span, unsigned __int128* need) {
  for (int i = 1; i < n; ++i)  // insertion sort (at most 5 entries)
    for (int j = i; j > 0 && dims[j].stride < dims[j - 1].stride; --j) std::swap(dims[j], dims[j - 1]);
  for (int i = 0; i < n; ++i) {
    if (dims[i].stride < span) {
      *need = span;
      return i;
    }
    span += static_cast<unsigned __int128>(dims[i].size - 1) * dims[i].stride;
  }
  return -1;
}

// a and b (validated, with distinct elements each) are two views with the same dtype, shape and
// strides whose elements interleave without sharing a byte: the pair is one view with an extra
// dimension of size 2 and stride |b - a| bytes whose elements are distinct. (A sufficient rule: it
// accepts the packed [.., V + K, K] layout of D and M, in either order.)
bool interleaved_disjoint(const kda_tensor& a, const kda_tensor& b) {
  if (a.ndim != b.ndim || raw_enum(a.dtype) != raw_enum(b.dtype) || a.ndim < 1 || a.ndim > 4) return false;
  const size_t eb = dtype_bytes(raw_enum(a.dtype));
  Dim dims[5];
  int n = 0;
  for (int d = 0; d < a.ndim; ++d) {
    if (a.shape[d] != b.shape[d]) return false;
    if (a.shape[d] <= 1) continue;
    if (a.stride[d] != b.stride[d]) return false;
    dims[n++] = Dim{a.shape[d], static_cast<unsigned __int128>(a.stride[d]) * eb, d};
  }
  const uintptr_t pa = reinterpret_cast<uintptr_t>(a.data), pb = reinterpret_cast<uintptr_t>(b.data);
  dims[n++] = Dim{2, static_cast<unsigned __int128>(pa > pb ? pa - pb : pb - pa), -1};
  unsigned __int128 need = 0;
  return first_short_stride(dims, n, eb, &need) < 0;
}

// The error of a written tensor w overlapping another tensor o.
kda_status written_overlap_error(const Named& w, const Named& o) {
  return make_error(KDA_ERROR_INVALID_ARGUMENT,
                    "%s: expected memory disjoint from every other tensor (it is written), got bytes [%p, +%zu) "
                    "overlapping %s [%p, +%zu)",
                    w.name, w.t->data, tensor_span_bytes(*w.t), o.name, o.t->data, tensor_span_bytes(*o.t));
}

// w (written) against every present tensor of `others` but itself.
kda_status check_disjoint(const Named& w, const Named* others, size_t count) {
  if (w.t->data == nullptr) return make_ok();
  const Range rw = range_of(*w.t);
  for (size_t i = 0; i < count; ++i) {
    const Named& o = others[i];
    if (o.t == w.t || o.t->data == nullptr) continue;
    if (overlap(rw, range_of(*o.t))) return written_overlap_error(w, o);
  }
  return make_ok();
}

std::string strides_str(const kda_tensor& t) {
  std::string s = "shape [";
  for (int d = 0; d < t.ndim; ++d) s += (d ? ", " : "") + std::to_string(t.shape[d]);
  s += "] with strides [";
  for (int d = 0; d < t.ndim; ++d) s += (d ? ", " : "") + std::to_string(t.stride[d]);
  return s + "]";
}

}  // namespace

FwdTensors::FwdTensors(const kda_fwd_params& p)
    : t{{"q", &p.q},         {"k", &p.k},         {"v", &p.v},
        {"g", &p.g},         {"beta", &p.beta},   {"out", &p.out},
        {"A_log", &p.A_log}, {"dt_bias", &p.dt_bias}, {"initial_state", &p.initial_state},
        {"final_state", &p.final_state}, {"cu_seqlens", &p.cu_seqlens}} {}

DecodeTensors::DecodeTensors(const kda_decode_params& p)
    : t{{"q", &p.q},
        {"k", &p.k},
        {"v", &p.v},
        {"g", &p.g},
        {"beta", &p.beta},
        {"out", &p.out},
        {"A_log", &p.A_log},
        {"dt_bias", &p.dt_bias},
        {"state_pool", &p.state_pool},
        {"state_indices", &p.state_indices},
        {"num_accepted_tokens", &p.num_accepted_tokens},
        {"cu_seqlens", &p.cu_seqlens}} {}

uint64_t bytes_past_range(uintptr_t ptr, size_t bytes, uintptr_t start, size_t size) {
  if (size == 0) return 0;
  const unsigned __int128 end = static_cast<unsigned __int128>(ptr) + bytes;
  const unsigned __int128 range_end = static_cast<unsigned __int128>(start) + size;
  if (end <= range_end) return 0;
  const unsigned __int128 past = end - range_end;
  return past > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(past);
}

size_t tensor_span_bytes(const kda_tensor& t) {
  if (t.ndim < 1 || t.ndim > 4) return 0;
  size_t elems = 1;
  for (int d = 0; d < t.ndim; ++d) {
    if (t.shape[d] <= 0) return 0;
    elems = sat_add(elems, sat_mul(sat_size(t.shape[d] - 1), sat_size(t.stride[d])));
  }
  return sat_mul(elems, dtype_bytes(raw_enum(t.dtype)));
}

kda_status check_rows_distinct(const char* name, const kda_tensor& t) {
  Dim dims[4];
  int n = 0;
  for (int d = 0; d < t.ndim && d < 4; ++d) {
    if (t.shape[d] == 0) return make_ok();  // no element
    if (t.shape[d] > 1) dims[n++] = Dim{t.shape[d], static_cast<unsigned __int128>(t.stride[d]), d};
  }
  unsigned __int128 need = 0;  // in elements (< 2^62: validated)
  const int bad = first_short_stride(dims, n, 1, &need);
  if (bad < 0) return make_ok();
  const int d = dims[bad].index;
  return make_error(KDA_ERROR_INVALID_ARGUMENT,
                    "%s: expected strides that give every element its own address (stride[%d] = %lld must be at "
                    "least %lld, the span of the dimensions with smaller strides), got %s",
                    name, d, static_cast<long long>(t.stride[d]), static_cast<long long>(need), strides_str(t).c_str());
}

kda_status check_tensor_overlaps(const kda_fwd_params& p) {
  const FwdTensors all(p);
  const Named written[] = {{"out", &p.out}, {"final_state", &p.final_state}};
  for (const Named& w : written) {
    if (w.t->data == nullptr) continue;
    const Range rw = range_of(w.t->data, tensor_span_bytes(*w.t));
    for (const Named& o : all.t) {
      if (o.t == w.t || o.t->data == nullptr) continue;
      // In place: final_state exactly initial_state (same address and dtype; shapes and strides are
      // equal, both being contiguous [N, HV, V, K]). Each element is read before it is written, by
      // the same thread (GPU) or worker (CPU); the bounded warm-up, whose pass 1 reads and writes a
      // unit's state in different CTAs, writes its final states to the workspace and copies them
      // after pass 1 (deferred_final_kernel.cuh).
      if (w.t == &p.final_state && o.t == &p.initial_state && p.final_state.data == p.initial_state.data &&
          raw_enum(p.final_state.dtype) == raw_enum(p.initial_state.dtype))
        continue;
      const Range ro = range_of(o.t->data, tensor_span_bytes(*o.t));
      if (!overlap(rw, ro)) continue;
      if (w.t == &p.final_state && o.t == &p.initial_state)
        return make_error(KDA_ERROR_INVALID_ARGUMENT,
                          "final_state: expected memory disjoint from initial_state, or exactly initial_state with "
                          "the same dtype (in-place update), got %s at %p overlapping initial_state (%s at %p)",
                          dtype_name(raw_enum(p.final_state.dtype)), p.final_state.data,
                          dtype_name(raw_enum(p.initial_state.dtype)), p.initial_state.data);
      // out against final_state is reported once, as out's.
      if (w.t == &p.final_state && o.t == &p.out) continue;
      return written_overlap_error(w, o);
    }
  }
  return make_ok();
}

kda_status check_workspace_overlaps(const kda_fwd_params& p, const void* workspace, size_t bytes) {
  const FwdTensors all(p);
  return check_workspace_disjoint(workspace, bytes, all.t, sizeof(all.t) / sizeof(all.t[0]));
}

kda_status check_workspace_disjoint(const void* workspace, size_t bytes, const NamedTensor* tensors, size_t count) {
  if (workspace == nullptr || bytes == 0) return make_ok();
  const Range rw = range_of(workspace, bytes);
  for (size_t i = 0; i < count; ++i) {
    const Named& o = tensors[i];
    if (o.t->data == nullptr) continue;
    if (overlap(rw, range_of(*o.t)))
      return make_error(KDA_ERROR_INVALID_ARGUMENT,
                        "workspace: expected memory disjoint from every tensor, got [%p, +%zu bytes) overlapping "
                        "%s [%p, +%zu)",
                        workspace, bytes, o.name, o.t->data, tensor_span_bytes(*o.t));
  }
  return make_ok();
}

namespace {

// What kda_segment_transition reads (out and the states of the params are ignored), then D and M.
struct TransitionTensors {
  Named t[10];
  TransitionTensors(const kda_fwd_params& p, const kda_tensor& D, const kda_tensor& M)
      : t{{"q", &p.q},         {"k", &p.k},         {"v", &p.v},
          {"g", &p.g},         {"beta", &p.beta},   {"A_log", &p.A_log},
          {"dt_bias", &p.dt_bias}, {"cu_seqlens", &p.cu_seqlens}, {"D", &D}, {"M", &M}} {}
  static constexpr size_t kInputs = 8;
};

}  // namespace

kda_status check_transition_memory(const kda_fwd_params& p, const kda_tensor& D, const kda_tensor& M, bool with_data) {
  // Strides first (the shape-only query too, whose pointers may be stand-ins or NULL).
  KDA_RETURN_IF_ERROR(check_rows_distinct("D", D));
  KDA_RETURN_IF_ERROR(check_rows_distinct("M", M));
  if (!with_data) return make_ok();
  const TransitionTensors all(p, D, M);
  KDA_RETURN_IF_ERROR(check_disjoint(all.t[8], all.t, TransitionTensors::kInputs));
  KDA_RETURN_IF_ERROR(check_disjoint(all.t[9], all.t, TransitionTensors::kInputs));
  // D against M: disjoint byte ranges, or the matrices of interleaved views sharing no byte.
  if (overlap(range_of(D), range_of(M)) && !interleaved_disjoint(D, M))
    return make_error(KDA_ERROR_INVALID_ARGUMENT,
                      "M: expected memory disjoint from D (both are written), or D and M interleaved views of one "
                      "buffer whose matrices share no byte (such as [.., HV, V + K, K]), got bytes [%p, +%zu) with %s "
                      "overlapping D [%p, +%zu) with %s",
                      M.data, tensor_span_bytes(M), strides_str(M).c_str(), D.data, tensor_span_bytes(D),
                      strides_str(D).c_str());
  return make_ok();
}

kda_status check_transition_workspace(const kda_fwd_params& p, const kda_tensor& D, const kda_tensor& M,
                                      const void* workspace, size_t bytes) {
  const TransitionTensors all(p, D, M);
  return check_workspace_disjoint(workspace, bytes, all.t, sizeof(all.t) / sizeof(all.t[0]));
}

kda_status check_combine_memory(const kda_tensor& D, const kda_tensor& M, const kda_tensor& initial_state,
                                const kda_tensor& start_states, const kda_tensor& end_state, bool with_data) {
  if (start_states.data != nullptr) KDA_RETURN_IF_ERROR(check_rows_distinct("start_states", start_states));
  if (end_state.data != nullptr) KDA_RETURN_IF_ERROR(check_rows_distinct("end_state", end_state));
  if (!with_data) return make_ok();
  // The header: outputs never overlap the inputs (no in-place end state) nor each other.
  const Named all[] = {{"D", &D},
                       {"M", &M},
                       {"initial_state", &initial_state},
                       {"start_states", &start_states},
                       {"end_state", &end_state}};
  KDA_RETURN_IF_ERROR(check_disjoint(all[3], all, 5));
  return check_disjoint(all[4], all, 5);
}

kda_status check_decode_overlaps(const kda_decode_params& p) {
  const DecodeTensors all(p);
  const size_t count = sizeof(all.t) / sizeof(all.t[0]);
  KDA_RETURN_IF_ERROR(check_disjoint(all.t[5], all.t, count));  // out (against state_pool too)
  return check_disjoint(all.t[8], all.t, count);                // state_pool
}

}  // namespace kda
