// The algebra of context parallelism across GPUs (docs/design.md §3.4) on the CPU, in float64:
// a piece of a sequence maps S_start to S_start·Mᵀ + D (reference/transition_reference.h), M is the
// product of the per-token maps (I - b k̂k̂ᵀ)·Diag(e^a) with the latest token on the left, and the
// pieces of a sequence, combined from its initial state, give the whole run's final state (and the
// last piece run from the combined start state gives the whole run's outputs).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "reference/common.h"
#include "reference/transition_reference.h"
#include "src/api/problem.h"
#include "tests/golden_io.h"
#include "tests/random_problem.h"

namespace kda::test {
namespace {

constexpr int64_t D = 128;

Problem validated(const kda_fwd_params& p) {
  Problem pr;
  const kda_status st = validate(&p, ValidateMode::kHost, &pr);
  EXPECT_EQ(st.code, KDA_OK) << st.message;
  return pr;
}

// The whole run in float64: out as [B*T, HV, V], final states [N, HV, V, K].
struct Whole {
  std::vector<double> out, state;
};
Whole whole_run(RandomProblem& p) {
  kda_fwd_params params = p.params();
  const Problem pr = validated(params);
  Whole w;
  w.out.assign(static_cast<size_t>(pr.T_total * pr.HV * D), 0.0);
  w.state.assign(static_cast<size_t>(pr.N * pr.HV * D * D), 0.0);
  EXPECT_EQ(reference::fwd_recurrence_f64_ex(pr, 1, w.out.data(), w.state.data()).code, KDA_OK);
  return w;
}

// The state of (n, hv) composed over the pieces [cuts[i], cuts[i+1]) from its initial state.
std::vector<double> composed_state(RandomProblem& p, int64_t n, int64_t hv, const std::vector<int64_t>& cuts) {
  kda_fwd_params params = p.params();
  const Problem pr = validated(params);
  std::vector<double> S(static_cast<size_t>(D * D));
  reference::load_state(pr, params.initial_state, n, hv, S.data());
  std::vector<double> Dm(static_cast<size_t>(D * D)), Mm(static_cast<size_t>(D * D));
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    reference::transition_f64(pr, n, hv, cuts[i], cuts[i + 1], Dm.data(), Mm.data());
    reference::apply_transition_f64(Dm.data(), Mm.data(), S.data());
  }
  return S;
}

std::vector<double> slice(const std::vector<double>& x, size_t offset, size_t count) {
  return std::vector<double>(x.begin() + static_cast<std::ptrdiff_t>(offset),
                             x.begin() + static_cast<std::ptrdiff_t>(offset + count));
}

TEST(CpAlgebra, MIsTheProductOfTheTokenMaps) {
  ProblemSpec s;
  s.T = 3;
  s.lower_bound = -0.5f;
  s.seed = 11;
  RandomProblem p = make_random_problem(s);
  kda_fwd_params params = p.params();
  const Problem pr = validated(params);
  std::vector<double> Dm(D * D), M(D * D);
  reference::transition_f64(pr, 0, 0, 0, 3, Dm.data(), M.data());

  // Expected: A2·A1·A0 with A_t = (I - b k̂k̂ᵀ)·Diag(e^a_t).
  std::vector<double> P(D * D, 0.0), A(D * D), Q(D * D);
  for (int64_t i = 0; i < D; ++i) P[i * D + i] = 1.0;
  const reference::HeadParams<double> hp = reference::head_params<double>(pr, 0);
  reference::TokenInputs<double> x;
  for (int64_t t = 0; t < 3; ++t) {
    reference::load_token(pr, hp, t, 0, &x);
    for (int64_t i = 0; i < D; ++i)
      for (int64_t j = 0; j < D; ++j) A[i * D + j] = ((i == j ? 1.0 : 0.0) - x.b * x.k[i] * x.k[j]) * std::exp(x.a[j]);
    for (int64_t i = 0; i < D; ++i)
      for (int64_t j = 0; j < D; ++j) {
        double acc = 0.0;
        for (int64_t m = 0; m < D; ++m) acc += A[i * D + m] * P[m * D + j];
        Q[i * D + j] = acc;
      }
    P = Q;
  }
  double worst = 0.0;
  for (int64_t i = 0; i < D * D; ++i) worst = std::max(worst, std::fabs(M[i] - P[i]));
  EXPECT_LT(worst, 1e-14);
  EXPECT_GT(std::fabs(M[0]), 1e-3);  // not trivially small: the convention is pinned
}

TEST(CpAlgebra, PiecesComposeToTheWholeRun) {
  struct Case {
    kda_gate gate;
    float lower_bound;
    int64_t H, HV;
    kda_dtype init;
  };
  const Case cases[] = {{KDA_GATE_BOUNDED, -5.0f, 2, 2, KDA_DTYPE_F32},
                        {KDA_GATE_BOUNDED, -0.1f, 1, 2, KDA_DTYPE_F32},  // slow decay, GVA
                        {KDA_GATE_SOFTPLUS, 0.0f, 2, 2, KDA_DTYPE_BF16},
                        {KDA_GATE_BOUNDED, -1.0f, 1, 1, KDA_DTYPE_NONE}};
  // Pieces: chunk-aligned or not, an empty one, one token.
  const std::vector<int64_t> cuts = {0, 16, 16, 50, 51, 130, 181};
  int seed = 20;
  for (const Case& c : cases) {
    ProblemSpec s;
    s.T = 181;
    s.H = c.H;
    s.HV = c.HV;
    s.gate = c.gate;
    s.lower_bound = c.lower_bound;
    s.initial_state = c.init;
    s.seed = static_cast<uint64_t>(seed++);
    RandomProblem p = make_random_problem(s);
    const Whole w = whole_run(p);
    for (int64_t hv = 0; hv < s.HV; ++hv) {
      const std::vector<double> S = composed_state(p, 0, hv, cuts);
      const double err = rel_l2(S, slice(w.state, static_cast<size_t>(hv * D * D), D * D));
      std::printf("[ errors ] gate %d lb %.1f hv %lld: composed vs whole final state %.2e\n", static_cast<int>(c.gate),
                  c.lower_bound, static_cast<long long>(hv), err);
      EXPECT_LT(err, 1e-12);
    }
  }
}

TEST(CpAlgebra, VarlenSequencePieces) {
  ProblemSpec s;
  s.T = 230;
  s.H = s.HV = 2;
  s.lower_bound = -0.3f;
  s.cu_seqlens = {0, 40, 190, 230};
  s.seed = 31;
  RandomProblem p = make_random_problem(s);
  const Whole w = whole_run(p);
  for (int64_t n = 0; n < 3; ++n)
    for (int64_t hv = 0; hv < 2; ++hv) {
      const std::vector<double> S = composed_state(p, n, hv, {0, 17, 100, 150, 1000});  // clamped to the length
      EXPECT_LT(rel_l2(S, slice(w.state, static_cast<size_t>((n * 2 + hv) * D * D), D * D)), 1e-12) << n << " " << hv;
    }
}

TEST(CpAlgebra, LastPieceFromTheCombinedStartGivesTheWholeRunsOutputs) {
  ProblemSpec s;
  s.T = 150;
  s.H = 1;
  s.HV = 2;
  s.lower_bound = -0.2f;
  s.seed = 41;
  RandomProblem p = make_random_problem(s);
  const Whole w = whole_run(p);
  const int64_t t0 = 70;  // the last piece: tokens [70, 150)
  std::vector<float> start(static_cast<size_t>(s.HV * D * D));
  for (int64_t hv = 0; hv < s.HV; ++hv) {
    const std::vector<double> S = composed_state(p, 0, hv, {0, 33, t0});
    for (int64_t i = 0; i < D * D; ++i) start[static_cast<size_t>(hv * D * D + i)] = static_cast<float>(S[i]);
  }
  // The piece as its own problem (views of the same buffers from token t0), from `start`.
  kda_fwd_params piece = p.params();
  const int64_t T1 = s.T - t0;
  const int64_t qk_shape[4] = {1, T1, s.H, D}, v_shape[4] = {1, T1, s.HV, D}, st_shape[4] = {1, s.HV, D, D};
  piece.q = kda_tensor_contiguous(p.q.data() + t0 * s.H * D, KDA_DTYPE_BF16, 4, qk_shape);
  piece.k = kda_tensor_contiguous(p.k.data() + t0 * s.H * D, KDA_DTYPE_BF16, 4, qk_shape);
  piece.v = kda_tensor_contiguous(p.v.data() + t0 * s.HV * D, KDA_DTYPE_BF16, 4, v_shape);
  piece.g = kda_tensor_contiguous(p.g.data() + t0 * s.HV * D, KDA_DTYPE_BF16, 4, v_shape);
  piece.beta = kda_tensor_contiguous(p.beta.data() + t0 * s.HV, KDA_DTYPE_BF16, 3, v_shape);
  std::vector<uint16_t> out(static_cast<size_t>(T1 * s.HV * D));
  piece.out = kda_tensor_contiguous(out.data(), KDA_DTYPE_BF16, 4, v_shape);
  piece.initial_state = kda_tensor_contiguous(start.data(), KDA_DTYPE_F32, 4, st_shape);
  std::vector<float> final_state(static_cast<size_t>(s.HV * D * D));
  piece.final_state = kda_tensor_contiguous(final_state.data(), KDA_DTYPE_F32, 4, st_shape);
  const Problem pr = validated(piece);
  std::vector<double> out_piece(static_cast<size_t>(T1 * s.HV * D)), state_piece(static_cast<size_t>(s.HV * D * D));
  ASSERT_EQ(reference::fwd_recurrence_f64_ex(pr, 1, out_piece.data(), state_piece.data()).code, KDA_OK);
  const double out_err = rel_l2(out_piece, slice(w.out, static_cast<size_t>(t0 * s.HV * D), out_piece.size()));
  const double state_err = rel_l2(state_piece, w.state);
  std::printf("[ errors ] last piece from the combined start: out %.2e final state %.2e\n", out_err, state_err);
  EXPECT_LT(out_err, 1e-6);  // the start state went through float32
  EXPECT_LT(state_err, 1e-6);
}

}  // namespace
}  // namespace kda::test
