// The single pass (single_pass_kernel.cuh; docs/design.md §3.5) forced by params.single_pass =
// KDA_SINGLE_PASS_ALWAYS, which makes kda_fwd fail rather than fall back, so a passing test ran it:
// against the float64 recurrence across batch rows, packed sequences (cu_seqlens; a sequence of
// Inf / NaN leaves its neighbours untouched), partial chunks, grouped heads, state dtypes,
// gates' options and the L2 norm's rescaled path; next to the two kernels; bitwise deterministic, in
// place equal to out of place; and every problem it does not take refused by name. (Its pieces:
// test_gpu_single_pass_pieces.cpp. The whole GPU suite also runs on it: FLASH_KDA_TEST_SINGLE_PASS=always,
// gpu_harness.h.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "reference/common.h"
#include "tests/golden_io.h"
#include "tests/gpu/gpu_harness.h"
#include "tests/gpu/single_pass_checks.h"
#include "tests/random_problem.h"

namespace kda::test {
namespace {

using reference::bf16_to_float;
using reference::float_to_bf16;

// A fixed-length problem's name in messages.
std::string shape_name(const char* what, const ProblemSpec& s) {
  char name[96];
  std::snprintf(name, sizeof(name), "%s B%lld T%lld H%lld HV%lld", what, static_cast<long long>(s.B),
                static_cast<long long>(s.T), static_cast<long long>(s.H), static_cast<long long>(s.HV));
  return name;
}

TEST(GpuSinglePass, ShapesAgainstFloat64AndTheTwoKernels) {
  KDA_SKIP_WITHOUT_SM90();
  struct Shape {
    int64_t B, T, H, HV;
  };
  // Whole and partial last chunks, one token, fewer chunks than preparation warps and more than the
  // ring's slots (24), batch rows, grouped value heads.
  const Shape shapes[] = {{1, 16, 1, 1}, {1, 1, 2, 2},  {2, 45, 2, 2},   {1, 128, 1, 3}, {3, 100, 2, 4},
                          {1, 400, 1, 1}, {2, 513, 1, 2}, {1, 1024, 2, 2}, {4, 64, 4, 8}};
  uint64_t seed = 300;
  for (const Shape& sh : shapes) {
    const ProblemSpec s = fixed_spec(sh.B, sh.T, sh.H, sh.HV, ++seed);
    check_both_paths(s, shape_name("single pass", s).c_str());
  }
}

TEST(GpuSinglePass, PackedSequencesAgainstFloat64AndTheTwoKernels) {
  KDA_SKIP_WITHOUT_SM90();
  // Empty sequences, one token, partial chunks next to whole ones, a long one; int32 and int64 offsets.
  struct Packed {
    int64_t H, HV;
    std::vector<int64_t> cu;
  };
  // Up to 384 sequences run longest first (single_pass_kernel's longest_first), more in index order.
  std::vector<int64_t> many{0};
  for (int i = 0; i < 400; ++i) many.push_back(many.back() + (i * 7) % 41);
  const Packed cases[] = {{2, 2, {0, 0, 1, 16, 17, 33, 33, 100, 200}},
                          {1, 4, {0, 300, 301, 640}},
                          {2, 2, {0, 16, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256}},
                          {1, 1, {0, 1000, 1003, 1019, 1500}},
                          {1, 1, std::vector<int64_t>(many.begin(), many.begin() + 385)},
                          {1, 1, many}};
  uint64_t seed = 350;
  for (const Packed& pk : cases) {
    for (kda_dtype cu : {KDA_DTYPE_I64, KDA_DTYPE_I32}) {
      ProblemSpec s;
      s.B = 1;
      s.T = pk.cu.back();
      s.H = pk.H;
      s.HV = pk.HV;
      s.cu_seqlens = pk.cu;
      s.cu_dtype = cu;
      s.seed = ++seed;
      char name[96];
      std::snprintf(name, sizeof(name), "single pass packed, %zu sequences of %lld tokens, HV %lld, %s", pk.cu.size() - 1,
                    static_cast<long long>(s.T), static_cast<long long>(s.HV), cu == KDA_DTYPE_I64 ? "int64" : "int32");
      check_both_paths(s, name);
    }
  }
}

TEST(GpuSinglePass, NeighboursPoisonNothing) {
  KDA_SKIP_WITHOUT_SM90();
  // A packed batch whose middle sequence holds Inf and NaN in q, k, v and g: the sequences around it
  // (partial chunks next to it: their padding rows are its tokens) equal a run without it.
  ProblemSpec s;
  s.B = 1;
  s.T = 90;
  s.H = s.HV = 2;
  s.cu_seqlens = {0, 37, 51, 90};
  s.seed = 380;
  RandomProblem clean = make_random_problem(s);
  RandomProblem dirty = clean;
  const uint16_t inf = 0x7f80, nan = 0x7fc0;
  for (int64_t t = 37; t < 51; ++t)
    for (int64_t i = 0; i < s.H * 128; ++i) {
      dirty.q[t * s.H * 128 + i] = (i % 2) ? inf : nan;
      dirty.k[t * s.H * 128 + i] = (i % 3) ? nan : inf;
      dirty.v[t * s.HV * 128 + i] = inf;
      dirty.g[t * s.HV * 128 + i] = nan;
    }
  kda_fwd_params pc = clean.params(), pd = dirty.params();
  always(pc);
  always(pd);
  ASSERT_EQ(run_on_gpu(pc).code, KDA_OK);
  ASSERT_EQ(run_on_gpu(pd).code, KDA_OK);
  const size_t row = static_cast<size_t>(s.HV) * 128;
  for (int64_t t : {int64_t{0}, int64_t{36}, int64_t{51}, int64_t{89}})
    EXPECT_EQ(0, std::memcmp(&clean.out[t * row], &dirty.out[t * row], row * 2)) << "token " << t;
  const size_t unit = 128 * 128 * static_cast<size_t>(s.HV);
  EXPECT_EQ(0, std::memcmp(&clean.final_f32[0], &dirty.final_f32[0], unit * 4)) << "sequence 0";
  EXPECT_EQ(0, std::memcmp(&clean.final_f32[2 * unit], &dirty.final_f32[2 * unit], unit * 4)) << "sequence 2";
}

TEST(GpuSinglePass, StateDtypesAndOptions) {
  KDA_SKIP_WITHOUT_SM90();
  const kda_dtype kinds[3] = {KDA_DTYPE_NONE, KDA_DTYPE_BF16, KDA_DTYPE_F32};
  for (kda_dtype in : kinds)
    for (kda_dtype out : kinds) {
      ProblemSpec s;
      s.B = 2;
      s.T = 77;
      s.H = s.HV = 2;
      s.initial_state = in;
      s.final_state = out;
      s.seed = 400 + 3 * in + out;
      RandomProblem p = make_random_problem(s);
      char name[96];
      std::snprintf(name, sizeof(name), "single pass state in %d out %d", in, out);
      expect_close(name, gpu_vs_f64(p, always), 5e-3, out == KDA_DTYPE_BF16 ? 6e-3 : 4e-3);
    }
  struct Option {
    const char* name;
    void (*set)(kda_fwd_params&);
    bool without_A_log_dt_bias;
  };
  const Option options[] = {
      {"beta as a probability", [](kda_fwd_params& p) { p.beta_sigmoid = 0; }, false},
      {"allow_neg_eigval", [](kda_fwd_params& p) { p.allow_neg_eigval = 1; }, false},
      {"no L2 norm", [](kda_fwd_params& p) { p.qk_l2norm = 0; }, false},
      {"lower bound -1, scale 0.3", [](kda_fwd_params& p) { p.lower_bound = -1.0, p.scale = 0.3; }, false},
      {"no A_log and dt_bias", [](kda_fwd_params&) {}, true},
  };
  uint64_t seed = 500;
  for (const Option& o : options) {
    ProblemSpec s;
    s.B = 2;
    s.T = 61;
    s.H = 1;
    s.HV = 2;
    s.with_A_log = s.with_dt_bias = !o.without_A_log_dt_bias;
    s.seed = ++seed;
    RandomProblem p = make_random_problem(s);
    const bool raw_keys = std::strcmp(o.name, "no L2 norm") == 0;
    auto adjust = [&](kda_fwd_params& q) {
      o.set(q);
      if (raw_keys) q.beta_sigmoid = 0;  // b = beta, chosen below
      always(q);
    };
    if (raw_keys) {
      // Unnormalised keys (norm ~sqrt(128)) would make the delta rule expand: keys scaled down and b in
      // [0, ~1], so that b |k|² stays below 2.
      for (uint16_t& x : p.k) x = float_to_bf16(bf16_to_float(x) * 0.05f);
      for (uint16_t& x : p.beta) x = float_to_bf16(std::fabs(bf16_to_float(x)) * 0.3f);
    }
    expect_close((std::string("single pass, ") + o.name).c_str(), gpu_vs_f64(p, adjust), 5e-3, 5e-3);
  }
}

TEST(GpuSinglePass, Float32BetaAndRowsWhoseNormOverflows) {
  KDA_SKIP_WITHOUT_SM90();
  ProblemSpec s;
  s.B = 1;
  s.T = 48;
  s.H = s.HV = 2;
  s.seed = 600;
  RandomProblem p = make_random_problem(s);
  // Rows of q and k near the largest bf16 (sum of squares beyond float32): the rescaled path; a whole
  // row, one element and a row of a later chunk.
  const int64_t K = 128;
  auto row = [&](std::vector<uint16_t>& x, int64_t t, int64_t h) { return x.data() + (t * s.H + h) * K; };
  for (int64_t c = 0; c < K; ++c) row(p.q, 3, 0)[c] = float_to_bf16((c % 2 ? -1.0f : 1.0f) * 3.0e38f);
  row(p.k, 5, 1)[7] = float_to_bf16(-3.3e38f);
  for (int64_t c = 0; c < K; ++c) row(p.k, 40, 0)[c] = float_to_bf16(2.0e30f * static_cast<float>(c % 5));
  expect_close("single pass, rows near the largest bf16", gpu_vs_f64(p, always), 5e-3, 4e-3);
  // beta in float32 (the same values).
  std::vector<float> beta32(p.beta.size());
  for (size_t i = 0; i < beta32.size(); ++i) beta32[i] = bf16_to_float(p.beta[i]);
  RandomProblem p32 = p;
  expect_close("single pass, f32 beta", gpu_vs_f64(p32, [&](kda_fwd_params& q) {
                 q.beta.data = beta32.data();
                 q.beta.dtype = KDA_DTYPE_F32;
                 for (int d = 0; d < 4; ++d) q.beta.stride[d] = p.params().beta.stride[d];
                 always(q);
               }),
               5e-3, 4e-3);
  expect_identical(p, p32, "single pass: f32 beta vs its bf16 values");
}

TEST(GpuSinglePass, DeterministicAndInPlace) {
  KDA_SKIP_WITHOUT_SM90();
  ProblemSpec s;
  s.B = 3;
  s.T = 300;
  s.H = 2;
  s.HV = 4;
  s.seed = 700;
  RandomProblem a = make_random_problem(s);
  RandomProblem b = a;
  kda_fwd_params pa = a.params(), pb = b.params();
  always(pa);
  always(pb);
  ASSERT_EQ(run_on_gpu(pa, 3).code, KDA_OK);
  ASSERT_EQ(run_on_gpu(pb).code, KDA_OK);
  expect_identical(a, b, "single pass: repeated runs");
  // In place: final_state is initial_state's own buffer.
  RandomProblem c = make_random_problem(s);
  kda_fwd_params pc = c.params();
  pc.final_state.data = pc.initial_state.data;
  always(pc);
  ASSERT_EQ(run_on_gpu(pc).code, KDA_OK);
  EXPECT_EQ(0, std::memcmp(c.initial_f32.data(), a.final_f32.data(), a.final_f32.size() * 4)) << "in place";
  EXPECT_EQ(0, std::memcmp(c.out.data(), a.out.data(), a.out.size() * 2)) << "in place: out";
}

// Rows b0 .. b0 + nb - 1 of a fixed-length problem as a problem of their own (inputs, states, out).
RandomProblem batch_rows(const RandomProblem& p, int64_t b0, int64_t nb) {
  RandomProblem r = p;
  r.spec.B = nb;
  r.N = nb;
  const int64_t T = p.spec.T, H = p.spec.H, HV = p.spec.HV, S = 128 * 128;
  auto cut = [&](auto& dst, const auto& src, int64_t per_row) {
    dst.assign(src.begin() + b0 * per_row, src.begin() + (b0 + nb) * per_row);
  };
  cut(r.q, p.q, T * H * 128);
  cut(r.k, p.k, T * H * 128);
  cut(r.v, p.v, T * HV * 128);
  cut(r.g, p.g, T * HV * 128);
  cut(r.beta, p.beta, T * HV);
  cut(r.out, p.out, T * HV * 128);
  if (!p.initial_f32.empty()) cut(r.initial_f32, p.initial_f32, HV * S);
  if (!p.final_f32.empty()) cut(r.final_f32, p.final_f32, HV * S);
  if (!p.initial_bf16.empty()) cut(r.initial_bf16, p.initial_bf16, HV * S);
  if (!p.final_bf16.empty()) cut(r.final_bf16, p.final_bf16, HV * S);
  return r;
}

// More (sequence, head) units than SMs in whole chunks of at least kSinglePassWalkMinChunks: one CTA per
// SM walks its units in turn (single_pass_kernel.cuh's kWalk: the ring runs on across units, the
// preparation warps' dt_bias per unit, the consumers' states swapped at each boundary). Every unit must
// come out bitwise as when the same rows run in calls of few units (one CTA per unit, no walk), in place
// too, and the whole call close to float64.
TEST(GpuSinglePass, WalkingCtasMatchOneCtaPerUnit) {
  KDA_SKIP_WITHOUT_SM90();
  int sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  struct Shape {
    int64_t B, T, H, HV, rows_per_call;
    kda_dtype state;
  };
  // 160 units (28 CTAs walk two on 132 SMs), 400 units (about three each) with bf16 states and
  // grouped heads, 528 units of 16 chunks (four each).
  const Shape shapes[] = {{40, 256, 2, 4, 8, KDA_DTYPE_F32}, {50, 512, 4, 8, 10, KDA_DTYPE_BF16},
                          {66, 256, 4, 8, 12, KDA_DTYPE_F32}};
  uint64_t seed = 900;
  for (const Shape& sh : shapes) {
    ProblemSpec s = fixed_spec(sh.B, sh.T, sh.H, sh.HV, ++seed);
    s.initial_state = s.final_state = sh.state;
    const std::string label = shape_name("walk", s);
    const char* name = label.c_str();
    const RandomProblem input = make_random_problem(s);
    RandomProblem whole = input;
    kda_fwd_params pw = whole.params();
    always(pw);
    ASSERT_EQ(run_on_gpu(pw).code, KDA_OK) << name;
    ASSERT_GT(sh.B * sh.HV, sms) << name << ": fewer units than SMs, no walk";
    ASSERT_LE(sh.rows_per_call * sh.HV, sms) << name << ": the reference calls must not walk";
    for (int64_t b0 = 0; b0 < sh.B; b0 += sh.rows_per_call) {
      const int64_t nb = std::min(sh.rows_per_call, sh.B - b0);
      RandomProblem part = batch_rows(input, b0, nb);
      kda_fwd_params pp = part.params();
      always(pp);
      ASSERT_EQ(run_on_gpu(pp).code, KDA_OK) << name;
      const RandomProblem mine = batch_rows(whole, b0, nb);
      expect_identical(mine, part, (std::string(name) + ": rows " + std::to_string(b0) + "+").c_str());
    }
    // In place (final_state is initial_state's buffer): the same bits.
    RandomProblem in_place = input;
    kda_fwd_params pi = in_place.params();
    pi.final_state.data = pi.initial_state.data;
    always(pi);
    ASSERT_EQ(run_on_gpu(pi).code, KDA_OK) << name;
    in_place.final_f32 = in_place.initial_f32;  // (where the in-place call left its final state)
    in_place.final_bf16 = in_place.initial_bf16;
    expect_identical(whole, in_place, (label + ": in place").c_str());
    std::printf("[ single  ] %s: %lld units on %d SMs, bitwise the calls of %lld rows, in place too\n", name,
                static_cast<long long>(sh.B * sh.HV), sms, static_cast<long long>(sh.rows_per_call));
  }
  // The first shape against float64 and the two kernels.
  const ProblemSpec s = fixed_spec(40, 256, 2, 4, 901);
  check_both_paths(s, shape_name("walk", s).c_str());
}

TEST(GpuSinglePass, RefusesWhatItDoesNotTakeByName) {
  KDA_SKIP_WITHOUT_SM90();
  auto expect_refused = [](RandomProblem& p, const std::function<void(kda_fwd_params&)>& adjust, const char* word) {
    kda_fwd_params q = p.params();
    adjust(q);
    always(q);
    const kda_status st = run_on_gpu(q);
    EXPECT_EQ(st.code, KDA_ERROR_UNSUPPORTED) << word << ": " << st.message;
    EXPECT_NE(std::string(st.message).find("single_pass"), std::string::npos) << st.message;
    EXPECT_NE(std::string(st.message).find(word), std::string::npos) << st.message;
  };
  ProblemSpec s;
  s.B = 1;
  s.T = 64;
  s.H = s.HV = 2;
  s.gate = KDA_GATE_SOFTPLUS;
  RandomProblem softplus = make_random_problem(s);
  expect_refused(softplus, [](kda_fwd_params&) {}, "gate other than");
  s.gate = KDA_GATE_BOUNDED;
  RandomProblem plain = make_random_problem(s);
  // v broadcast over tokens (stride 0): no tensor map describes it.
  expect_refused(plain, [](kda_fwd_params& q) { q.v.stride[1] = 0; }, "describes v");
  // An unknown value: refused by validation, naming the field.
  kda_fwd_params bad = plain.params();
  bad.single_pass = 3;
  size_t bytes = 0;
  const kda_status st = kda_fwd_workspace_size(&bad, &bytes);
  EXPECT_EQ(st.code, KDA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(st.message).find("single_pass"), std::string::npos) << st.message;
}

}  // namespace
}  // namespace kda::test
