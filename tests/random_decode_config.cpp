// Random configurations of kda_decode's option matrix and the correct-rounding rule (random_decode_config.h).
#include "tests/random_decode_config.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>

#include "reference/common.h"
#include "reference/decode_reference.h"
#include "src/api/decode_problem.h"
#include "tests/random_problem.h"

namespace kda::test {

using reference::bf16_to_float;

namespace {

constexpr int64_t D = 128;

DecodeConfig draw_one(uint64_t seed) {
  Dice dice(seed);
  auto pick = [&](int n) { return dice.pick(n); };
  auto chance = [&](int percent) { return dice.chance(percent); };
  DecodeConfig c;
  DecodeSpec& s = c.spec;
  s.seed = seed;
  s.H = 1 + pick(4);
  static const int kRatios[] = {1, 1, 2, 4};
  s.HV = std::min<int64_t>(16, s.H * kRatios[pick(4)]);
  if (s.HV % s.H != 0) s.HV = s.H;
  s.pool = chance(50) ? KDA_DTYPE_F32 : KDA_DTYPE_BF16;
  draw_gate(dice, s);
  static const float kGScale[] = {1.0f, 1.0f, 2.0f, 4.0f, 8.0f};
  s.g_scale = kGScale[pick(5)];
  s.idx_dtype = chance(50) ? KDA_DTYPE_I32 : KDA_DTYPE_I64;
  s.accepted_dtype = chance(50) ? KDA_DTYPE_I32 : KDA_DTYPE_I64;

  // The value heads times the slots a call may name stay under ~512 (a 32 MiB f32 pool).
  const int64_t max_slots = std::max<int64_t>(2, 512 / s.HV);
  const int form = pick(10);
  int64_t N = 0, longest = 0;
  if (form < 7) {  // a batch [B, T]: decode (T = 1) or verify / several tokens
    s.idx_dims = form < 1 ? 0 : form < 4 ? 1 : 2;
    static const int64_t kT[] = {1, 1, 1, 2, 3, 4, 5, 8, 16, 17, 20};
    s.T = kT[pick(11)];
    if (s.idx_dims == 2) s.idx_cols = s.T + (chance(30) ? pick(3) : 0);  // T_idx >= T without cu_seqlens
    const int64_t cols = s.idx_dims == 2 ? s.idx_cols : 1;
    s.B = 1 + pick(static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(40, max_slots / cols))));
    N = s.B;
    longest = s.T;
  } else {  // packed sequences
    s.idx_dims = chance(50) ? 1 : 2;
    const int n = 1 + pick(12);
    static const int64_t kLen[] = {0, 1, 1, 2, 3, 5, 8, 16, 17, 20, 33};
    s.cu_seqlens = {0};
    for (int i = 0; i < n; ++i) {
      const int64_t len = kLen[pick(11)];
      longest = std::max(longest, len);
      s.cu_seqlens.push_back(s.cu_seqlens.back() + len);
    }
    if (s.cu_seqlens.back() == 0) {  // at least one token in the call
      s.cu_seqlens.back() = 1;
      longest = 1;
    }
    if (s.idx_dims == 2) s.idx_cols = 1 + pick(static_cast<int>(std::min<int64_t>(8, std::max<int64_t>(1, longest))));
    N = n;
    while (N * (s.idx_dims == 2 ? s.idx_cols : 1) > max_slots && s.idx_cols > 1) --s.idx_cols;
  }
  const int64_t cols = s.idx_dims == 2 ? s.idx_cols : 1;
  s.slots = N * cols + pick(4);  // distinct slots for every entry (random_decode.cpp: a permutation)
  s.with_accepted = s.idx_dims == 2 && chance(60);
  if (s.with_accepted)
    for (int64_t i = 0; i < N; ++i) c.accepted.push_back(pick(static_cast<int>(cols) + 2));  // 0 .. T_idx + 1
  if (s.idx_dims >= 1 && chance(25)) {
    const int count = 1 + pick(2);
    for (int i = 0; i < count; ++i) c.padding.push_back(pick(static_cast<int>(N)));
  }
  if (s.idx_dims == 2 && chance(30)) {
    const int count = 1 + pick(3);
    for (int i = 0; i < count; ++i) c.no_write.push_back(pick(static_cast<int>(N * cols)));
  }
  c.beta_probs = chance(20);
  c.unit_qk = chance(20);
  c.neg = chance(20);
  if (chance(30)) c.scale *= chance(50) ? 0.5 : 2.0;
  c.kernel_config = chance(50) ? 0 : 1 + pick(KDA_DECODE_NUM_KERNEL_CONFIGS);
  c.other_config = 1 + pick(KDA_DECODE_NUM_KERNEL_CONFIGS);
  if (c.other_config == c.kernel_config) c.other_config = c.other_config % KDA_DECODE_NUM_KERNEL_CONFIGS + 1;
  c.trusted = chance(30);
  c.variant = static_cast<DecodeVariant>(pick(3));

  std::string shape;
  if (s.cu_seqlens.empty()) {
    shape = "B" + std::to_string(s.B) + " T" + std::to_string(s.T);
  } else {
    shape = "cu_seqlens {";
    for (size_t i = 0; i < s.cu_seqlens.size(); ++i) shape += (i ? "," : "") + std::to_string(s.cu_seqlens[i]);
    shape += "}";
  }
  std::string idx = s.idx_dims == 0 ? "none" : s.idx_dims == 1 ? "[N]" : "[N," + std::to_string(s.idx_cols) + "]";
  if (s.idx_dims > 0) idx += s.idx_dtype == KDA_DTYPE_I64 ? " i64" : " i32";
  if (s.with_accepted) {
    idx += std::string(" accepted ") + (s.accepted_dtype == KDA_DTYPE_I64 ? "i64" : "i32") + " {";
    for (size_t i = 0; i < c.accepted.size(); ++i) idx += (i ? "," : "") + std::to_string(c.accepted[i]);
    idx += "}";
  }
  auto list = [](const std::vector<int64_t>& v) {
    std::string t = "{";
    for (size_t i = 0; i < v.size(); ++i) t += (i ? "," : "") + std::to_string(v[i]);
    return t + "}";
  };
  static const char* kGate[] = {"bounded", "softplus", "preactivated"};
  static const char* kVariant[] = {"graph", "other-config", "again"};
  char text[768];
  std::snprintf(text, sizeof(text),
                "%s H%lld HV%lld slots %lld pool %s idx %s padding %s no-write %s gate %s lb %g A_log %d dt_bias %d "
                "g_scale %g beta %s qk %s neg %d scale x%g config %d trusted %d variant %s (config %d)",
                shape.c_str(), static_cast<long long>(s.H), static_cast<long long>(s.HV),
                static_cast<long long>(s.slots), s.pool == KDA_DTYPE_F32 ? "f32" : "bf16", idx.c_str(),
                list(c.padding).c_str(), list(c.no_write).c_str(), kGate[s.gate], static_cast<double>(s.lower_bound),
                s.with_A_log, s.with_dt_bias, static_cast<double>(s.g_scale), c.beta_probs ? "probs" : "logits",
                c.unit_qk ? "unit" : "l2norm", c.neg, c.scale * std::sqrt(128.0), c.kernel_config, c.trusted,
                kVariant[static_cast<int>(c.variant)], c.other_config);
  c.text = text;
  return c;
}

// Half a unit in the last place at x of a format with `mantissa` stored bits (bf16 7, f32 23).
double half_ulp(double x, int mantissa) {
  if (x == 0.0 || !std::isfinite(x)) return 0.0;
  int e = 0;
  std::frexp(x, &e);  // |x| = m 2^e, m in [0.5, 1): the binade's lowest power is 2^(e-1)
  return std::ldexp(1.0, std::max(e - 1, -126) - mantissa - 1);
}

template <typename Get>
RoundingExcess excess(size_t n, const Get& got, const std::vector<double>& exact, int64_t row, double slack,
                      int mantissa) {
  RoundingExcess r;
  for (size_t r0 = 0; r0 < n; r0 += static_cast<size_t>(row)) {
    const size_t r1 = std::min(n, r0 + static_cast<size_t>(row));
    double ss = 0;
    bool any = false;
    for (size_t i = r0; i < r1; ++i)
      if (!std::isnan(exact[i])) ss += exact[i] * exact[i], any = true;
    if (!any) continue;  // a row the call does not write
    const double rms = std::sqrt(ss / static_cast<double>(r1 - r0));
    for (size_t i = r0; i < r1; ++i) {
      if (std::isnan(exact[i])) continue;
      const double g = got(i);
      if (!std::isfinite(g)) {
        ++r.non_finite;
        continue;
      }
      const double half = half_ulp(exact[i], mantissa), allowed = half + slack * rms;
      const double diff = std::fabs(g - exact[i]);
      if (rms > 0) r.residual = std::max(r.residual, (diff - half) / rms);
      const double ratio = diff == 0 ? 0.0 : allowed > 0 ? diff / allowed : std::numeric_limits<double>::infinity();
      if (ratio > r.worst) r.worst = ratio, r.at = static_cast<int64_t>(i);
    }
  }
  return r;
}

}  // namespace

DecodeConfig draw_decode_config(uint64_t seed, uint64_t index) { return draw_one(seed * 1000003u + index + 7919u); }

int for_each_decode_config(const RandomDraw& d, const std::function<void(int index, const DecodeConfig& c)>& check) {
  return for_each_index(d, "decode-random",
                        [&](uint64_t i) { check(static_cast<int>(i), draw_decode_config(d.seed, i)); });
}

RandomDecode make_decode(const DecodeConfig& c) {
  RandomDecode d = make_random_decode(c.spec);
  adjust_token_inputs(c.beta_probs, c.unit_qk, &d.beta, &d.q, &d.k);
  for (size_t n = 0; n < c.accepted.size(); ++n) d.set_accepted(static_cast<int64_t>(n), c.accepted[n]);
  for (int64_t e : c.no_write) d.set_index(e / d.cols, e % d.cols, -1);
  for (int64_t n : c.padding)
    for (int64_t t = 0; t < d.cols; ++t) d.set_index(n, t, -1);
  return d;
}

kda_decode_params decode_params_of(const DecodeConfig& c, RandomDecode& d) {
  kda_decode_params p = d.params();
  set_shared_flags(p, c.beta_probs, c.unit_qk, c.neg, c.scale, c.trusted);
  p.kernel_config = c.kernel_config;
  return p;
}

RandomDecode run_decode_f32(const DecodeConfig& c, const RandomDecode& base) {
  RandomDecode d = base;
  const kda_decode_params p = decode_params_of(c, d);
  DecodeProblem problem;
  kda_status st = validate_decode(&p, ValidateMode::kHost, &problem);
  if (st.code != KDA_OK) throw std::runtime_error(st.message);
  st = reference::decode_recurrence_f32(problem, 0);
  if (st.code != KDA_OK) throw std::runtime_error(st.message);
  return d;
}

DecodeExact decode_exact(const kda_decode_params& host) {
  // The reference writes out and the pool: run it on copies of those two tensors.
  kda_decode_params p = host;
  const kda_tensor& pool = host.state_pool;
  const size_t pool_bytes = static_cast<size_t>(pool.shape[0]) * static_cast<size_t>(pool.stride[0]) *
                            (pool.dtype == KDA_DTYPE_F32 ? 4 : 2);
  const size_t out_bytes = static_cast<size_t>(host.out.shape[0] * host.out.shape[1] * host.out.shape[2] * D) * 2;
  std::vector<unsigned char> pool_copy(static_cast<const unsigned char*>(pool.data),
                                       static_cast<const unsigned char*>(pool.data) + pool_bytes);
  std::vector<unsigned char> out_copy(out_bytes);
  p.state_pool.data = pool_copy.data();
  p.out.data = out_copy.data();
  DecodeProblem problem;
  kda_status st = validate_decode(&p, ValidateMode::kHost, &problem);
  if (st.code != KDA_OK) throw std::runtime_error(st.message);
  DecodeExact e;
  e.out.assign(static_cast<size_t>(problem.pr.T_total * problem.pr.HV * D), 0.0);
  e.pool.assign(static_cast<size_t>(problem.slots * problem.pr.HV * D * D), std::numeric_limits<double>::quiet_NaN());
  st = reference::decode_recurrence_f64(problem, 0, e.out.data(), e.pool.data());
  if (st.code != KDA_OK) throw std::runtime_error(st.message);
  return e;
}

RoundingExcess rounding_excess_bf16(const std::vector<uint16_t>& got, const std::vector<double>& exact, int64_t row,
                                    double slack) {
  if (got.size() != exact.size()) throw std::invalid_argument("rounding_excess_bf16: sizes differ");
  return excess(got.size(), [&](size_t i) { return static_cast<double>(bf16_to_float(got[i])); }, exact, row, slack, 7);
}

RoundingExcess rounding_excess_f32(const std::vector<float>& got, const std::vector<double>& exact, int64_t row,
                                   double slack) {
  if (got.size() != exact.size()) throw std::invalid_argument("rounding_excess_f32: sizes differ");
  return excess(got.size(), [&](size_t i) { return static_cast<double>(got[i]); }, exact, row, slack, 23);
}

DecodeCheck check_decode(const RandomDecode& got, const RandomDecode& before, const DecodeExact& exact,
                         double slack_scale) {
  DecodeCheck c;
  c.out = rounding_excess_bf16(got.out, exact.out, D, slack_scale * kDecodeOutSlack);
  const bool f32 = got.spec.pool == KDA_DTYPE_F32;
  const double state_slack = slack_scale * kDecodeStateSlack;
  c.pool = f32 ? rounding_excess_f32(got.pool_f32, exact.pool, D, state_slack)
               : rounding_excess_bf16(got.pool_bf16, exact.pool, D, state_slack);
  for (size_t i = 0; i < exact.pool.size(); ++i) {
    if (!std::isnan(exact.pool[i])) {
      ++c.written;
      continue;
    }
    const bool same = f32 ? std::memcmp(&got.pool_f32[i], &before.pool_f32[i], 4) == 0
                          : got.pool_bf16[i] == before.pool_bf16[i];
    c.untouched_changed += !same;
  }
  return c;
}

}  // namespace kda::test
