// Loader of the golden cases and builder of their kda_fwd_params (see golden_io.h). The raw
// arrays are little-endian, as is every machine this project builds for.
#include "tests/golden_io.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "tests/mini_json.h"

#ifndef FLASH_KDA_SOURCE_DIR
#define FLASH_KDA_SOURCE_DIR "."
#endif
#ifndef FLASH_KDA_REPO_GOLDEN_DIR
#define FLASH_KDA_REPO_GOLDEN_DIR "tests/golden"
#endif

namespace kda::test {

namespace {

size_t elem_size(kda_dtype dt) {
  switch (dt) {
    case KDA_DTYPE_BF16: case KDA_DTYPE_F16: return 2;
    case KDA_DTYPE_F32: case KDA_DTYPE_I32: return 4;
    case KDA_DTYPE_F64: case KDA_DTYPE_I64: return 8;
    case KDA_DTYPE_NONE: break;
  }
  return 0;
}

kda_dtype parse_dtype(const std::string& s) {
  if (s == "bf16") return KDA_DTYPE_BF16;
  if (s == "f32") return KDA_DTYPE_F32;
  if (s == "f64") return KDA_DTYPE_F64;
  if (s == "i64") return KDA_DTYPE_I64;
  if (s == "i32") return KDA_DTYPE_I32;
  return KDA_DTYPE_NONE;
}

bool get_number(const Json& meta, const char* key, double* out, std::string* error) {
  const Json* j = meta.get(key);
  if (j == nullptr || !j->is_number()) {
    *error = std::string("meta.json: missing number '") + key + "'";
    return false;
  }
  *out = j->number;
  return true;
}

bool get_flag(const Json& meta, const char* key, bool fallback) {
  const Json* j = meta.get(key);
  return (j != nullptr && j->type == Json::Type::Bool) ? j->boolean : fallback;
}

kda_tensor tensor_of(const void* data, const HostArray& a) {
  return kda_tensor_contiguous(const_cast<void*>(data), a.dtype, static_cast<int32_t>(a.shape.size()),
                               a.shape.data());
}

}  // namespace

int64_t HostArray::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<double> HostArray::to_f64() const {
  const int64_t n = numel();
  std::vector<double> r(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    switch (dtype) {
      case KDA_DTYPE_BF16: {
        uint16_t b;
        std::memcpy(&b, bytes.data() + 2 * i, 2);
        const uint32_t u = static_cast<uint32_t>(b) << 16;
        float f;
        std::memcpy(&f, &u, 4);
        r[i] = f;
        break;
      }
      case KDA_DTYPE_F32: { float f; std::memcpy(&f, bytes.data() + 4 * i, 4); r[i] = f; break; }
      case KDA_DTYPE_F64: { double d; std::memcpy(&d, bytes.data() + 8 * i, 8); r[i] = d; break; }
      case KDA_DTYPE_I32: { int32_t v; std::memcpy(&v, bytes.data() + 4 * i, 4); r[i] = v; break; }
      case KDA_DTYPE_I64: { int64_t v; std::memcpy(&v, bytes.data() + 8 * i, 8); r[i] = static_cast<double>(v); break; }
      default: r[i] = NAN;
    }
  }
  return r;
}

const HostArray* GoldenCase::find(const std::string& name) const {
  auto it = arrays.find(name);
  return it == arrays.end() ? nullptr : &it->second;
}

std::string golden_dir(bool* named_by_env) {
  const char* env = std::getenv("FLASH_KDA_GOLDEN_DIR");
  const bool named = env != nullptr && env[0] != '\0';
  if (named_by_env != nullptr) *named_by_env = named;
  return named ? std::string(env) : std::string(FLASH_KDA_SOURCE_DIR) + "/.gpu_data/golden";
}

std::string repo_golden_dir() {
  const char* env = std::getenv("FLASH_KDA_REPO_GOLDEN_DIR");
  if (env != nullptr && env[0] != '\0') return env;
  return FLASH_KDA_REPO_GOLDEN_DIR;
}

bool golden_available(const std::string& dir) {
  std::string text;
  return read_file(dir + "/index.json", &text);
}

std::vector<std::string> shared_golden_cases(std::string* dir, std::string* skip, std::string* failure) {
  bool named = false;
  *dir = golden_dir(&named);
  if (!golden_available(*dir)) {
    if (named)
      *failure = "FLASH_KDA_GOLDEN_DIR names " + *dir + ", which has no index.json";
    else
      *skip = "no copy of the shared golden set (looked for " + *dir +
              "/index.json; set FLASH_KDA_GOLDEN_DIR, or scripts/prepare_gpu_data.sh --shared DIR copies it there):"
              " the independent shared check is skipped; the in-repo cases ran";
    return {};
  }
  std::string error;
  std::vector<std::string> names = golden_case_names(*dir, &error);
  if (names.empty()) *failure = *dir + "/index.json lists no case" + (error.empty() ? "" : ": " + error);
  return names;
}

std::vector<std::string> golden_case_names(const std::string& dir, std::string* error) {
  std::vector<std::string> names;
  std::string text;
  Json index;
  if (!read_file(dir + "/index.json", &text)) {
    *error = "cannot read " + dir + "/index.json";
    return names;
  }
  if (!parse_json(text, &index, error)) return names;
  const Json* cases = index.get("cases");
  if (cases == nullptr || !cases->is_array()) {
    *error = dir + "/index.json: no \"cases\" array";
    return names;
  }
  for (const Json& c : cases->array)
    if (c.is_string()) names.push_back(c.string);
  return names;
}

bool load_golden_case(const std::string& dir, const std::string& name, GoldenCase* out, std::string* error) {
  GoldenCase c;
  c.name = name;
  c.dir = dir + "/" + name;
  std::string text;
  Json meta;
  if (!read_file(c.dir + "/meta.json", &text)) {
    *error = "cannot read " + c.dir + "/meta.json";
    return false;
  }
  if (!parse_json(text, &meta, error)) return false;

  double B, T, H, HV, K, V, N;
  if (!get_number(meta, "B", &B, error) || !get_number(meta, "T", &T, error) || !get_number(meta, "H", &H, error) ||
      !get_number(meta, "HV", &HV, error) || !get_number(meta, "K", &K, error) || !get_number(meta, "V", &V, error) ||
      !get_number(meta, "N", &N, error) || !get_number(meta, "scale", &c.scale, error))
    return false;
  c.B = static_cast<int64_t>(B), c.T = static_cast<int64_t>(T), c.H = static_cast<int64_t>(H);
  c.HV = static_cast<int64_t>(HV), c.K = static_cast<int64_t>(K), c.V = static_cast<int64_t>(V);
  c.N = static_cast<int64_t>(N);
  const Json* lb = meta.get("lower_bound");
  c.has_lower_bound = lb != nullptr && lb->is_number();
  c.lower_bound = c.has_lower_bound ? lb->number : 0.0;
  c.gate_in_kernel = get_flag(meta, "gate_in_kernel", true);
  c.beta_sigmoid = get_flag(meta, "beta_sigmoid_in_kernel", true);
  c.qk_l2norm = get_flag(meta, "qk_l2norm_in_kernel", true);
  if (const Json* note = meta.get("note"); note != nullptr && note->is_string()) c.note = note->string;

  const Json* files = meta.get("files");
  if (files == nullptr || !files->is_object()) {
    *error = c.dir + "/meta.json: no \"files\" object";
    return false;
  }
  for (const auto& [key, desc] : files->object) {
    HostArray a;
    const Json* dt = desc.get("dtype");
    const Json* shape = desc.get("shape");
    a.dtype = dt != nullptr && dt->is_string() ? parse_dtype(dt->string) : KDA_DTYPE_NONE;
    if (a.dtype == KDA_DTYPE_NONE || shape == nullptr || !shape->is_array()) {
      *error = c.dir + "/meta.json: bad dtype or shape for '" + key + "'";
      return false;
    }
    for (const Json& d : shape->array) a.shape.push_back(static_cast<int64_t>(d.number));
    const std::string path = c.dir + "/" + key + ".bin";
    std::string raw;
    if (!read_file(path, &raw)) {
      *error = "cannot read " + path;
      return false;
    }
    const size_t expect = static_cast<size_t>(a.numel()) * elem_size(a.dtype);
    if (raw.size() != expect) {
      *error = path + ": expected " + std::to_string(expect) + " bytes, got " + std::to_string(raw.size());
      return false;
    }
    a.bytes.assign(raw.begin(), raw.end());
    c.arrays[key] = std::move(a);
  }
  // cu_seqlens given only inline in meta.json: build an i64 array from it.
  const Json* cu = meta.get("cu_seqlens");
  if (c.find("cu_seqlens") == nullptr && cu != nullptr && cu->is_array()) {
    HostArray a;
    a.dtype = KDA_DTYPE_I64;
    a.shape = {static_cast<int64_t>(cu->array.size())};
    a.bytes.resize(cu->array.size() * 8);
    for (size_t i = 0; i < cu->array.size(); ++i) {
      const int64_t v = static_cast<int64_t>(cu->array[i].number);
      std::memcpy(a.bytes.data() + 8 * i, &v, 8);
    }
    c.arrays["cu_seqlens"] = std::move(a);
  }
  for (const char* required : {"q", "k", "v", "g", "beta", "expected_o", "expected_final_state"}) {
    if (c.find(required) == nullptr) {
      *error = c.dir + "/meta.json: no array '" + required + "'";
      return false;
    }
  }
  *out = std::move(c);
  return true;
}

void golden_tolerance(const std::string& dir, const std::string& name, double* out_tol, double* state_tol) {
  *out_tol = 4e-3;
  *state_tol = 3e-3;
  std::string text, error;
  Json tol;
  if (!read_file(dir + "/tolerances.json", &text) || !parse_json(text, &tol, &error)) return;
  const Json* fla = tol.get("fla") != nullptr ? tol.get("fla")->get(name) : nullptr;
  if (fla == nullptr) return;
  if (const Json* o = fla->get("out"); o != nullptr && o->is_number()) *out_tol = std::max(*out_tol, o->number);
  if (const Json* s = fla->get("final_state"); s != nullptr && s->is_number())
    *state_tol = std::max(*state_tol, s->number);
}

FwdPointers host_input_pointers(const GoldenCase& c) {
  FwdPointers p;
  auto ptr = [&](const char* name) -> const void* {
    const HostArray* a = c.find(name);
    return a == nullptr ? nullptr : a->data();
  };
  p.q = ptr("q"), p.k = ptr("k"), p.v = ptr("v"), p.g = ptr("g"), p.beta = ptr("beta");
  p.A_log = ptr("A_log"), p.dt_bias = ptr("dt_bias"), p.initial_state = ptr("initial_state");
  p.cu_seqlens = ptr("cu_seqlens");
  return p;
}

kda_fwd_params make_params(const GoldenCase& c, const FwdPointers& ptrs) {
  kda_fwd_params p;
  kda_fwd_params_init(&p);
  auto set = [&](kda_tensor* t, const char* name, const void* data) {
    const HostArray* a = c.find(name);
    if (a != nullptr && data != nullptr) *t = tensor_of(data, *a);
  };
  set(&p.q, "q", ptrs.q);
  set(&p.k, "k", ptrs.k);
  set(&p.v, "v", ptrs.v);
  set(&p.g, "g", ptrs.g);
  set(&p.beta, "beta", ptrs.beta);
  set(&p.A_log, "A_log", ptrs.A_log);
  set(&p.dt_bias, "dt_bias", ptrs.dt_bias);
  set(&p.initial_state, "initial_state", ptrs.initial_state);
  set(&p.cu_seqlens, "cu_seqlens", ptrs.cu_seqlens);
  const int64_t out_shape[4] = {c.B, c.T, c.HV, c.V};
  p.out = kda_tensor_contiguous(ptrs.out, KDA_DTYPE_BF16, 4, out_shape);
  if (ptrs.final_state != nullptr) {
    const int64_t state_shape[4] = {c.N, c.HV, c.V, c.K};
    p.final_state = kda_tensor_contiguous(ptrs.final_state, ptrs.final_state_dtype, 4, state_shape);
  }
  p.scale = c.scale;
  if (!c.gate_in_kernel) {
    p.gate = KDA_GATE_PREACTIVATED;
  } else if (!c.has_lower_bound) {
    p.gate = KDA_GATE_SOFTPLUS;
  } else {
    p.gate = KDA_GATE_BOUNDED;
    p.lower_bound = c.lower_bound;
  }
  p.beta_sigmoid = c.beta_sigmoid ? 1 : 0;
  p.qk_l2norm = c.qk_l2norm ? 1 : 0;
  return p;
}

HostOutputs make_host_outputs(const GoldenCase& c, uint16_t out_fill, float state_fill) {
  HostOutputs o;
  o.out.assign(static_cast<size_t>(c.out_numel()), out_fill);
  o.final_state.assign(static_cast<size_t>(c.state_numel()), state_fill);
  return o;
}

kda_fwd_params make_host_params(const GoldenCase& c, HostOutputs* outs) {
  FwdPointers ptrs = host_input_pointers(c);
  ptrs.out = outs->out.data();
  ptrs.final_state = outs->final_state.data();
  ptrs.final_state_dtype = KDA_DTYPE_F32;
  return make_params(c, ptrs);
}

double rel_l2(const std::vector<double>& x, const std::vector<double>& ref) {
  if (x.size() != ref.size()) return INFINITY;
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double d = x[i] - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  return den > 0.0 ? std::sqrt(num / den) : std::sqrt(num);
}

std::vector<double> bf16_to_f64(const std::vector<uint16_t>& bits) {
  std::vector<double> r(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) {
    const uint32_t u = static_cast<uint32_t>(bits[i]) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    r[i] = f;
  }
  return r;
}

std::vector<double> f32_to_f64(const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); }

size_t count_non_finite(const std::vector<double>& x) {
  size_t n = 0;
  for (double v : x) n += std::isfinite(v) ? 0 : 1;
  return n;
}

}  // namespace kda::test
