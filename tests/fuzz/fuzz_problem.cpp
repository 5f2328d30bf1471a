// The fuzz problem's accessors (fuzz_build.h): its tensor slots and buffers, the raw enum fields, a
// tensor's span in bytes, which buffer holds an address, whether the params are honest and keep
// kda_fwd's memory rules, and the problem described for a report; the generator, element stores and
// tensors over buffers that the harnesses build with.
// Decoding an input into a problem is fuzz_build.cpp.
#include <algorithm>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_build.h"

namespace kda::fuzz {

kda_tensor* slot(kda_fwd_params& p, int i) {
  kda_tensor* all[kSlots] = {&p.q,     &p.k,       &p.v,             &p.g,           &p.beta,     &p.out,
                             &p.A_log, &p.dt_bias, &p.initial_state, &p.final_state, &p.cu_seqlens};
  return all[i];
}

uint64_t Rng::next() {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
float Rng::uniform() { return static_cast<float>(next() >> 40) * 0x1p-24f; }
float Rng::normal() { return (uniform() + uniform() + uniform() + uniform() - 2.0f) * 1.7320508f; }

namespace {
uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
}  // namespace

void store(unsigned char* p, kda_dtype dt, size_t i, float v) {
  if (dt == KDA_DTYPE_BF16) {
    const uint16_t b = to_bf16(v);
    std::memcpy(p + 2 * i, &b, 2);
  } else {
    std::memcpy(p + 4 * i, &v, 4);
  }
}

kda_tensor make_tensor(Buffer* b, kda_dtype dt, int ndim, const int64_t* shape, int64_t pad) {
  kda_tensor t = kda_tensor_contiguous(nullptr, dt, ndim, shape);
  if (pad > 0 && ndim >= 2) {
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; --d) {
      t.stride[d] = s;
      s *= shape[d] + (d == ndim - 1 ? pad : 0);
    }
  }
  unsigned __int128 bytes = 0;
  span_bytes(t, &bytes);
  b->allocate(static_cast<size_t>(bytes) + kSlack);
  t.data = b->base;
  return t;
}

void Buffer::allocate(size_t n) {
  storage.assign(n + 256, 0);
  base = storage.data() + (256 - reinterpret_cast<uintptr_t>(storage.data()) % 256) % 256;
  bytes = n;
}

int32_t raw_dtype(const kda_tensor& t) {
  int32_t v;
  std::memcpy(&v, &t.dtype, 4);
  return v;
}
int32_t raw_gate(const kda_fwd_params& p) {
  int32_t v;
  std::memcpy(&v, &p.gate, 4);
  return v;
}

size_t elem_bytes(const kda_tensor& t) {
  switch (raw_dtype(t)) {
    case KDA_DTYPE_BF16: case KDA_DTYPE_F16: return 2;
    case KDA_DTYPE_F32: case KDA_DTYPE_I32: return 4;
    case KDA_DTYPE_I64: case KDA_DTYPE_F64: return 8;
    default: return 0;
  }
}

bool span_bytes(const kda_tensor& t, unsigned __int128* bytes) {
  *bytes = 0;
  if (t.ndim < 1 || t.ndim > 4 || elem_bytes(t) == 0) return false;
  unsigned __int128 elems = 1;
  for (int d = 0; d < t.ndim; ++d) {
    if (t.shape[d] < 0 || t.stride[d] < 0) return false;
    if (t.shape[d] == 0) return true;  // no element
    elems += static_cast<unsigned __int128>(t.shape[d] - 1) * static_cast<unsigned __int128>(t.stride[d]);
    if (elems > (static_cast<unsigned __int128>(1) << 62)) return false;
  }
  *bytes = elems * elem_bytes(t);
  return true;
}

int owner_of(const Buffer* buf, int n, const void* data, unsigned __int128 bytes) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(data);
  for (int i = 0; i < n; ++i) {
    const uintptr_t b = reinterpret_cast<uintptr_t>(buf[i].base);
    if (buf[i].base != nullptr && a >= b && static_cast<unsigned __int128>(a - b) + bytes <= buf[i].bytes) return i;
  }
  return -1;
}
int owner(const Problem& pr, const void* data, unsigned __int128 bytes) { return owner_of(pr.buf, kSlots, data, bytes); }

Range range_of(const kda_tensor& t) {
  Range r;
  unsigned __int128 bytes = 0;
  span_bytes(t, &bytes);
  r.lo = reinterpret_cast<uintptr_t>(t.data);
  r.hi = r.lo + bytes;
  return r;
}
bool overlap(const Range& a, const Range& b) { return a.lo < a.hi && b.lo < b.hi && a.lo < b.hi && b.lo < a.hi; }

bool has(const kda_status& s, const char* part) { return std::strstr(s.message, part) != nullptr; }
bool data_rule(const kda_status& s) {
  return has(s, "got NULL data") || has(s, "aligned") || has(s, "memory disjoint");
}
bool device_rule(const kda_status& s) { return data_rule(s) || has(s, "multiple of 16 bytes"); }
bool reached_device(const kda_status& s) {
  return s.code == KDA_ERROR_UNSUPPORTED_DEVICE || has(s, "expected CUDA device memory");
}

// Every present tensor well formed and inside one of the harness's buffers.
bool honest(Problem* pr) {
  for (int i = 0; i < kSlots; ++i) {
    const kda_tensor* t = slot(pr->p, i);
    if (t->data == nullptr) continue;
    unsigned __int128 bytes = 0;
    if (!span_bytes(*t, &bytes) || owner(*pr, t->data, bytes) < 0) return false;
  }
  return true;
}

// The memory rules, judged here independently of the library from addresses, shapes and strides
// only: what every entry point that takes data pointers must reject.
std::string address_violation(Problem* pr) {
  kda_fwd_params& p = pr->p;
  const kda_tensor& out = p.out;
  if (out.data != nullptr) {
    bool empty = false;
    int64_t count = 1;
    for (int d = 0; d < 4; ++d) empty = empty || out.shape[d] == 0;
    for (int d = 0; d < 4 && !empty; ++d) {
      if (out.shape[d] > 1 && out.stride[d] == 0) return "out: a dimension of stride 0 aliases rows";
      count = count > (1 << 22) ? count : count * out.shape[d];
    }
    if (!empty && count <= (1 << 22)) {  // every element's offset, distinct
      std::vector<int64_t> offs;
      for (int64_t a = 0; a < out.shape[0]; ++a)
        for (int64_t b = 0; b < out.shape[1]; ++b)
          for (int64_t c = 0; c < out.shape[2]; ++c)
            for (int64_t e = 0; e < out.shape[3]; ++e)
              offs.push_back(a * out.stride[0] + b * out.stride[1] + c * out.stride[2] + e * out.stride[3]);
      std::sort(offs.begin(), offs.end());
      if (std::adjacent_find(offs.begin(), offs.end()) != offs.end()) return "out: two elements share an address";
    }
  }
  for (int w : {5, 9}) {
    const kda_tensor* wt = slot(p, w);
    if (wt->data == nullptr) continue;
    for (int o = 0; o < kSlots; ++o) {
      const kda_tensor* ot = slot(p, o);
      if (o == w || ot->data == nullptr) continue;
      if (w == 9 && o == 8 && wt->data == ot->data && raw_dtype(*wt) == raw_dtype(*ot)) continue;  // in place
      if (overlap(range_of(*wt), range_of(*ot)))
        return std::string(kSlotNames[w]) + " overlaps " + kSlotNames[o];
    }
  }
  return "";
}

std::string Problem::describe() const {
  std::ostringstream s;
  s << "header: layout " << int(h.layout) << " options " << int(h.options) << " B " << int(h.B) << " T " << int(h.T)
    << " H " << int(h.H) << " group " << int(h.group) << " values " << int(h.values) << " cu " << int(h.cu)
    << " workspace " << int(h.workspace) << " scale " << p.scale << " lower_bound " << p.lower_bound << "\n";
  for (int i = 0; i < kSlots; ++i) {
    kda_fwd_params& q = const_cast<kda_fwd_params&>(p);
    const kda_tensor* t = slot(q, i);
    s << "  " << kSlotNames[i] << ": data " << t->data << " dtype " << raw_dtype(*t) << " ndim " << t->ndim << " shape [";
    for (int d = 0; d < 4; ++d) s << (d ? ", " : "") << t->shape[d];
    s << "] strides [";
    for (int d = 0; d < 4; ++d) s << (d ? ", " : "") << t->stride[d];
    s << "]\n";
  }
  s << "  ops:";
  for (const Op& op : ops) s << " (" << int(op.kind % 10) << " " << int(op.a) << " " << int(op.b) << " " << op.value << ")";
  return s.str();
}

}  // namespace kda::fuzz
