// The regression corpus: one input per defect that fuzzing the C API found (issue 8; the last one is
// the harness's own), encoded in the harness's format (fuzz_case.h). Each broke an invariant of the
// harness (or a sanitizer) before its fix. `flash_kda_fuzz_driver --emit-corpus DIR` writes them as
// files (tests/fuzz/corpus).
#include <climits>
#include <cstdint>

#include "tests/fuzz/fuzz_case.h"

namespace kda::fuzz {

namespace {

// Slots and raw field numbers of ops (fuzz_build.cpp): kind 0 sets field b of slot a.
enum Slot : uint8_t { kQ, kK, kV, kG, kBeta, kOut, kALog, kDtBias, kInitial, kFinal, kCu };
enum Field : uint8_t { kNdim = 0, kShape0 = 1, kStride0 = 5, kDtype = 9 };
constexpr uint8_t kRaw = 0x80;  // the op's value is used as is

Op set_field(uint8_t slot, uint8_t field, int64_t value) { return Op{0, slot, static_cast<uint8_t>(kRaw | field), value}; }
Op alias(uint8_t slot, uint8_t into, int64_t byte_offset) { return Op{1, slot, into, byte_offset}; }
Op reshape(uint8_t slot, uint8_t dim, int64_t value) { return Op{3, slot, static_cast<uint8_t>(kRaw | dim), value}; }

// A tame, valid problem: B = 1, T = 20, H = 1, HV = 2, bounded gate with A_log and dt_bias, fp32
// states in and out, beta sigmoid and L2 norm in the kernel, chunked path, workspace as needed.
Header tame() {
  Header h;
  h.layout = 32 | 64;                  // A_log, dt_bias
  h.options = 2 | (2 << 2) | 16 | 32;  // f32 initial, f32 final, beta_sigmoid, qk_l2norm
  h.B = 0, h.T = 20, h.H = 0, h.group = 1;
  h.threads = 1, h.algorithm = 1, h.workspace = 2;
  h.seed = 0x5eed;
  return h;
}

}  // namespace

std::vector<std::pair<std::string, std::vector<uint8_t>>> regression_inputs() {
  std::vector<std::pair<std::string, std::vector<uint8_t>>> r;
  auto add = [&](const char* name, const Header& h, const std::vector<Op>& ops = {}) { r.emplace_back(name, encode(h, ops)); };
  Header h = tame();
  add("valid_tame_problem", h);
  // Item 2: overlapping outputs.
  add("item2_out_rows_alias_zero_stride", h, {set_field(kOut, kStride0 + 1, 0)});
  add("item2_out_rows_overlap_small_stride", h, {set_field(kOut, kStride0 + 1, 64)});
  {
    Header q = h;
    q.group = 0;  // HV = H: out and q have the same span
    add("item2_out_is_q", q, {alias(kOut, kQ, 0)});
  }
  add("item2_out_overlaps_v", h, {alias(kOut, kV, 256)});
  add("item2_final_state_overlaps_initial_state", h, {alias(kFinal, kInitial, 512)});
  {
    Header f = h;
    f.options = 2 | (1 << 2) | 16 | 32;  // f32 initial, bf16 final: same address, other dtype
    add("item2_final_state_is_initial_state_other_dtype", f, {alias(kFinal, kInitial, 0)});
  }
  add("item2_in_place_state_update", h, {alias(kFinal, kInitial, 0)});
  {
    Header v = h;
    v.layout |= 1;            // varlen
    v.cu = 2 | (3 << 3);      // N = 3, decreasing contents
    add("item2_cu_seqlens_decreasing_sequences_overlap", v);
  }
  // Item 3: integer overflow.
  {
    Header w = h;
    w.layout = 1;                     // varlen, no A_log / dt_bias
    w.options = 16 | 32;              // no states
    w.context_split = 64;
    add("item3_workspace_size_wraps", w,
        {reshape(kV, 2, 65535), reshape(kG, 2, 65535), reshape(kBeta, 2, 65535), reshape(kOut, 2, 65535),
         reshape(kCu, 0, 1LL << 30)});
  }
  {
    Header t = h;
    t.options = 16 | 32;  // no states (N = B = 0)
    std::vector<Op> ops;
    for (uint8_t s : {kQ, kK, kV, kG, kBeta, kOut}) {
      ops.push_back(set_field(s, kShape0, 0));
      ops.push_back(set_field(s, kShape0 + 1, INT64_MAX));
      ops.push_back(set_field(s, kStride0 + 1, 0));
    }
    add("item3_T_plus_15_with_empty_batch", t, ops);
  }
  {
    Header g = h;
    g.layout |= 8;  // g in fp32
    g.B = 1;        // B = 2
    add("item3_stride_times_element_size", g, {set_field(kG, kStride0, 1LL << 61)});
  }
  {
    Header c = h;
    c.layout |= 1, c.group = 0;  // varlen, HV = 1
    add("item3_state_dense_stride_overflow", c,
        {set_field(kCu, kShape0, (1LL << 58) + 1), set_field(kInitial, kShape0, 1LL << 58)});
  }
  add("item3_contiguous_shape_near_2_62", h, {reshape(kQ, 1, 1LL << 62)});
  {
    Header e = h;
    e.layout = (3 << 1) | 32 | 64;  // raw gate value
    e.gate_raw = 7;
    add("item3_gate_enum_out_of_range", e);
    e.gate_raw = INT32_MIN;
    add("item3_gate_enum_int_min", e);
  }
  add("item3_dtype_out_of_range", h, {set_field(kQ, kDtype, 77)});
  add("dtype_none_accepted_as_the_only_dtype", h, {set_field(kQ, kDtype, 0)});  // found by this harness
  {
    Header a = h;
    a.algorithm = 2, a.algorithm_raw = 1 << 30;
    add("item3_cpu_algorithm_out_of_range", a);
  }
  // Item 4: kda_tensor_contiguous with a NULL shape.
  add("item4_contiguous_null_shape", h, {Op{4, kQ, 4, 0}});
  // Item 5: values.
  {
    Header s = h;
    s.scale = 6;  // 1e300
    add("item5_scale_1e300", s);
    s.scale = 5;  // 65536.5
    add("item5_scale_just_past_65536", s);
  }
  {
    Header q = h;
    q.values = 1;  // q and k rows near 3e38
    add("item5_huge_q_k_bounded", q);
    q.layout |= 1 << 1;  // softplus
    add("item5_huge_q_k_softplus", q);
  }
  {
    Header g = h;
    g.layout |= 1 << 1;  // softplus gate
    g.values = 2;        // +inf, 3e38, -inf gates
    add("item5_softplus_gate_infinity", g);
    g.layout = (2 << 1) | 32 | 64;  // preactivated: -inf
    add("item5_preactivated_gate_minus_infinity", g);
  }
  {
    Header a = h;
    a.values = 3;  // A_log 100 with zero gate arguments
    add("item5_A_log_100_bounded", a);
    a.layout |= 1 << 1;
    add("item5_A_log_100_softplus", a);
  }
  // Item 6: lower_bound just below -5 (rejected; the message prints it in full).
  {
    Header l = h;
    l.lower_bound = 3;
    add("item6_lower_bound_below_minus_5", l);
  }
  // Item 7: a workspace one byte short, without a GPU.
  {
    Header w = h;
    w.workspace = 3;
    add("item7_workspace_too_small_before_device", w);
    w.workspace = 5;
    add("item7_workspace_overlaps_q", w);
  }
  // Anything at all: raw bits in every value; a misaligned pointer.
  {
    Header n = h;
    n.values = 4;
    add("values_raw_bits", n);
  }
  add("misaligned_q", h, {Op{9, kQ, 0, 0}});
  // Not a defect of the library but of the harness (session 61, found by libFuzzer): one packed
  // sequence of 65,535 value heads, which the single pass covers whole, so that its workspace is
  // 256 bytes; the harness held every accepted size to the chunk records' bound, which holds for the
  // two kernels' size (single_pass NEVER) only.
  {
    Header v = h;
    v.layout = 1, v.options = 16 | 32, v.workspace = 1;
    add("harness_single_pass_workspace_65535_value_heads", v,
        {reshape(kV, 2, 65535), reshape(kG, 2, 65535), reshape(kBeta, 2, 65535), reshape(kOut, 2, 65535)});
  }
  return r;
}

}  // namespace kda::fuzz
