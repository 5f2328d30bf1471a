// The independent float64 transcription of the recurrence (see naive_oracle.h).
#include "tests/naive_oracle.h"

#include <cmath>

namespace kda::test {

void naive_recurrence(const GoldenCase& c, std::vector<double>* out, std::vector<double>* state) {
  const int64_t K = c.K, V = c.V, HV = c.HV, H = c.H, T = c.T;
  auto get = [&](const char* name) {
    const HostArray* a = c.find(name);
    return a == nullptr ? std::vector<double>() : a->to_f64();
  };
  const std::vector<double> q = get("q"), k = get("k"), v = get("v"), g = get("g"), beta = get("beta");
  const std::vector<double> A_log = get("A_log"), dt_bias = get("dt_bias"), S0 = get("initial_state");
  const std::vector<double> cu = get("cu_seqlens");
  out->assign(static_cast<size_t>(c.B * T * HV * V), 0.0);
  state->assign(static_cast<size_t>(c.N * HV * V * K), 0.0);

  std::vector<double> S(V * K), qh(K), kh(K), decay(K), u(V);
  for (int64_t n = 0; n < c.N; ++n) {
    const int64_t first = cu.empty() ? n * T : static_cast<int64_t>(cu[n]);
    const int64_t last = cu.empty() ? (n + 1) * T : static_cast<int64_t>(cu[n + 1]);
    for (int64_t hv = 0; hv < HV; ++hv) {
      const int64_t h = hv / (HV / H);
      const double rate = A_log.empty() ? 1.0 : std::exp(A_log[hv]);
      for (int64_t i = 0; i < V * K; ++i) S[i] = S0.empty() ? 0.0 : S0[(n * HV + hv) * V * K + i];
      for (int64_t tok = first; tok < last; ++tok) {  // tok: index into the B*T rows
        double qq = 0, kk = 0;
        for (int64_t j = 0; j < K; ++j) {
          qh[j] = q[(tok * H + h) * K + j];
          kh[j] = k[(tok * H + h) * K + j];
          qq += qh[j] * qh[j];
          kk += kh[j] * kh[j];
        }
        if (c.qk_l2norm) {
          for (int64_t j = 0; j < K; ++j) {
            qh[j] /= std::sqrt(qq + 1e-6);
            kh[j] /= std::sqrt(kk + 1e-6);
          }
        }
        for (int64_t j = 0; j < K; ++j) {
          const double x = g[(tok * HV + hv) * K + j] + (c.gate_in_kernel && !dt_bias.empty() ? dt_bias[hv * K + j] : 0.0);
          double a;
          if (!c.gate_in_kernel)
            a = x;  // already the log-decay
          else if (c.has_lower_bound)
            a = c.lower_bound / (1.0 + std::exp(-rate * x));
          else
            a = -rate * (std::fmax(x, 0.0) + std::log1p(std::exp(-std::fabs(x))));
          decay[j] = std::exp(a);
        }
        const double bl = beta[tok * HV + hv];
        const double b = c.beta_sigmoid ? 1.0 / (1.0 + std::exp(-bl)) : bl;
        // S <- S Diag(exp(a)); u = b (v - S k); S <- S + u kᵀ; o = scale S q.
        for (int64_t r = 0; r < V; ++r)
          for (int64_t j = 0; j < K; ++j) S[r * K + j] *= decay[j];
        for (int64_t r = 0; r < V; ++r) {
          double sk = 0;
          for (int64_t j = 0; j < K; ++j) sk += S[r * K + j] * kh[j];
          u[r] = b * (v[(tok * HV + hv) * V + r] - sk);
        }
        for (int64_t r = 0; r < V; ++r) {
          double sq = 0;
          for (int64_t j = 0; j < K; ++j) {
            S[r * K + j] += u[r] * kh[j];
            sq += S[r * K + j] * qh[j];
          }
          (*out)[(tok * HV + hv) * V + r] = c.scale * sq;
        }
      }
      for (int64_t i = 0; i < V * K; ++i) (*state)[(n * HV + hv) * V * K + i] = S[i];
    }
  }
}

}  // namespace kda::test
