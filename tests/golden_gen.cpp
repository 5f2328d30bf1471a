// The repository's own golden-style cases (see golden_gen.h): specs mirroring the shared golden set,
// seeded inputs, float64 expected values, and the writer of the shared format.
#include "tests/golden_gen.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "reference/common.h"
#include "src/api/problem.h"

namespace kda::test {

namespace {

constexpr int64_t D = 128;

enum class Inputs {
  kNormal,        // q, k, v, g, beta ~ N(0, 1); A_log ~ U(0, 1); dt_bias ~ U(-1, 1)
  kExtremeGates,  // g ~ N(0, 8), dt_bias ~ U(-8, 8), A_log ~ U(-0.5, 1.25): gates saturate both ways
  kNearDuplicateKeys,  // keys of a chunk = one base + 1% noise, beta ~ N(6, 1) (b ~ 1)
  kSoftplus,      // g ~ N(0, 3), A_log ~ log(1/2): per-step log-decay reaching ~-30
  kPreactivated,  // g an fp32 log-decay -exp(N(-1.3, 1)), beta ~ U(0, 1), q and k unit vectors
  kLongMemory     // kNormal with dt_bias = -8 on every 8th key channel
};

struct CaseSpec {
  const char* name;
  const char* note;
  int64_t B, T, H, HV;
  double lower_bound;  // NaN: the unbounded (softplus) gate
  bool with_A_log, with_initial_state;
  std::vector<int64_t> cu_seqlens;
  Inputs inputs;
  uint64_t seed;
};

const std::vector<CaseSpec>& specs() {
  static const std::vector<CaseSpec> s = {
      {"basic", "one sequence, partial last chunk, no initial state", 1, 37, 2, 2, -5.0, true, false, {},
       Inputs::kNormal, 101},
      {"batched_state", "B=2 fixed length with fp32 initial state", 2, 64, 3, 3, -5.0, true, true, {},
       Inputs::kNormal, 102},
      {"varlen_edges", "lengths 1, 15, 0, 17, 100, 16: empty sequence keeps its initial state", 1, 149, 2, 2, -5.0,
       true, true, {0, 1, 16, 16, 33, 133, 149}, Inputs::kNormal, 103},
      {"long_weak_decay", "long memory: gate close to 0", 1, 300, 2, 2, -0.1, true, true, {}, Inputs::kNormal, 104},
      {"extreme_gates", "saturated gates: per-step decay near lower_bound or near 0", 1, 64, 2, 2, -5.0, true, true,
       {}, Inputs::kExtremeGates, 105},
      {"near_duplicate_keys", "keys almost identical within a chunk, beta near 1: ill-conditioned intra-chunk system",
       1, 48, 2, 2, -5.0, true, true, {}, Inputs::kNearDuplicateKeys, 106},
      {"medium", "numerics over many chunks", 1, 1000, 4, 4, -5.0, true, true, {}, Inputs::kNormal, 107},
      {"softplus_gate", "unbounded gate -exp(A_log)*softplus(g+dt_bias); per-step log-decay reaches ~-30", 1, 80, 2,
       2, NAN, true, true, {}, Inputs::kSoftplus, 108},
      {"gva", "grouped value heads: HV=4 value heads share H=2 q/k heads", 1, 40, 2, 4, -5.0, true, true, {},
       Inputs::kNormal, 109},
      {"no_A_log", "A_log absent: gate = lower_bound*sigmoid(g+dt_bias)", 1, 33, 2, 2, -5.0, false, true, {},
       Inputs::kNormal, 110},
      {"preactivated", "g is an fp32 log-decay, beta a probability, q/k used as given (inputs already unit-norm)", 1,
       50, 2, 2, -5.0, true, true, {}, Inputs::kPreactivated, 111},
      {"long_memory", "every 8th key channel has dt_bias -8: per-token log-decay ~-1e-3, memory of thousands of tokens",
       1, 1024, 2, 2, -5.0, true, true, {}, Inputs::kLongMemory, 112},
  };
  return s;
}

HostArray array_bf16(const std::vector<int64_t>& shape, const std::vector<float>& values) {
  HostArray a;
  a.dtype = KDA_DTYPE_BF16;
  a.shape = shape;
  a.bytes.resize(values.size() * 2);
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t b = reference::float_to_bf16(values[i]);
    std::memcpy(a.bytes.data() + 2 * i, &b, 2);
  }
  return a;
}

template <class T>
HostArray array_of(kda_dtype dtype, const std::vector<int64_t>& shape, const std::vector<T>& values) {
  HostArray a;
  a.dtype = dtype;
  a.shape = shape;
  a.bytes.resize(values.size() * sizeof(T));
  std::memcpy(a.bytes.data(), values.data(), a.bytes.size());
  return a;
}

// Draws the inputs of `s` into `c` (shapes as in the shared golden set).
void draw_inputs(const CaseSpec& s, GoldenCase* c) {
  std::mt19937_64 rng(s.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto normals = [&](int64_t n, float mean, float sd) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = mean + sd * normal(rng);
    return v;
  };
  auto uniforms = [&](int64_t n, float lo, float hi) {
    std::uniform_real_distribution<float> u(lo, hi);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = u(rng);
    return v;
  };
  const int64_t tokens = s.B * s.T;
  const std::vector<int64_t> qk_shape = {s.B, s.T, s.H, D}, v_shape = {s.B, s.T, s.HV, D};
  std::vector<float> q = normals(tokens * s.H * D, 0, 1), k = normals(tokens * s.H * D, 0, 1);
  std::vector<float> v = normals(tokens * s.HV * D, 0, 1);
  const float g_sd = s.inputs == Inputs::kExtremeGates ? 8.0f : (s.inputs == Inputs::kSoftplus ? 3.0f : 1.0f);
  std::vector<float> g = normals(tokens * s.HV * D, 0, g_sd);
  std::vector<float> beta = s.inputs == Inputs::kNearDuplicateKeys ? normals(tokens * s.HV, 6, 1)
                                                                   : normals(tokens * s.HV, 0, 1);
  std::vector<float> A_log = s.inputs == Inputs::kExtremeGates ? uniforms(s.HV, -0.5f, 1.25f)
                             : s.inputs == Inputs::kSoftplus   ? uniforms(s.HV, -0.7031f, -0.6832f)
                                                               : uniforms(s.HV, 0, 1);
  std::vector<float> dt_bias = s.inputs == Inputs::kExtremeGates ? uniforms(s.HV * D, -8, 8) : uniforms(s.HV * D, -1, 1);
  if (s.inputs == Inputs::kLongMemory)
    for (int64_t i = 0; i < s.HV * D; i += 8) dt_bias[i] = -8.0f;
  if (s.inputs == Inputs::kNearDuplicateKeys) {
    // Per (batch row, chunk of 16 tokens, head): one base key, each token's key 1% away from it.
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t t0 = 0; t0 < s.T; t0 += 16)
        for (int64_t h = 0; h < s.H; ++h) {
          const std::vector<float> base = normals(D, 0, 1);
          for (int64_t t = t0; t < std::min(t0 + 16, s.T); ++t)
            for (int64_t i = 0; i < D; ++i) k[((b * s.T + t) * s.H + h) * D + i] = base[i] + 0.01f * normal(rng);
        }
  }
  c->arrays["v"] = array_bf16(v_shape, v);
  c->arrays["beta"] = array_bf16({s.B, s.T, s.HV}, beta);
  if (s.inputs == Inputs::kPreactivated) {
    for (auto* x : {&q, &k})  // unit vectors (before the bf16 rounding)
      for (int64_t r = 0; r < tokens * s.H; ++r) {
        double ss = 0;
        for (int64_t i = 0; i < D; ++i) ss += double((*x)[r * D + i]) * (*x)[r * D + i];
        for (int64_t i = 0; i < D; ++i) (*x)[r * D + i] = static_cast<float>((*x)[r * D + i] / std::sqrt(ss));
      }
    for (float& x : g) x = std::max(-3.0f, -std::exp(-1.3f + x));
    std::uniform_real_distribution<float> prob(0.005f, 0.995f);
    for (float& x : beta) x = prob(rng);
    c->arrays["g"] = array_of(KDA_DTYPE_F32, v_shape, g);
    c->arrays["beta"] = array_bf16({s.B, s.T, s.HV}, beta);
  } else {
    c->arrays["g"] = array_bf16(v_shape, g);
  }
  c->arrays["q"] = array_bf16(qk_shape, q);
  c->arrays["k"] = array_bf16(qk_shape, k);
  if (s.with_A_log) c->arrays["A_log"] = array_of(KDA_DTYPE_F32, {s.HV}, A_log);
  c->arrays["dt_bias"] = array_of(KDA_DTYPE_F32, {s.HV, D}, dt_bias);
  if (s.with_initial_state) c->arrays["initial_state"] = array_of(KDA_DTYPE_F32, {c->N, s.HV, D, D}, normals(c->N * s.HV * D * D, 0, 0.1f));
  if (!s.cu_seqlens.empty())
    c->arrays["cu_seqlens"] = array_of(KDA_DTYPE_I64, {static_cast<int64_t>(s.cu_seqlens.size())}, s.cu_seqlens);
}

bool make_dir(const std::string& path, std::string* error) {
  if (mkdir(path.c_str(), 0755) == 0 || errno == EEXIST) return true;
  *error = "cannot create " + path + ": " + std::strerror(errno);
  return false;
}

bool write_text(const std::string& path, const std::string& text, std::string* error) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  if (!f) *error = "cannot write " + path;
  return static_cast<bool>(f);
}

const char* dtype_tag(kda_dtype dt) {
  switch (dt) {
    case KDA_DTYPE_BF16: return "bf16";
    case KDA_DTYPE_F32: return "f32";
    case KDA_DTYPE_F64: return "f64";
    case KDA_DTYPE_I64: return "i64";
    case KDA_DTYPE_I32: return "i32";
    default: return "?";
  }
}

std::string json_double(double x) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.17g", x);
  return buf;
}

}  // namespace

const std::vector<std::string>& repo_golden_case_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const CaseSpec& s : specs()) n.push_back(s.name);
    return n;
  }();
  return names;
}

bool make_repo_golden_case(const std::string& name, GoldenCase* out, std::string* error) {
  const CaseSpec* spec = nullptr;
  for (const CaseSpec& s : specs())
    if (name == s.name) spec = &s;
  if (spec == nullptr) {
    *error = "no in-repo golden case named '" + name + "'";
    return false;
  }
  GoldenCase c;
  c.name = name;
  c.note = spec->note;
  c.B = spec->B, c.T = spec->T, c.H = spec->H, c.HV = spec->HV, c.K = D, c.V = D;
  c.N = spec->cu_seqlens.empty() ? spec->B : static_cast<int64_t>(spec->cu_seqlens.size()) - 1;
  c.scale = 1.0 / std::sqrt(128.0);
  c.has_lower_bound = !std::isnan(spec->lower_bound);
  c.lower_bound = c.has_lower_bound ? spec->lower_bound : 0.0;
  const bool pre = spec->inputs == Inputs::kPreactivated;
  c.gate_in_kernel = c.beta_sigmoid = c.qk_l2norm = !pre;
  draw_inputs(*spec, &c);

  // Expected values: the float64 recurrence, unrounded.
  HostOutputs outs = make_host_outputs(c);
  const kda_fwd_params p = make_host_params(c, &outs);
  Problem problem;
  kda_status st = validate(&p, ValidateMode::kHost, &problem);
  std::vector<double> o(static_cast<size_t>(c.out_numel()), 0.0), s(static_cast<size_t>(c.state_numel()), 0.0);
  if (st.code == KDA_OK) st = reference::fwd_recurrence_f64_ex(problem, 0, o.data(), s.data());
  if (st.code != KDA_OK) {
    *error = name + ": " + st.message;
    return false;
  }
  c.arrays["expected_o"] = array_of(KDA_DTYPE_F64, {c.B, c.T, c.HV, D}, o);
  c.arrays["expected_final_state"] = array_of(KDA_DTYPE_F64, {c.N, c.HV, D, D}, s);
  *out = std::move(c);
  return true;
}

bool write_golden_case(const std::string& dir, const GoldenCase& c, std::string* error) {
  const std::string base = dir + "/" + c.name;
  if (!make_dir(dir, error) || !make_dir(base, error)) return false;
  std::ostringstream m;
  m << "{\n \"B\": " << c.B << ",\n \"T\": " << c.T << ",\n \"H\": " << c.H << ",\n \"HV\": " << c.HV
    << ",\n \"K\": " << c.K << ",\n \"V\": " << c.V << ",\n \"N\": " << c.N << ",\n \"scale\": " << json_double(c.scale)
    << ",\n \"lower_bound\": " << (c.has_lower_bound ? json_double(c.lower_bound) : "null")
    << ",\n \"gate_in_kernel\": " << (c.gate_in_kernel ? "true" : "false")
    << ",\n \"beta_sigmoid_in_kernel\": " << (c.beta_sigmoid ? "true" : "false")
    << ",\n \"qk_l2norm_in_kernel\": " << (c.qk_l2norm ? "true" : "false")
    << ",\n \"state_layout\": \"[N, HV, V, K]\",\n \"cu_seqlens\": ";
  if (const HostArray* cu = c.find("cu_seqlens")) {
    m << "[";
    for (int64_t i = 0; i < cu->numel(); ++i) {
      int64_t x;
      std::memcpy(&x, cu->bytes.data() + 8 * i, 8);
      m << (i ? ", " : "") << x;
    }
    m << "]";
  } else {
    m << "null";
  }
  m << ",\n \"note\": \"" << c.note << " (generated by flash_kda_make_golden: fixed seed, float64 recurrence)\""
    << ",\n \"files\": {";
  bool first = true;
  for (const auto& [key, a] : c.arrays) {
    m << (first ? "" : ",") << "\n  \"" << key << "\": {\"dtype\": \"" << dtype_tag(a.dtype) << "\", \"shape\": [";
    for (size_t d = 0; d < a.shape.size(); ++d) m << (d ? ", " : "") << a.shape[d];
    m << "]}";
    first = false;
    const std::string path = base + "/" + key + ".bin";
    if (!write_text(path, std::string(a.bytes.begin(), a.bytes.end()), error)) return false;
  }
  m << "\n }\n}\n";
  return write_text(base + "/meta.json", m.str(), error);
}

bool write_golden_index(const std::string& dir, const std::vector<std::string>& names, std::string* error) {
  if (!make_dir(dir, error)) return false;
  const std::string tol =
      "{\n \"about\": \"Pass rule of the generated cases: out <= 4e-3 and final_state <= 3e-3 relative L2 error "
      "against the float64 recurrence, no NaN or Inf (FLA's per-case errors are measured on the shared golden set only).\",\n"
      " \"default\": {\"out\": 0.004, \"final_state\": 0.003},\n \"fla\": {}\n}\n";
  if (!write_text(dir + "/tolerances.json", tol, error)) return false;
  std::string index = "{\n \"cases\": [";
  for (size_t i = 0; i < names.size(); ++i) index += (i ? ", \"" : "\"") + names[i] + "\"";
  index += "]\n}\n";
  return write_text(dir + "/index.json", index, error);
}

}  // namespace kda::test
