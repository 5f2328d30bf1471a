// Float64 transitions of pieces of a sequence (transition_reference.h): the token recurrence of
// recurrence_f64.cpp, once from a zero state with the values (D) and once on the rows of the
// identity with zero values (Mᵀ, transposed at the end).
#include <algorithm>
#include <cmath>
#include <vector>

#include "reference/common.h"
#include "reference/transition_reference.h"

namespace kda::reference {

namespace {

// One token on `rows` state rows of K columns: S <- S·Diag(e^a); S <- S + b (v - S k̂) k̂ᵀ, with
// v = 0 when `values` is null.
void token_step(double* S, int64_t rows, int64_t K, const TokenInputs<double>& x, const double* decay,
                const double* values) {
  for (int64_t r = 0; r < rows; ++r) {
    double* s = S + r * K;
    double sk = 0.0;
    for (int64_t k = 0; k < K; ++k) {
      s[k] *= decay[k];
      sk += s[k] * x.k[k];
    }
    const double u = x.b * ((values != nullptr ? values[r] : 0.0) - sk);
    for (int64_t k = 0; k < K; ++k) s[k] += u * x.k[k];
  }
}

}  // namespace

void transition_f64(const Problem& pr, int64_t n, int64_t hv, int64_t t0, int64_t t1, double* D, double* M) {
  const int64_t V = pr.V, K = pr.K;
  const HeadParams<double> hp = head_params<double>(pr, hv);
  const SeqRange range = sequence_range(pr, n);
  const int64_t len = range.eos - range.bos;
  t0 = std::clamp<int64_t>(t0, 0, len);
  t1 = std::clamp<int64_t>(t1, t0, len);
  std::vector<double> Mt(static_cast<size_t>(K * K), 0.0);
  for (int64_t k = 0; k < K; ++k) Mt[k * K + k] = 1.0;
  std::fill(D, D + V * K, 0.0);
  TokenInputs<double> x;
  double decay[kHeadDim];
  for (int64_t t = range.bos + t0; t < range.bos + t1; ++t) {
    load_token(pr, hp, t, hv, &x);
    for (int64_t k = 0; k < K; ++k) decay[k] = std::exp(x.a[k]);
    token_step(D, V, K, x, decay, x.v);
    token_step(Mt.data(), K, K, x, decay, nullptr);
  }
  for (int64_t i = 0; i < K; ++i)
    for (int64_t j = 0; j < K; ++j) M[i * K + j] = Mt[j * K + i];
}

void apply_transition_f64(const double* D, const double* M, double* S) {
  constexpr int64_t n = kHeadDim;
  std::vector<double> row(n);
  for (int64_t v = 0; v < n; ++v) {
    for (int64_t i = 0; i < n; ++i) {
      double acc = D[v * n + i];
      for (int64_t j = 0; j < n; ++j) acc += S[v * n + j] * M[i * n + j];
      row[i] = acc;
    }
    std::copy(row.begin(), row.end(), S + v * n);
  }
}

}  // namespace kda::reference
