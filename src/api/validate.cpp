// Validation of kda_fwd_params: every rule of the contract that can be checked on the host without
// touching device memory. Messages name the argument, the expectation and what was given.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "src/core/checked_math.h"
#include "src/api/memory_rules.h"
#include "src/api/problem.h"

namespace kda {

namespace {
constexpr double kMaxScale = 65536.0;  // |scale| bound: fp32 holds it with room to spare
}  // namespace

namespace {

std::string shape_str(const int64_t* shape, int ndim) {
  std::string s = "[";
  for (int d = 0; d < ndim; ++d) {
    if (d) s += ", ";
    s += std::to_string(shape[d]);
  }
  return s + "]";
}

std::string shape_str(const kda_tensor& t) {
  if (t.ndim < 0 || t.ndim > 4) return "[rank " + std::to_string(t.ndim) + "]";
  return shape_str(t.shape, t.ndim);
}

bool present(const kda_tensor& t) { return t.data != nullptr; }

// A required tensor may have a NULL data pointer only when it has no elements (frameworks give
// empty tensors a null pointer).
bool missing(const kda_tensor& t) {
  if (t.data != nullptr) return false;
  if (t.ndim < 1 || t.ndim > 4) return true;
  for (int d = 0; d < t.ndim; ++d)
    if (t.shape[d] == 0) return false;
  return true;
}

// "bf16", or "77 (not a kda_dtype value)" for a raw value outside the enum.
std::string dtype_str(int32_t dtype) {
  if (dtype_bytes(dtype) != 0 || dtype == KDA_DTYPE_NONE) return dtype_name(dtype);
  return std::to_string(dtype) + " (not a kda_dtype value)";
}

// Rank, shape, dtype (one of two) and stride rules of one tensor. `contiguous` requires a dense
// row-major layout; otherwise only the last dimension must be contiguous and strides non-negative.
// The dtype is read as a raw integer (the caller's field may hold any value).
kda_status check_tensor(const char* name, const kda_tensor& t, int ndim, const int64_t* shape,
                        kda_dtype dt0, kda_dtype dt1, bool contiguous, const char* shape_hint) {
  if (t.ndim != ndim)
    return make_error(KDA_ERROR_INVALID_ARGUMENT, "%s: expected a %d-D tensor %s, got %d-D %s", name, ndim,
                      shape_hint, t.ndim, shape_str(t).c_str());
  for (int d = 0; d < ndim; ++d) {
    if (t.shape[d] != shape[d])
      return make_error(KDA_ERROR_INVALID_ARGUMENT, "%s: expected shape %s %s, got %s", name,
                        shape_str(shape, ndim).c_str(), shape_hint, shape_str(t).c_str());
  }
  const int32_t dtype = raw_enum(t.dtype);
  if (dtype == KDA_DTYPE_NONE || (dtype != dt0 && dtype != dt1)) {  // dt1 may be NONE: "only dt0"
    if (dt1 == KDA_DTYPE_NONE || dt1 == dt0)
      return make_error(KDA_ERROR_INVALID_ARGUMENT, "%s: expected dtype %s, got %s", name, dtype_name(dt0),
                        dtype_str(dtype).c_str());
    return make_error(KDA_ERROR_INVALID_ARGUMENT, "%s: expected dtype %s or %s, got %s", name, dtype_name(dt0),
                      dtype_name(dt1), dtype_str(dtype).c_str());
  }
  int64_t expect = 1;
  bool expect_fits = true;  // false once the dense stride of the dimensions so far overflows
  for (int d = ndim - 1; d >= 0; --d) {
    if (t.stride[d] < 0)
      return make_error(KDA_ERROR_INVALID_ARGUMENT, "%s: expected non-negative strides, got stride[%d] = %lld",
                        name, d, static_cast<long long>(t.stride[d]));
    if (d == ndim - 1 && t.shape[d] > 1 && t.stride[d] != 1)
      return make_error(KDA_ERROR_INVALID_ARGUMENT,
                        "%s: expected the last dimension to be contiguous (stride 1), got stride %lld", name,
                        static_cast<long long>(t.stride[d]));
    if (contiguous && t.shape[d] > 1) {
      if (!expect_fits)
        return make_error(KDA_ERROR_INVALID_ARGUMENT,
                          "%s: sizes too large to index: shape %s has more than 2^63 elements", name,
                          shape_str(t).c_str());
      if (t.stride[d] != expect)
        return make_error(KDA_ERROR_INVALID_ARGUMENT,
                          "%s: expected a contiguous tensor (stride[%d] = %lld), got stride[%d] = %lld", name, d,
                          static_cast<long long>(expect), d, static_cast<long long>(t.stride[d]));
    }
    if (expect_fits && t.shape[d] >= 0) expect_fits = checked_mul(expect, t.shape[d], &expect);
  }
  // The byte offset one past the last element, (1 + sum (shape[d] - 1) * stride[d]) * element size,
  // must fit comfortably in int64 (2^62 bytes).
  constexpr int64_t kMaxBytes = int64_t{1} << 62;
  const int64_t elem = static_cast<int64_t>(dtype_bytes(dtype));
  int64_t reach = 1;  // elements
  const int d = add_tensor_reach(t, kMaxBytes / elem, &reach);  // (t.ndim == ndim, checked above)
  if (d >= 0)
    return make_error(KDA_ERROR_INVALID_ARGUMENT,
                      "%s: sizes too large to index: shape %s with stride[%d] = %lld reaches past 2^62 bytes", name,
                      shape_str(t).c_str(), d, static_cast<long long>(t.stride[d]));
  return make_ok();
}

// Host and device paths: every element is read or written through a pointer of its type, so the
// data pointer must be a multiple of the element size.
kda_status check_element_alignment(const char* name, const kda_tensor& t) {
  const size_t elem = dtype_bytes(raw_enum(t.dtype));  // validated
  if (t.data != nullptr && elem != 0 && reinterpret_cast<uintptr_t>(t.data) % elem != 0)
    return make_error(KDA_ERROR_INVALID_ARGUMENT, "%s: expected a data pointer aligned to its element size (%zu bytes), got %p",
                      name, elem, t.data);
  return make_ok();
}

// GPU path: rows are read with 16-byte vector loads, so the base pointer must be 16-byte aligned and
// every stride but the last a multiple of 16 bytes.
kda_status check_row_alignment(const char* name, const kda_tensor& t) {
  const int64_t elem = static_cast<int64_t>(dtype_bytes(raw_enum(t.dtype)));  // validated: 2 or 4
  if (reinterpret_cast<uintptr_t>(t.data) % 16 != 0)
    return make_error(KDA_ERROR_INVALID_ARGUMENT, "%s: expected a 16-byte aligned data pointer, got %p", name,
                      t.data);
  for (int d = 0; d + 1 < t.ndim; ++d) {
    if (t.shape[d] > 1 && t.stride[d] % (16 / elem) != 0)  // stride * elem could overflow
      return make_error(KDA_ERROR_INVALID_ARGUMENT,
                        "%s: expected stride[%d] to be a multiple of 16 bytes (%lld elements), got %lld elements",
                        name, d, static_cast<long long>(16 / elem), static_cast<long long>(t.stride[d]));
  }
  return make_ok();
}

}  // namespace

kda_status validate(const kda_fwd_params* p, ValidateMode mode, Problem* out, bool writes_out) {
  const bool for_device = mode == ValidateMode::kDevice;
  const bool need_data = mode != ValidateMode::kShapesOnly;
  if (p == nullptr) return make_error(KDA_ERROR_INVALID_ARGUMENT, "params: expected a non-null pointer, got NULL");
  if (p->struct_size != sizeof(kda_fwd_params))
    return make_error(KDA_ERROR_INVALID_ARGUMENT,
                      "params.struct_size: expected %zu (call kda_fwd_params_init), got %u",
                      sizeof(kda_fwd_params), p->struct_size);
  Problem pr;
  pr.params = p;

  // q fixes B, T, H, K.
  if (need_data && missing(p->q)) return make_error(KDA_ERROR_INVALID_ARGUMENT, "q: expected a tensor, got NULL data");
  if (p->q.ndim != 4)
    return make_error(KDA_ERROR_INVALID_ARGUMENT, "q: expected a 4-D tensor [B, T, H, K], got %d-D %s", p->q.ndim,
                      shape_str(p->q).c_str());
  pr.B = p->q.shape[0];
  pr.T = p->q.shape[1];
  pr.H = p->q.shape[2];
  pr.K = p->q.shape[3];
  if (pr.B < 0 || pr.T < 0 || pr.H <= 0 || pr.K <= 0)
    return make_error(KDA_ERROR_INVALID_ARGUMENT,
                      "q: expected shape [B, T, H, K] with B >= 0, T >= 0, H >= 1, K >= 1, got %s",
                      shape_str(p->q).c_str());
  if (pr.K != kHeadDim)
    return make_error(KDA_ERROR_UNSUPPORTED, "q: head dimension K = q.shape[3] must be 128, got %lld",
                      static_cast<long long>(pr.K));
  KDA_RETURN_IF_ERROR(check_tensor("q", p->q, 4, p->q.shape, KDA_DTYPE_BF16, KDA_DTYPE_NONE, false, "[B, T, H, K]"));
  if (need_data && missing(p->k)) return make_error(KDA_ERROR_INVALID_ARGUMENT, "k: expected a tensor, got NULL data");
  KDA_RETURN_IF_ERROR(
      check_tensor("k", p->k, 4, p->q.shape, KDA_DTYPE_BF16, KDA_DTYPE_NONE, false, "[B, T, H, K] (as q)"));

  // v fixes HV and V.
  if (need_data && missing(p->v)) return make_error(KDA_ERROR_INVALID_ARGUMENT, "v: expected a tensor, got NULL data");
  if (p->v.ndim != 4)
    return make_error(KDA_ERROR_INVALID_ARGUMENT, "v: expected a 4-D tensor [B, T, HV, V], got %d-D %s", p->v.ndim,
                      shape_str(p->v).c_str());
  pr.HV = p->v.shape[2];
  pr.V = p->v.shape[3];
  if (pr.V != kHeadDim)
    return make_error(KDA_ERROR_UNSUPPORTED, "v: head dimension V = v.shape[3] must be 128, got %lld",
                      static_cast<long long>(pr.V));
  if (pr.HV < pr.H || pr.HV % pr.H != 0)
    return make_error(KDA_ERROR_INVALID_ARGUMENT,
                      "v: number of value heads HV = v.shape[2] must be a positive multiple of H = %lld, got %lld",
                      static_cast<long long>(pr.H), static_cast<long long>(pr.HV));
  if (pr.HV > 65535)
    return make_error(KDA_ERROR_INVALID_ARGUMENT, "v: number of value heads HV = %lld must stay below 65536",
                      static_cast<long long>(pr.HV));
  const int64_t v_shape[4] = {pr.B, pr.T, pr.HV, pr.V};
  KDA_RETURN_IF_ERROR(check_tensor("v", p->v, 4, v_shape, KDA_DTYPE_BF16, KDA_DTYPE_NONE, false, "[B, T, HV, V]"));

  const int64_t g_shape[4] = {pr.B, pr.T, pr.HV, pr.K};
  if (need_data && missing(p->g)) return make_error(KDA_ERROR_INVALID_ARGUMENT, "g: expected a tensor, got NULL data");
  KDA_RETURN_IF_ERROR(check_tensor("g", p->g, 4, g_shape, KDA_DTYPE_BF16, KDA_DTYPE_F32, false, "[B, T, HV, K]"));
  if (need_data && missing(p->beta)) return make_error(KDA_ERROR_INVALID_ARGUMENT, "beta: expected a tensor, got NULL data");
  KDA_RETURN_IF_ERROR(check_tensor("beta", p->beta, 3, v_shape, KDA_DTYPE_BF16, KDA_DTYPE_F32, false, "[B, T, HV]"));
  if (need_data && missing(p->out)) return make_error(KDA_ERROR_INVALID_ARGUMENT, "out: expected a tensor, got NULL data");
  KDA_RETURN_IF_ERROR(check_tensor("out", p->out, 4, v_shape, KDA_DTYPE_BF16, KDA_DTYPE_NONE, false, "[B, T, HV, V]"));

  // Gate parameters. The enum field is read as an integer first (any value may be there).
  const int32_t gate = raw_enum(p->gate);
  if (gate != KDA_GATE_BOUNDED && gate != KDA_GATE_SOFTPLUS && gate != KDA_GATE_PREACTIVATED)
    return make_error(KDA_ERROR_INVALID_ARGUMENT,
                      "gate: expected KDA_GATE_BOUNDED (0), KDA_GATE_SOFTPLUS (1) or KDA_GATE_PREACTIVATED (2), got %d",
                      gate);
  // Doubles are printed with 17 significant digits: a value just outside a bound must not read as
  // the bound itself. The kernels use lower_bound and scale in fp32: both must be non-zero, finite
  // values there (a bound that rounds to 0 in fp32 would be a gate without decay).
  if (gate == KDA_GATE_BOUNDED &&
      !(p->lower_bound >= -5.0 && p->lower_bound < 0.0 && static_cast<float>(p->lower_bound) != 0.0f))
    return make_error(KDA_ERROR_INVALID_ARGUMENT,
                      "lower_bound: expected a value in [-5, 0) for the bounded gate, non-zero in fp32 (use the "
                      "softplus gate, lower_bound=None, for an unbounded decay), got %.17g",
                      p->lower_bound);
  if (p->context_split < 0 || p->context_split > KDA_MAX_CONTEXT_SPLIT)
    return make_error(KDA_ERROR_INVALID_ARGUMENT,
                      "context_split: expected 0 (automatic), 1 (off) or a segment count in [2, %d], got %d",
                      KDA_MAX_CONTEXT_SPLIT, p->context_split);
  if (p->context_method != KDA_CONTEXT_AUTO && p->context_method != KDA_CONTEXT_EXACT &&
      p->context_method != KDA_CONTEXT_WARMUP)
    return make_error(KDA_ERROR_INVALID_ARGUMENT,
                      "context_method: expected KDA_CONTEXT_AUTO (0), KDA_CONTEXT_EXACT (1) or KDA_CONTEXT_WARMUP (2), "
                      "got %d",
                      static_cast<int>(p->context_method));
  if (p->single_pass != KDA_SINGLE_PASS_AUTO && p->single_pass != KDA_SINGLE_PASS_NEVER &&
      p->single_pass != KDA_SINGLE_PASS_ALWAYS)
    return make_error(KDA_ERROR_INVALID_ARGUMENT,
                      "single_pass: expected KDA_SINGLE_PASS_AUTO (0), KDA_SINGLE_PASS_NEVER (1) or "
                      "KDA_SINGLE_PASS_ALWAYS (2), got %d",
                      static_cast<int>(p->single_pass));
  if (p->trusted_pointers != 0 && p->trusted_pointers != 1)
    return make_error(KDA_ERROR_INVALID_ARGUMENT, "trusted_pointers: expected 0 (check every pointer) or 1, got %d",
                      p->trusted_pointers);
  if (p->context_warmup_chunks < 0)
    return make_error(KDA_ERROR_INVALID_ARGUMENT,
                      "context_warmup_chunks: expected 0 (chosen from the decay bound) or a chunk count >= 1, got %d",
                      p->context_warmup_chunks);
  if (p->context_warmup_chunks > 0 && p->context_method != KDA_CONTEXT_WARMUP)
    return make_error(KDA_ERROR_INVALID_ARGUMENT,
                      "context_warmup_chunks: expected 0 unless context_method is KDA_CONTEXT_WARMUP (2), got %d with "
                      "context_method %d",
                      p->context_warmup_chunks, static_cast<int>(p->context_method));
  if (!(std::fabs(p->scale) <= kMaxScale))  // also NaN
    return make_error(KDA_ERROR_INVALID_ARGUMENT,
                      "scale: expected a finite value with |scale| <= %g (the kernels use it in fp32), got %.17g",
                      kMaxScale, p->scale);
  pr.has_A_log = present(p->A_log);
  pr.has_dt_bias = present(p->dt_bias);
  if (pr.has_A_log) {
    const int64_t shape[1] = {pr.HV};
    KDA_RETURN_IF_ERROR(check_tensor("A_log", p->A_log, 1, shape, KDA_DTYPE_F32, KDA_DTYPE_NONE, true, "[HV]"));
  }
  if (pr.has_dt_bias) {
    if (p->dt_bias.ndim == 1) {
      const int64_t shape[1] = {pr.HV * pr.K};
      KDA_RETURN_IF_ERROR(
          check_tensor("dt_bias", p->dt_bias, 1, shape, KDA_DTYPE_F32, KDA_DTYPE_NONE, true, "[HV * K]"));
    } else {
      const int64_t shape[2] = {pr.HV, pr.K};
      KDA_RETURN_IF_ERROR(
          check_tensor("dt_bias", p->dt_bias, 2, shape, KDA_DTYPE_F32, KDA_DTYPE_NONE, true, "[HV, K] or [HV * K]"));
    }
  }

  // Sequences. B*T must not overflow before the size rule below can look at it; T alone is bounded
  // too (B = 0 leaves B*T = 0 for any T, and the launcher rounds T up to whole chunks).
  constexpr int64_t kMaxTokens = (int64_t{1} << 31) - 1;
  if (!checked_mul(pr.B, pr.T, &pr.T_total))
    return make_error(KDA_ERROR_INVALID_ARGUMENT,
                      "q: sizes too large to index: B*T = %lld*%lld tokens must stay below 2^31",
                      static_cast<long long>(pr.B), static_cast<long long>(pr.T));
  if (present(p->cu_seqlens)) {
    const kda_tensor& cu = p->cu_seqlens;
    if (cu.ndim != 1)
      return make_error(KDA_ERROR_INVALID_ARGUMENT, "cu_seqlens: expected a 1-D tensor [N + 1], got %d-D %s",
                        cu.ndim, shape_str(cu).c_str());
    if (cu.shape[0] < 2)
      return make_error(KDA_ERROR_INVALID_ARGUMENT,
                        "cu_seqlens: expected at least 2 entries (N + 1 with N >= 1), got shape %s",
                        shape_str(cu).c_str());
    KDA_RETURN_IF_ERROR(check_tensor("cu_seqlens", cu, 1, cu.shape, KDA_DTYPE_I64, KDA_DTYPE_I32, true, "[N + 1]"));
    if (pr.B != 1)
      return make_error(KDA_ERROR_INVALID_ARGUMENT,
                        "q: expected batch size B = 1 when cu_seqlens is given (packed sequences), got B = %lld",
                        static_cast<long long>(pr.B));
    pr.varlen = true;
    pr.N = cu.shape[0] - 1;
  } else {
    pr.N = pr.B;
  }

  const int64_t state_shape[4] = {pr.N, pr.HV, pr.V, pr.K};
  pr.has_initial_state = present(p->initial_state);
  pr.has_final_state = present(p->final_state);
  if (pr.has_initial_state)
    KDA_RETURN_IF_ERROR(check_tensor("initial_state", p->initial_state, 4, state_shape, KDA_DTYPE_F32,
                                     KDA_DTYPE_BF16, true, "[N, HV, V, K]"));
  if (pr.has_final_state)
    KDA_RETURN_IF_ERROR(check_tensor("final_state", p->final_state, 4, state_shape, KDA_DTYPE_F32, KDA_DTYPE_BF16,
                                     true, "[N, HV, V, K]"));

  // Sizes whose indexing would overflow: token indices are 32-bit in the kernels, offsets 64-bit.
  if (pr.T_total > kMaxTokens || pr.T > kMaxTokens || pr.N > kMaxTokens / 2)
    return make_error(KDA_ERROR_INVALID_ARGUMENT,
                      "q: sizes too large to index: B*T = %lld tokens (T = %lld) and N = %lld sequences must stay "
                      "below 2^31 and 2^30",
                      static_cast<long long>(pr.T_total), static_cast<long long>(pr.T), static_cast<long long>(pr.N));

  if (need_data) {
    const struct {
      const char* name;
      const kda_tensor& t;
    } all[] = {{"q", p->q},         {"k", p->k},         {"v", p->v},
               {"g", p->g},         {"beta", p->beta},   {"out", p->out},
               {"A_log", p->A_log}, {"dt_bias", p->dt_bias}, {"initial_state", p->initial_state},
               {"final_state", p->final_state}, {"cu_seqlens", p->cu_seqlens}};
    for (const auto& e : all) KDA_RETURN_IF_ERROR(check_element_alignment(e.name, e.t));
  }
  if (for_device) {
    KDA_RETURN_IF_ERROR(check_row_alignment("q", p->q));
    KDA_RETURN_IF_ERROR(check_row_alignment("k", p->k));
    KDA_RETURN_IF_ERROR(check_row_alignment("v", p->v));
    KDA_RETURN_IF_ERROR(check_row_alignment("g", p->g));
    KDA_RETURN_IF_ERROR(check_row_alignment("out", p->out));
    if (pr.has_initial_state) KDA_RETURN_IF_ERROR(check_row_alignment("initial_state", p->initial_state));
    if (pr.has_final_state) KDA_RETURN_IF_ERROR(check_row_alignment("final_state", p->final_state));
    if (pr.has_dt_bias) KDA_RETURN_IF_ERROR(check_row_alignment("dt_bias", p->dt_bias));
  }
  // Memory rules (memory_rules.h): rows of out never alias each other (any mode: strides only);
  // written tensors disjoint from everything they do not update in place (addresses only; the
  // shape-only query may be given stand-in pointers, so it skips this).
  if (writes_out) {
    KDA_RETURN_IF_ERROR(check_out_rows_distinct(p->out));
    if (need_data) KDA_RETURN_IF_ERROR(check_tensor_overlaps(*p));
  }
  *out = pr;
  return make_ok();
}

}  // namespace kda

// ---- Shared with the other validators (src/api/tensor_rules.h; validate_decode.cpp) ----
namespace kda {

kda_status check_tensor_rules(const char* name, const kda_tensor& t, int ndim, const int64_t* shape, kda_dtype dt0,
                              kda_dtype dt1, bool contiguous, const char* shape_hint) {
  return check_tensor(name, t, ndim, shape, dt0, dt1, contiguous, shape_hint);
}
kda_status check_tensor_row_alignment(const char* name, const kda_tensor& t) { return check_row_alignment(name, t); }
kda_status check_tensor_element_alignment(const char* name, const kda_tensor& t) {
  return check_element_alignment(name, t);
}
std::string tensor_shape_string(const kda_tensor& t) { return shape_str(t); }
bool tensor_missing(const kda_tensor& t) { return missing(t); }

}  // namespace kda
