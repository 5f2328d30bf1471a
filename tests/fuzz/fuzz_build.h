// Internals of the fuzz harness shared by fuzz_build.cpp (decoding an input into a problem),
// fuzz_problem.cpp (the problem's accessors) and fuzz_run.cpp (the calls and invariants). See fuzz_case.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flash_kda/flash_kda.h"
#include "tests/fuzz/fuzz_case.h"

// fuzz_c_calls.c: API calls with enum arguments given as integers (from C).
extern "C" kda_tensor kda_fuzz_tensor_contiguous(void* data, int32_t dtype, int32_t ndim, const int64_t* shape);
extern "C" kda_status kda_fuzz_fwd_cpu(const kda_fwd_params* params, int32_t algorithm, int32_t num_threads);

namespace kda::fuzz {

inline constexpr int kSlots = 11;  // q, k, v, g, beta, out, A_log, dt_bias, initial, final, cu_seqlens
inline constexpr const char* kSlotNames[kSlots] = {"q",     "k",       "v",       "g",           "beta",      "out",
                                                   "A_log", "dt_bias", "initial", "final_state", "cu_seqlens"};
kda_tensor* slot(kda_fwd_params& p, int i);

// A host buffer whose base is 256-byte aligned.
struct Buffer {
  std::vector<unsigned char> storage;
  unsigned char* base = nullptr;
  size_t bytes = 0;
  void allocate(size_t n);
};

// What both harnesses (kda_fwd's, kda_decode's: fuzz_decode.cpp) build their problems with.
inline constexpr size_t kSlack = 4096;  // bytes past each tensor's span: room for aliased views
// splitmix64: a fast deterministic generator for the values.
struct Rng {
  uint64_t s;
  uint64_t next();
  float uniform();  // [0, 1)
  float normal();   // ~N(0, 1)
};
// Element i of a bf16 (dt) or else fp32 buffer set to v (bf16: round to nearest even).
void store(unsigned char* p, kda_dtype dt, size_t i, float v);
// A tensor over its own buffer `b` (allocated here: its span plus kSlack): shape, strides (rows padded
// by `pad` elements), dtype.
kda_tensor make_tensor(Buffer* b, kda_dtype dt, int ndim, const int64_t* shape, int64_t pad);

struct Problem {
  Header h;
  std::vector<Op> ops;
  kda_fwd_params p{};
  Buffer buf[kSlots];
  int threads = 1;
  bool tame = false;        // finite moderate inputs with a stable configuration (see fuzz_case.h)
  bool values_changed = false;
  int value_mode = 0;
  std::string describe() const;
};

// Builds the honest problem of the header, then applies the ops.
void build(const uint8_t* data, size_t size, Problem* pr);

// Bytes from the first to one past the last element of t; false when t is not a well-formed
// tensor (rank, dtype, negative shape or stride, or a span past 2^62): computed in 128 bits.
bool span_bytes(const kda_tensor& t, unsigned __int128* bytes);
size_t elem_bytes(const kda_tensor& t);  // 0 for a dtype outside the enum
// Enum fields as the raw integers they hold.
int32_t raw_dtype(const kda_tensor& t);
int32_t raw_gate(const kda_fwd_params& p);

// The buffer of buf[0, n) that holds [data, data + bytes), or -1; owner: of a Problem's buffers.
int owner_of(const Buffer* buf, int n, const void* data, unsigned __int128 bytes);
int owner(const Problem& pr, const void* data, unsigned __int128 bytes);

// A tensor's bytes [lo, hi) as addresses (span_bytes), and whether two such ranges share a byte.
struct Range {
  unsigned __int128 lo = 0, hi = 0;
};
Range range_of(const kda_tensor& t);
bool overlap(const Range& a, const Range& b);

// The statuses the harnesses judge (fuzz_problem.cpp): a message containing `part`; an error of a rule
// that looks at data pointers (NULL data, alignment, overlaps: the shape-only queries skip them), and
// those plus the row strides in multiples of 16 bytes (kda_fwd's vector loads); a call on host pointers
// that got past every host check (no SM90 device here, or the pointer check refusing host memory).
bool has(const kda_status& s, const char* part);
bool data_rule(const kda_status& s);
bool device_rule(const kda_status& s);
bool reached_device(const kda_status& s);

// Every present tensor well formed and inside one of the problem's buffers.
bool honest(Problem* pr);
// kda_fwd's memory rules judged from addresses, shapes and strides alone (fuzz_problem.cpp): "" or the
// first rule the params break.
std::string address_violation(Problem* pr);

}  // namespace kda::fuzz
