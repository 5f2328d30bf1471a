// Validation at the edges found by fuzzing the C API (issue 8): sizes whose products overflow,
// enum fields holding any integer, values that fp32 cannot hold, messages that print doubles in
// full, kda_tensor_contiguous on bad arguments, and the order of the checks in kda_fwd (every
// host-checkable argument before the device). All run without a GPU and touch no tensor memory
// unless the params are valid.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "flash_kda/flash_kda.h"
#include "tests/validation_fixture.h"

namespace kda::test {
namespace {

void set_batch_time(kda_fwd_params* p, int64_t B, int64_t T) {
  for (kda_tensor* t : {&p->q, &p->k, &p->v, &p->g, &p->beta, &p->out}) {
    t->shape[0] = B;
    t->shape[1] = T;
  }
}

// Gives the v-shaped tensors (v, g, beta, out) HV heads, with contiguous strides.
void set_value_heads(kda_fwd_params* p, int64_t HV) {
  for (kda_tensor* t : {&p->v, &p->g, &p->beta, &p->out}) {
    int64_t shape[4] = {t->shape[0], t->shape[1], HV, t->shape[3]};
    *t = kda_tensor_contiguous(t->data, t->dtype, t->ndim, shape);
  }
}

bool has(const kda_status& s, const char* part) { return std::string(s.message).find(part) != std::string::npos; }

// --- item 3: integer overflow

// With a forced split, the context-parallel workspace is (2P - 3) 64 KiB states per sequence and
// head: 2^30 - 1 sequences x 65535 heads x 125 states does not fit in 64 bits. It used to wrap to a
// small size; it is an error now, and below the limit the size is the exact formula.
TEST_F(Validation, WorkspaceSizeThatDoesNotFitIsAnError) {
  p_.initial_state.data = p_.final_state.data = nullptr;
  p_.A_log.data = p_.dt_bias.data = nullptr;
  set_value_heads(&p_, 65535);
  p_.cu_seqlens.shape[0] = int64_t{1} << 30;
  p_.context_split = 64;
  size_t bytes = 0;
  kda_status s = kda_fwd_workspace_size(&p_, &bytes);
  EXPECT_EQ(s.code, KDA_ERROR_INVALID_ARGUMENT) << "returned " << bytes << " bytes";
  EXPECT_TRUE(has(s, "workspace: sizes too large")) << s.message;
  EXPECT_TRUE(has(s, "N = 1073741823 sequences x HV = 65535 value heads")) << s.message;

  // 2^20 sequences x 1024 heads x 125 states of 65536 bytes: 2^53 bytes and more, exactly counted.
  set_value_heads(&p_, 1024);
  p_.cu_seqlens.shape[0] = (int64_t{1} << 20) + 1;
  s = kda_fwd_workspace_size(&p_, &bytes);
  ASSERT_EQ(s.code, KDA_OK) << s.message;
  const unsigned __int128 states = static_cast<unsigned __int128>(1 << 20) * 1024 * 125 * 65536;
  EXPECT_GE(static_cast<unsigned __int128>(bytes), states);
  EXPECT_LT(static_cast<unsigned __int128>(bytes), states + (static_cast<unsigned __int128>(1) << 50));
}

// kda_tensor_contiguous: strides past int64 saturate at INT64_MAX (no signed overflow), which
// validation then reports as too large.
TEST_F(Validation, ContiguousStridesSaturateInsteadOfOverflowing) {
  const int64_t shape[4] = {3, int64_t{1} << 62, 1, D};
  const kda_tensor t = kda_tensor_contiguous(q_.data(), KDA_DTYPE_BF16, 4, shape);
  EXPECT_EQ(t.stride[3], 1);
  EXPECT_EQ(t.stride[1], D);
  EXPECT_EQ(t.stride[0], INT64_MAX);
  p_.q = t;
  size_t bytes = 0;
  const kda_status s = kda_fwd_workspace_size(&p_, &bytes);
  EXPECT_EQ(s.code, KDA_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(has(s, "q: sizes too large")) << s.message;
}

// The reach limit counts bytes: a stride of 2^62 elements is 2^63 bytes of bf16 (it used to be
// accepted, and the 16-byte rule computed stride * element size past int64).
TEST_F(Validation, ReachLimitCountsBytes) {
  p_.cu_seqlens.data = nullptr;
  p_.initial_state.data = p_.final_state.data = nullptr;
  set_batch_time(&p_, 2, 1);
  p_.g.dtype = KDA_DTYPE_F32;
  for (kda_tensor* t : {&p_.q, &p_.k, &p_.v, &p_.g, &p_.beta, &p_.out}) t->stride[0] = int64_t{1} << 61;
  ExpectInvalid({"q: sizes too large to index", "reaches past 2^62 bytes"});
  p_.q.stride[0] = p_.k.stride[0] = p_.v.stride[0] = p_.out.stride[0] = int64_t{1} << 60;
  ExpectInvalid({"g: sizes too large to index", "stride[0] = 2305843009213693952"});
}

// T alone is bounded: with B = 0, B*T = 0 for any T, but the launcher rounds T up to chunks
// (T + 15 overflowed for T near 2^63).
TEST_F(Validation, TBoundedEvenWithAnEmptyBatch) {
  p_.cu_seqlens.data = nullptr;
  p_.initial_state.data = p_.final_state.data = nullptr;
  set_batch_time(&p_, 0, INT64_MAX);
  for (kda_tensor* t : {&p_.q, &p_.k, &p_.v, &p_.g, &p_.beta, &p_.out}) t->stride[0] = t->stride[1] = 0;
  ExpectInvalid({"q: sizes too large to index", "T = 9223372036854775807"});
  set_batch_time(&p_, 0, (int64_t{1} << 31) - 1);
  size_t bytes = 0;
  const kda_status s = kda_fwd_workspace_size(&p_, &bytes);
  EXPECT_EQ(s.code, KDA_OK) << s.message;
}

// A contiguous tensor whose element count passes int64: the dense stride of its dimensions is
// computed with overflow checks (the old `expect *= shape` overflowed here: UBSan, sanitizer build).
TEST_F(Validation, ContiguityRuleWithOverflowingElementCount) {
  p_.final_state.data = nullptr;
  p_.cu_seqlens.shape[0] = (int64_t{1} << 58) + 1;
  p_.initial_state.shape[0] = int64_t{1} << 58;
  p_.initial_state.stride[0] = D * D;
  ExpectInvalid({"initial_state: sizes too large to index"});
}

// --- enum fields: any integer may arrive; it is read and reported as an integer.
TEST_F(Validation, DtypeOutsideTheEnum) {
  const int32_t bad = 77;
  std::memcpy(&p_.q.dtype, &bad, sizeof(bad));
  ExpectInvalid({"q: expected dtype bf16", "got 77 (not a kda_dtype value)"});
  const int32_t negative = -1;
  std::memcpy(&p_.q.dtype, &negative, sizeof(negative));
  ExpectInvalid({"q: expected dtype bf16", "got -1 (not a kda_dtype value)"});
}
// KDA_DTYPE_NONE is no dtype: it used to pass wherever only one dtype is accepted (the second
// allowed value being NONE), and the CPU path then read bf16 data as f32 (found by the fuzzer).
TEST_F(Validation, DtypeNoneIsRejected) {
  p_.q.dtype = KDA_DTYPE_NONE;
  ExpectInvalid({"q: expected dtype bf16", "got none"});
  p_.q.dtype = KDA_DTYPE_BF16;
  p_.A_log.dtype = KDA_DTYPE_NONE;
  ExpectInvalid({"A_log: expected dtype f32", "got none"});
}
TEST_F(Validation, GateOutsideTheEnum) {
  const int32_t bad = -2147483647 - 1;
  std::memcpy(&p_.gate, &bad, sizeof(bad));
  ExpectInvalid({"gate: expected KDA_GATE_BOUNDED (0)", "got -2147483648"});
}
TEST_F(Validation, CpuAlgorithmOutsideTheEnum) {
  kda_cpu_algorithm algorithm;
  const int32_t bad = 1 << 30;
  std::memcpy(&algorithm, &bad, sizeof(bad));
  const kda_status s = kda_fwd_cpu(&p_, algorithm, 1);
  EXPECT_EQ(s.code, KDA_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(has(s, "algorithm: expected KDA_CPU_RECURRENCE_F64 (0) or KDA_CPU_CHUNKED_F32 (1), got 1073741824"))
      << s.message;
}

// --- item 4: kda_tensor_contiguous with a NULL shape or a bad rank returns a rejected tensor.
TEST_F(Validation, ContiguousWithNullShapeIsRejectedNotACrash) {
  p_.q = kda_tensor_contiguous(q_.data(), KDA_DTYPE_BF16, 4, nullptr);
  EXPECT_EQ(p_.q.ndim, -1);
  ExpectInvalid({"q: expected a 4-D tensor [B, T, H, K]", "got -1-D"});
  const int64_t shape[4] = {1, 2, 1, D};
  p_.q = kda_tensor_contiguous(q_.data(), KDA_DTYPE_BF16, 7, shape);
  EXPECT_EQ(p_.q.ndim, -1);
  p_.q = kda_tensor_contiguous(q_.data(), KDA_DTYPE_BF16, -3, shape);
  EXPECT_EQ(p_.q.ndim, -1);
  const kda_tensor empty = kda_tensor_contiguous(nullptr, KDA_DTYPE_BF16, 0, nullptr);  // rank 0: no shape read
  EXPECT_EQ(empty.ndim, 0);
}

// --- item 5: scale must be finite in fp32 with room to spare.
TEST_F(Validation, ScaleBeyondFp32IsRejected) {
  p_.scale = 1e300;
  ExpectInvalid({"scale: expected a finite value with |scale| <= 65536", "got 1.0000000000000001e+300"});
  p_.scale = -65536.5;
  ExpectInvalid({"scale:", "got -65536.5"});
  for (double ok : {65536.0, -65536.0, 0.0, 1e-30}) {
    p_.scale = ok;
    EXPECT_EQ(kda_fwd_cpu(&p_, KDA_CPU_CHUNKED_F32, 1).code, KDA_OK) << ok;
  }
}

// lower_bound must stay a non-zero value in fp32 (the kernels use it there).
TEST_F(Validation, LowerBoundThatRoundsToZeroInFp32) {
  p_.lower_bound = -1e-300;
  ExpectInvalid({"lower_bound:", "non-zero in fp32", "got -1e-300"});
}

// --- item 6: doubles printed with 17 significant digits.
TEST_F(Validation, LowerBoundJustPastTheRangeIsPrintedInFull) {
  p_.lower_bound = std::nextafter(-5.0, -6.0);
  ExpectInvalid({"lower_bound: expected a value in [-5, 0)", "got -5.0000000000000009"});
}

// --- item 7: kda_fwd checks every host argument before looking for a device.
TEST_F(Validation, WorkspaceErrorsComeBeforeTheDeviceCheck) {
  size_t bytes = 0;
  ASSERT_EQ(kda_fwd_workspace_size(&p_, &bytes).code, KDA_OK);
  ASSERT_GT(bytes, 256u);
  kda_status s = kda_fwd(&p_, nullptr, bytes - 1, nullptr);
  EXPECT_EQ(s.code, KDA_ERROR_WORKSPACE_TOO_SMALL) << s.message;
  EXPECT_TRUE(has(s, "workspace: expected at least")) << s.message;
  s = kda_fwd(&p_, nullptr, bytes, nullptr);
  EXPECT_EQ(s.code, KDA_ERROR_INVALID_ARGUMENT) << s.message;
  EXPECT_TRUE(has(s, "workspace: expected")) << s.message;
  EXPECT_TRUE(has(s, "got NULL")) << s.message;
  std::vector<unsigned char> ws(bytes + 512);
  unsigned char* aligned = ws.data() + (256 - reinterpret_cast<uintptr_t>(ws.data()) % 256) % 256;
  s = kda_fwd(&p_, aligned + 16, bytes, nullptr);
  EXPECT_EQ(s.code, KDA_ERROR_INVALID_ARGUMENT) << s.message;
  EXPECT_TRUE(has(s, "workspace: expected a 256-byte aligned pointer")) << s.message;
}

}  // namespace
}  // namespace kda::test
