// Memory rules of a call (memory_rules.h): out's rows distinct, written tensors disjoint from the
// others (final_state may be exactly initial_state), the workspace disjoint from every tensor.
#include "src/api/memory_rules.h"

#include <utility>
#include <cstdint>
#include <string>

#include "src/launch/checked_math.h"

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

struct Named {
  const char* name;
  const kda_tensor* t;
};

// Every tensor of the call, in the order messages name them.
struct AllTensors {
  Named t[11];
  explicit AllTensors(const kda_fwd_params& p)
      : t{{"q", &p.q},         {"k", &p.k},         {"v", &p.v},
          {"g", &p.g},         {"beta", &p.beta},   {"out", &p.out},
          {"A_log", &p.A_log}, {"dt_bias", &p.dt_bias}, {"initial_state", &p.initial_state},
          {"final_state", &p.final_state}, {"cu_seqlens", &p.cu_seqlens}} {}
};

std::string strides_str(const kda_tensor& t) {
  std::string s = "shape [";
  for (int d = 0; d < t.ndim; ++d) s += (d ? ", " : "") + std::to_string(t.shape[d]);
  s += "] with strides [";
  for (int d = 0; d < t.ndim; ++d) s += (d ? ", " : "") + std::to_string(t.stride[d]);
  return s + "]";
}

}  // namespace

size_t tensor_span_bytes(const kda_tensor& t) {
  if (t.ndim < 1 || t.ndim > 4) return 0;
  size_t elems = 1;
  for (int d = 0; d < t.ndim; ++d) {
    if (t.shape[d] <= 0) return 0;
    elems = sat_add(elems, sat_mul(sat_size(t.shape[d] - 1), sat_size(t.stride[d])));
  }
  return sat_mul(elems, dtype_bytes(raw_enum(t.dtype)));
}

kda_status check_out_rows_distinct(const kda_tensor& out) {
  int dims[4], n = 0;
  for (int d = 0; d < out.ndim && d < 4; ++d) {
    if (out.shape[d] == 0) return make_ok();  // no element
    if (out.shape[d] > 1) dims[n++] = d;
  }
  for (int i = 1; i < n; ++i)  // insertion sort by stride (at most 4 entries)
    for (int j = i; j > 0 && out.stride[dims[j]] < out.stride[dims[j - 1]]; --j) std::swap(dims[j], dims[j - 1]);
  int64_t span = 1;  // elements spanned by the dimensions checked so far (< 2^62: validated)
  for (int i = 0; i < n; ++i) {
    const int d = dims[i];
    if (out.stride[d] < span)
      return make_error(KDA_ERROR_INVALID_ARGUMENT,
                        "out: expected strides that give every element its own address (stride[%d] = %lld must be "
                        "at least %lld, the span of the dimensions with smaller strides), got %s",
                        d, static_cast<long long>(out.stride[d]), static_cast<long long>(span),
                        strides_str(out).c_str());
    span += (out.shape[d] - 1) * out.stride[d];
  }
  return make_ok();
}

kda_status check_tensor_overlaps(const kda_fwd_params& p) {
  const AllTensors all(p);
  const Named written[] = {{"out", &p.out}, {"final_state", &p.final_state}};
  for (const Named& w : written) {
    if (w.t->data == nullptr) continue;
    const Range rw = range_of(w.t->data, tensor_span_bytes(*w.t));
    for (const Named& o : all.t) {
      if (o.t == w.t || o.t->data == nullptr) continue;
      // In place: final_state exactly initial_state (same address and dtype; shapes and strides are
      // equal, both being contiguous [N, HV, V, K]). Each element is read before it is written, by
      // the same thread (GPU) or worker (CPU).
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
      return make_error(KDA_ERROR_INVALID_ARGUMENT,
                        "%s: expected memory disjoint from every other tensor (it is written), got bytes [%p, +%zu) "
                        "overlapping %s [%p, +%zu)",
                        w.name, w.t->data, tensor_span_bytes(*w.t), o.name, o.t->data, tensor_span_bytes(*o.t));
    }
  }
  return make_ok();
}

kda_status check_workspace_overlaps(const kda_fwd_params& p, const void* workspace, size_t bytes) {
  if (workspace == nullptr || bytes == 0) return make_ok();
  const AllTensors all(p);
  const Range rw = range_of(workspace, bytes);
  for (const Named& o : all.t) {
    if (o.t->data == nullptr) continue;
    if (overlap(rw, range_of(o.t->data, tensor_span_bytes(*o.t))))
      return make_error(KDA_ERROR_INVALID_ARGUMENT,
                        "workspace: expected memory disjoint from every tensor, got [%p, +%zu bytes) overlapping "
                        "%s [%p, +%zu)",
                        workspace, bytes, o.name, o.t->data, tensor_span_bytes(*o.t));
  }
  return make_ok();
}

}  // namespace kda
