// Entry points of context parallelism across GPUs (flash_kda.h, last section; docs/design.md §3.4):
// validate, check the device and the pointers, size the workspace, dispatch to the launcher
// (src/launch/cp_sm90.cu). No allocation, no synchronisation, no host read of device data.
#include <cstdint>

#include "flash_kda/flash_kda.h"
#include "src/api/cp_problem.h"
#include "src/api/device_checks.h"
#include "src/api/memory_rules.h"
#include "src/launch/cp_launch.h"
#include "src/launch/launch.h"

namespace {

using kda::make_error;
using kda::make_ok;

kda_status check_params_struct(const kda_fwd_params* params) {
  if (params == nullptr) return make_error(KDA_ERROR_INVALID_ARGUMENT, "params: expected a non-null pointer, got NULL");
  if (params->struct_size != sizeof(kda_fwd_params))
    return make_error(KDA_ERROR_INVALID_ARGUMENT, "params.struct_size: expected %zu (call kda_fwd_params_init), got %u",
                      sizeof(kda_fwd_params), params->struct_size);
  return make_ok();
}

// The inputs of the shard (and, for the forward, its outputs and states) on the current device.
kda_status check_shard_pointers(const kda_fwd_params& p, bool forward, int device) {
  const kda::NamedTensor tensors[] = {{"q", &p.q},          {"k", &p.k},
                                      {"v", &p.v},          {"g", &p.g},
                                      {"beta", &p.beta},    {"A_log", &p.A_log},
                                      {"dt_bias", &p.dt_bias}, {"cu_seqlens", &p.cu_seqlens},
                                      {"out", &p.out},      {"initial_state", &p.initial_state},
                                      {"final_state", &p.final_state}};
  return kda::check_device_tensors(tensors, forward ? 11 : 8, device);
}

// The workspace on the host (size, pointer, alignment), before the device is looked at, as kda_fwd
// does; the memory rules on it come next (memory_rules.h).
kda_status check_workspace_host(void* workspace, size_t bytes, size_t needed, const char* query) {
  if (bytes < needed)
    return make_error(KDA_ERROR_WORKSPACE_TOO_SMALL, "workspace: expected at least %zu bytes (%s), got %zu", needed,
                      query, bytes);
  if (needed == 0) return make_ok();
  if (workspace == nullptr)
    return make_error(KDA_ERROR_INVALID_ARGUMENT, "workspace: expected %zu bytes of device memory, got NULL", needed);
  if (reinterpret_cast<uintptr_t>(workspace) % 256 != 0)
    return make_error(KDA_ERROR_INVALID_ARGUMENT, "workspace: expected a 256-byte aligned pointer, got %p", workspace);
  return make_ok();
}

}  // namespace

extern "C" {

kda_status kda_segment_transition_workspace_size(const kda_fwd_params* params, kda_tensor D, kda_tensor M,
                                                 size_t* bytes) {
  if (bytes == nullptr) return make_error(KDA_ERROR_INVALID_ARGUMENT, "bytes: expected a non-null pointer, got NULL");
  KDA_RETURN_IF_ERROR(check_params_struct(params));
  const kda_fwd_params local = kda::transition_params(*params);
  kda::TransitionProblem tp;
  KDA_RETURN_IF_ERROR(kda::validate_transition(&local, D, M, kda::ValidateMode::kShapesOnly, &tp));
  *bytes = kda::sm90::transition_workspace_bytes(tp, kda::sm90::transition_plan(tp));
  return make_ok();
}

kda_status kda_segment_transition(const kda_fwd_params* params, kda_tensor D, kda_tensor M, void* workspace,
                                  size_t workspace_bytes, kda_stream_t stream) {
  // Everything the host can check comes first (arguments, memory rules, workspace), then the device.
  KDA_RETURN_IF_ERROR(check_params_struct(params));
  const kda_fwd_params local = kda::transition_params(*params);
  kda::TransitionProblem tp;
  KDA_RETURN_IF_ERROR(kda::validate_transition(&local, D, M, kda::ValidateMode::kDevice, &tp));
  const kda::sm90::TransitionPlan plan = kda::sm90::transition_plan(tp);
  const size_t needed = kda::sm90::transition_workspace_bytes(tp, plan);
  KDA_RETURN_IF_ERROR(
      check_workspace_host(workspace, workspace_bytes, needed, "kda_segment_transition_workspace_size"));
  // The workspace against what the transition reads and writes (out and the states are ignored).
  KDA_RETURN_IF_ERROR(kda::check_transition_workspace(local, D, M, workspace, needed));
  int device = -1;
  KDA_RETURN_IF_ERROR(kda::check_sm90_device(&device));
  if (!params->trusted_pointers) {
    KDA_RETURN_IF_ERROR(check_shard_pointers(local, false, device));
    const kda::NamedTensor dm[] = {{"D", &D}, {"M", &M}};
    KDA_RETURN_IF_ERROR(kda::check_device_tensors(dm, 2, device));
    if (needed > 0) KDA_RETURN_IF_ERROR(kda::check_device_pointer("workspace", workspace, needed, device));
  }
  return kda::sm90::segment_transition(tp, plan, workspace, stream);
}

kda_status kda_fwd_prepared(const kda_fwd_params* params, void* workspace, size_t workspace_bytes,
                            kda_stream_t stream) {
  kda::Problem problem;
  KDA_RETURN_IF_ERROR(kda::validate(params, kda::ValidateMode::kDevice, &problem));
  const kda::sm90::RecurrencePlan plan = kda::sm90::fwd_plan(problem);
  const size_t needed = kda::sm90::fwd_prepared_workspace_bytes(problem, plan);
  KDA_RETURN_IF_ERROR(
      check_workspace_host(workspace, workspace_bytes, needed, "kda_segment_transition_workspace_size"));
  // The workspace (holding the preparation) against every tensor of the call.
  KDA_RETURN_IF_ERROR(kda::check_workspace_overlaps(*params, workspace, needed));
  int device = -1;
  KDA_RETURN_IF_ERROR(kda::check_sm90_device(&device));
  if (!params->trusted_pointers) {
    KDA_RETURN_IF_ERROR(check_shard_pointers(*params, true, device));
    if (needed > 0) KDA_RETURN_IF_ERROR(kda::check_device_pointer("workspace", workspace, needed, device));
  }
  if (params->check_cu_seqlens && problem.varlen)
    KDA_RETURN_IF_ERROR(kda::sm90::check_cu_seqlens(problem, plan, true, workspace, stream));
  return kda::sm90::fwd_prepared(problem, plan, workspace, stream);
}

kda_status kda_combine_transitions(int64_t num_shards, kda_tensor D, kda_tensor M, kda_tensor initial_state,
                                   kda_tensor start_states, kda_tensor end_state, kda_stream_t stream) {
  kda::CombineProblem cp;
  KDA_RETURN_IF_ERROR(kda::validate_combine(num_shards, D, M, initial_state, start_states, end_state, true, &cp));
  int device = -1;
  KDA_RETURN_IF_ERROR(kda::check_sm90_device(&device));
  const kda::NamedTensor tensors[] = {
      {"D", &D}, {"M", &M}, {"initial_state", &initial_state}, {"start_states", &start_states}, {"end_state", &end_state}};
  KDA_RETURN_IF_ERROR(kda::check_device_tensors(tensors, 5, device));
  return kda::sm90::combine_transitions(cp, stream);
}

}  // extern "C"
