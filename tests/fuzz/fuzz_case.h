// The fuzz harness of the public C API (host only): a byte string decodes into a small honest
// problem (host buffers large enough for the shapes it declares), then a list of mutations of the
// kda_fwd_params (raw shapes, strides, dtypes and enum values, aliased or misaligned pointers,
// doubles, flags), then the API calls and the invariants they must keep:
//  - no crash, no sanitizer report (the fuzz build uses ASan + UBSan), whatever the params hold;
//  - kda_fwd_workspace_size: an error, or a size that the two kernels' size (single_pass NEVER, which
//    the header says covers every choice) covers, and that size at least the chunk records' (computed
//    here in 128-bit arithmetic: a wrapped size is caught; a call the single pass covers whole needs
//    only a few hundred bytes);
//  - kda_fwd (no GPU is touched: there is none, or the pointers are host memory): never KDA_OK;
//    when it gets as far as the device, every host-checkable argument was fine (workspace size,
//    alignment, overlaps);
//  - kda_fwd_cpu, only when every tensor lies inside its buffer: the same verdict as the shape
//    query (up to rules on data); when it accepts, out's elements are distinct and the written
//    tensors overlap nothing but an in-place state (checked here by brute force), and a second
//    run with another thread count gives the same bytes;
//  - on tame inputs (finite, moderate, with the in-kernel norm and gate, huge q/k rows and
//    infinite softplus gates included): finite outputs, and the chunked path close to the float64
//    recurrence.
// A violation prints the case and aborts. The same inputs serve libFuzzer (fuzz_libfuzzer.cpp)
// and the seeded driver (fuzz_driver.cpp); regressions.cpp encodes the defects of issue 8.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kda::fuzz {

// The decoded form of an input (also what regressions.cpp encodes).
struct Header {
  uint8_t layout = 0;   // bit 0 varlen, bits 1-2 gate (3: raw value in gate_raw), bit 3 g f32,
                        // bit 4 beta f32, bit 5 A_log, bit 6 dt_bias, bit 7 dt_bias flat
  uint8_t options = 0;  // bits 0-1 initial state (none, bf16, f32, f32), bits 2-3 final state
                        // (idem), bit 4 beta_sigmoid, bit 5 qk_l2norm, bit 6 allow_neg_eigval,
                        // bit 7 check_cu_seqlens
  uint8_t B = 0, T = 0, H = 0, group = 0;  // B = 1 + B % 2, T = T % 41, H = 1 + H % 2, HV = H (1 + group % 2)
  uint8_t values = 0;   // value mode (see kValueModes in fuzz_case.cpp)
  uint8_t padding = 0;  // per-tensor row padding (bit i: tensor i padded)
  uint8_t cu = 0;       // bits 0-1 N - 1, bit 2 i32, bits 3-5 contents mode
  int8_t context_split = 0;
  uint8_t scale = 0, lower_bound = 0;  // indices into tables of doubles (the last: raw bits)
  double scale_raw = 0, lower_bound_raw = 0;
  uint8_t threads = 0;     // 1 + threads % 4
  uint8_t algorithm = 0;   // 0, 1, else raw value algorithm_raw
  int32_t algorithm_raw = 0, gate_raw = 0;
  uint8_t workspace = 0;   // what kda_fwd is given (see run_one)
  uint64_t seed = 0;       // values
};

struct Op {
  uint8_t kind = 0;    // see apply_op in fuzz_case.cpp
  uint8_t a = 0, b = 0;
  int64_t value = 0;
};

std::vector<uint8_t> encode(const Header& h, const std::vector<Op>& ops);
void decode(const uint8_t* data, size_t size, Header* h, std::vector<Op>* ops);

// Runs one input; aborts with a report when an invariant breaks.
void run_one(const uint8_t* data, size_t size);

// How far the inputs run so far went (for the driver's summary; single-threaded use).
struct Stats {
  long long inputs = 0, shape_query_ok = 0, honest = 0, cpu_ok = 0, tame_checked = 0;
};
const Stats& stats();
// With verbose set, run_one prints one line per input (statuses of the calls).
void set_verbose(bool verbose);

// The harness of kda_decode and kda_decode_cpu (fuzz_decode.cpp): the same kind of input (any bytes)
// decoded into a decode / verify problem over a state pool; aborts with a report when an invariant breaks.
void run_one_decode(const uint8_t* data, size_t size);
struct DecodeStats {
  long long inputs = 0, honest = 0, cpu_ok = 0, deterministic_checked = 0;
};
const DecodeStats& decode_stats();

// The harness of the context-parallel entry points (fuzz_cp.cpp: kda_segment_transition and its size
// query, kda_fwd_prepared, kda_combine_transitions): kda_fwd's problem of the same bytes, with D, M, the
// workspace and a combine's tensors laid out from a hash of the bytes; aborts with a report when an invariant breaks.
void run_one_cp(const uint8_t* data, size_t size);
struct CpStats {
  long long inputs = 0, transition_reached = 0, prepared_reached = 0, combine_reached = 0;  // calls that got to the device check
};
const CpStats& cp_stats();

// The regression corpus: (file name, input) for each defect found by fuzzing (issue 8).
std::vector<std::pair<std::string, std::vector<uint8_t>>> regression_inputs();

}  // namespace kda::fuzz
