// The API calls of one fuzz input and their invariants (see fuzz_case.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_build.h"

namespace kda::fuzz {

namespace {

Stats g_stats;
bool g_verbose = false;

[[noreturn]] void fail(const Problem& pr, const std::string& what) {
  std::fprintf(stderr, "\nFUZZ INVARIANT BROKEN: %s\n%s\n", what.c_str(), pr.describe().c_str());
  std::fflush(stderr);
  std::abort();
}

// Bytes of chunk records per (virtual chunk, value head), measured through the API once.
size_t record_bytes() {
  static const size_t r = [] {
    auto query = [](int64_t T) {
      kda_fwd_params p;
      kda_fwd_params_init(&p);
      const int64_t s[4] = {1, T, 1, 128};
      for (kda_tensor* t : {&p.q, &p.k, &p.v, &p.g, &p.out}) *t = kda_tensor_contiguous(nullptr, KDA_DTYPE_BF16, 4, s);
      p.beta = kda_tensor_contiguous(nullptr, KDA_DTYPE_BF16, 3, s);
      p.context_split = 1;
      size_t bytes = 0;
      kda_fwd_workspace_size(&p, &bytes);
      return bytes;
    };
    return query(16) - query(0);
  }();
  return r;
}

// What the two kernels' workspace (single_pass NEVER) must hold at least: the records, the check word
// and, for a forced split, the segment states and transitions (plan.h). 128-bit: a wrapped size shows.
unsigned __int128 workspace_lower_bound(const kda_fwd_params& p) {
  using U = unsigned __int128;
  const bool varlen = p.cu_seqlens.data != nullptr;
  const U B = static_cast<U>(p.q.shape[0]), T = static_cast<U>(p.q.shape[1]), HV = static_cast<U>(p.v.shape[2]);
  const U N = varlen ? static_cast<U>(p.cu_seqlens.shape[0] - 1) : B;
  const U vchunks = varlen ? (B * T + 15) / 16 + N : N * ((T + 15) / 16);
  U lb = vchunks * HV * record_bytes() + 256;
  if (p.context_split >= 2) {
    const U P = p.context_split < 64 ? p.context_split : 64;
    lb = (lb + 255) / 256 * 256 + N * HV * (2 * P - 3) * 128 * 128 * 4;
  }
  return lb;
}

// Sequences covering the same tokens (reads cu_seqlens: honest params only): kda_fwd_cpu rejects them.
std::string sequence_violation(Problem* pr) {
  kda_fwd_params& p = pr->p;
  if (p.cu_seqlens.data != nullptr) {
    const int64_t N = p.cu_seqlens.shape[0] - 1, total = p.q.shape[0] * p.q.shape[1];
    auto entry = [&](int64_t i) -> int64_t {
      if (raw_dtype(p.cu_seqlens) == KDA_DTYPE_I32) return static_cast<const int32_t*>(p.cu_seqlens.data)[i];
      return static_cast<const int64_t*>(p.cu_seqlens.data)[i];
    };
    int64_t reach = 0;
    for (int64_t n = 0; n < N; ++n) {
      const int64_t bos = std::clamp<int64_t>(entry(n), 0, total), eos = std::clamp<int64_t>(entry(n + 1), bos, total);
      if (eos > bos && bos < reach) return "sequences overlap (decreasing cu_seqlens)";
      reach = std::max(reach, eos);
    }
  }
  return "";
}

std::vector<std::vector<unsigned char>> snapshot(const Problem& pr) {
  std::vector<std::vector<unsigned char>> s(kSlots);
  for (int i = 0; i < kSlots; ++i) s[i].assign(pr.buf[i].base, pr.buf[i].base + pr.buf[i].bytes);
  return s;
}
void restore(Problem* pr, const std::vector<std::vector<unsigned char>>& s) {
  for (int i = 0; i < kSlots; ++i)
    if (!s[i].empty()) std::memcpy(pr->buf[i].base, s[i].data(), s[i].size());
}

float bf16f(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// out's elements and the final state's, as doubles.
std::vector<double> outputs(const kda_fwd_params& p) {
  std::vector<double> r;
  const kda_tensor& o = p.out;
  for (int64_t a = 0; a < o.shape[0]; ++a)
    for (int64_t b = 0; b < o.shape[1]; ++b)
      for (int64_t c = 0; c < o.shape[2]; ++c)
        for (int64_t e = 0; e < o.shape[3]; ++e)
          r.push_back(bf16f(static_cast<const uint16_t*>(o.data)[a * o.stride[0] + b * o.stride[1] + c * o.stride[2] + e]));
  const kda_tensor& f = p.final_state;
  if (f.data != nullptr) {
    const int64_t n = f.shape[0] * f.shape[1] * f.shape[2] * f.shape[3];
    for (int64_t i = 0; i < n; ++i)
      r.push_back(raw_dtype(f) == KDA_DTYPE_F32 ? static_cast<const float*>(f.data)[i]
                                                : bf16f(static_cast<const uint16_t*>(f.data)[i]));
  }
  return r;
}

double rel_l2(const std::vector<double>& x, const std::vector<double>& y) {
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) num += (x[i] - y[i]) * (x[i] - y[i]), den += y[i] * y[i];
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

}  // namespace

const Stats& stats() { return g_stats; }
void set_verbose(bool verbose) { g_verbose = verbose; }

void run_one(const uint8_t* data, size_t size) {
  Problem problem;
  Problem* pr = &problem;
  build(data, size, pr);
  kda_fwd_params& p = pr->p;
  ++g_stats.inputs;

  // kda_tensor_contiguous on arbitrary arguments: never a crash; non-negative shapes give
  // non-negative strides.
  {
    const int64_t shape[4] = {static_cast<int64_t>(pr->h.seed), static_cast<int64_t>(pr->h.seed >> 3), 1, 128};
    const kda_tensor t = kda_fuzz_tensor_contiguous(nullptr, raw_dtype(p.q), static_cast<int8_t>(pr->h.seed >> 56),
                                                    (pr->h.seed & 1) ? shape : nullptr);
    for (int d = 0; d < t.ndim && d < 4; ++d)
      if (t.shape[d] >= 0 && t.stride[d] < 0) fail(*pr, "kda_tensor_contiguous: negative stride");
  }

  // The shape-only query.
  size_t needed = 0;
  const kda_status ws = kda_fwd_workspace_size(&p, &needed);
  if (ws.code == KDA_OK) {
    ++g_stats.shape_query_ok;
    // The records' bound holds for the two kernels' size (KDA_SINGLE_PASS_NEVER), which the header
    // promises covers every choice: a call the single pass covers whole needs only a few hundred bytes
    // (found by libFuzzer: one sequence of 65,535 value heads, 256 bytes).
    kda_fwd_params never = p;
    never.single_pass = KDA_SINGLE_PASS_NEVER;
    size_t two_kernels = 0;
    const kda_status wn = kda_fwd_workspace_size(&never, &two_kernels);
    if (wn.code != KDA_OK)
      fail(*pr, std::string("kda_fwd_workspace_size: accepted, but refused with single_pass NEVER: ") + wn.message);
    if (two_kernels < needed)
      fail(*pr, "kda_fwd_workspace_size: " + std::to_string(two_kernels) + " bytes with single_pass NEVER, less than the " +
                    std::to_string(needed) + " of single_pass " + std::to_string(p.single_pass));
    const unsigned __int128 lb = workspace_lower_bound(p);
    if (lb > static_cast<unsigned __int128>(SIZE_MAX) || two_kernels < lb)
      fail(*pr, "kda_fwd_workspace_size: " + std::to_string(two_kernels) +
                    " bytes with single_pass NEVER is less than the records need");
  }

  // kda_fwd: host checks first; a GPU is never reached with these host pointers.
  const int wmode = pr->h.workspace % 6;
  unsigned char* fake = reinterpret_cast<unsigned char*>(uintptr_t{1} << 20);
  void* workspace = nullptr;
  size_t given = 0;
  const size_t want = ws.code == KDA_OK ? needed : 4096;
  switch (wmode) {
    case 0: break;
    case 1: given = want; break;
    case 2: workspace = fake, given = want; break;
    case 3: workspace = fake, given = want - 1; break;
    case 4: workspace = fake + 16, given = want; break;
    default: workspace = pr->buf[0].base, given = want; break;  // overlaps q
  }
  const kda_status dev = kda_fwd(&p, workspace, given, nullptr);
  if (dev.code == KDA_OK) fail(*pr, "kda_fwd returned KDA_OK without a device call");
  if (ws.code != KDA_OK && std::strcmp(ws.message, dev.message) != 0 && !device_rule(dev))
    fail(*pr, std::string("kda_fwd and the shape query disagree: '") + dev.message + "' vs '" + ws.message + "'");
  if (reached_device(dev)) {
    bool ws_overlap = false;
    const Range wr{reinterpret_cast<uintptr_t>(workspace), reinterpret_cast<uintptr_t>(workspace) + given};
    const bool well_formed = honest(pr);
    for (int i = 0; i < kSlots && well_formed; ++i)
      if (slot(p, i)->data != nullptr && overlap(wr, range_of(*slot(p, i)))) ws_overlap = true;
    if (ws.code != KDA_OK || given < needed || workspace == nullptr || reinterpret_cast<uintptr_t>(workspace) % 256 ||
        ws_overlap)
      fail(*pr, std::string("kda_fwd looked at the device before a host-checkable error: ") + dev.message);
    const std::string violation = address_violation(pr);
    if (!violation.empty()) fail(*pr, "kda_fwd accepted params that break a memory rule: " + violation);
    for (int i = 0; i < kSlots; ++i) {  // every tensor it accepted has a dtype the kernels read
      const int32_t dt = raw_dtype(*slot(p, i));
      if (slot(p, i)->data != nullptr && dt != KDA_DTYPE_BF16 && dt != KDA_DTYPE_F32 && dt != KDA_DTYPE_I32 &&
          dt != KDA_DTYPE_I64)
        fail(*pr, std::string("kda_fwd accepted ") + kSlotNames[i] + " with dtype " + std::to_string(dt));
    }
  }

  if (g_verbose)
    std::printf("%s\n  shape query: %s | kda_fwd: %s | honest %d\n", pr->describe().c_str(), ws.code ? ws.message : "ok",
                dev.message, honest(pr) ? 1 : 0);
  if (!honest(pr)) return;  // the CPU path would read what the params claim: only honest params
  ++g_stats.honest;

  const int32_t algo = pr->h.algorithm < 2 ? pr->h.algorithm : pr->h.algorithm_raw;
  const auto before = snapshot(*pr);
  const kda_status cpu = kda_fuzz_fwd_cpu(&p, algo, pr->threads);
  if (ws.code != KDA_OK) {
    if (cpu.code == KDA_OK) fail(*pr, std::string("kda_fwd_cpu accepted what the shape query rejected: ") + ws.message);
    if (std::strcmp(ws.message, cpu.message) != 0 && !data_rule(cpu))
      fail(*pr, std::string("kda_fwd_cpu and the shape query disagree: '") + cpu.message + "' vs '" + ws.message + "'");
    return;
  }
  if (cpu.code != KDA_OK) {
    if (!data_rule(cpu) && !has(cpu, "cu_seqlens: expected") && !has(cpu, "algorithm:"))
      fail(*pr, std::string("kda_fwd_cpu rejected what the shape query accepted: ") + cpu.message);
    return;
  }
  ++g_stats.cpu_ok;
  const std::string violation = address_violation(pr) + sequence_violation(pr);
  if (!violation.empty()) fail(*pr, "kda_fwd_cpu accepted params that break a memory rule: " + violation);

  // Deterministic whatever the thread count.
  const auto first = snapshot(*pr);
  restore(pr, before);
  if (kda_fuzz_fwd_cpu(&p, algo, 1 + pr->threads % 4).code != KDA_OK) fail(*pr, "second run failed");
  if (snapshot(*pr) != first) fail(*pr, "kda_fwd_cpu is not deterministic across thread counts");

  // Tame inputs: finite outputs, and the two CPU paths agree.
  const int32_t gate = raw_gate(p);
  // (Any scale validation accepts keeps tame outputs finite: |out| <= |scale| |S| with |S| small.)
  const bool tame = pr->value_mode <= 3 && !pr->values_changed && p.qk_l2norm == 1 &&
                    (p.beta_sigmoid == 1 || ((pr->h.options >> 4) & 1) == 0) && gate == ((pr->h.layout >> 1) & 3);
  if (g_verbose) std::printf("  kda_fwd_cpu: ok, tame %d\n", tame ? 1 : 0);
  if (!tame) return;
  ++g_stats.tame_checked;
  const std::vector<double> mine = outputs(p);
  for (double x : mine)
    if (!std::isfinite(x)) fail(*pr, "non-finite output on tame inputs");
  restore(pr, before);
  const int32_t other = algo == KDA_CPU_RECURRENCE_F64 ? KDA_CPU_CHUNKED_F32 : KDA_CPU_RECURRENCE_F64;
  if (kda_fuzz_fwd_cpu(&p, other, pr->threads).code != KDA_OK) fail(*pr, "the other CPU path failed");
  const double err = rel_l2(mine, outputs(p));
  if (g_verbose) std::printf("  the other CPU path: relative L2 %.3e\n", err);
  if (!(err <= 1e-2)) fail(*pr, "the CPU paths disagree on tame inputs: relative L2 " + std::to_string(err));
}

}  // namespace kda::fuzz
