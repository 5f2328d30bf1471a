// The float64 and emulated-kernel oracles of host params (host_reference.h).
#include "tests/host_reference.h"

#include <algorithm>
#include <limits>
#include <utility>
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

namespace {
// Row `row` (fixed batch) and tokens [t0, t1) of a [B, T, ...] view, as a one-row view.
kda_tensor token_rows(kda_tensor t, int64_t row, int64_t t0, int64_t t1) {
  const int64_t elem = t.dtype == KDA_DTYPE_F32 ? 4 : 2;
  t.data = static_cast<char*>(t.data) + (row * t.stride[0] + t0 * t.stride[1]) * elem;
  t.shape[0] = 1;
  t.shape[1] = t1 - t0;
  return t;
}

// Sequence n's rows of a [N, HV, V, K] state view, as a one-sequence view (an absent state stays absent).
kda_tensor state_row(kda_tensor t, int64_t n) {
  if (t.data == nullptr) return t;
  t.data = static_cast<char*>(t.data) + n * t.stride[0] * (t.dtype == KDA_DTYPE_F32 ? 4 : 2);
  t.shape[0] = 1;
  return t;
}
}  // namespace

void run_emulated_sharded(const kda_fwd_params& host, const std::vector<int64_t>& cuts,
                          const reference::ChunkedRounding& rounding) {
  const Problem pr = validated(host);
  const int64_t tokens = pr.varlen ? pr.T_total : pr.T;
  auto cu = [&](int64_t i) {
    return host.cu_seqlens.dtype == KDA_DTYPE_I32 ? int64_t{static_cast<const int32_t*>(host.cu_seqlens.data)[i]}
                                                  : static_cast<const int64_t*>(host.cu_seqlens.data)[i];
  };
  if (cuts.size() < 2 || cuts.front() != 0 || cuts.back() != tokens)
    throw std::runtime_error("run_emulated_sharded: the cuts must run from 0 to the tokens' end");
  for (size_t i = 1; i < cuts.size(); ++i)
    if (cuts[i] <= cuts[i - 1]) throw std::runtime_error("run_emulated_sharded: the cuts must increase strictly");
  const int64_t state_elems = pr.HV * pr.V * pr.K;
  const int64_t shape[4] = {1, pr.HV, pr.V, pr.K};
  std::vector<float> carried(static_cast<size_t>(state_elems)), next(carried.size());
  for (int64_t n = 0; n < pr.N; ++n) {
    const int64_t row = pr.varlen ? 0 : n;
    const int64_t s0 = pr.varlen ? cu(n) : 0, s1 = pr.varlen ? cu(n + 1) : pr.T;
    std::vector<std::pair<int64_t, int64_t>> pieces;
    for (size_t r = 0; r + 1 < cuts.size(); ++r) {
      const int64_t a = std::max(s0, cuts[r]), b = std::min(s1, cuts[r + 1]);
      if (b > a) pieces.emplace_back(a, b);
    }
    const kda_tensor init = state_row(host.initial_state, n), fin = state_row(host.final_state, n);
    if (pieces.empty()) {  // an empty sequence passes its initial state through
      if (fin.data == nullptr) continue;
      if (fin.dtype != KDA_DTYPE_F32)
        throw std::runtime_error("run_emulated_sharded: an empty sequence needs an fp32 final state");
      float* dst = static_cast<float*>(fin.data);
      for (int64_t i = 0; i < state_elems; ++i)
        dst[i] = init.data != nullptr ? reference::load_element<float>(init, i) : 0.0f;
      continue;
    }
    for (size_t i = 0; i < pieces.size(); ++i) {
      const bool last = i + 1 == pieces.size();
      const auto [a, b] = pieces[i];
      kda_fwd_params sp = host;
      sp.cu_seqlens = kda_tensor{};
      for (kda_tensor* t : {&sp.q, &sp.k, &sp.v, &sp.g, &sp.beta, &sp.out}) *t = token_rows(*t, row, a, b);
      sp.initial_state = i == 0 ? init : kda_tensor_contiguous(carried.data(), KDA_DTYPE_F32, 4, shape);
      // The last piece writes the sequence's final state (if any); the others the next start state.
      sp.final_state = last ? fin : kda_tensor_contiguous(next.data(), KDA_DTYPE_F32, 4, shape);
      reference::ChunkedRounding r = rounding;
      if (!last) r.split_update_last_chunks = 0;
      run_chunked_f32(sp, r);
      if (!last) carried.swap(next);
    }
  }
}

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
