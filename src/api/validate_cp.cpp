// Validation of the building blocks of context parallelism across GPUs (flash_kda.h, last section):
// the shard's params as kda_fwd's (validate.cpp), then the transition and state tensors. Messages
// name the argument, the expectation and what was given; sizes are checked before anything is
// multiplied.
#include <cstdint>
#include <string>

#include "src/api/cp_problem.h"
#include "src/api/memory_rules.h"
#include "src/api/tensor_rules.h"

namespace kda {

namespace {

constexpr int64_t kDim = 128;

// A float32 tensor [rows, HV, 128, 128] of dense matrices: rank, shape, dtype, strides, reach (the
// shared tensor rules), then stride[2] = 128, stride[0] and stride[1] multiples of 4 elements and,
// for the device, a 16-byte aligned data pointer.
kda_status check_matrices(const char* name, const kda_tensor& t, int64_t rows, int64_t HV, const char* hint,
                          bool for_device) {
  const int64_t shape[4] = {rows, HV, kDim, kDim};
  KDA_RETURN_IF_ERROR(check_tensor_rules(name, t, 4, shape, KDA_DTYPE_F32, KDA_DTYPE_NONE, false, hint));
  if (t.stride[2] != kDim)
    return make_error(KDA_ERROR_INVALID_ARGUMENT,
                      "%s: expected every [128, 128] matrix dense (stride[2] = 128, stride[3] = 1), got stride[2] = %lld",
                      name, static_cast<long long>(t.stride[2]));
  for (int d = 0; d < 2; ++d)
    if (t.shape[d] > 1 && t.stride[d] % 4 != 0)
      return make_error(KDA_ERROR_INVALID_ARGUMENT,
                        "%s: expected stride[%d] to be a multiple of 4 elements (16 bytes), got %lld", name, d,
                        static_cast<long long>(t.stride[d]));
  if (for_device && reinterpret_cast<uintptr_t>(t.data) % 16 != 0)
    return make_error(KDA_ERROR_INVALID_ARGUMENT, "%s: expected a 16-byte aligned data pointer, got %p", name, t.data);
  return make_ok();
}

bool present(const kda_tensor& t) { return t.data != nullptr; }

}  // namespace

kda_fwd_params transition_params(const kda_fwd_params& params) {
  kda_fwd_params p = params;
  p.initial_state = kda_tensor{};
  p.final_state = kda_tensor{};
  p.out = p.v;  // never written: the transition has no outputs
  p.out.dtype = KDA_DTYPE_BF16;
  return p;
}

kda_status validate_transition(const kda_fwd_params* params, const kda_tensor& D, const kda_tensor& M,
                               ValidateMode mode, TransitionProblem* out) {
  TransitionProblem tp;
  // The stand-in out (transition_params) is never written: no memory rules on it; D and M are
  // checked below.
  KDA_RETURN_IF_ERROR(validate(params, mode, &tp.shard, /*writes_out=*/false));
  const Problem& pr = tp.shard;
  if (present(D) != present(M))
    return make_error(KDA_ERROR_INVALID_ARGUMENT,
                      "D and M: expected both (the transitions to compute) or neither (the preparation only), got %s only",
                      present(D) ? "D" : "M");
  if (present(D)) {
    if (D.ndim != 4)
      return make_error(KDA_ERROR_INVALID_ARGUMENT, "D: expected a 4-D tensor [N_t, HV, V, K], got %d-D %s", D.ndim,
                        tensor_shape_string(D).c_str());
    tp.num_transitions = D.shape[0];
    if (tp.num_transitions < 1 || tp.num_transitions > pr.N)
      return make_error(KDA_ERROR_INVALID_ARGUMENT,
                        "D: expected N_t = D.shape[0] in [1, N] with N = %lld sequences (the last N_t sequences), got "
                        "shape %s",
                        static_cast<long long>(pr.N), tensor_shape_string(D).c_str());
    const bool device = mode == ValidateMode::kDevice;
    KDA_RETURN_IF_ERROR(check_matrices("D", D, tp.num_transitions, pr.HV, "[N_t, HV, V, K]", device));
    KDA_RETURN_IF_ERROR(check_matrices("M", M, tp.num_transitions, pr.HV, "[N_t, HV, K, K] (N_t as D)", device));
    // Memory rules (memory_rules.h): every matrix of D and M its own memory (strides: any mode);
    // with data, D and M disjoint from the shard's inputs and from each other (or interleaved).
    KDA_RETURN_IF_ERROR(check_transition_memory(*params, D, M, mode != ValidateMode::kShapesOnly));
    tp.D = D;
    tp.M = M;
  }
  *out = tp;
  return make_ok();
}

kda_status validate_combine(int64_t num_shards, const kda_tensor& D, const kda_tensor& M,
                            const kda_tensor& initial_state, const kda_tensor& start_states,
                            const kda_tensor& end_state, bool for_device, CombineProblem* out) {
  CombineProblem cp;
  if (num_shards < 1 || num_shards > 0x7fffffff)
    return make_error(KDA_ERROR_INVALID_ARGUMENT, "num_shards: expected R in [1, 2^31 - 1], got %lld",
                      static_cast<long long>(num_shards));
  cp.R = num_shards;
  if (for_device && tensor_missing(D)) return make_error(KDA_ERROR_INVALID_ARGUMENT, "D: expected a tensor, got NULL data");
  if (D.ndim != 4)
    return make_error(KDA_ERROR_INVALID_ARGUMENT, "D: expected a 4-D tensor [R*N, HV, V, K], got %d-D %s", D.ndim,
                      tensor_shape_string(D).c_str());
  if (D.shape[0] < 0 || D.shape[0] % cp.R != 0 || D.shape[1] < 1)
    return make_error(KDA_ERROR_INVALID_ARGUMENT,
                      "D: expected shape [R*N, HV, V, K] with R = num_shards = %lld and HV >= 1 (row r*N + n: shard r, "
                      "sequence n), got %s",
                      static_cast<long long>(cp.R), tensor_shape_string(D).c_str());
  cp.N = D.shape[0] / cp.R;
  cp.HV = D.shape[1];
  KDA_RETURN_IF_ERROR(check_matrices("D", D, cp.R * cp.N, cp.HV, "[R*N, HV, V, K]", for_device));
  if (for_device && tensor_missing(M)) return make_error(KDA_ERROR_INVALID_ARGUMENT, "M: expected a tensor, got NULL data");
  KDA_RETURN_IF_ERROR(check_matrices("M", M, cp.R * cp.N, cp.HV, "[R*N, HV, K, K] (as D)", for_device));
  if (present(initial_state)) {
    const int64_t shape[4] = {cp.N, cp.HV, kDim, kDim};
    KDA_RETURN_IF_ERROR(check_tensor_rules("initial_state", initial_state, 4, shape, KDA_DTYPE_F32, KDA_DTYPE_BF16, true,
                                           "[N, HV, V, K]"));
    if (for_device) KDA_RETURN_IF_ERROR(check_tensor_row_alignment("initial_state", initial_state));
  }
  if (!present(start_states) && !present(end_state))
    return make_error(KDA_ERROR_INVALID_ARGUMENT,
                      "start_states and end_state: expected at least one output tensor, got neither");
  if (present(start_states))
    KDA_RETURN_IF_ERROR(check_matrices("start_states", start_states, cp.R * cp.N, cp.HV, "[R*N, HV, V, K] (as D)",
                                       for_device));
  if (present(end_state))
    KDA_RETURN_IF_ERROR(check_matrices("end_state", end_state, cp.N, cp.HV, "[N, HV, V, K]", for_device));
  // One CTA per 8 rows of each (sequence, head): N x HV x 16 CTAs in one grid.
  if (cp.N > 0 && cp.HV > (int64_t{0x7fffffff} / 16) / cp.N)
    return make_error(KDA_ERROR_INVALID_ARGUMENT,
                      "D: sizes too large: N x HV = %lld x %lld (sequences x value heads) must stay below 2^27",
                      static_cast<long long>(cp.N), static_cast<long long>(cp.HV));
  // Memory rules (memory_rules.h): every matrix of an output its own memory; outputs disjoint from
  // the inputs and from each other (with data: for_device).
  KDA_RETURN_IF_ERROR(check_combine_memory(D, M, initial_state, start_states, end_state, for_device));
  cp.D = D;
  cp.M = M;
  cp.initial_state = initial_state;
  cp.start_states = start_states;
  cp.end_state = end_state;
  *out = cp;
  return make_ok();
}

}  // namespace kda
