// The fuzz harness of kda_decode and kda_decode_cpu (fuzz_case.h, run_one_decode): a byte string
// decodes into a small honest decode / verify problem over a state pool (host buffers large enough for
// the shapes it declares, slot indices 1-D or 2-D with num_accepted_tokens, cu_seqlens, contents that
// may name slots out of range, twice, or negative), then mutations of the kda_decode_params (raw shapes,
// strides, dtypes and enum values, aliased, missing or misaligned pointers, flags, and single entries of
// the index tensors set to interesting integers), then the calls and their invariants:
//  - no crash, no sanitizer report (ASan + UBSan in the fuzz build), whatever the params and the
//    contents hold: the header's "without check_indices, bad contents never cause an out-of-bounds
//    access" is checked here by the sanitizer on the CPU path;
//  - kda_decode (no GPU is touched): never KDA_OK; when it gets as far as the device, the memory rules
//    hold (out and state_pool, both written, overlap no other tensor, each other or themselves);
//  - kda_decode_cpu, on params whose tensors lie inside their buffers: an error names its argument
//    ("name: ..."); an accepted call leaves every input byte unchanged and every byte of the pool
//    outside the slots the indices name (slot n for sequence n without indices), gives zero output
//    rows to a sequence whose start slot is negative or >= slots (fixed-length batches), with
//    check_indices accepts only contents that the header allows, and, where no two sequences name
//    one slot, gives the same bytes with another thread count. (What may change is judged by address:
//    a mutation may place out or the pool in another tensor's buffer, past that tensor's span.)
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_build.h"

namespace kda::fuzz {

namespace {

constexpr int64_t D = 128;
constexpr int kDSlots = 12;  // q, k, v, g, beta, out, A_log, dt_bias, state_pool, state_indices, num_accepted, cu
constexpr const char* kDNames[kDSlots] = {"q",       "k",          "v",     "g",        "beta",
                                          "out",     "A_log",      "dt_bias", "state_pool", "state_indices",
                                          "num_accepted_tokens", "cu_seqlens"};
constexpr int kOut = 5, kPool = 8, kIdx = 9, kAcc = 10, kCu = 11;
const int64_t kInts[] = {0, 1, 2, 3, 4, 5, 7, 8, 16, 127, 128, -1, -2, -128, 255, 256, 65536, 2147483647,
                         2147483648LL, 4294967296LL, 1LL << 40, 1LL << 62, INT64_MAX, INT64_MIN};
constexpr size_t kNumInts = sizeof(kInts) / sizeof(int64_t);

DecodeStats g_dstats;

struct DProblem {
  kda_decode_params p{};
  Buffer buf[kDSlots];
  int64_t N = 0, T = 0, cols = 0;  // sequences, tokens per sequence (fixed) or packed length, index columns
  int threads = 1;
  std::vector<uint8_t> ops;  // the raw op bytes, for the report
  std::string describe() const {
    std::string s = "decode problem: N " + std::to_string(N) + " T " + std::to_string(T) + " threads " +
                    std::to_string(threads) + " check_indices " + std::to_string(p.check_indices) + "\n";
    for (int i = 0; i < kDSlots; ++i) {
      const kda_tensor& t = const_cast<DProblem*>(this)->tensor(i);
      s += std::string("  ") + kDNames[i] + ": data " + (t.data ? "set" : "NULL") + " dtype " +
           std::to_string(raw_dtype(t)) + " ndim " + std::to_string(t.ndim) + " shape [";
      for (int d = 0; d < 4; ++d) s += (d ? ", " : "") + std::to_string(t.shape[d]);
      s += "] strides [";
      for (int d = 0; d < 4; ++d) s += (d ? ", " : "") + std::to_string(t.stride[d]);
      s += "]\n";
    }
    for (int i = kIdx; i < kDSlots; ++i) {  // the index tensors' contents, as stored (up to 16 entries)
      const kda_tensor& t = const_cast<DProblem*>(this)->tensor(i);
      const size_t w = raw_dtype(t) == KDA_DTYPE_I64 ? 8 : 4;
      if (buf[i].base == nullptr) continue;
      s += std::string("  ") + kDNames[i] + " contents:";
      for (size_t e = 0; e < 16 && (e + 1) * w <= buf[i].bytes; ++e) {
        int64_t v = 0;
        if (w == 8) std::memcpy(&v, buf[i].base + 8 * e, 8);
        else {
          int32_t v32;
          std::memcpy(&v32, buf[i].base + 4 * e, 4);
          v = v32;
        }
        s += " " + std::to_string(v);
      }
      s += "\n";
    }
    s += "  op bytes:";
    for (uint8_t b : ops) s += " " + std::to_string(b);
    return s;
  }
  kda_tensor& tensor(int i) {
    kda_tensor* all[kDSlots] = {&p.q,     &p.k,       &p.v,          &p.g,           &p.beta,
                                &p.out,   &p.A_log,   &p.dt_bias,    &p.state_pool,  &p.state_indices,
                                &p.num_accepted_tokens, &p.cu_seqlens};
    return *all[i];
  }
};

[[noreturn]] void fail(const DProblem& pr, const std::string& what) {
  std::fprintf(stderr, "\nFUZZ INVARIANT BROKEN (decode): %s\n%s\n", what.c_str(), pr.describe().c_str());
  std::fflush(stderr);
  std::abort();
}

struct Bytes {
  const uint8_t* p;
  size_t n, i = 0;
  uint8_t u8() { return i < n ? p[i++] : 0; }
};

int64_t read_int(const kda_tensor& t, int64_t elem) {
  return raw_dtype(t) == KDA_DTYPE_I64 ? static_cast<const int64_t*>(t.data)[elem]
                                       : static_cast<const int32_t*>(t.data)[elem];
}
void write_int(kda_tensor& t, int64_t elem, int64_t v) {
  if (raw_dtype(t) == KDA_DTYPE_I64) static_cast<int64_t*>(t.data)[elem] = v;
  else static_cast<int32_t*>(t.data)[elem] = static_cast<int32_t>(v);
}

// The honest problem of the header bytes.
void build(Bytes& in, DProblem* pr) {
  kda_decode_params& p = pr->p;
  kda_decode_params_init(&p);
  const uint8_t layout = in.u8(), options = in.u8(), sizes = in.u8(), contents = in.u8();
  const uint64_t seed = static_cast<uint64_t>(in.u8()) * 0x100000001b3ull + in.u8();
  const bool varlen = layout & 1;
  const int gate = (layout >> 1) & 3;  // 3: a value outside the enum
  const int32_t gate_raw = gate == 3 ? 7 : gate;
  std::memcpy(&p.gate, &gate_raw, 4);
  const int64_t N = 1 + sizes % 3, H = 1 + (sizes >> 2) % 2, HV = H * (1 + (sizes >> 3) % 2);
  const int64_t T = varlen ? (sizes >> 4) % 9 : 1 + (sizes >> 4) % 5;  // fixed: tokens per sequence
  const int64_t B = varlen ? 1 : N, Tt = T;
  const int idx_kind = options & 3;  // none, [N], [N, T_idx], [N, T_idx] + num_accepted_tokens
  const int64_t cols = idx_kind >= 2 ? std::max<int64_t>(1, (varlen ? 1 + contents % 6 : T + contents % 2)) : 1;
  const int64_t slots = N + (contents >> 3) % 4 - (idx_kind == 0 ? 0 : (contents >> 5) % 2);
  pr->N = N, pr->T = T, pr->cols = cols;
  pr->threads = 1 + (layout >> 6) % 4;
  p.beta_sigmoid = (options >> 4) & 1;
  p.qk_l2norm = (options >> 5) & 1;
  p.allow_neg_eigval = (options >> 6) & 1;
  p.check_indices = (options >> 7) & 1;
  p.scale = 0.08838834764831845;
  p.lower_bound = -5.0;
  const int64_t qk[4] = {B, Tt, H, D}, vs[4] = {B, Tt, HV, D}, bs[3] = {B, Tt, HV};
  p.q = make_tensor(&pr->buf[0], KDA_DTYPE_BF16, 4, qk, 0);
  p.k = make_tensor(&pr->buf[1], KDA_DTYPE_BF16, 4, qk, (layout >> 5) & 1 ? 8 : 0);
  p.v = make_tensor(&pr->buf[2], KDA_DTYPE_BF16, 4, vs, 0);
  p.g = make_tensor(&pr->buf[3], (layout & 8) ? KDA_DTYPE_F32 : KDA_DTYPE_BF16, 4, vs, 0);
  p.beta = make_tensor(&pr->buf[4], (layout & 16) ? KDA_DTYPE_F32 : KDA_DTYPE_BF16, 3, bs, 0);
  p.out = make_tensor(&pr->buf[kOut], KDA_DTYPE_BF16, 4, vs, 0);
  if (options & 4) p.A_log = make_tensor(&pr->buf[6], KDA_DTYPE_F32, 1, &HV, 0);
  if (options & 8) {
    const int64_t two[2] = {HV, D};
    p.dt_bias = make_tensor(&pr->buf[7], KDA_DTYPE_F32, 2, two, 0);
  }
  // The pool: [slots, HV, 128, 128], fp32 or bf16, slots maybe a slot apart (a view of a larger buffer).
  const int64_t pool_shape[4] = {std::max<int64_t>(slots, 0), HV, D, D};
  p.state_pool = make_tensor(&pr->buf[kPool], (layout >> 7) ? KDA_DTYPE_BF16 : KDA_DTYPE_F32, 4, pool_shape, 0);
  if ((contents >> 6) & 1) {  // stride[0] one slot larger: room between slots
    p.state_pool.stride[0] += HV * D * D;
    unsigned __int128 bytes = 0;
    span_bytes(p.state_pool, &bytes);
    pr->buf[kPool].allocate(static_cast<size_t>(bytes) + kSlack);
    p.state_pool.data = pr->buf[kPool].base;
  }
  Rng rng{seed};
  const bool i64 = (contents >> 7) & 1;
  if (idx_kind >= 1) {
    const int64_t one[1] = {N}, two[2] = {N, cols};
    p.state_indices = make_tensor(&pr->buf[kIdx], i64 ? KDA_DTYPE_I64 : KDA_DTYPE_I32, idx_kind == 1 ? 1 : 2,
                                  idx_kind == 1 ? one : two, 0);
    // Distinct valid slots mostly; with contents bits 1-2, some padding (-1), out of range or repeated.
    const int64_t n_idx = N * (idx_kind == 1 ? 1 : cols);
    for (int64_t e = 0; e < n_idx; ++e) {
      int64_t v = slots > 0 ? (e % slots + static_cast<int64_t>(seed % 7)) % slots : -1;
      if (n_idx > slots) v = e < slots ? e : -1;
      const uint64_t r = rng.next() % 8;
      if (((contents >> 1) & 3) == 1 && r == 0) v = -1;
      if (((contents >> 1) & 3) == 2 && r == 0) v = slots + static_cast<int64_t>(r);
      if (((contents >> 1) & 3) == 3 && r < 2) v = static_cast<int64_t>(rng.next() % static_cast<uint64_t>(slots + 3)) - 1;
      write_int(p.state_indices, e, v);
    }
  }
  if (idx_kind == 3) {
    const int64_t one[1] = {N};
    p.num_accepted_tokens = make_tensor(&pr->buf[kAcc], (layout >> 5) & 1 ? KDA_DTYPE_I64 : KDA_DTYPE_I32, 1, one, 0);
    for (int64_t n = 0; n < N; ++n)
      write_int(p.num_accepted_tokens, n, static_cast<int64_t>(rng.next() % static_cast<uint64_t>(cols + 3)) - 1);
  }
  if (varlen) {
    const int64_t n1[1] = {N + 1};
    p.cu_seqlens = make_tensor(&pr->buf[kCu], (options >> 3) & 1 ? KDA_DTYPE_I32 : KDA_DTYPE_I64, 1, n1, 0);
    std::vector<int64_t> cu(static_cast<size_t>(N + 1));
    for (int64_t i = 1; i < N; ++i) cu[i] = static_cast<int64_t>(rng.next() % static_cast<uint64_t>(T + 1));
    cu[N] = T;
    std::sort(cu.begin() + 1, cu.end() - 1);
    if (((contents >> 1) & 3) == 3) cu[rng.next() % static_cast<uint64_t>(N + 1)] = static_cast<int64_t>(rng.next() % 13) - 3;
    for (int64_t i = 0; i <= N; ++i) write_int(p.cu_seqlens, i, cu[i]);
  }
  // Values: inputs ~N(0, 1) (beta in [0, 1) when not activated in the kernel, the preactivated gate
  // <= 0), the pool small; a 1-in-64 element of any input set to inf, NaN or a huge value.
  for (int i = 0; i <= kPool; ++i) {
    const kda_tensor& t = pr->tensor(i);
    if (t.data == nullptr || i == kOut) continue;
    const kda_dtype dt = raw_dtype(t) == KDA_DTYPE_BF16 ? KDA_DTYPE_BF16 : KDA_DTYPE_F32;
    const size_t n = pr->buf[i].bytes / (dt == KDA_DTYPE_BF16 ? 2 : 4);
    for (size_t e = 0; e < n; ++e) {
      float v = rng.normal();
      if (i == 3 && gate == KDA_GATE_PREACTIVATED) v = -std::abs(v);
      if (i == 4 && !p.beta_sigmoid) v = rng.uniform();
      if (i == kPool) v *= 0.05f;
      if ((layout >> 5) & 1 && rng.next() % 64 == 0) v = (e % 3 == 0) ? INFINITY : (e % 3 == 1 ? NAN : 3e38f);
      store(pr->buf[i].base, dt, e, v);
    }
  }
}

// One mutation: 4 bytes (kind, a, b, c).
void apply(Bytes& in, DProblem* pr) {
  const uint8_t kind = in.u8(), a = in.u8(), b = in.u8(), c = in.u8();
  pr->ops.insert(pr->ops.end(), {kind, a, b, c});
  kda_decode_params& p = pr->p;
  kda_tensor& t = pr->tensor(a % kDSlots);
  const int64_t value = kInts[c % kNumInts];
  switch (kind % 9) {
    case 0: {  // a raw field
      const int field = b % 10;
      if (field == 0) t.ndim = static_cast<int32_t>(value);
      else if (field <= 4) t.shape[field - 1] = value;
      else if (field <= 8) t.stride[field - 5] = value;
      else {
        const int32_t dt = static_cast<int32_t>(value % 9);
        std::memcpy(&t.dtype, &dt, 4);
      }
      break;
    }
    case 1:  // alias into another tensor's buffer
      t.data = pr->buf[b % kDSlots].base == nullptr ? nullptr : pr->buf[b % kDSlots].base + (c % 16) * 256;
      break;
    case 2: t.data = nullptr; break;
    case 3: p.struct_size = static_cast<uint32_t>(c == 0 ? 0 : sizeof(kda_decode_params) + (c % 3) - 1); break;
    case 4: {
      const int32_t g = static_cast<int32_t>(value);
      std::memcpy(&p.gate, &g, 4);
      break;
    }
    case 5: {
      int32_t* flags[6] = {&p.beta_sigmoid, &p.qk_l2norm, &p.allow_neg_eigval, &p.check_indices, &p.kernel_config,
                           &p.trusted_pointers};
      *flags[b % 6] = static_cast<int32_t>(value);
      break;
    }
    case 6: {  // one entry of the index tensors (indices, num_accepted_tokens, cu_seqlens) set
      const int s = kIdx + b % 3;
      kda_tensor& x = pr->tensor(s);
      const size_t w = raw_dtype(x) == KDA_DTYPE_I64 ? 8 : 4;
      if (pr->buf[s].bytes >= w) {
        kda_tensor whole = x;
        whole.data = pr->buf[s].base;
        write_int(whole, static_cast<int64_t>(a % (pr->buf[s].bytes / w)), value);
      }
      break;
    }
    case 7: {  // one dimension changed, strides contiguous again
      int64_t shape[4] = {t.shape[0], t.shape[1], t.shape[2], t.shape[3]};
      const int nd = t.ndim >= 1 && t.ndim <= 4 ? t.ndim : 4;
      shape[b % nd] = value;
      t = kda_fuzz_tensor_contiguous(t.data, raw_dtype(t), nd, shape);
      break;
    }
    default:  // 8: a misaligned pointer
      if (t.data != nullptr) t.data = static_cast<unsigned char*>(t.data) + 1 + b % 15;
      break;
  }
}

// Every present tensor well formed and inside one of the harness's buffers.
bool honest(DProblem* pr) {
  for (int i = 0; i < kDSlots; ++i) {
    const kda_tensor& t = pr->tensor(i);
    if (t.data == nullptr) continue;
    unsigned __int128 bytes = 0;
    if (!span_bytes(t, &bytes) || owner_of(pr->buf, kDSlots, t.data, bytes) < 0) return false;
  }
  return true;
}

// The memory rules of the written tensors, judged here from addresses, shapes and strides only.
std::string memory_violation(DProblem* pr) {
  for (int w : {kOut, kPool}) {
    const kda_tensor& wt = pr->tensor(w);
    if (wt.data == nullptr) continue;
    for (int o = 0; o < kDSlots; ++o)
      if (o != w && pr->tensor(o).data != nullptr && overlap(range_of(wt), range_of(pr->tensor(o))))
        return std::string(kDNames[w]) + " overlaps " + kDNames[o];
  }
  const kda_tensor& s = pr->p.state_pool;
  if (s.data != nullptr && s.ndim == 4 && s.shape[0] > 1 && s.stride[0] < s.shape[1] * s.shape[2] * s.shape[3])
    return "state_pool: slots overlap";
  return "";
}

// Byte ranges equal (either empty: equal; memcmp and memcpy take no NULL, even for 0 bytes).
bool same(const void* a, const void* b, size_t n) { return n == 0 || std::memcmp(a, b, n) == 0; }
void copy(void* to, const void* from, size_t n) {
  if (n > 0) std::memcpy(to, from, n);
}

// An error message that names its argument: "name: ..." or "name[...]: ...".
bool names_argument(const char* m) {
  const char* colon = std::strchr(m, ':');
  if (colon == nullptr || colon == m) return false;
  for (const char* c = m; c < colon; ++c)
    if (!(std::isalnum(static_cast<unsigned char>(*c)) || *c == '_' || *c == '.' || *c == '[' || *c == ']')) return false;
  return true;
}

}  // namespace

const DecodeStats& decode_stats() { return g_dstats; }

void run_one_decode(const uint8_t* data, size_t size) {
  DProblem problem;
  DProblem* pr = &problem;
  Bytes in{data, size};
  build(in, pr);
  for (int k = 0; k < 24 && in.i + 4 <= in.n; ++k) apply(in, pr);
  kda_decode_params& p = pr->p;
  ++g_dstats.inputs;

  // The device entry point: host checks, then a device that is not there (or host pointers).
  const kda_status dev = kda_decode(&p, nullptr);
  if (dev.code == KDA_OK) fail(*pr, "kda_decode returned KDA_OK without a device call");
  if (reached_device(dev)) {
    const std::string v = honest(pr) ? memory_violation(pr) : "";
    if (!v.empty()) fail(*pr, "kda_decode looked at the device although " + v);
  }
  if (!honest(pr)) return;  // the CPU path reads what the params claim: only honest params
  ++g_dstats.honest;

  std::vector<std::vector<unsigned char>> before(kDSlots);
  for (int i = 0; i < kDSlots; ++i) before[i].assign(pr->buf[i].base, pr->buf[i].base + pr->buf[i].bytes);
  const kda_status cpu = kda_decode_cpu(&p, pr->threads);
  if (cpu.code != KDA_OK) {
    if (!names_argument(cpu.message)) fail(*pr, std::string("kda_decode_cpu's error names no argument: ") + cpu.message);
    // Nothing written before an error: every check comes before the recurrence (check_indices too).
    for (int i = 0; i < kDSlots; ++i)
      if (!same(before[i].data(), pr->buf[i].base, pr->buf[i].bytes))
        fail(*pr, std::string("kda_decode_cpu wrote ") + kDNames[i] + "'s buffer and then failed: " + cpu.message);
    return;
  }
  ++g_dstats.cpu_ok;
  const std::string v = memory_violation(pr);
  if (!v.empty()) fail(*pr, "kda_decode_cpu accepted params that break a memory rule: " + v);

  // What the contents name (the header's rules), read as the library reads them.
  const kda_tensor& ix = p.state_indices;
  const kda_tensor& pool = p.state_pool;
  const int64_t N = p.cu_seqlens.data != nullptr ? p.cu_seqlens.shape[0] - 1 : p.q.shape[0];
  const int64_t slots = pool.shape[0];
  const bool two_d = ix.data != nullptr && ix.ndim == 2;
  const int64_t cols = ix.data == nullptr ? 1 : (two_d ? ix.shape[1] : 1);
  auto entry = [&](int64_t n, int64_t t) -> int64_t {
    if (ix.data == nullptr) return n;
    return read_int(ix, n * ix.stride[0] + (two_d ? t * ix.stride[1] : 0));
  };
  std::set<int64_t> named;
  bool unique = true, out_of_range = false;
  std::vector<std::set<int64_t>> per_seq(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t t = 0; t < cols; ++t) {
      const int64_t s = entry(n, t);
      if (s >= slots) out_of_range = true;
      if (s >= 0 && s < slots) per_seq[n].insert(s);
    }
  for (int64_t n = 0; n < N; ++n)
    for (int64_t s : per_seq[n]) unique = named.insert(s).second && unique;
  if (p.check_indices) {
    if (out_of_range) fail(*pr, "check_indices accepted an index >= slots");
    if (!unique) fail(*pr, "check_indices accepted a slot named by two sequences");
    const kda_tensor& na = p.num_accepted_tokens;
    for (int64_t n = 0; na.data != nullptr && n < N; ++n) {
      const int64_t a = read_int(na, n * na.stride[0]);
      if (a < 0 || a > cols) fail(*pr, "check_indices accepted num_accepted_tokens out of [0, T_idx]");
    }
  }
  // Nothing written but out's span and the named slots of the pool: every other byte of every buffer
  // (the inputs, the pool's other slots and the gaps between slots, the slack after each tensor, where a
  // mutation may have placed out or the pool) unchanged. Judged by address, not by buffer.
  {
    const size_t eb = raw_dtype(pool) == KDA_DTYPE_F32 ? 4 : 2;
    const uintptr_t slot_bytes = static_cast<uintptr_t>(pool.shape[1] * pool.shape[2] * pool.shape[3]) * eb;
    std::vector<Range> may;
    may.push_back(range_of(p.out));
    for (int64_t s : named) {
      Range r;
      r.lo = reinterpret_cast<uintptr_t>(pool.data) + static_cast<uintptr_t>(s) * static_cast<uintptr_t>(slots > 1 ? pool.stride[0] : 0) * eb;
      r.hi = r.lo + slot_bytes;
      may.push_back(r);
    }
    for (int i = 0; i < kDSlots; ++i)
      for (size_t k = 0; k < pr->buf[i].bytes; ++k) {
        if (before[i][k] == pr->buf[i].base[k]) continue;
        const unsigned __int128 a = reinterpret_cast<uintptr_t>(pr->buf[i].base + k);
        bool allowed = false;
        for (const Range& r : may) allowed = allowed || (a >= r.lo && a < r.hi);
        if (!allowed)
          fail(*pr, std::string("kda_decode_cpu changed byte ") + std::to_string(k) + " of " + kDNames[i] +
                        "'s buffer, outside out and the slots the indices name");
      }
  }
  // A fixed-length batch: sequence n's output rows are zero where its start slot is not in the pool.
  if (p.cu_seqlens.data == nullptr) {
    const kda_tensor& o = p.out;
    for (int64_t n = 0; n < N; ++n) {
      int64_t col = 0;
      if (two_d && p.num_accepted_tokens.data != nullptr) {
        const int64_t a = read_int(p.num_accepted_tokens, n * p.num_accepted_tokens.stride[0]);
        col = std::clamp<int64_t>(a, 1, cols) - 1;
      }
      const int64_t start = entry(n, col);
      if (start >= 0 && start < slots) continue;
      for (int64_t t = 0; t < o.shape[1]; ++t)
        for (int64_t h = 0; h < o.shape[2]; ++h)
          for (int64_t e = 0; e < o.shape[3]; ++e)
            if (static_cast<const uint16_t*>(o.data)[n * o.stride[0] + t * o.stride[1] + h * o.stride[2] + e * o.stride[3]] != 0)
              fail(*pr, "a sequence whose start slot is not in the pool got a non-zero output");
    }
  }
  // Deterministic whatever the thread count, where no slot is named twice.
  if (unique) {
    std::vector<std::vector<unsigned char>> first(kDSlots);
    for (int i = 0; i < kDSlots; ++i) {
      first[i].assign(pr->buf[i].base, pr->buf[i].base + pr->buf[i].bytes);
      copy(pr->buf[i].base, before[i].data(), before[i].size());
    }
    if (kda_decode_cpu(&p, 1 + pr->threads % 4).code != KDA_OK) fail(*pr, "a second kda_decode_cpu call failed");
    for (int i = 0; i < kDSlots; ++i)
      if (!same(first[i].data(), pr->buf[i].base, pr->buf[i].bytes))
        fail(*pr, std::string("kda_decode_cpu is not deterministic across thread counts: ") + kDNames[i]);
    ++g_dstats.deterministic_checked;
  }
}

}  // namespace kda::fuzz
