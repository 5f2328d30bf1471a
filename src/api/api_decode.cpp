// Entry points of the decode C API (flash_kda.h, "Decode and speculative verify"): validate, check
// the device and the pointers, the opt-in content check, then the SM90 launcher or the CPU
// reference.
#include <cstring>
#include <iterator>

#include "flash_kda/flash_kda.h"
#include "reference/decode_reference.h"
#include "src/api/decode_problem.h"
#include "src/api/device_checks.h"
#include "src/api/memory_rules.h"
#include "src/launch/decode_launch.h"

namespace {

kda_status check_pointers(const kda_decode_params& p, int device) {
  const kda::DecodeTensors tensors(p);
  return kda::check_device_tensors(tensors.t, std::size(tensors.t), device);
}

}  // namespace

extern "C" {

void kda_decode_params_init(kda_decode_params* params) {
  if (params == nullptr) return;
  kda_fwd_params defaults;
  kda_fwd_params_init(&defaults);
  std::memset(params, 0, sizeof(*params));
  params->struct_size = sizeof(kda_decode_params);
  params->scale = defaults.scale;
  params->lower_bound = defaults.lower_bound;
  params->gate = defaults.gate;
  params->beta_sigmoid = defaults.beta_sigmoid;
  params->qk_l2norm = defaults.qk_l2norm;
  params->allow_neg_eigval = defaults.allow_neg_eigval;
}

kda_status kda_decode(const kda_decode_params* params, kda_stream_t stream) {
  kda::DecodeProblem problem;
  KDA_RETURN_IF_ERROR(kda::validate_decode(params, kda::ValidateMode::kDevice, &problem));
  int device = -1;
  KDA_RETURN_IF_ERROR(kda::check_sm90_device(&device));
  if (!params->trusted_pointers) KDA_RETURN_IF_ERROR(check_pointers(*params, device));
  if (params->check_indices) {
    kda::DecodeCheckResult result;
    KDA_RETURN_IF_ERROR(kda::sm90::decode_check(problem, stream, &result));
    KDA_RETURN_IF_ERROR(kda::decode_check_status(problem, result));
  }
  return kda::sm90::decode(problem, stream);
}

kda_status kda_decode_cpu(const kda_decode_params* params, int32_t num_threads) {
  kda::DecodeProblem problem;
  KDA_RETURN_IF_ERROR(kda::validate_decode(params, kda::ValidateMode::kHost, &problem));
  if (params->check_indices)
    KDA_RETURN_IF_ERROR(kda::decode_check_status(problem, kda::check_decode_contents_host(problem)));
  // Always: packed sequences that overlap (two threads would write their shared output rows). Found by
  // the decode fuzz harness (tests/fuzz/fuzz_decode.cpp): outputs that changed with the thread count.
  KDA_RETURN_IF_ERROR(kda::check_decode_sequences_disjoint_host(problem));
  return kda::reference::decode_recurrence_f64(problem, num_threads);
}

}  // extern "C"
