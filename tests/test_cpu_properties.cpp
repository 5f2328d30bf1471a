// Properties of both CPU paths through the public API (kda_fwd_cpu), on synthetic problems:
// bitwise determinism (also across thread counts), strided inputs equal to contiguous copies,
// rows of `out` outside every sequence left untouched, bad cu_seqlens contents clamped without
// crashing, empty sequences passing the initial state through, T = 1 against the closed form, GVA
// against a manual expansion of the q/k heads, allow_neg_eigval, and unbounded gates without NaN/Inf.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "reference/common.h"
#include "tests/golden_io.h"
#include "tests/random_problem.h"

namespace kda::test {
namespace {

constexpr int64_t D = 128;

class CpuPaths : public ::testing::TestWithParam<kda_cpu_algorithm> {
 protected:
  void Run(RandomProblem* rp, int threads = 0) {
    kda_fwd_params p = rp->params();
    const kda_status s = kda_fwd_cpu(&p, GetParam(), threads);
    ASSERT_EQ(s.code, KDA_OK) << s.message;
  }
};

TEST_P(CpuPaths, BitwiseDeterministic) {
  ProblemSpec spec;
  spec.B = 2, spec.T = 45, spec.H = 2, spec.HV = 4;
  RandomProblem a = make_random_problem(spec), b = make_random_problem(spec);
  Run(&a, 1);
  Run(&b, 3);
  EXPECT_EQ(0, std::memcmp(a.out.data(), b.out.data(), a.out.size() * 2));
  EXPECT_EQ(0, std::memcmp(a.final_f32.data(), b.final_f32.data(), a.final_f32.size() * 4));
  Run(&b, 0);
  EXPECT_EQ(0, std::memcmp(a.out.data(), b.out.data(), a.out.size() * 2));
}

// A copy of a contiguous [d0, d1, d2, d3] bf16 tensor into a padded buffer with other strides.
struct Strided {
  std::vector<uint16_t> buf;
  int64_t stride[4];
};
Strided restride(const std::vector<uint16_t>& src, const int64_t* shape, int ndim, const int64_t* stride,
                 uint16_t fill) {
  Strided s;
  int64_t extent = 1;
  for (int d = 0; d < ndim; ++d) extent += (shape[d] - 1) * stride[d], s.stride[d] = stride[d];
  s.buf.assign(static_cast<size_t>(extent + 64), fill);
  int64_t idx[4] = {0, 0, 0, 0}, n = 1;
  for (int d = 0; d < ndim; ++d) n *= shape[d];
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i, off = 0;
    for (int d = ndim - 1; d >= 0; --d) idx[d] = rem % shape[d], rem /= shape[d];
    for (int d = 0; d < ndim; ++d) off += idx[d] * stride[d];
    s.buf[off] = src[i];
  }
  return s;
}

TEST_P(CpuPaths, StridedInputsMatchContiguous) {
  ProblemSpec spec;
  spec.B = 2, spec.T = 21, spec.H = 2, spec.HV = 2;
  RandomProblem rp = make_random_problem(spec);
  Run(&rp);
  const int64_t B = 2, T = 21, H = 2;
  const int64_t shape[4] = {B, T, H, D};
  // [B, H, T, K]-ordered storage with padded rows (as a transposed PyTorch view would be).
  const int64_t st[4] = {H * T * (D + 8) + 24, D + 8, T * (D + 8), 1};
  const int64_t beta_st[3] = {T * 2 * H + 5, 2 * H, 1};
  Strided q = restride(rp.q, shape, 4, st, 0x7fc0), k = restride(rp.k, shape, 4, st, 0x7fc0);
  Strided v = restride(rp.v, shape, 4, st, 0x7fc0), g = restride(rp.g, shape, 4, st, 0x7fc0);
  Strided beta = restride(rp.beta, shape, 3, beta_st, 0x7fc0);
  Strided out = restride(std::vector<uint16_t>(rp.out.size(), 0), shape, 4, st, 0xdead);
  std::vector<uint16_t> out_before = out.buf;

  RandomProblem copy = rp;
  copy.final_f32.assign(copy.final_f32.size(), 0.0f);
  kda_fwd_params p = copy.params();
  auto view = [](kda_tensor* t, Strided& s) {
    t->data = s.buf.data();
    for (int d = 0; d < t->ndim; ++d) t->stride[d] = s.stride[d];
  };
  view(&p.q, q), view(&p.k, k), view(&p.v, v), view(&p.g, g), view(&p.beta, beta), view(&p.out, out);
  const kda_status s = kda_fwd_cpu(&p, GetParam(), 0);
  ASSERT_EQ(s.code, KDA_OK) << s.message;
  EXPECT_EQ(copy.final_f32, rp.final_f32);
  // Every element of the strided out equals the contiguous one; the padding is untouched.
  Strided expect = restride(rp.out, shape, 4, st, 0xdead);
  EXPECT_EQ(out.buf, expect.buf);
}

TEST_P(CpuPaths, RowsOutsideSequencesUntouched) {
  ProblemSpec spec;
  spec.T = 40, spec.H = 1, spec.HV = 2;
  spec.cu_seqlens = {3, 10, 10, 31};  // tokens 0..2 and 31..39 belong to no sequence
  for (kda_dtype cu_dtype : {KDA_DTYPE_I64, KDA_DTYPE_I32}) {
    spec.cu_dtype = cu_dtype;
    RandomProblem rp = make_random_problem(spec);
    const uint16_t poison = 0xffff;  // a NaN pattern
    rp.out.assign(rp.out.size(), poison);
    Run(&rp);
    for (int64_t t = 0; t < 40; ++t) {
      const bool inside = t >= 3 && t < 31;
      for (int64_t i = 0; i < 2 * D; ++i) {
        const uint16_t x = rp.out[t * 2 * D + i];
        if (inside)
          ASSERT_TRUE(std::isfinite(reference::bf16_to_float(x))) << "token " << t;
        else
          ASSERT_EQ(x, poison) << "token " << t << " outside every sequence was written";
      }
    }
  }
}

TEST_P(CpuPaths, BadCuSeqlensContentsAreClamped) {
  // Non-decreasing contents outside [0, B*T] are clamped (as on the GPU): no crash, finite values.
  const std::vector<std::vector<int64_t>> clamped = {
      {0, 5, 1000},                        // past T
      {7, 12, 20},                         // not starting at 0
      {-9, 5, 20},                         // negative
      {25, 30},                            // entirely past T
      {-3, 0, 2147483647, 2147483647, 20 + 2147483647LL}  // both ends at once
  };
  for (const auto& cu : clamped) {
    for (kda_dtype cu_dtype : {KDA_DTYPE_I64, KDA_DTYPE_I32}) {
      if (cu_dtype == KDA_DTYPE_I32 && cu.back() > 2147483647) continue;
      ProblemSpec spec;
      spec.T = 20, spec.HV = 2, spec.H = 2;
      spec.cu_seqlens = cu;
      spec.cu_dtype = cu_dtype;
      RandomProblem rp = make_random_problem(spec);
      Run(&rp);
      for (uint16_t x : rp.out) ASSERT_TRUE(std::isfinite(reference::bf16_to_float(x)));
      for (float x : rp.final_f32) ASSERT_TRUE(std::isfinite(x));
    }
  }
}

// Decreasing entries make two sequences cover the same tokens: their rows of out would be written
// by two workers in either order. The CPU path reads cu_seqlens on the host, so it always rejects
// them, naming the entry (the GPU path does under check_cu_seqlens).
TEST_P(CpuPaths, DecreasingCuSeqlensAreRejected) {
  const std::vector<std::vector<int64_t>> bad = {{0, 10, 4, 20}, {0, -3, 2147483647, 20}, {0, 20, 0, 20}};
  for (const auto& cu : bad) {
    for (kda_dtype cu_dtype : {KDA_DTYPE_I64, KDA_DTYPE_I32}) {
      ProblemSpec spec;
      spec.T = 20, spec.HV = 2, spec.H = 2;
      spec.cu_seqlens = cu;
      spec.cu_dtype = cu_dtype;
      RandomProblem rp = make_random_problem(spec);
      kda_fwd_params p = rp.params();
      const kda_status s = kda_fwd_cpu(&p, GetParam(), 2);
      EXPECT_EQ(s.code, KDA_ERROR_INVALID_ARGUMENT) << s.message;
      EXPECT_NE(std::string(s.message).find("cu_seqlens: expected non-decreasing entries"), std::string::npos)
          << s.message;
    }
  }
  // The whole opt-in check on the host: the same messages as the GPU check.
  const std::vector<std::pair<std::vector<int64_t>, const char*>> checked = {
      {{3, 10, 20}, "cu_seqlens: expected cu_seqlens[0] = 0, got 3"},
      {{0, 10, 21}, "cu_seqlens: expected entries <= the packed length B*T = 20, got cu_seqlens[2] = 21"},
      {{0, 12, 11}, "got cu_seqlens[2] = 11 < cu_seqlens[1] = 12"}};
  for (const auto& [cu, message] : checked) {
    ProblemSpec spec;
    spec.T = 20;
    spec.cu_seqlens = cu;
    RandomProblem rp = make_random_problem(spec);
    kda_fwd_params p = rp.params();
    p.check_cu_seqlens = 1;
    const kda_status s = kda_fwd_cpu(&p, GetParam(), 1);
    EXPECT_EQ(s.code, KDA_ERROR_INVALID_ARGUMENT) << s.message;
    EXPECT_NE(std::string(s.message).find(message), std::string::npos) << s.message;
    p.check_cu_seqlens = 0;  // unchecked, only the decreasing one is an error
    EXPECT_EQ(kda_fwd_cpu(&p, GetParam(), 1).code == KDA_OK, cu[2] >= cu[1]) << s.message;
  }
}

TEST_P(CpuPaths, EmptySequencesPassInitialStateThrough) {
  for (kda_dtype init : {KDA_DTYPE_F32, KDA_DTYPE_BF16, KDA_DTYPE_NONE}) {
    for (kda_dtype fin : {KDA_DTYPE_F32, KDA_DTYPE_BF16}) {
      ProblemSpec spec;
      spec.T = 12, spec.HV = 2, spec.H = 1;
      spec.cu_seqlens = {0, 0, 12, 12};  // sequences 0 and 2 are empty
      spec.initial_state = init;
      spec.final_state = fin;
      RandomProblem rp = make_random_problem(spec);
      rp.final_f32.assign(rp.final_f32.size(), 123.0f);
      rp.final_bf16.assign(rp.final_bf16.size(), 0x42f6);
      Run(&rp);
      const int64_t per_seq = 2 * D * D;
      for (int64_t n : {0, 2}) {
        for (int64_t i = n * per_seq; i < (n + 1) * per_seq; ++i) {
          float expect = 0.0f;
          if (init == KDA_DTYPE_F32) expect = rp.initial_f32[i];
          if (init == KDA_DTYPE_BF16) expect = reference::bf16_to_float(rp.initial_bf16[i]);
          const float got = fin == KDA_DTYPE_F32 ? rp.final_f32[i] : reference::bf16_to_float(rp.final_bf16[i]);
          const float want = fin == KDA_DTYPE_F32 ? expect : reference::round_bf16(expect);
          ASSERT_EQ(got, want) << "sequence " << n << " element " << i;
        }
      }
    }
  }
}

// One token per sequence: S = S0·Diag(e^a) + b (v − S0' k̂) k̂ᵀ, o = scale·S q̂, in long double.
TEST_P(CpuPaths, SingleTokenMatchesClosedForm) {
  ProblemSpec spec;
  spec.B = 3, spec.T = 1, spec.H = 1, spec.HV = 1;
  RandomProblem rp = make_random_problem(spec);
  Run(&rp);
  kda_fwd_params p = rp.params();
  const long double ea = std::exp(static_cast<long double>(rp.A_log[0]));
  std::vector<double> ref_out, got_out;
  for (int64_t n = 0; n < 3; ++n) {
    long double q[D], k[D], sq = 0, sk = 0;
    for (int64_t i = 0; i < D; ++i) {
      q[i] = reference::bf16_to_float(rp.q[n * D + i]);
      k[i] = reference::bf16_to_float(rp.k[n * D + i]);
      sq += q[i] * q[i], sk += k[i] * k[i];
    }
    for (int64_t i = 0; i < D; ++i) q[i] /= std::sqrt(sq + 1e-6L), k[i] /= std::sqrt(sk + 1e-6L);
    const long double b = 1.0L / (1.0L + std::exp(-static_cast<long double>(reference::bf16_to_float(rp.beta[n]))));
    for (int64_t v = 0; v < D; ++v) {
      long double row[D], dot = 0;
      for (int64_t i = 0; i < D; ++i) {
        const long double gi = reference::bf16_to_float(rp.g[n * D + i]) + static_cast<long double>(rp.dt_bias[i]);
        const long double a = static_cast<long double>(p.lower_bound) / (1.0L + std::exp(-ea * gi));
        row[i] = rp.initial_f32[(n * D + v) * D + i] * std::exp(a);
        dot += row[i] * k[i];
      }
      const long double u = b * (reference::bf16_to_float(rp.v[n * D + v]) - dot);
      long double o = 0;
      for (int64_t i = 0; i < D; ++i) o += (row[i] + u * k[i]) * q[i];
      ref_out.push_back(static_cast<double>(o * static_cast<long double>(p.scale)));
      got_out.push_back(reference::bf16_to_float(rp.out[n * D + v]));
    }
  }
  EXPECT_LE(rel_l2(got_out, ref_out), 0x1p-9 + 2e-5);  // bf16 rounding of the output (+ float32 arithmetic)
}

// HV = 4 value heads on H = 2 q/k heads equals HV = H = 4 with each q/k head repeated.
TEST_P(CpuPaths, GroupedValueHeadsMatchManualExpansion) {
  ProblemSpec spec;
  spec.T = 37, spec.H = 2, spec.HV = 4, spec.initial_state = KDA_DTYPE_BF16;
  RandomProblem gva = make_random_problem(spec);
  spec.H = 4;
  RandomProblem full = make_random_problem(spec);  // same v, g, beta, states draws are replaced below
  full.v = gva.v, full.g = gva.g, full.beta = gva.beta, full.A_log = gva.A_log, full.dt_bias = gva.dt_bias;
  full.initial_bf16 = gva.initial_bf16;
  for (int64_t t = 0; t < 37; ++t)
    for (int64_t hv = 0; hv < 4; ++hv)
      for (int64_t i = 0; i < D; ++i) {
        full.q[(t * 4 + hv) * D + i] = gva.q[(t * 2 + hv / 2) * D + i];
        full.k[(t * 4 + hv) * D + i] = gva.k[(t * 2 + hv / 2) * D + i];
      }
  Run(&gva);
  Run(&full);
  EXPECT_EQ(gva.out, full.out);
  EXPECT_EQ(gva.final_f32, full.final_f32);
}

// allow_neg_eigval doubles b: with beta given as a probability (beta_sigmoid = 0), the flag on
// equals the flag off with beta doubled (exact in bf16).
TEST_P(CpuPaths, AllowNegEigvalDoublesBeta) {
  ProblemSpec spec;
  spec.T = 40, spec.H = 1, spec.HV = 2;
  RandomProblem flag = make_random_problem(spec);
  for (uint16_t& b : flag.beta) b = reference::float_to_bf16(0.45f * reference::sigmoid(reference::bf16_to_float(b)));
  RandomProblem doubled = flag;
  for (uint16_t& b : doubled.beta) b = reference::float_to_bf16(2.0f * reference::bf16_to_float(b));
  kda_fwd_params pf = flag.params(), pd = doubled.params();
  pf.beta_sigmoid = pd.beta_sigmoid = 0;
  pf.allow_neg_eigval = 1;
  ASSERT_EQ(kda_fwd_cpu(&pf, GetParam(), 0).code, KDA_OK);
  ASSERT_EQ(kda_fwd_cpu(&pd, GetParam(), 0).code, KDA_OK);
  EXPECT_EQ(flag.out, doubled.out);
  EXPECT_EQ(flag.final_f32, doubled.final_f32);
}

// Very negative per-step decays (softplus with large arguments, preactivated log-decays down to
// ~-1e3): no NaN or Inf, and the two paths agree.
TEST(CpuPathsAgree, UnboundedGatesStayFinite) {
  for (kda_gate gate : {KDA_GATE_SOFTPLUS, KDA_GATE_PREACTIVATED}) {
    ProblemSpec spec;
    spec.T = 70, spec.H = 1, spec.HV = 2, spec.gate = gate, spec.g_scale = gate == KDA_GATE_SOFTPLUS ? 30.0f : 300.0f;
    RandomProblem f64 = make_random_problem(spec), f32 = make_random_problem(spec);
    kda_fwd_params p64 = f64.params(), p32 = f32.params();
    ASSERT_EQ(kda_fwd_cpu(&p64, KDA_CPU_RECURRENCE_F64, 0).code, KDA_OK);
    ASSERT_EQ(kda_fwd_cpu(&p32, KDA_CPU_CHUNKED_F32, 0).code, KDA_OK);
    const std::vector<double> o64 = bf16_to_f64(f64.out), o32 = bf16_to_f64(f32.out);
    EXPECT_EQ(count_non_finite(o32), 0u);
    EXPECT_EQ(count_non_finite(f32_to_f64(f32.final_f32)), 0u);
    EXPECT_LE(rel_l2(o32, o64), 0x1p-8);
    EXPECT_LE(rel_l2(f32_to_f64(f32.final_f32), f32_to_f64(f64.final_f32)), 1e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(Cpu, CpuPaths, ::testing::Values(KDA_CPU_RECURRENCE_F64, KDA_CPU_CHUNKED_F32),
                         [](const ::testing::TestParamInfo<kda_cpu_algorithm>& info) {
                           return std::string(info.param == KDA_CPU_RECURRENCE_F64 ? "RecurrenceF64" : "ChunkedF32");
                         });

}  // namespace
}  // namespace kda::test
