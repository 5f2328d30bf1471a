// The decode oracle (reference/decode_reference.h): kda_fwd's float64 recurrence over pool slots; the
// same code in float32 is the tests' transcription of the kernels' arithmetic.
#include <vector>

#include "reference/common.h"
#include "reference/decode_reference.h"

namespace kda::reference {

namespace {

template <class R>
void load_slot(const DecodeProblem& dp, int64_t slot, int64_t hv, R* S) {
  const kda_tensor& pool = dp.params->state_pool;
  const int64_t count = dp.pr.V * dp.pr.K;
  const int64_t base = slot * dp.pool_stride + hv * count;
  for (int64_t i = 0; i < count; ++i) S[i] = load_element<R>(pool, base + i);
}

// bf16 rounded to nearest even from the state's own precision (one rounding).
uint16_t state_to_bf16(double x) { return double_to_bf16(x); }
uint16_t state_to_bf16(float x) { return float_to_bf16(x); }

template <class R>
void store_slot(const DecodeProblem& dp, int64_t slot, int64_t hv, const R* S, double* pool_exact) {
  const kda_tensor& pool = dp.params->state_pool;
  const int64_t count = dp.pr.V * dp.pr.K;
  const int64_t base = slot * dp.pool_stride + hv * count;
  if (pool_exact != nullptr) {
    double* dst = pool_exact + (slot * dp.pr.HV + hv) * count;
    for (int64_t i = 0; i < count; ++i) dst[i] = S[i];
  }
  if (dp.pool_f32) {
    float* dst = static_cast<float*>(pool.data) + base;
    for (int64_t i = 0; i < count; ++i) dst[i] = static_cast<float>(S[i]);
  } else {
    uint16_t* dst = static_cast<uint16_t*>(pool.data) + base;
    for (int64_t i = 0; i < count; ++i) dst[i] = state_to_bf16(S[i]);
  }
}

template <class R>
void run_seq_head(const DecodeProblem& dp, int64_t n, int64_t hv, double* out_exact, double* pool_exact) {
  const Problem& pr = dp.pr;
  const kda_fwd_params& p = dp.fwd;
  const int64_t V = pr.V, K = pr.K;
  const SeqRange range = sequence_range(pr, n);
  const int64_t start = host_slot_index(dp, n, host_read_column(dp, n));
  R o[kHeadDim];
  if (!valid_slot(dp, start)) {  // padding: zeros out, no state access
    for (int64_t v = 0; v < V; ++v) o[v] = R(0);
    for (int64_t t = range.bos; t < range.eos; ++t) {
      store_out_row(p.out, t, hv, pr.T, V, o);
      if (out_exact != nullptr)
        for (int64_t v = 0; v < V; ++v) out_exact[(t * pr.HV + hv) * V + v] = 0.0;
    }
    return;
  }
  if (range.eos == range.bos) return;

  const HeadParams<R> hp = head_params<R>(pr, hv);
  std::vector<R> S(V * K);
  load_slot(dp, start, hv, S.data());
  TokenInputs<R> x;
  for (int64_t t = range.bos; t < range.eos; ++t) {
    load_token(pr, hp, t, hv, &x);
    recurrence_token(x, static_cast<R>(p.scale), V, K, S.data(), o);
    store_out_row(p.out, t, hv, pr.T, V, o);
    if (out_exact != nullptr)
      for (int64_t v = 0; v < V; ++v) out_exact[(t * pr.HV + hv) * V + v] = o[v];
    const int64_t col = t - range.bos;
    if (dp.indices_2d && col < dp.idx_cols) {
      const int64_t slot = host_slot_index(dp, n, col);
      if (valid_slot(dp, slot)) store_slot(dp, slot, hv, S.data(), pool_exact);
    }
  }
  if (!dp.indices_2d) store_slot(dp, start, hv, S.data(), pool_exact);
}

}  // namespace

kda_status decode_recurrence_f64(const DecodeProblem& problem, int num_threads, double* out_exact,
                                 double* pool_exact) {
  return for_each_seq_head(problem.pr.N, problem.pr.HV, num_threads, [&](int64_t n, int64_t hv) {
    run_seq_head<double>(problem, n, hv, out_exact, pool_exact);
  });
}

kda_status decode_recurrence_f32(const DecodeProblem& problem, int num_threads) {
  return for_each_seq_head(problem.pr.N, problem.pr.HV, num_threads, [&](int64_t n, int64_t hv) {
    run_seq_head<float>(problem, n, hv, nullptr, nullptr);
  });
}

}  // namespace kda::reference
