// Decoding a fuzz input into a problem (fuzz_build.h): the byte format (encode / decode), the
// honest problem of the header (shapes, strides, dtypes, values, cu_seqlens contents) in host
// buffers, and the mutations. The problem's accessors are fuzz_problem.cpp.
#include "tests/fuzz/fuzz_build.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace kda::fuzz {

namespace {

constexpr int64_t D = 128;

struct Reader {
  const uint8_t* p;
  size_t n, i = 0;
  uint8_t u8() { return i < n ? p[i++] : 0; }
  uint64_t u64() {
    uint64_t v = 0;
    for (int b = 0; b < 8; ++b) v |= static_cast<uint64_t>(u8()) << (8 * b);
    return v;
  }
  int32_t i32() { return static_cast<int32_t>(static_cast<uint32_t>(u64() & 0xffffffffu)); }
  double f64() {
    const uint64_t b = u64();
    double d;
    std::memcpy(&d, &b, 8);
    return d;
  }
};

struct Writer {
  std::vector<uint8_t> b;
  void u8(uint8_t v) { b.push_back(v); }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void i32(int32_t v) { u64(static_cast<uint32_t>(v)); }
  void f64(double d) {
    uint64_t v;
    std::memcpy(&v, &d, 8);
    u64(v);
  }
};

// Doubles the params may carry; the last entry of each table means "raw bits follow".
const double kScales[] = {0.08838834764831845, 1.0, 0.0, -1.0, 65536.0, 65536.5, 1e300, NAN, INFINITY, -0.0, 1e-300,
                          -3.5};
const double kLowerBounds[] = {-5.0, -1.0, -0.1, -5.000000000000001, -1e-300, 0.0, NAN, -INFINITY, -4.9999, -0.5};
constexpr uint8_t kScaleRaw = sizeof(kScales) / sizeof(double);
constexpr uint8_t kLowerBoundRaw = sizeof(kLowerBounds) / sizeof(double);

// Integers ops may write into shapes, strides, ndim and dtypes (or raw bits, see Op.b).
const int64_t kInteresting[] = {0,          1,          2,          -1,        8,         16,        127,
                                128,        129,        256,        65535,     65536,     1 << 30,   (1 << 30) + 1,
                                2147483647, 2147483648, 4294967296, 1LL << 58, 1LL << 59, 1LL << 61, 1LL << 62,
                                (1LL << 62) + 1, INT64_MAX, INT64_MIN, -128, 3, 4, 5, 6, 7, 77};
constexpr size_t kNumInteresting = sizeof(kInteresting) / sizeof(int64_t);

void fill_values(Problem* pr, Rng& rng) {
  kda_fwd_params& p = pr->p;
  const int mode = pr->value_mode;
  const bool preact = raw_gate(p) == KDA_GATE_PREACTIVATED;
  for (int i = 0; i < kSlots; ++i) {
    kda_tensor* t = slot(p, i);
    if (t->data == nullptr || i == 5 || i == 9 || i == 10) continue;  // outputs, cu_seqlens
    const size_t n = pr->buf[i].bytes / elem_bytes(*t);
    unsigned char* base = pr->buf[i].base;
    for (size_t e = 0; e < n; ++e) {
      float v = rng.normal();
      if (i == 3) v = preact ? -std::fabs(v) : (raw_gate(p) == KDA_GATE_SOFTPLUS ? 2.0f * v : v);
      if (i == 4 && !p.beta_sigmoid) v = rng.uniform();
      if (i == 6) v = rng.uniform();
      if (i == 7) v = 2.0f * rng.uniform() - 1.0f;
      if (i == 8) v *= 0.1f;
      if (mode == 1 && (i == 0 || i == 1) && (e / D) % 3 != 0) v *= 1e19f + 3.3e38f * rng.uniform() / 4.0f;
      if (mode == 2 && i == 3) {
        const uint64_t r = rng.next() % 16;
        if (r == 0) v = preact ? -INFINITY : INFINITY;
        if (r == 1) v = preact ? -3e38f : 3e38f;
        if (r == 2) v = -INFINITY;
      }
      if (mode == 3 && i == 6) v = e % 2 ? 100.0f : 88.5f;
      if (mode == 3 && i == 7) v = 0.0f;
      if (mode == 3 && i == 3 && !preact) v = e % 3 == 0 ? 0.0f : (e % 3 == 1 ? -200.0f : v);
      if (mode == 4) {  // raw bits: NaN, inf, denormals, anything
        const uint32_t bits = static_cast<uint32_t>(rng.next());
        std::memcpy(&v, &bits, 4);
      }
      store(base, raw_dtype(*t) == KDA_DTYPE_BF16 ? KDA_DTYPE_BF16 : KDA_DTYPE_F32, e, v);
    }
  }
}

void fill_cu(Problem* pr, Rng& rng, int64_t N, int64_t T, bool i32) {
  std::vector<int64_t> cu(static_cast<size_t>(N + 1));
  for (int64_t i = 1; i < N; ++i) cu[i] = T > 0 ? static_cast<int64_t>(rng.next() % static_cast<uint64_t>(T + 1)) : 0;
  cu[0] = 0;
  cu[N] = T;
  for (int64_t i = 1; i < N; ++i)  // sort the interior
    for (int64_t j = i; j > 1 && cu[j] < cu[j - 1]; --j) std::swap(cu[j], cu[j - 1]);
  switch ((pr->h.cu >> 3) & 7) {
    case 1: cu[N] = T / 2; for (int64_t i = 1; i < N; ++i) cu[i] = std::min(cu[i], T / 2); break;
    case 2: cu[0] = std::min<int64_t>(3, cu[1]); break;
    case 3:  // decreasing: with N >= 3, sequence 2 covers tokens of sequence 0
      cu[1] = T;
      for (int64_t i = 2; i < N; ++i) cu[i] = T / 2;
      if (N == 1) cu[1] = -5;
      break;
    case 4: cu[N] = T + 5; break;
    case 5: cu[0] = -3; break;
    case 6: for (int64_t& c : cu) c = 0; break;
    case 7: for (int64_t& c : cu) c = static_cast<int64_t>(rng.next() % static_cast<uint64_t>(3 * T + 11)) - T - 5; break;
    default: break;
  }
  for (int64_t i = 0; i <= N; ++i) {
    if (i32) {
      const int32_t v = static_cast<int32_t>(cu[i]);
      std::memcpy(pr->buf[10].base + 4 * i, &v, 4);
    } else {
      std::memcpy(pr->buf[10].base + 8 * i, &cu[i], 8);
    }
  }
}

float special_value(uint8_t k) {
  const float v[8] = {INFINITY, -INFINITY, NAN, 3e38f, -3e38f, 0.0f, 1e-40f, 1e30f};
  return v[k % 8];
}

void apply_op(const Op& op, Problem* pr) {
  kda_fwd_params& p = pr->p;
  kda_tensor* t = slot(p, op.a % kSlots);
  const int64_t value = (op.b & 0x80) ? op.value : kInteresting[static_cast<uint64_t>(op.value) % kNumInteresting];
  switch (op.kind % 10) {
    case 0: {  // a raw field
      const int field = (op.b & 0x7f) % 10;
      if (field == 0) t->ndim = static_cast<int32_t>(value);
      else if (field <= 4) t->shape[field - 1] = value;
      else if (field <= 8) t->stride[field - 5] = value;
      else {
        const int32_t dt = static_cast<int32_t>(value);
        std::memcpy(&t->dtype, &dt, 4);
        pr->values_changed = true;
      }
      break;
    }
    case 1:  // alias into another slot's buffer at a byte offset
      t->data = pr->buf[(op.b & 0x7f) % kSlots].base == nullptr ? nullptr
                : pr->buf[(op.b & 0x7f) % kSlots].base + static_cast<uint64_t>(op.value) % 8192;
      pr->values_changed = true;
      break;
    case 2: t->data = nullptr; break;
    case 3: {  // one dimension changed, strides contiguous again (kda_tensor_contiguous)
      int64_t shape[4] = {t->shape[0], t->shape[1], t->shape[2], t->shape[3]};
      const int nd = t->ndim >= 1 && t->ndim <= 4 ? t->ndim : 4;
      shape[(op.b & 0x7f) % nd] = value;
      *t = kda_fuzz_tensor_contiguous(t->data, raw_dtype(*t), nd, shape);
      break;
    }
    case 4: *t = kda_fuzz_tensor_contiguous(t->data, raw_dtype(*t), static_cast<int8_t>(op.b), nullptr); break;
    case 5: p.struct_size = static_cast<uint32_t>(value); break;
    case 6: {
      const int32_t g = static_cast<int32_t>(value);
      std::memcpy(&p.gate, &g, 4);
      break;
    }
    case 7: {
      int32_t* flags[5] = {&p.beta_sigmoid, &p.qk_l2norm, &p.allow_neg_eigval, &p.check_cu_seqlens, &p.context_split};
      *flags[(op.b & 0x7f) % 5] = static_cast<int32_t>(value);
      break;
    }
    case 8: {  // one input element set to a special value
      const int s = op.a % kSlots;
      if (s == 5 || s == 9 || s == 10 || pr->buf[s].bytes == 0) break;
      const kda_dtype dt = raw_dtype(*t) == KDA_DTYPE_BF16 ? KDA_DTYPE_BF16 : KDA_DTYPE_F32;
      const size_t n = pr->buf[s].bytes / (dt == KDA_DTYPE_BF16 ? 2 : 4);
      store(pr->buf[s].base, dt, static_cast<uint64_t>(op.value) % n, special_value(op.b));
      pr->values_changed = true;
      break;
    }
    default:  // 9: a misaligned pointer
      if (t->data != nullptr) t->data = static_cast<unsigned char*>(t->data) + 1 + op.b % 15;
      pr->values_changed = true;
      break;
  }
}

}  // namespace

std::vector<uint8_t> encode(const Header& h, const std::vector<Op>& ops) {
  Writer w;
  w.u8(h.layout), w.u8(h.options), w.u8(h.B), w.u8(h.T), w.u8(h.H), w.u8(h.group), w.u8(h.values);
  w.u8(h.padding), w.u8(h.cu), w.u8(static_cast<uint8_t>(h.context_split));
  w.u8(h.scale);
  if (h.scale % (kScaleRaw + 1) == kScaleRaw) w.f64(h.scale_raw);
  w.u8(h.lower_bound);
  if (h.lower_bound % (kLowerBoundRaw + 1) == kLowerBoundRaw) w.f64(h.lower_bound_raw);
  w.u8(h.threads), w.u8(h.algorithm);
  if (h.algorithm >= 2) w.i32(h.algorithm_raw);
  if (((h.layout >> 1) & 3) == 3) w.i32(h.gate_raw);
  w.u8(h.workspace);
  w.u64(h.seed);
  for (const Op& op : ops) w.u8(op.kind), w.u8(op.a), w.u8(op.b), w.u64(static_cast<uint64_t>(op.value));
  return w.b;
}

void decode(const uint8_t* data, size_t size, Header* h, std::vector<Op>* ops) {
  Reader r{data, size};
  h->layout = r.u8(), h->options = r.u8(), h->B = r.u8(), h->T = r.u8(), h->H = r.u8(), h->group = r.u8();
  h->values = r.u8(), h->padding = r.u8(), h->cu = r.u8(), h->context_split = static_cast<int8_t>(r.u8());
  h->scale = r.u8();
  if (h->scale % (kScaleRaw + 1) == kScaleRaw) h->scale_raw = r.f64();
  h->lower_bound = r.u8();
  if (h->lower_bound % (kLowerBoundRaw + 1) == kLowerBoundRaw) h->lower_bound_raw = r.f64();
  h->threads = r.u8(), h->algorithm = r.u8();
  if (h->algorithm >= 2) h->algorithm_raw = r.i32();
  if (((h->layout >> 1) & 3) == 3) h->gate_raw = r.i32();
  h->workspace = r.u8();
  h->seed = r.u64();
  ops->clear();
  while (r.i < r.n && ops->size() < 32) {
    Op op;
    op.kind = r.u8(), op.a = r.u8(), op.b = r.u8(), op.value = static_cast<int64_t>(r.u64());
    ops->push_back(op);
  }
}

void build(const uint8_t* data, size_t size, Problem* pr) {
  decode(data, size, &pr->h, &pr->ops);
  const Header& h = pr->h;
  kda_fwd_params& p = pr->p;
  kda_fwd_params_init(&p);
  const bool varlen = h.layout & 1;
  const int64_t B = varlen ? 1 : 1 + h.B % 2, T = h.T % 41, H = 1 + h.H % 2, HV = H * (1 + h.group % 2);
  const int64_t N = varlen ? 1 + (h.cu & 3) : B;
  const int gate_bits = (h.layout >> 1) & 3;
  const int32_t gate = gate_bits == 3 ? h.gate_raw : gate_bits;
  std::memcpy(&p.gate, &gate, 4);
  p.beta_sigmoid = (h.options >> 4) & 1;
  p.qk_l2norm = (h.options >> 5) & 1;
  p.allow_neg_eigval = (h.options >> 6) & 1;
  p.check_cu_seqlens = (h.options >> 7) & 1;
  p.context_split = h.context_split;
  const uint8_t si = h.scale % (kScaleRaw + 1), li = h.lower_bound % (kLowerBoundRaw + 1);
  p.scale = si == kScaleRaw ? h.scale_raw : kScales[si];
  p.lower_bound = li == kLowerBoundRaw ? h.lower_bound_raw : kLowerBounds[li];
  pr->threads = 1 + h.threads % 4;
  pr->value_mode = h.values % 5;

  auto pad = [&](int i) -> int64_t { return (h.padding >> (i % 8)) & 1 ? 8 : 0; };
  const int64_t qk[4] = {B, T, H, D}, vs[4] = {B, T, HV, D}, bs[3] = {B, T, HV};
  p.q = make_tensor(&pr->buf[0], KDA_DTYPE_BF16, 4, qk, pad(0));
  p.k = make_tensor(&pr->buf[1], KDA_DTYPE_BF16, 4, qk, pad(1));
  p.v = make_tensor(&pr->buf[2], KDA_DTYPE_BF16, 4, vs, pad(2));
  p.g = make_tensor(&pr->buf[3], (h.layout & 8) ? KDA_DTYPE_F32 : KDA_DTYPE_BF16, 4, vs, pad(3));
  p.beta = make_tensor(&pr->buf[4], (h.layout & 16) ? KDA_DTYPE_F32 : KDA_DTYPE_BF16, 3, bs, pad(4) / 4);
  p.out = make_tensor(&pr->buf[5], KDA_DTYPE_BF16, 4, vs, pad(5));
  if (h.layout & 32) p.A_log = make_tensor(&pr->buf[6], KDA_DTYPE_F32, 1, &HV, 0);
  if (h.layout & 64) {
    const int64_t flat[1] = {HV * D}, two[2] = {HV, D};
    p.dt_bias = (h.layout & 128) ? make_tensor(&pr->buf[7], KDA_DTYPE_F32, 1, flat, 0) : make_tensor(&pr->buf[7], KDA_DTYPE_F32, 2, two, 0);
  }
  const int64_t st[4] = {N, HV, D, D};
  const kda_dtype state_dt[4] = {KDA_DTYPE_NONE, KDA_DTYPE_BF16, KDA_DTYPE_F32, KDA_DTYPE_F32};
  if (state_dt[h.options & 3] != KDA_DTYPE_NONE) p.initial_state = make_tensor(&pr->buf[8], state_dt[h.options & 3], 4, st, 0);
  if (state_dt[(h.options >> 2) & 3] != KDA_DTYPE_NONE)
    p.final_state = make_tensor(&pr->buf[9], state_dt[(h.options >> 2) & 3], 4, st, 0);
  Rng rng{h.seed};
  if (varlen) {
    const bool i32 = (h.cu >> 2) & 1;
    const int64_t n1 = N + 1;
    p.cu_seqlens = make_tensor(&pr->buf[10], i32 ? KDA_DTYPE_I32 : KDA_DTYPE_I64, 1, &n1, 0);
    fill_cu(pr, rng, N, T, i32);
  }
  fill_values(pr, rng);
  for (const Op& op : pr->ops) apply_op(op, pr);
}

}  // namespace kda::fuzz
