// Validation of kda_decode_params. The token tensors (q, k, v, g, beta, out, A_log, dt_bias,
// cu_seqlens) and the options go through kda_fwd's validation unchanged (a forward problem without
// states, so the rules and messages are the same); then the state pool, the slot indices,
// num_accepted_tokens and the memory rules of the two written tensors, out and the pool.
#include <cstdint>
#include <cstring>
#include <string>

#include "src/api/decode_problem.h"
#include "src/api/memory_rules.h"
#include "src/api/tensor_rules.h"

namespace kda {

namespace {

// An optional tensor is absent when its data pointer is NULL (flash_kda.h).
bool present(const kda_tensor& t) { return t.data != nullptr; }

kda_status check_pool(const kda_decode_params& p, ValidateMode mode, DecodeProblem* dp) {
  const Problem& pr = dp->pr;
  const kda_tensor& s = p.state_pool;
  if (mode != ValidateMode::kShapesOnly && tensor_missing(s))
    return make_error(KDA_ERROR_INVALID_ARGUMENT, "state_pool: expected a tensor [slots, HV, V, K], got NULL data");
  if (s.ndim != 4)
    return make_error(KDA_ERROR_INVALID_ARGUMENT, "state_pool: expected a 4-D tensor [slots, HV, V, K], got %d-D %s",
                      s.ndim, tensor_shape_string(s).c_str());
  if (s.shape[0] < 0)
    return make_error(KDA_ERROR_INVALID_ARGUMENT, "state_pool: expected slots = shape[0] >= 0, got %s",
                      tensor_shape_string(s).c_str());
  const int64_t shape[4] = {s.shape[0], pr.HV, pr.V, pr.K};
  KDA_RETURN_IF_ERROR(
      check_tensor_rules("state_pool", s, 4, shape, KDA_DTYPE_F32, KDA_DTYPE_BF16, false, "[slots, HV, V, K]"));
  const int64_t inner = pr.HV * pr.V * pr.K;
  if ((pr.HV > 1 && s.stride[1] != pr.V * pr.K) || s.stride[2] != pr.K)
    return make_error(KDA_ERROR_INVALID_ARGUMENT,
                      "state_pool: expected dimensions 1..3 [HV, V, K] contiguous (strides [*, %lld, %lld, 1]), got "
                      "strides [%lld, %lld, %lld, %lld]",
                      static_cast<long long>(pr.V * pr.K), static_cast<long long>(pr.K),
                      static_cast<long long>(s.stride[0]), static_cast<long long>(s.stride[1]),
                      static_cast<long long>(s.stride[2]), static_cast<long long>(s.stride[3]));
  if (s.shape[0] > 1 && s.stride[0] < inner)
    return make_error(KDA_ERROR_INVALID_ARGUMENT,
                      "state_pool: expected stride[0] >= HV*V*K = %lld (slots must not overlap), got %lld",
                      static_cast<long long>(inner), static_cast<long long>(s.stride[0]));
  dp->slots = s.shape[0];
  dp->pool_stride = s.shape[0] > 1 ? s.stride[0] : inner;
  dp->pool_f32 = s.dtype == KDA_DTYPE_F32;
  if (mode == ValidateMode::kDevice) KDA_RETURN_IF_ERROR(check_tensor_row_alignment("state_pool", s));
  return make_ok();
}

kda_status check_indices(const kda_decode_params& p, DecodeProblem* dp) {
  const Problem& pr = dp->pr;
  const kda_tensor& ix = p.state_indices;
  dp->has_indices = present(ix);
  if (!dp->has_indices) {
    if (dp->slots < pr.N)
      return make_error(KDA_ERROR_INVALID_ARGUMENT,
                        "state_pool: expected at least N = %lld slots when state_indices is absent (sequence n uses "
                        "slot n), got %lld",
                        static_cast<long long>(pr.N), static_cast<long long>(dp->slots));
  } else {
    if (ix.ndim == 1) {
      const int64_t shape[1] = {pr.N};
      KDA_RETURN_IF_ERROR(
          check_tensor_rules("state_indices", ix, 1, shape, KDA_DTYPE_I32, KDA_DTYPE_I64, false, "[N] (N sequences)"));
      dp->idx_cols = 1;
      dp->idx_stride_n = ix.stride[0];
      dp->idx_stride_t = 1;
    } else if (ix.ndim == 2) {
      if (ix.shape[1] < 1 || (!pr.varlen && ix.shape[1] < pr.T))
        return make_error(
            KDA_ERROR_INVALID_ARGUMENT, "state_indices: expected shape [N, T_idx] with T_idx >= %lld (%s), got %s",
            static_cast<long long>(pr.varlen ? 1 : pr.T),
            pr.varlen ? "at least one column" : "a slot for each of the T tokens", tensor_shape_string(ix).c_str());
      const int64_t shape[2] = {pr.N, ix.shape[1]};
      KDA_RETURN_IF_ERROR(check_tensor_rules("state_indices", ix, 2, shape, KDA_DTYPE_I32, KDA_DTYPE_I64, false,
                                             "[N, T_idx] (N sequences)"));
      dp->indices_2d = true;
      dp->idx_cols = ix.shape[1];
      dp->idx_stride_n = ix.stride[0];
      dp->idx_stride_t = ix.shape[1] > 1 ? ix.stride[1] : 1;
    } else {
      return make_error(KDA_ERROR_INVALID_ARGUMENT,
                        "state_indices: expected a 1-D [N] or 2-D [N, T_idx] tensor, got %d-D %s", ix.ndim,
                        tensor_shape_string(ix).c_str());
    }
    dp->indices_i64 = ix.dtype == KDA_DTYPE_I64;
  }

  const kda_tensor& na = p.num_accepted_tokens;
  dp->has_accepted = present(na);
  if (dp->has_accepted) {
    if (!dp->indices_2d)
      return make_error(KDA_ERROR_INVALID_ARGUMENT,
                        "num_accepted_tokens: requires 2-D state_indices [N, T_idx] (one slot per token), got %s",
                        dp->has_indices ? "1-D state_indices" : "no state_indices");
    const int64_t shape[1] = {pr.N};
    KDA_RETURN_IF_ERROR(
        check_tensor_rules("num_accepted_tokens", na, 1, shape, KDA_DTYPE_I32, KDA_DTYPE_I64, false, "[N]"));
    dp->accepted_i64 = na.dtype == KDA_DTYPE_I64;
    dp->accepted_stride = na.stride[0];
  }
  return make_ok();
}

}  // namespace

kda_status validate_decode(const kda_decode_params* p, ValidateMode mode, DecodeProblem* out) {
  if (p == nullptr) return make_error(KDA_ERROR_INVALID_ARGUMENT, "params: expected a non-null pointer, got NULL");
  if (p->struct_size != sizeof(kda_decode_params))
    return make_error(KDA_ERROR_INVALID_ARGUMENT,
                      "params.struct_size: expected %zu (call kda_decode_params_init), got %u",
                      sizeof(kda_decode_params), p->struct_size);
  if (p->kernel_config < 0 || p->kernel_config > KDA_DECODE_NUM_KERNEL_CONFIGS)
    return make_error(KDA_ERROR_INVALID_ARGUMENT,
                      "kernel_config: expected 0 (automatic) or a configuration in [1, %d], got %d",
                      KDA_DECODE_NUM_KERNEL_CONFIGS, p->kernel_config);
  if (p->trusted_pointers != 0 && p->trusted_pointers != 1)
    return make_error(KDA_ERROR_INVALID_ARGUMENT, "trusted_pointers: expected 0 (check every pointer) or 1, got %d",
                      p->trusted_pointers);
  DecodeProblem& dp = *out;
  dp.params = p;
  kda_fwd_params& f = dp.fwd;
  kda_fwd_params_init(&f);
  f.q = p->q;
  f.k = p->k;
  f.v = p->v;
  f.g = p->g;
  f.beta = p->beta;
  f.out = p->out;
  f.A_log = p->A_log;
  f.dt_bias = p->dt_bias;
  f.cu_seqlens = p->cu_seqlens;
  f.scale = p->scale;
  f.lower_bound = p->lower_bound;
  // (Copied as bytes: a C caller may hold any integer there, and loading an out-of-range value through
  // the enum type is undefined behaviour; kda_fwd's validation then reads it as an integer and names it.
  // Found by the decode fuzz harness, tests/fuzz/fuzz_decode.cpp, under UBSan.)
  std::memcpy(&f.gate, &p->gate, sizeof(f.gate));
  f.beta_sigmoid = p->beta_sigmoid;
  f.qk_l2norm = p->qk_l2norm;
  f.allow_neg_eigval = p->allow_neg_eigval;
  KDA_RETURN_IF_ERROR(validate(&f, mode, &dp.pr));
  KDA_RETURN_IF_ERROR(check_pool(*p, mode, &dp));
  KDA_RETURN_IF_ERROR(check_indices(*p, &dp));
  // Every element of the pool and the index tensors is read through a pointer of its type, on the CPU
  // path and in the kernels (kda_fwd's own tensors were checked by validate()). Found by the decode fuzz
  // harness (tests/fuzz/fuzz_decode.cpp): a pool one byte off passed to the float64 recurrence.
  if (mode != ValidateMode::kShapesOnly) {
    KDA_RETURN_IF_ERROR(check_tensor_element_alignment("state_pool", p->state_pool));
    KDA_RETURN_IF_ERROR(check_tensor_element_alignment("state_indices", p->state_indices));
    KDA_RETURN_IF_ERROR(check_tensor_element_alignment("num_accepted_tokens", p->num_accepted_tokens));
  }
  // Memory rules (memory_rules.h): out (its rows checked above, like kda_fwd's) and the pool, both
  // written, share no byte with any other tensor of the call or with each other.
  if (mode != ValidateMode::kShapesOnly) KDA_RETURN_IF_ERROR(check_decode_overlaps(*p));
  return make_ok();
}

}  // namespace kda
