// The float64 and emulated-kernel oracles of host params (host_reference.h).
#include "tests/host_reference.h"

#include <limits>
#include <stdexcept>

#include "reference/common.h"
#include "src/api/problem.h"
#include "tests/golden_io.h"
#include "tests/kernel_rounding.h"

namespace kda::test {

namespace {
Problem validated(const kda_fwd_params& host) {
  Problem pr;
  const kda_status st = validate(&host, ValidateMode::kHost, &pr);
  if (st.code != KDA_OK) throw std::runtime_error(st.message);
  return pr;
}
}  // namespace

ExactReference reference_f64(const kda_fwd_params& host) {
  const Problem pr = validated(host);
  ExactReference r;
  r.out.assign(static_cast<size_t>(pr.T_total * pr.HV * pr.V), 0.0);
  r.final_state.assign(static_cast<size_t>(pr.N * pr.HV * pr.V * pr.K), 0.0);
  const kda_status st = reference::fwd_recurrence_f64_ex(pr, 0, r.out.data(), r.final_state.data());
  if (st.code != KDA_OK) throw std::runtime_error(st.message);
  return r;
}

void run_chunked_f32(const kda_fwd_params& host, const reference::ChunkedRounding& rounding, float* out_exact,
                     float* state_exact) {
  const Problem pr = validated(host);
  const kda_status st = reference::fwd_chunked_f32_ex(pr, rounding, 0, out_exact, state_exact);
  if (st.code != KDA_OK) throw std::runtime_error(st.message);
}

void run_emulated_kernel(const kda_fwd_params& host) { run_chunked_f32(host, kernel_rounding()); }

RunErrors errors_against(const RandomProblem& p, const ExactReference& exact, bool in_place) {
  RunErrors e;
  const std::vector<double> out = bf16_to_f64(p.out);
  e.out = rel_l2(out, exact.out);  // rows outside every sequence are 0 on both sides
  e.non_finite = count_non_finite(out);
  const kda_dtype d = p.spec.final_state;
  if (d != KDA_DTYPE_NONE) {
    const std::vector<double> state = d == KDA_DTYPE_F32 ? f32_to_f64(in_place ? p.initial_f32 : p.final_f32)
                                                         : bf16_to_f64(in_place ? p.initial_bf16 : p.final_bf16);
    e.state = rel_l2(state, exact.final_state);
    e.non_finite += count_non_finite(state);
  }
  return e;
}

RunErrors golden_errors(const GoldenCase& c, const HostOutputs& outs) {
  RunErrors e;
  const std::vector<double> out = bf16_to_f64(outs.out), state = f32_to_f64(outs.final_state);
  e.out = rel_l2(out, c.find("expected_o")->to_f64());
  e.state = rel_l2(state, c.find("expected_final_state")->to_f64());
  e.non_finite = count_non_finite(out) + count_non_finite(state);
  return e;
}

RunErrors rounded_golden_errors(const GoldenCase& c, const reference::ChunkedRounding& rounding) {
  HostOutputs outs = make_host_outputs(c, 0xffff, std::numeric_limits<float>::quiet_NaN());
  run_chunked_f32(make_host_params(c, &outs), rounding);
  return golden_errors(c, outs);
}

RunErrors emulated_golden_errors(const GoldenCase& c) { return rounded_golden_errors(c, kernel_rounding()); }

}  // namespace kda::test
