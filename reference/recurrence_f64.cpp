// The oracle: KDA forward as a token-by-token recurrence in float64 (docs/design.md §1).
// Per sequence n and value head hv, with the state S [V, K] (V-first, K contiguous):
//   S <- S Diag(exp(a_t));  S <- S + b_t (v_t - S k̂_t) k̂_tᵀ;  o_t = scale S q̂_t.
// Inputs are converted exactly (bf16 -> float -> double); `out` is rounded to bf16 once, from
// double, to nearest even; the final state is rounded once to its dtype.
#include <cmath>
#include <vector>

#include "reference/common.h"
#include "reference/reference.h"

namespace kda::reference {

namespace {

void run_seq_head(const Problem& pr, int64_t n, int64_t hv, double* out_exact, double* state_exact) {
  const kda_fwd_params& p = *pr.params;
  const int64_t V = pr.V, K = pr.K;
  const double scale = p.scale;
  const HeadParams<double> hp = head_params<double>(pr, hv);
  const SeqRange range = sequence_range(pr, n);

  std::vector<double> S(V * K);
  load_state(pr, p.initial_state, n, hv, S.data());
  TokenInputs<double> x;
  double o[kHeadDim];

  for (int64_t t = range.bos; t < range.eos; ++t) {
    load_token(pr, hp, t, hv, &x);
    recurrence_token(x, scale, V, K, S.data(), o);
    store_out_row(p.out, t, hv, pr.T, V, o);
    if (out_exact != nullptr) {
      double* dst = out_exact + (t * pr.HV + hv) * V;
      for (int64_t v = 0; v < V; ++v) dst[v] = o[v];
    }
  }

  store_state(pr, p.final_state, n, hv, S.data());
  if (state_exact != nullptr) {
    double* dst = state_exact + (n * pr.HV + hv) * V * K;
    for (int64_t i = 0; i < V * K; ++i) dst[i] = S[i];
  }
}

}  // namespace

kda_status fwd_recurrence_f64_ex(const Problem& problem, int num_threads, double* out_exact, double* state_exact) {
  return for_each_seq_head(problem.N, problem.HV, num_threads, [&](int64_t n, int64_t hv) {
    run_seq_head(problem, n, hv, out_exact, state_exact);
  });
}

kda_status fwd_recurrence_f64(const Problem& problem, int num_threads) {
  return fwd_recurrence_f64_ex(problem, num_threads, nullptr, nullptr);
}

}  // namespace kda::reference
