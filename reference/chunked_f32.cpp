// The chunked algebra of the GPU kernel in float32 (docs/design.md §2.1-2.4), chunk C = 16.
// Per sequence and value head the tokens are cut into chunks of 16 (the last may be partial: rows
// i >= L are padding with k̂ = q̂ = a = b = 0). Per chunk: G (log2 units), Γ, Kd, Qd, Kr, A and M
// (§2.3: factorised for the bounded gate, four blocks of four for the unbounded gates),
// T = (I + A)^-1 by forward substitution, Tb, Wd, P, Qp; then the chunk step
//   U = Tb·Vc − Wd·Sᵀ,  O = P·Vc + Qp·Sᵀ,  S <- S·Diag(Γ) + Uᵀ·Kr      (S float32 throughout).
// ChunkedRounding (reference.h) rounds chosen operands to bf16 to predict the kernel's error.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "reference/common.h"
#include "reference/reference.h"

namespace kda::reference {

namespace {

constexpr int C = static_cast<int>(kChunk);
constexpr int D = static_cast<int>(kHeadDim);  // K = V = 128
constexpr float kLog2e = 1.4426950408889634f;

float round_if(bool round, float x) { return round ? round_bf16(x) : x; }
// x rounded to tf32 (10 explicit mantissa bits), to nearest with ties away from zero (cvt.rna).
float round_tf32(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  if ((b & 0x7f800000u) != 0x7f800000u) b = (b + 0x1000u) & 0xffffe000u;  // inf / NaN kept
  float y;
  std::memcpy(&y, &b, 4);
  return y;
}
// x as a bf16 hi + lo pair (what two products with the pair add up to), or as one bf16.
float split_or_round(bool split, float x) {
  const float hi = round_bf16(x);
  return split ? hi + round_bf16(x - hi) : hi;
}

// Everything one chunk needs; rows 0..C-1, key/value column 0..D-1.
struct Chunk {
  int L = 0;                                   // valid rows
  float kh[C][D], qs[C][D], vc[C][D];          // k̂, scale·q̂, values (zeros on padding rows)
  float b[C];                                  // b (0 on padding rows)
  float G[C][D];                               // inclusive cumulative log2-decay
  float gamma[D];                              // 2^G[C-1]
  float Kd[C][D], Qd[C][D], Kr[C][D];
  float A[C][C], M[C][C], T[C][C], Tb[C][C], P[C][C];
  float Wd[C][D], Qp[C][D];
};

void load_chunk(const Problem& pr, const HeadParams<float>& hp, int64_t hv, int64_t start, int L, Chunk* c) {
  const float scale = static_cast<float>(pr.params->scale);
  TokenInputs<float> x;
  c->L = L;
  for (int i = 0; i < C; ++i) {
    float a[D];
    if (i < L) {
      load_token(pr, hp, start + i, hv, &x);
      for (int k = 0; k < D; ++k) {
        c->kh[i][k] = x.k[k];
        c->qs[i][k] = scale * x.q[k];
        c->vc[i][k] = x.v[k];
        a[k] = x.a[k];
      }
      c->b[i] = x.b;
    } else {
      for (int k = 0; k < D; ++k) c->kh[i][k] = c->qs[i][k] = c->vc[i][k] = a[k] = 0.0f;
      c->b[i] = 0.0f;
    }
    for (int k = 0; k < D; ++k) {
      float a2 = a[k] * kLog2e;
      if (a2 < kMinLog2Decay) a2 = kMinLog2Decay;  // a gate of -inf or huge: decay exactly 0, no inf - inf
      c->G[i][k] = (i > 0 ? c->G[i - 1][k] : 0.0f) + a2;
    }
  }
}

// Γ, Kd, Qd, Kr: every exponent is <= 0, so nothing overflows (underflow to 0 is the right limit).
void decayed_rows(Chunk* c) {
  for (int k = 0; k < D; ++k) c->gamma[k] = std::exp2(c->G[C - 1][k]);
  for (int i = 0; i < C; ++i) {
    for (int k = 0; k < D; ++k) {
      const float e = std::exp2(c->G[i][k]);
      c->Kd[i][k] = c->kh[i][k] * e;
      c->Qd[i][k] = c->qs[i][k] * e;
      c->Kr[i][k] = c->kh[i][k] * std::exp2(c->G[C - 1][k] - c->G[i][k]);
    }
  }
}

// Bounded gate: |G| <= 16·5·log2(e) < 126, so 2^{G[i]-G[j]} = 2^{G[i]}·2^{-G[j]} exactly:
// A = Diag(b)·strict_lower(Kd·Kiᵀ), M = lower(Qd·Kiᵀ), Ki[j] = k̂[j] ⊙ 2^{-G[j]}.
void build_am_factorised(Chunk* c, bool round_a, bool round_m, bool tf32) {
  float Ki[C][D];
  for (int j = 0; j < C; ++j)
    for (int k = 0; k < D; ++k) Ki[j][k] = c->kh[j][k] * std::exp2(-c->G[j][k]);
  for (int i = 0; i < C; ++i) {
    for (int j = 0; j < C; ++j) {
      float a = 0.0f, m = 0.0f;
      if (j <= i) {
        for (int k = 0; k < D; ++k) {
          if (tf32) {
            a += round_tf32(c->Kd[i][k]) * round_tf32(Ki[j][k]);
            m += round_tf32(c->Qd[i][k]) * round_tf32(Ki[j][k]);
          } else {
            a += round_if(round_a, c->Kd[i][k]) * round_if(round_a, Ki[j][k]);
            m += round_if(round_m, c->Qd[i][k]) * round_if(round_m, Ki[j][k]);
          }
        }
      }
      c->A[i][j] = j < i ? c->b[i] * a : 0.0f;
      c->M[i][j] = m;
    }
  }
}

// Unbounded gates: rows in four blocks of four. Same block: 2^{G[i]-G[j]} formed directly.
// Different blocks, R = G at the last row of j's block: (x[i]·2^{G[i]-R})·(k̂[j]·2^{R-G[j]}).
// Every factor is <= 1, so nothing overflows however negative the gate is.
void build_am_blocked(Chunk* c) {
  constexpr int kBlock = 4;
  for (int i = 0; i < C; ++i)
    for (int j = 0; j < C; ++j) c->A[i][j] = c->M[i][j] = 0.0f;
  for (int jb = 0; jb < C / kBlock; ++jb) {
    const float* R = c->G[jb * kBlock + kBlock - 1];
    for (int j = jb * kBlock; j < (jb + 1) * kBlock; ++j) {
      float right[D];  // k̂[j]·2^{R-G[j]}
      for (int k = 0; k < D; ++k) right[k] = c->kh[j][k] * std::exp2(R[k] - c->G[j][k]);
      for (int i = j; i < C; ++i) {
        const bool same_block = i / kBlock == jb;
        float a = 0.0f, m = 0.0f;
        for (int k = 0; k < D; ++k) {
          if (same_block) {
            const float e = std::exp2(c->G[i][k] - c->G[j][k]);
            a += c->kh[i][k] * e * c->kh[j][k];
            m += c->qs[i][k] * e * c->kh[j][k];
          } else {
            const float e = std::exp2(c->G[i][k] - R[k]);
            a += (c->kh[i][k] * e) * right[k];
            m += (c->qs[i][k] * e) * right[k];
          }
        }
        if (j < i) c->A[i][j] = c->b[i] * a;
        c->M[i][j] = m;
      }
    }
  }
}

// T = (I + A)^-1, Tb = T·Diag(b), Wd = Tb·Kd, P = M·Tb, Qp = Qd − P·Kd; then the record roundings.
void solve_chunk(const ChunkedRounding& r, Chunk* c) {
  unit_lower_inverse(&c->A[0][0], &c->T[0][0], C);
  for (int i = 0; i < C; ++i)
    for (int j = 0; j < C; ++j) c->Tb[i][j] = c->T[i][j] * c->b[j];
  auto left = [&](float x) { return round_if(r.round_wide_left, x); };
  auto kd = [&](int j, int k) { return round_if(r.round_wide_kd, c->Kd[j][k]); };
  // P's operands as the kernel's tensor cores see them: hi + lo (their product is exact in float32).
  auto pf = [&](float x) { return r.split_p_operands ? split_or_round(true, x) : x; };
  for (int i = 0; i < C; ++i) {
    for (int k = 0; k < D; ++k) {
      float acc = 0.0f;
      for (int j = 0; j <= i; ++j) acc += left(c->Tb[i][j]) * kd(j, k);
      c->Wd[i][k] = acc;
    }
    for (int j = 0; j < C; ++j) {
      float acc = 0.0f;
      for (int m = j; m <= i; ++m) acc += pf(c->M[i][m]) * pf(c->Tb[m][j]);
      c->P[i][j] = j <= i ? acc : 0.0f;
    }
  }
  for (int i = 0; i < C; ++i) {
    for (int k = 0; k < D; ++k) {
      float acc = 0.0f;
      for (int j = 0; j <= i; ++j) acc += left(c->P[i][j]) * kd(j, k);
      c->Qp[i][k] = (r.tf32_am_operands ? round_tf32(c->Qd[i][k]) : c->Qd[i][k]) - acc;
    }
  }
  for (int i = 0; i < C; ++i) {
    for (int k = 0; k < D; ++k) {
      if (r.round_record) {
        c->Wd[i][k] = round_bf16(c->Wd[i][k]);
        c->Qp[i][k] = round_bf16(c->Qp[i][k]);
      }
      if (r.round_record || r.split_kr) c->Kr[i][k] = split_or_round(r.split_kr, c->Kr[i][k]);
    }
  }
}

// U = Tb·Vc − Wd·Sᵀ, O = P·Vc + Qp·Sᵀ, S <- S·Diag(Γ) + Uᵀ·Kr. `Sop` is scratch [V][K].
void chunk_step(const ChunkedRounding& r, const Chunk& c, float* S, float* Sop, float (*O)[D]) {
  for (int i = 0; i < D * D; ++i) {
    const float s = S[i];
    if (r.split_state_operand) {
      const float hi = round_bf16(s);
      Sop[i] = hi + round_bf16(s - hi);
    } else {
      Sop[i] = r.round_state_operand ? round_bf16(s) : s;
    }
  }
  float U[C][D];
  for (int i = 0; i < C; ++i) {
    float tb[C], p[C];
    for (int j = 0; j < C; ++j) {
      tb[j] = r.round_small ? round_bf16(c.Tb[i][j]) : c.Tb[i][j];
      p[j] = r.round_small ? round_bf16(c.P[i][j]) : c.P[i][j];
    }
    for (int v = 0; v < D; ++v) {
      float tv = 0.0f, pv = 0.0f;
      for (int j = 0; j < C; ++j) {
        tv += tb[j] * c.vc[j][v];
        pv += p[j] * c.vc[j][v];
      }
      const float* s = Sop + v * D;
      float ws = 0.0f, qs = 0.0f;
      for (int k = 0; k < D; ++k) {
        ws += c.Wd[i][k] * s[k];
        qs += c.Qp[i][k] * s[k];
      }
      U[i][v] = tv - ws;
      O[i][v] = pv + qs;
    }
  }
  if (r.round_u || r.split_u)
    for (int i = 0; i < C; ++i)
      for (int v = 0; v < D; ++v) U[i][v] = split_or_round(r.split_u, U[i][v]);
  for (int v = 0; v < D; ++v) {
    float* s = S + v * D;
    for (int k = 0; k < D; ++k) {
      float acc = s[k] * c.gamma[k];
      for (int i = 0; i < C; ++i) acc += U[i][v] * c.Kr[i][k];
      s[k] = acc;
    }
  }
}

void run_seq_head(const Problem& pr, const ChunkedRounding& r, int64_t n, int64_t hv, float* out_exact,
                  float* state_exact) {
  const kda_fwd_params& p = *pr.params;
  const HeadParams<float> hp = head_params<float>(pr, hv);
  const SeqRange range = sequence_range(pr, n);
  const bool bounded = p.gate == KDA_GATE_BOUNDED;

  std::vector<float> S(D * D), Sop(D * D);
  load_state(pr, p.initial_state, n, hv, S.data());
  auto chunk = std::make_unique<Chunk>();
  float O[C][D];

  ChunkedRounding r_last = r;  // the last split_update_last_chunks chunks: U and Kr as pairs
  r_last.split_u = r_last.split_kr = true;
  // Chunks are counted from the sequence's end in whole chunks of C from its start; the split ones
  // hold at least split_update_min_tokens tokens where the sequence has them.
  const int64_t last_chunk_start = range.bos + ((range.eos - range.bos - 1) / C) * C;
  const int64_t split_chunks = split_update_chunks(range.eos - range.bos, r);
  for (int64_t start = range.bos; start < range.eos; start += C) {
    const int L = static_cast<int>(std::min<int64_t>(C, range.eos - start));
    const bool split_here = split_chunks > 0 && start > last_chunk_start - split_chunks * C;
    const ChunkedRounding& rc = split_here ? r_last : r;
    load_chunk(pr, hp, hv, start, L, chunk.get());
    decayed_rows(chunk.get());
    if (bounded)
      build_am_factorised(chunk.get(), rc.round_a_operands, rc.round_m_operands, rc.tf32_am_operands);
    else
      build_am_blocked(chunk.get());
    solve_chunk(rc, chunk.get());
    chunk_step(rc, *chunk, S.data(), Sop.data(), O);
    for (int i = 0; i < L; ++i) {
      store_out_row(p.out, start + i, hv, pr.T, D, O[i]);
      if (out_exact != nullptr) {
        float* dst = out_exact + ((start + i) * pr.HV + hv) * D;
        for (int v = 0; v < D; ++v) dst[v] = O[i][v];
      }
    }
  }

  store_state(pr, p.final_state, n, hv, S.data());
  if (state_exact != nullptr) {
    float* dst = state_exact + (n * pr.HV + hv) * D * D;
    for (int i = 0; i < D * D; ++i) dst[i] = S[i];
  }
}

}  // namespace

int64_t split_update_chunks(int64_t len, const ChunkedRounding& r) {
  if (len <= 0 || r.split_update_last_chunks <= 0) return 0;
  const int64_t chunks = (len - 1) / C + 1;
  int64_t n = std::min<int64_t>(r.split_update_last_chunks, chunks);
  // The last n chunks hold len - (chunks - n) · C tokens (the last one possibly partial).
  while (n < chunks && len - (chunks - n) * C < r.split_update_min_tokens) ++n;
  return n;
}

kda_status fwd_chunked_f32_ex(const Problem& problem, const ChunkedRounding& rounding, int num_threads,
                              float* out_exact, float* state_exact) {
  return for_each_seq_head(problem.N, problem.HV, num_threads, [&](int64_t n, int64_t hv) {
    run_seq_head(problem, rounding, n, hv, out_exact, state_exact);
  });
}

kda_status fwd_chunked_f32(const Problem& problem, const ChunkedRounding& rounding, int num_threads) {
  return fwd_chunked_f32_ex(problem, rounding, num_threads, nullptr, nullptr);
}

}  // namespace kda::reference
