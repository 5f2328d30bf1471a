// Edge inputs (see edge_inputs.h).
#include "tests/edge_inputs.h"

#include <cmath>
#include <random>
#include <vector>

#include "reference/common.h"

namespace kda::test {

namespace {
constexpr int64_t D = 128;
}  // namespace

void make_huge_rows(RandomProblem& p, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> mag(1e19f, 3.3e38f);
  for (std::vector<uint16_t>* x : {&p.q, &p.k}) {
    for (size_t row = 0; row < x->size() / D; ++row) {
      if (rng() % 3 == 0) continue;
      const float m = mag(rng);
      float peak = 0.0f;
      for (int64_t i = 0; i < D; ++i) peak = std::fmax(peak, std::fabs(reference::bf16_to_float((*x)[row * D + i])));
      for (int64_t i = 0; i < D; ++i)
        (*x)[row * D + i] = reference::float_to_bf16(reference::bf16_to_float((*x)[row * D + i]) / peak * m);
    }
  }
}

void make_extreme_softplus_gates(RandomProblem& p, std::initializer_list<int64_t> whole_tokens) {
  std::mt19937_64 rng(3);
  for (size_t i = 0; i < p.g.size(); ++i) {
    const uint64_t r = rng() % 64;
    if (r == 0) p.g[i] = kBf16PlusInf;
    if (r == 1) p.g[i] = reference::float_to_bf16(3.0e38f);
    if (r == 2) p.g[i] = kBf16MinusInf;
  }
  for (int64_t t : whole_tokens)
    for (int64_t i = 0; i < D; ++i) p.g[(t * 2 + 1) * D + i] = kBf16PlusInf;  // head 1 of 2, whole tokens
}

void make_extreme_preactivated_gates(RandomProblem& p) {
  for (size_t i = 0; i < p.g.size(); i += 7) p.g[i] = kBf16MinusInf;
  for (size_t i = 3; i < p.g.size(); i += 11) p.g[i] = reference::float_to_bf16(-3.0e38f);
}

void make_identical_chunk_keys(RandomProblem& p) {
  const ProblemSpec& s = p.spec;
  const uint16_t plus100 = reference::float_to_bf16(100.0f);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t t = 0; t < s.T; ++t) {
      if ((t / 16) % 2 != 0) continue;
      const int64_t first = t - t % 16;
      for (int64_t h = 0; h < s.H; ++h)
        for (int64_t i = 0; i < D; ++i) p.k[((b * s.T + t) * s.H + h) * D + i] = p.k[((b * s.T + first) * s.H + h) * D + i];
      for (int64_t h = 0; h < s.HV; ++h) p.beta[(b * s.T + t) * s.HV + h] = plus100;
    }
}

void make_saturated_gates(RandomProblem& p, float big) {
  const ProblemSpec& s = p.spec;
  const uint16_t hi = reference::float_to_bf16(big), lo = reference::float_to_bf16(-big);
  const uint16_t b1 = reference::float_to_bf16(100.0f), b0 = reference::float_to_bf16(-100.0f);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t t = 0; t < s.T; ++t) {
      const int64_t c = (t / 16) % 3;
      for (int64_t h = 0; h < s.HV; ++h) {
        if (c < 2)
          for (int64_t i = 0; i < D; ++i) p.g[((b * s.T + t) * s.HV + h) * D + i] = c == 0 ? hi : lo;
        p.beta[(b * s.T + t) * s.HV + h] = t % 2 ? b1 : b0;
      }
    }
}

EdgeCase degenerate_chunks_case(DegenerateChunks kind, kda_gate gate, int64_t T, uint64_t seed) {
  EdgeCase c;
  c.spec.B = 2, c.spec.T = T, c.spec.H = 1, c.spec.HV = 2, c.spec.gate = gate, c.spec.seed = seed;
  const bool bounded = gate == KDA_GATE_BOUNDED;
  if (kind == DegenerateChunks::kIdenticalKeys) {
    c.edit = [](RandomProblem& p) { make_identical_chunk_keys(p); };
    c.name = bounded ? "identical keys, b = 1 (bounded)" : "identical keys, b = 1 (softplus)";
  } else {
    const float big = bounded ? 1e4f : 100.0f;
    c.edit = [big](RandomProblem& p) { make_saturated_gates(p, big); };
    c.name = bounded ? "saturated gates +-1e4, b in {0, 1} (bounded)" : "softplus gates +-100, b in {0, 1}";
  }
  return c;
}

}  // namespace kda::test
