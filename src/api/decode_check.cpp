// The opt-in content check of kda_decode (check_indices): the host version (kda_decode_cpu) and the
// messages of both versions (the GPU version, src/launch/decode_sm90.cu, fills the same
// DecodeCheckResult on the device).
#include <algorithm>
#include <cstdio>
#include <unordered_map>
#include <vector>

#include "src/api/decode_problem.h"

namespace kda {

namespace {

int64_t cu_entry(const DecodeProblem& dp, int64_t i) {
  const kda_tensor& cu = dp.fwd.cu_seqlens;
  return cu.dtype == KDA_DTYPE_I64 ? static_cast<const int64_t*>(cu.data)[i] : static_cast<const int32_t*>(cu.data)[i];
}

// Tokens of sequence n as the kernels see them (cu_seqlens clamped to [0, T_total]).
int64_t sequence_length(const DecodeProblem& dp, int64_t n) {
  if (!dp.pr.varlen) return dp.pr.T;
  auto clamp = [&](int64_t x) { return x < 0 ? 0 : (x > dp.pr.T_total ? dp.pr.T_total : x); };
  const int64_t bos = clamp(cu_entry(dp, n)), eos = clamp(cu_entry(dp, n + 1));
  return eos > bos ? eos - bos : 0;
}

}  // namespace

DecodeCheckResult check_decode_contents_host(const DecodeProblem& dp) {
  DecodeCheckResult r;
  for (int k = 0; k < kNumCheckKinds; ++k) r.first[k] = r.value[k] = r.other[k] = r.other_t[k] = -1;
  r.cu_kind = 0;
  const int64_t N = dp.pr.N, cols = dp.idx_cols;
  if (dp.has_indices) {
    std::unordered_map<int64_t, int64_t> owner;  // slot -> smallest sequence naming it
    for (int64_t n = 0; n < N; ++n)
      for (int64_t t = 0; t < cols; ++t) {
        const int64_t s = host_slot_index(dp, n, t);
        if (s >= dp.slots && r.first[kCheckSlotRange] < 0) {
          r.first[kCheckSlotRange] = n * cols + t;
          r.value[kCheckSlotRange] = s;
        }
        if (valid_slot(dp, s) && owner.find(s) == owner.end()) owner[s] = n;
      }
    for (int64_t n = 0; n < N && r.first[kCheckDuplicate] < 0; ++n)
      for (int64_t t = 0; t < cols; ++t) {
        const int64_t s = host_slot_index(dp, n, t);
        if (!valid_slot(dp, s) || owner[s] == n) continue;
        r.first[kCheckDuplicate] = n * cols + t;
        r.value[kCheckDuplicate] = s;
        r.other[kCheckDuplicate] = owner[s];
        for (int64_t u = 0; u < cols; ++u)
          if (host_slot_index(dp, owner[s], u) == s) {
            r.other_t[kCheckDuplicate] = u;
            break;
          }
        break;
      }
  }
  if (dp.has_accepted)
    for (int64_t n = 0; n < N; ++n) {
      const int64_t a = host_accepted(dp, n);
      if (a < 0 || a > cols) {
        r.first[kCheckAccepted] = n;
        r.value[kCheckAccepted] = a;
        break;
      }
    }
  if (dp.pr.varlen) {
    for (int64_t i = 0; i <= N; ++i) {
      const int64_t x = cu_entry(dp, i);
      const bool order = i == 0 ? x != 0 : x < cu_entry(dp, i - 1);
      if (!order && x <= dp.pr.T_total) continue;
      r.first[kCheckCuSeqlens] = i;
      r.value[kCheckCuSeqlens] = x;
      if (i == 0 && x != 0) {
        r.cu_kind = 1;
      } else if (i > 0 && x < cu_entry(dp, i - 1)) {
        r.cu_kind = 2;
        r.other[kCheckCuSeqlens] = cu_entry(dp, i - 1);
      } else {
        r.cu_kind = 3;
        r.other[kCheckCuSeqlens] = dp.pr.T_total;
      }
      break;
    }
    if (dp.indices_2d)
      for (int64_t n = 0; n < N; ++n)
        if (sequence_length(dp, n) > cols) {
          r.first[kCheckLength] = n;
          r.value[kCheckLength] = sequence_length(dp, n);
          break;
        }
  }
  return r;
}

kda_status check_decode_sequences_disjoint_host(const DecodeProblem& dp) {
  if (!dp.pr.varlen) return make_ok();
  auto clamp = [&](int64_t x) { return x < 0 ? 0 : (x > dp.pr.T_total ? dp.pr.T_total : x); };
  struct Span {
    int64_t bos, eos, n;
  };
  std::vector<Span> spans;
  for (int64_t n = 0; n < dp.pr.N; ++n) {
    const int64_t bos = clamp(cu_entry(dp, n)), eos = clamp(cu_entry(dp, n + 1));
    if (eos > bos) spans.push_back({bos, eos, n});
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.bos < b.bos || (a.bos == b.bos && a.n < b.n); });
  for (size_t i = 1; i < spans.size(); ++i)
    if (spans[i].bos < spans[i - 1].eos) {
      const Span& a = spans[i - 1].n < spans[i].n ? spans[i - 1] : spans[i];
      const Span& b = spans[i - 1].n < spans[i].n ? spans[i] : spans[i - 1];
      return make_error(KDA_ERROR_INVALID_ARGUMENT,
                        "cu_seqlens: expected sequences that cover disjoint tokens (kda_decode_cpu writes each output "
                        "row once), got sequence %lld over tokens [%lld, %lld) and sequence %lld over [%lld, %lld)",
                        static_cast<long long>(a.n), static_cast<long long>(a.bos), static_cast<long long>(a.eos),
                        static_cast<long long>(b.n), static_cast<long long>(b.bos), static_cast<long long>(b.eos));
    }
  return make_ok();
}

kda_status decode_check_status(const DecodeProblem& dp, const DecodeCheckResult& r) {
  const long long cols = dp.idx_cols;
  auto entry = [&](int64_t e, char* buf, size_t size) {
    if (dp.indices_2d)
      std::snprintf(buf, size, "state_indices[%lld, %lld]", static_cast<long long>(e / cols),
                    static_cast<long long>(e % cols));
    else
      std::snprintf(buf, size, "state_indices[%lld]", static_cast<long long>(e));
  };
  char at[64], at2[64];
  if (r.first[kCheckSlotRange] >= 0) {
    entry(r.first[kCheckSlotRange], at, sizeof(at));
    return make_error(KDA_ERROR_INVALID_ARGUMENT,
                      "state_indices: expected slot indices < slots = %lld (state_pool.shape[0]) or negative "
                      "(padding), got %s = %lld",
                      static_cast<long long>(dp.slots), at, static_cast<long long>(r.value[kCheckSlotRange]));
  }
  if (r.first[kCheckAccepted] >= 0)
    return make_error(KDA_ERROR_INVALID_ARGUMENT,
                      "num_accepted_tokens: expected values in [0, T_idx = %lld], got num_accepted_tokens[%lld] = %lld",
                      cols, static_cast<long long>(r.first[kCheckAccepted]),
                      static_cast<long long>(r.value[kCheckAccepted]));
  if (r.first[kCheckCuSeqlens] >= 0) {
    const long long i = r.first[kCheckCuSeqlens], x = r.value[kCheckCuSeqlens], o = r.other[kCheckCuSeqlens];
    if (r.cu_kind == 1)
      return make_error(KDA_ERROR_INVALID_ARGUMENT, "cu_seqlens: expected cu_seqlens[0] = 0, got %lld", x);
    if (r.cu_kind == 2)
      return make_error(
          KDA_ERROR_INVALID_ARGUMENT,
          "cu_seqlens: expected non-decreasing entries, got cu_seqlens[%lld] = %lld < cu_seqlens[%lld] = %lld", i, x,
          i - 1, o);
    return make_error(KDA_ERROR_INVALID_ARGUMENT,
                      "cu_seqlens: expected entries <= the packed length B*T = %lld, got cu_seqlens[%lld] = %lld", o, i,
                      x);
  }
  if (r.first[kCheckLength] >= 0)
    return make_error(KDA_ERROR_INVALID_ARGUMENT,
                      "state_indices: expected T_idx = %lld >= every sequence's length (a slot per token), got "
                      "sequence %lld of length %lld (cu_seqlens)",
                      cols, static_cast<long long>(r.first[kCheckLength]),
                      static_cast<long long>(r.value[kCheckLength]));
  if (r.first[kCheckDuplicate] >= 0) {
    entry(r.first[kCheckDuplicate], at, sizeof(at));
    entry(r.other[kCheckDuplicate] * cols + (r.other_t[kCheckDuplicate] < 0 ? 0 : r.other_t[kCheckDuplicate]), at2,
          sizeof(at2));
    return make_error(KDA_ERROR_INVALID_ARGUMENT,
                      "state_indices: expected each slot to be named by one sequence at most, got slot %lld in %s "
                      "(sequence %lld) and in %s (sequence %lld)",
                      static_cast<long long>(r.value[kCheckDuplicate]), at2,
                      static_cast<long long>(r.other[kCheckDuplicate]), at,
                      static_cast<long long>(r.first[kCheckDuplicate] / cols));
  }
  return make_ok();
}

}  // namespace kda
