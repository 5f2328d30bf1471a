// The fuzz harness of the context-parallel entry points (fuzz_case.h, run_one_cp): a byte string
// decodes into kda_fwd's problem (fuzz_build.cpp: the honest shard, then the mutations of its params);
// a hash of the bytes then lays out the transition's D and M, the workspace, and a combine's D, M,
// initial_state, start_states and end_state (packed either order, separate, absent, aliased with each
// other or with an input, misaligned, one field set to an interesting integer; drawn from a hash of
// the input's bytes). No GPU is touched: the
// calls stop at the device check (none here) or the pointer check (host memory), so D, M and the
// combine's tensors are stand-in addresses that no host check may read. The invariants:
//  - no crash, no sanitizer report (ASan + UBSan in the fuzz build), whatever the arguments;
//  - every call returns an error, never KDA_OK, and the error's message names its argument ("name: ...");
//  - kda_segment_transition fails as its size query does, up to the rules on data pointers; when it
//    gets as far as the device: the query accepted, the workspace holds the query's bytes (aligned),
//    D and M are f32 [N_t, HV, 128, 128] with 1 <= N_t <= N and dense matrices, every matrix of D and M
//    shares no byte with another, with an input of the shard or with the workspace;
//  - kda_fwd_prepared, when it gets as far as the device: the transition's query accepts its params,
//    the workspace holds what it needs (aligned) and shares no byte with a tensor, and kda_fwd's
//    memory rules hold (out and final_state overlap nothing else, final_state may be initial_state);
//  - kda_combine_transitions, when it gets as far as the device: R >= 1, D and M f32 [R N, HV, 128,
//    128] alike with dense matrices, initial_state (if any) [N, HV, 128, 128] f32 or bf16, at least one
//    output, and every output matrix shares no byte with another output matrix or with an input.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_build.h"

namespace kda::fuzz {

namespace {

constexpr int64_t D = 128;
constexpr uint64_t kMatrixBytes = D * D * 4;
const int64_t kInts[] = {0, 1, 2, 3, 4, 7, 8, 16, 127, 128, 129, 256, 16384, -1, -4, -128, 65536,
                         2147483647, 2147483648LL, 1LL << 40, 1LL << 62, INT64_MAX, INT64_MIN};
constexpr size_t kNumInts = sizeof(kInts) / sizeof(int64_t);
constexpr int kInputs[] = {0, 1, 2, 3, 4, 6, 7, 10};  // q, k, v, g, beta, A_log, dt_bias, cu_seqlens

CpStats g_cstats;

struct Cp {
  Problem pr;
  kda_tensor D{}, M{};                           // the transition's
  void* ws = nullptr;
  size_t given = 0;
  int64_t R = 1;                                 // the combine's
  kda_tensor cD{}, cM{}, init{}, start{}, end{};
  std::string layout;                            // how the hash laid them out, for the report
};

std::string describe_tensor(const char* name, const kda_tensor& t) {
  std::string s = std::string("  ") + name + ": data " + std::to_string(reinterpret_cast<uintptr_t>(t.data)) + " dtype " +
                  std::to_string(raw_dtype(t)) + " ndim " + std::to_string(t.ndim) + " shape [";
  for (int d = 0; d < 4; ++d) s += (d ? ", " : "") + std::to_string(t.shape[d]);
  s += "] strides [";
  for (int d = 0; d < 4; ++d) s += (d ? ", " : "") + std::to_string(t.stride[d]);
  return s + "]\n";
}

[[noreturn]] void fail(const Cp& c, const std::string& what) {
  std::string s = c.pr.describe() + "\n  cp layout: " + c.layout + "\n";
  s += describe_tensor("D", c.D) + describe_tensor("M", c.M) + "  workspace " +
       std::to_string(reinterpret_cast<uintptr_t>(c.ws)) + " bytes " + std::to_string(c.given) + "\n  combine R " +
       std::to_string(c.R) + "\n" + describe_tensor("combine D", c.cD) + describe_tensor("combine M", c.cM) +
       describe_tensor("initial_state", c.init) + describe_tensor("start_states", c.start) +
       describe_tensor("end_state", c.end);
  std::fprintf(stderr, "\nFUZZ INVARIANT BROKEN (context parallelism): %s\n%s\n", what.c_str(), s.c_str());
  std::fflush(stderr);
  std::abort();
}

// An error names its argument: a message "name: ..." (or "name and name: ...").
void check_named(const Cp& c, const char* call, const kda_status& s) {
  if (s.code == KDA_OK) fail(c, std::string(call) + " returned KDA_OK without a device call");
  const char* colon = std::strstr(s.message, ": ");
  if (colon == nullptr || colon == s.message || colon - s.message > 64)
    fail(c, std::string(call) + ": an error that names no argument: '" + s.message + "'");
}

// Stand-in addresses for tensors that no host check may read: far above the heap, 256-byte aligned.
struct Arena {
  uintptr_t next = uintptr_t{1} << 44;
  unsigned char* take(uint64_t bytes) {
    unsigned char* p = reinterpret_cast<unsigned char*>(next);
    next += (bytes / 256 + 2) * 256;
    return p;
  }
};

kda_tensor matrices(void* data, int64_t rows, int64_t HV) {
  const int64_t shape[4] = {rows, HV, D, D};
  return kda_tensor_contiguous(data, KDA_DTYPE_F32, 4, shape);
}

// One field of t set to an interesting value, or its pointer moved (rng's choice).
void mutate(kda_tensor* t, Rng& rng, const Problem& pr) {
  const int64_t v = kInts[rng.next() % kNumInts];
  const int d = static_cast<int>(rng.next() % 4);
  switch (rng.next() % 7) {
    case 0: t->shape[d] = v; break;
    case 1: t->stride[d] = v; break;
    case 2: {  // a raw dtype, -1 to 6 (as the C API receives integers)
      const int32_t dt = static_cast<int32_t>(rng.next() % 8) - 1;
      std::memcpy(&t->dtype, &dt, sizeof dt);
      break;
    }
    case 3: t->ndim = static_cast<int32_t>(rng.next() % 6); break;
    case 4: if (t->data != nullptr) t->data = static_cast<unsigned char*>(t->data) + 4 * (1 + rng.next() % 7); break;
    case 5: t->data = nullptr; break;
    default: t->data = pr.buf[kInputs[rng.next() % 8]].base; break;  // onto an input's buffer (maybe none)
  }
}

// Whether t is what the device reads as matrices: f32, 4-D [a, b, 128, 128], 16-byte aligned data,
// dense [128, 128] matrices, stride[0] and stride[1] non-negative multiples of 4 elements where
// their dimension exceeds 1. Then (at most 4096 matrices; more: none listed, and true) the byte
// ranges of its matrices.
bool matrix_ranges(const kda_tensor& t, std::vector<Range>* out) {
  out->clear();
  if (t.data == nullptr || raw_dtype(t) != KDA_DTYPE_F32 || t.ndim != 4 || t.shape[2] != D || t.shape[3] != D ||
      t.stride[2] != D || t.stride[3] != 1 || t.shape[0] < 0 || t.shape[1] < 0 ||
      reinterpret_cast<uintptr_t>(t.data) % 16 != 0)
    return false;
  for (int d = 0; d < 2; ++d)
    if (t.shape[d] > 1 && (t.stride[d] < 0 || t.stride[d] % 4 != 0)) return false;
  if (t.shape[0] > 4096 || t.shape[1] > 4096 || t.shape[0] * t.shape[1] > 4096) return true;
  const unsigned __int128 base = reinterpret_cast<uintptr_t>(t.data);
  for (int64_t a = 0; a < t.shape[0]; ++a)
    for (int64_t b = 0; b < t.shape[1]; ++b) {
      const __int128 off = (static_cast<__int128>(a) * t.stride[0] + static_cast<__int128>(b) * t.stride[1]) * 4;
      if (off < 0) return false;
      Range r;
      r.lo = base + static_cast<unsigned __int128>(off);
      r.hi = r.lo + kMatrixBytes;
      out->push_back(r);
    }
  return true;
}

std::string first_overlap(const std::vector<Range>& a, const std::vector<Range>& b, bool same) {
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = same ? i + 1 : 0; j < b.size(); ++j)
      if (overlap(a[i], b[j])) return "matrices " + std::to_string(i) + " and " + std::to_string(j) + " share bytes";
  return "";
}

int64_t sequences(const kda_fwd_params& p) {  // (any shape: a mutated one may be INT64_MIN)
  return p.cu_seqlens.data != nullptr ? (p.cu_seqlens.shape[0] > 0 ? p.cu_seqlens.shape[0] - 1 : 0) : p.q.shape[0];
}
int64_t value_heads(const kda_fwd_params& p) { return p.v.shape[2]; }

// The layout of the transition's D and M and of the combine's tensors, drawn from a hash of the whole
// input (any mutation of the bytes draws another).
void lay_out(Cp* c, Arena& arena, uint64_t hash) {
  const kda_fwd_params& p = c->pr.p;
  Rng rng{hash};
  const int64_t N = std::max<int64_t>(1, std::min<int64_t>(sequences(p), 4));
  const int64_t HV = std::max<int64_t>(1, std::min<int64_t>(value_heads(p), 4));
  const int64_t nt = 1 + static_cast<int64_t>(rng.next() % N);
  const int dm = static_cast<int>(rng.next() % 8);
  c->layout = "D/M " + std::to_string(dm);
  unsigned char* packed = arena.take(2 * static_cast<uint64_t>(nt * HV) * kMatrixBytes);
  auto packed_view = [&](int which) {  // [nt, HV, 256, 128] with D's rows then M's (or M's first)
    kda_tensor t = matrices(packed + which * kMatrixBytes, nt, HV);
    t.stride[0] = 2 * HV * D * D;
    t.stride[1] = 2 * D * D;
    return t;
  };
  switch (dm) {
    case 0: c->D = packed_view(0), c->M = packed_view(1); break;
    case 1: c->D = packed_view(1), c->M = packed_view(0); break;
    case 2: c->D = matrices(packed, nt, HV), c->M = matrices(packed + nt * HV * kMatrixBytes, nt, HV); break;
    case 3: break;  // neither: the preparation only
    case 4: c->D = matrices(packed, nt, HV); break;  // D only
    case 5: c->D = c->M = matrices(packed, nt, HV); break;  // the same memory
    case 6: c->D = matrices(packed, nt, HV), c->M = matrices(packed + kMatrixBytes / 2, nt, HV); break;
    default: c->D = matrices(packed, nt, HV), c->M = matrices(c->pr.buf[2].base, nt, HV); break;  // M over v
  }
  if (rng.next() % 6 == 0 && c->D.data != nullptr && c->M.data != nullptr) {  // N_t of both: 0, N + 1, huge
    const int64_t rows = rng.next() % 2 ? std::min<int64_t>(sequences(p), int64_t{1} << 40) + 1 : kInts[rng.next() % kNumInts];
    c->D = matrices(arena.take(0), rows, HV);
    c->M = matrices(reinterpret_cast<unsigned char*>(c->D.data) + (uint64_t{1} << 52), rows, HV);  // far apart
    arena.next += uint64_t{1} << 53;
    c->layout += ", rows " + std::to_string(rows);
  } else if (rng.next() % 3 == 0) {
    mutate(rng.next() % 2 ? &c->D : &c->M, rng, c->pr);
  }

  // The workspace: the query's bytes (with these D and M) given in several ways.
  size_t want = 0;
  if (kda_segment_transition_workspace_size(&p, c->D, c->M, &want).code != KDA_OK) want = 4096;
  const int wmode = static_cast<int>(rng.next() % 7);
  c->layout += ", workspace " + std::to_string(wmode);
  unsigned char* ws = arena.take(want + 512);
  switch (wmode) {
    case 0: c->ws = nullptr, c->given = want; break;
    case 1: c->ws = ws, c->given = want; break;
    case 2: c->ws = ws, c->given = want > 0 ? want - 1 : 0; break;
    case 3: c->ws = ws + 16, c->given = want; break;
    case 4: c->ws = c->pr.buf[0].base, c->given = want; break;  // over q
    case 5: c->ws = c->D.data != nullptr ? c->D.data : ws, c->given = want; break;  // over D
    default: c->ws = ws, c->given = want + 256; break;
  }

  // The combine: R shards of N sequences.
  c->R = rng.next() % 5 == 0 ? kInts[rng.next() % kNumInts] : 1 + static_cast<int64_t>(rng.next() % 3);
  const int64_t R = c->R >= 1 && c->R <= 3 ? c->R : 2;
  unsigned char* cpacked = arena.take(2 * static_cast<uint64_t>(R * N * HV) * kMatrixBytes);
  c->cD = matrices(cpacked, R * N, HV);
  c->cM = matrices(cpacked + R * N * HV * kMatrixBytes, R * N, HV);
  if (rng.next() % 2) {  // packed, either order
    c->cD.stride[0] = c->cM.stride[0] = 2 * HV * D * D;
    c->cD.stride[1] = c->cM.stride[1] = 2 * D * D;
    c->cM.data = cpacked + kMatrixBytes;
  }
  const int64_t st[4] = {N, HV, D, D};
  const int i = static_cast<int>(rng.next() % 3);
  if (i > 0) c->init = kda_tensor_contiguous(arena.take(N * HV * kMatrixBytes), i == 1 ? KDA_DTYPE_BF16 : KDA_DTYPE_F32, 4, st);
  const int o = static_cast<int>(rng.next() % 4);  // outputs: start, end, both, neither
  if (o == 0 || o == 2) c->start = matrices(arena.take(R * N * HV * kMatrixBytes), R * N, HV);
  if (o == 1 || o == 2) c->end = matrices(arena.take(N * HV * kMatrixBytes), N, HV);
  const int alias = static_cast<int>(rng.next() % 8);
  c->layout += ", combine outputs " + std::to_string(o) + " alias " + std::to_string(alias);
  switch (alias) {
    case 0: if (c->start.data) c->start.data = c->cD.data; break;           // start_states over D
    case 1: if (c->end.data && c->init.data) c->end.data = c->init.data; break;  // in place (refused)
    case 2: if (c->end.data && c->start.data) c->end.data = c->start.data; break;
    case 3: if (c->start.data) c->start.stride[0] = 0; break;               // rows alias
    default: break;
  }
  if (rng.next() % 6 == 0) {  // the rows of D and M together (R N): any count, far apart
    const int64_t rows = kInts[rng.next() % kNumInts], heads = rng.next() % 2 ? HV : kInts[rng.next() % kNumInts];
    c->cD = matrices(arena.take(0), rows, heads);
    c->cM = matrices(reinterpret_cast<unsigned char*>(c->cD.data) + (uint64_t{1} << 52), rows, heads);
    c->init = c->start = kda_tensor{};  // the end state alone, of the rows' N, far apart too
    c->end = matrices(reinterpret_cast<unsigned char*>(c->cD.data) + (uint64_t{1} << 53), c->R > 0 ? rows / c->R : rows, heads);
    arena.next += uint64_t{1} << 54;
    c->layout += ", combine rows " + std::to_string(rows) + " heads " + std::to_string(heads);
  } else if (rng.next() % 3 == 0) {
    kda_tensor* ts[5] = {&c->cD, &c->cM, &c->init, &c->start, &c->end};
    mutate(ts[rng.next() % 5], rng, c->pr);
  }
}

// Ranges of the shard's inputs (the slots that are well formed).
std::vector<Range> input_ranges(Problem* pr, bool with_outputs) {
  std::vector<Range> r;
  for (int i = 0; i < kSlots; ++i) {
    const bool input = i != 5 && i != 8 && i != 9;
    if (!input && !with_outputs) continue;
    const kda_tensor* t = slot(pr->p, i);
    unsigned __int128 bytes = 0;
    if (t->data != nullptr && span_bytes(*t, &bytes)) r.push_back(range_of(*t));
  }
  return r;
}

bool any_overlap(const Range& a, const std::vector<Range>& rs) {
  for (const Range& r : rs)
    if (overlap(a, r)) return true;
  return false;
}

// NULL where a pointer is required: each call names it.
void check_null_pointers(Cp* c, uint64_t hash) {
  const kda_fwd_params& p = c->pr.p;
  switch (hash % 16) {
    case 0: check_named(*c, "kda_segment_transition_workspace_size(NULL params)",
                        kda_segment_transition_workspace_size(nullptr, c->D, c->M, &c->given)); break;
    case 1: check_named(*c, "kda_segment_transition_workspace_size(NULL bytes)",
                        kda_segment_transition_workspace_size(&p, c->D, c->M, nullptr)); break;
    case 2: check_named(*c, "kda_segment_transition(NULL params)",
                        kda_segment_transition(nullptr, c->D, c->M, c->ws, c->given, nullptr)); break;
    case 3: check_named(*c, "kda_fwd_prepared(NULL params)", kda_fwd_prepared(nullptr, c->ws, c->given, nullptr)); break;
    default: break;
  }
}

void check_transition(Cp* c) {
  Problem* pr = &c->pr;
  const kda_fwd_params& p = pr->p;
  size_t bytes = 0;
  const kda_status q = kda_segment_transition_workspace_size(&p, c->D, c->M, &bytes);
  if (q.code != KDA_OK) check_named(*c, "kda_segment_transition_workspace_size", q);
  const kda_status s = kda_segment_transition(&p, c->D, c->M, c->ws, c->given, nullptr);
  check_named(*c, "kda_segment_transition", s);
  if (q.code != KDA_OK && std::strcmp(q.message, s.message) != 0 && !device_rule(s))
    fail(*c, std::string("kda_segment_transition and its size query disagree: '") + s.message + "' vs '" + q.message + "'");
  if (!reached_device(s)) return;
  ++g_cstats.transition_reached;
  if (q.code != KDA_OK) fail(*c, std::string("kda_segment_transition reached the device past its query's error: ") + q.message);
  const uintptr_t w = reinterpret_cast<uintptr_t>(c->ws);
  if (c->given < bytes || (bytes > 0 && (w == 0 || w % 256 != 0)))
    fail(*c, "kda_segment_transition reached the device with a workspace the host could refuse");
  Range wr;
  wr.lo = w, wr.hi = w + bytes;
  const std::vector<Range> inputs = input_ranges(pr, false);
  if (any_overlap(wr, inputs)) fail(*c, "kda_segment_transition accepted a workspace over an input");
  if (c->D.data == nullptr && c->M.data == nullptr) return;
  std::vector<Range> dr, mr;
  const int64_t nt = c->D.shape[0];
  if (!matrix_ranges(c->D, &dr) || !matrix_ranges(c->M, &mr) || c->M.shape[0] != nt || nt < 1 || nt > sequences(p) ||
      c->D.shape[1] != value_heads(p) || c->M.shape[1] != value_heads(p))
    fail(*c, "kda_segment_transition accepted D or M that is not f32 [N_t, HV, 128, 128] of dense matrices, 16-byte aligned");
  std::vector<Range> all = dr;
  all.insert(all.end(), mr.begin(), mr.end());
  const std::string o = first_overlap(all, all, true);
  if (!o.empty()) fail(*c, "kda_segment_transition accepted D and M whose " + o);
  for (const Range& r : all)
    if (any_overlap(r, inputs) || overlap(r, wr)) fail(*c, "kda_segment_transition accepted D or M over an input or the workspace");
}

void check_prepared(Cp* c) {
  Problem* pr = &c->pr;
  const kda_fwd_params& p = pr->p;
  const kda_status s = kda_fwd_prepared(&p, c->ws, c->given, nullptr);
  check_named(*c, "kda_fwd_prepared", s);
  if (!reached_device(s)) return;
  ++g_cstats.prepared_reached;
  size_t query = 0;
  const kda_status q = kda_segment_transition_workspace_size(&p, kda_tensor{}, kda_tensor{}, &query);
  if (q.code != KDA_OK) fail(*c, std::string("kda_fwd_prepared reached the device where the shard's query refuses: ") + q.message);
  // What it needs: the error it gives with no workspace (none: it needs none).
  const kda_status n = kda_fwd_prepared(&p, nullptr, 0, nullptr);
  size_t needed = 0;
  if (n.code == KDA_ERROR_WORKSPACE_TOO_SMALL) {
    const char* at = std::strstr(n.message, "at least ");
    needed = at != nullptr ? std::strtoull(at + 9, nullptr, 10) : 0;
    if (needed == 0) fail(*c, std::string("kda_fwd_prepared: a workspace error without a size: ") + n.message);
  } else if (!reached_device(n)) {
    fail(*c, std::string("kda_fwd_prepared: refused without a workspace for another reason: ") + n.message);
  }
  if (needed > query) fail(*c, "kda_fwd_prepared needs " + std::to_string(needed) + " bytes, more than the query's " + std::to_string(query));
  const uintptr_t w = reinterpret_cast<uintptr_t>(c->ws);
  if (c->given < needed || (needed > 0 && (w == 0 || w % 256 != 0)))
    fail(*c, "kda_fwd_prepared reached the device with a workspace the host could refuse");
  Range wr;
  wr.lo = w, wr.hi = w + needed;
  if (any_overlap(wr, input_ranges(pr, true))) fail(*c, "kda_fwd_prepared accepted a workspace over a tensor");
  if (honest(pr)) {
    const std::string v = address_violation(pr);
    if (!v.empty()) fail(*c, "kda_fwd_prepared accepted params that break a memory rule: " + v);
  }
}

void check_combine(Cp* c) {
  const kda_status s = kda_combine_transitions(c->R, c->cD, c->cM, c->init, c->start, c->end, nullptr);
  check_named(*c, "kda_combine_transitions", s);
  if (!reached_device(s)) return;
  ++g_cstats.combine_reached;
  std::vector<Range> dr, mr, sr, er;
  if (c->R < 1 || !matrix_ranges(c->cD, &dr) || !matrix_ranges(c->cM, &mr) || c->cD.shape[0] != c->cM.shape[0] ||
      c->cD.shape[1] != c->cM.shape[1] || c->cD.shape[0] % c->R != 0)
    fail(*c, "kda_combine_transitions accepted D and M that are not f32 [R N, HV, 128, 128] alike");
  const int64_t N = c->cD.shape[0] / c->R, HV = c->cD.shape[1];
  if (N > 0 && HV > (int64_t{0x7fffffff} / 16) / N) fail(*c, "kda_combine_transitions accepted N x HV past one grid");
  if (c->start.data == nullptr && c->end.data == nullptr) fail(*c, "kda_combine_transitions accepted no output");
  if (c->start.data != nullptr && (!matrix_ranges(c->start, &sr) || c->start.shape[0] != N * c->R || c->start.shape[1] != HV))
    fail(*c, "kda_combine_transitions accepted start_states that are not f32 [R N, HV, 128, 128]");
  if (c->end.data != nullptr && (!matrix_ranges(c->end, &er) || c->end.shape[0] != N || c->end.shape[1] != HV))
    fail(*c, "kda_combine_transitions accepted an end_state that is not f32 [N, HV, 128, 128]");
  std::vector<Range> inputs = dr;
  inputs.insert(inputs.end(), mr.begin(), mr.end());
  if (c->init.data != nullptr) {
    const int32_t dt = raw_dtype(c->init);
    unsigned __int128 bytes = 0;
    if ((dt != KDA_DTYPE_F32 && dt != KDA_DTYPE_BF16) || c->init.ndim != 4 || c->init.shape[0] != N ||
        c->init.shape[1] != HV || c->init.shape[2] != D || c->init.shape[3] != D || !span_bytes(c->init, &bytes))
      fail(*c, "kda_combine_transitions accepted an initial_state that is not [N, HV, 128, 128] f32 or bf16");
    inputs.push_back(range_of(c->init));
  }
  std::vector<Range> outs = sr;
  outs.insert(outs.end(), er.begin(), er.end());
  const std::string o = first_overlap(outs, outs, true);
  if (!o.empty()) fail(*c, "kda_combine_transitions accepted outputs whose " + o);
  for (const Range& r : outs)
    if (any_overlap(r, inputs)) fail(*c, "kda_combine_transitions accepted an output over an input");
}

}  // namespace

const CpStats& cp_stats() { return g_cstats; }

void run_one_cp(const uint8_t* data, size_t size) {
  Cp c;
  build(data, size, &c.pr);
  ++g_cstats.inputs;
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a
  for (size_t i = 0; i < size; ++i) hash = (hash ^ data[i]) * 0x100000001b3ull;
  Arena arena;
  lay_out(&c, arena, hash);
  check_null_pointers(&c, hash >> 32);
  check_transition(&c);
  check_prepared(&c);
  check_combine(&c);
}

}  // namespace kda::fuzz
