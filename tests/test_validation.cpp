// One test per argument rule of src/api/validate.cpp and src/api/api.cpp that can run without a
// GPU. Each checks the status code and that the message names the argument, states the
// expectation and shows the value given. Invalid params are checked through
// kda_fwd_workspace_size first (it touches no tensor memory) and then through kda_fwd_cpu, so a
// rule that wrongly accepts never makes the CPU path read out of bounds.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "flash_kda/flash_kda.h"
#include "tests/validation_fixture.h"

namespace kda::test {
namespace {

TEST_F(Validation, ValidProblemRuns) {
  EXPECT_EQ(kda_fwd_cpu(&p_, KDA_CPU_RECURRENCE_F64, 1).code, KDA_OK);
  EXPECT_EQ(kda_fwd_cpu(&p_, KDA_CPU_CHUNKED_F32, 1).code, KDA_OK);
}

// --- params and entry points
TEST_F(Validation, NullParams) {
  const kda_status s = kda_fwd_cpu(nullptr, KDA_CPU_RECURRENCE_F64, 1);
  EXPECT_EQ(s.code, KDA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(s.message).find("params: expected a non-null pointer, got NULL"), std::string::npos);
  size_t bytes = 0;
  EXPECT_EQ(kda_fwd_workspace_size(nullptr, &bytes).code, KDA_ERROR_INVALID_ARGUMENT);
}
TEST_F(Validation, StructSize) {
  p_.struct_size = 12;
  ExpectInvalid({"params.struct_size", ("expected " + std::to_string(sizeof(kda_fwd_params))).c_str(), "got 12"});
}
TEST_F(Validation, WorkspaceSizeNullOutput) {
  const kda_status s = kda_fwd_workspace_size(&p_, nullptr);
  EXPECT_EQ(s.code, KDA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(s.message).find("bytes: expected a non-null pointer, got NULL"), std::string::npos);
}
TEST_F(Validation, CpuAlgorithmEnum) {
  const kda_status s = kda_fwd_cpu(&p_, static_cast<kda_cpu_algorithm>(7), 1);
  EXPECT_EQ(s.code, KDA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(s.message).find("algorithm: expected KDA_CPU_RECURRENCE_F64 (0)"), std::string::npos);
  EXPECT_NE(std::string(s.message).find("got 7"), std::string::npos);
}

// --- q, k
TEST_F(Validation, QMissing) { p_.q.data = nullptr; ExpectInvalid({"q: expected a tensor", "got NULL"}); }
TEST_F(Validation, QRank) { p_.q.ndim = 3; ExpectInvalid({"q: expected a 4-D tensor [B, T, H, K]", "got 3-D [1, 2, 1]"}); }
TEST_F(Validation, QNegativeShape) {
  p_.q.shape[1] = -1;
  ExpectInvalid({"q: expected shape [B, T, H, K]", "T >= 0", "got [1, -1, 1, 128]"});
}
TEST_F(Validation, HeadDimNot128) {
  p_.q.shape[3] = 64;
  ExpectError(KDA_ERROR_UNSUPPORTED, {"q: head dimension K", "must be 128", "got 64"});
}
// The whole message: with one dtype allowed it names that one (a mutant that fell through to the
// two-dtype message, "expected dtype bf16 or none", passed when the test looked for its parts).
TEST_F(Validation, QDtype) { p_.q.dtype = KDA_DTYPE_F16; ExpectInvalid({"q: expected dtype bf16, got f16"}); }
TEST_F(Validation, QLastStride) {
  p_.q.stride[3] = 2;
  ExpectInvalid({"q: expected the last dimension to be contiguous (stride 1)", "got stride 2"});
}
TEST_F(Validation, QNegativeStride) {
  p_.q.stride[1] = -128;
  ExpectInvalid({"q: expected non-negative strides", "got stride[1] = -128"});
}
TEST_F(Validation, KMissing) { p_.k.data = nullptr; ExpectInvalid({"k: expected a tensor", "got NULL"}); }
TEST_F(Validation, KShape) {
  p_.k.shape[1] = 3;
  ExpectInvalid({"k: expected shape [1, 2, 1, 128]", "(as q)", "got [1, 3, 1, 128]"});
}
TEST_F(Validation, KDtype) { p_.k.dtype = KDA_DTYPE_F32; ExpectInvalid({"k: expected dtype bf16", "got f32"}); }

// --- v, g, beta, out
TEST_F(Validation, VMissing) { p_.v.data = nullptr; ExpectInvalid({"v: expected a tensor", "got NULL"}); }
TEST_F(Validation, VRank) {
  p_.v.ndim = 2;
  ExpectInvalid({"v: expected a 4-D tensor [B, T, HV, V]", "got 2-D [1, 2]"});
  p_.v.shape[3] = 0;  // beyond the rank: never read as V (the rank is named, not "V must be 128")
  ExpectInvalid({"v: expected a 4-D tensor [B, T, HV, V], got 2-D [1, 2]"});
}
TEST_F(Validation, ValueDimNot128) {
  p_.v.shape[3] = 256;
  ExpectError(KDA_ERROR_UNSUPPORTED, {"v: head dimension V", "must be 128", "got 256"});
}
TEST_F(Validation, HVNotMultipleOfH) {
  p_.q.shape[2] = p_.k.shape[2] = 2;
  p_.v.shape[2] = 3;
  ExpectInvalid({"v: number of value heads HV", "multiple of H = 2", "got 3"});
}
TEST_F(Validation, HVSmallerThanH) {
  p_.q.shape[2] = p_.k.shape[2] = 2;
  ExpectInvalid({"v: number of value heads HV", "multiple of H = 2", "got 1"});
}
TEST_F(Validation, VShape) { p_.v.shape[0] = 2; ExpectInvalid({"v: expected shape [1, 2, 1, 128]", "got [2, 2, 1, 128]"}); }
TEST_F(Validation, VDtype) { p_.v.dtype = KDA_DTYPE_F32; ExpectInvalid({"v: expected dtype bf16", "got f32"}); }
TEST_F(Validation, GMissing) { p_.g.data = nullptr; ExpectInvalid({"g: expected a tensor", "got NULL"}); }
TEST_F(Validation, GShape) { p_.g.shape[2] = 2; ExpectInvalid({"g: expected shape [1, 2, 1, 128]", "got [1, 2, 2, 128]"}); }
TEST_F(Validation, GDtype) { p_.g.dtype = KDA_DTYPE_F16; ExpectInvalid({"g: expected dtype bf16 or f32", "got f16"}); }
TEST_F(Validation, BetaMissing) { p_.beta.data = nullptr; ExpectInvalid({"beta: expected a tensor", "got NULL"}); }
TEST_F(Validation, BetaRank) { p_.beta.ndim = 4; ExpectInvalid({"beta: expected a 3-D tensor [B, T, HV]", "got 4-D"}); }
TEST_F(Validation, BetaShape) { p_.beta.shape[1] = 5; ExpectInvalid({"beta: expected shape [1, 2, 1]", "got [1, 5, 1]"}); }
TEST_F(Validation, BetaDtype) { p_.beta.dtype = KDA_DTYPE_I32; ExpectInvalid({"beta: expected dtype bf16 or f32", "got i32"}); }
TEST_F(Validation, OutMissing) { p_.out.data = nullptr; ExpectInvalid({"out: expected a tensor", "got NULL"}); }
TEST_F(Validation, OutShape) { p_.out.shape[1] = 1; ExpectInvalid({"out: expected shape [1, 2, 1, 128]", "got [1, 1, 1, 128]"}); }
TEST_F(Validation, OutDtype) { p_.out.dtype = KDA_DTYPE_F32; ExpectInvalid({"out: expected dtype bf16", "got f32"}); }
TEST_F(Validation, OutLastStride) {
  p_.out.stride[3] = 3;
  ExpectInvalid({"out: expected the last dimension to be contiguous (stride 1)", "got stride 3"});
}

// --- gate, lower_bound, scale
TEST_F(Validation, GateEnum) {
  p_.gate = static_cast<kda_gate>(7);
  ExpectInvalid({"gate: expected KDA_GATE_BOUNDED (0)", "KDA_GATE_PREACTIVATED (2)", "got 7"});
}
TEST_F(Validation, ContextSplitNegative) {
  p_.context_split = -1;
  ExpectInvalid({"context_split: expected 0 (automatic), 1 (off) or a segment count in [2, 64]", "got -1"});
}
TEST_F(Validation, ContextSplitTooLarge) {
  p_.context_split = 65;
  ExpectInvalid({"context_split:", "[2, 64]", "got 65"});
}
TEST_F(Validation, ContextSplitInRangeIsAccepted) {
  for (int n : {0, 1, 2, 64}) {
    p_.context_split = n;
    EXPECT_EQ(kda_fwd_cpu(&p_, KDA_CPU_RECURRENCE_F64, 1).code, KDA_OK) << n;
  }
}
// The context-parallel options (scripts/mutants.sh host found no test refusing them, 2026-12-04).
TEST_F(Validation, ContextMethodIsOneOfThree) {
  for (int bad : {-1, 3}) {
    p_.context_method = static_cast<kda_context_method>(bad);
    ExpectInvalid({"context_method: expected KDA_CONTEXT_AUTO (0), KDA_CONTEXT_EXACT (1) or KDA_CONTEXT_WARMUP (2), got",
                   bad < 0 ? "got -1" : "got 3"});
  }
  for (kda_context_method ok : {KDA_CONTEXT_AUTO, KDA_CONTEXT_EXACT, KDA_CONTEXT_WARMUP}) {
    p_.context_method = ok;
    EXPECT_EQ(kda_fwd_cpu(&p_, KDA_CPU_RECURRENCE_F64, 1).code, KDA_OK) << ok;
  }
}
TEST_F(Validation, ContextWarmupChunks) {
  p_.context_warmup_chunks = -1;
  ExpectInvalid({"context_warmup_chunks: expected 0 (chosen from the decay bound) or a chunk count >= 1, got -1"});
  p_.context_warmup_chunks = 2;  // a forced warm-up length without the warm-up method
  ExpectInvalid({"context_warmup_chunks: expected 0 unless context_method is KDA_CONTEXT_WARMUP (2), got 2 with "
                 "context_method 0"});
  p_.context_method = KDA_CONTEXT_WARMUP;
  EXPECT_EQ(kda_fwd_cpu(&p_, KDA_CPU_RECURRENCE_F64, 1).code, KDA_OK);
}
TEST_F(Validation, TrustedPointersIsAFlag) {
  for (int bad : {-1, 2}) {
    p_.trusted_pointers = bad;
    ExpectInvalid({"trusted_pointers: expected 0 (check every pointer) or 1", bad < 0 ? "got -1" : "got 2"});
  }
  for (int ok : {0, 1}) {  // the CPU path ignores the promise itself
    p_.trusted_pointers = ok;
    EXPECT_EQ(kda_fwd_cpu(&p_, KDA_CPU_RECURRENCE_F64, 1).code, KDA_OK) << ok;
  }
}
TEST_F(Validation, SinglePassIsOneOfThree) {
  for (int bad : {-1, 3}) {
    p_.single_pass = bad;
    ExpectInvalid({"single_pass: expected KDA_SINGLE_PASS_AUTO (0), KDA_SINGLE_PASS_NEVER (1) or KDA_SINGLE_PASS_ALWAYS (2)",
                   bad < 0 ? "got -1" : "got 3"});
  }
  for (int ok : {KDA_SINGLE_PASS_AUTO, KDA_SINGLE_PASS_NEVER, KDA_SINGLE_PASS_ALWAYS}) {  // the CPU path ignores it
    p_.single_pass = ok;
    EXPECT_EQ(kda_fwd_cpu(&p_, KDA_CPU_RECURRENCE_F64, 1).code, KDA_OK) << ok;
  }
}
TEST_F(Validation, LowerBoundBelowRange) { p_.lower_bound = -6.0f; ExpectInvalid({"lower_bound: expected a value in [-5, 0)", "got -6"}); }
TEST_F(Validation, LowerBoundZero) { p_.lower_bound = 0.0f; ExpectInvalid({"lower_bound: expected a value in [-5, 0)", "got 0"}); }
TEST_F(Validation, LowerBoundPositive) { p_.lower_bound = 0.5f; ExpectInvalid({"lower_bound:", "[-5, 0)", "got 0.5"}); }
TEST_F(Validation, LowerBoundNaN) { p_.lower_bound = NAN; ExpectInvalid({"lower_bound:", "[-5, 0)", "nan"}); }
TEST_F(Validation, LowerBoundMinusInf) { p_.lower_bound = -INFINITY; ExpectInvalid({"lower_bound:", "[-5, 0)", "got -inf"}); }
TEST_F(Validation, LowerBoundIgnoredByUnboundedGates) {
  p_.lower_bound = NAN;
  p_.gate = KDA_GATE_SOFTPLUS;
  EXPECT_EQ(kda_fwd_cpu(&p_, KDA_CPU_RECURRENCE_F64, 1).code, KDA_OK);
  p_.gate = KDA_GATE_PREACTIVATED;
  EXPECT_EQ(kda_fwd_cpu(&p_, KDA_CPU_RECURRENCE_F64, 1).code, KDA_OK);
}
TEST_F(Validation, ScaleInf) { p_.scale = INFINITY; ExpectInvalid({"scale: expected a finite value", "got inf"}); }
TEST_F(Validation, ScaleNaN) { p_.scale = NAN; ExpectInvalid({"scale: expected a finite value", "nan"}); }

// --- A_log, dt_bias
TEST_F(Validation, ALogShape) { p_.A_log.shape[0] = 2; ExpectInvalid({"A_log: expected shape [1] [HV]", "got [2]"}); }
TEST_F(Validation, ALogRank) { p_.A_log.ndim = 2; p_.A_log.shape[1] = 1; ExpectInvalid({"A_log: expected a 1-D tensor [HV]", "got 2-D"}); }
TEST_F(Validation, ALogDtype) { p_.A_log.dtype = KDA_DTYPE_BF16; ExpectInvalid({"A_log: expected dtype f32", "got bf16"}); }
TEST_F(Validation, DtBiasFlatShape) {
  p_.dt_bias.ndim = 1;
  p_.dt_bias.shape[0] = 64;
  p_.dt_bias.stride[0] = 1;
  ExpectInvalid({"dt_bias: expected shape [128] [HV * K]", "got [64]"});
}
TEST_F(Validation, DtBiasFlatAccepted) {
  p_.dt_bias.ndim = 1;
  p_.dt_bias.shape[0] = D;
  p_.dt_bias.stride[0] = 1;
  EXPECT_EQ(kda_fwd_cpu(&p_, KDA_CPU_RECURRENCE_F64, 1).code, KDA_OK);
}
TEST_F(Validation, DtBias2DShape) { p_.dt_bias.shape[1] = 64; ExpectInvalid({"dt_bias: expected shape [1, 128]", "got [1, 64]"}); }
TEST_F(Validation, DtBiasRank) { p_.dt_bias.ndim = 3; ExpectInvalid({"dt_bias: expected a 2-D tensor [HV, K] or [HV * K]", "got 3-D"}); }
TEST_F(Validation, DtBiasDtype) { p_.dt_bias.dtype = KDA_DTYPE_BF16; ExpectInvalid({"dt_bias: expected dtype f32", "got bf16"}); }
TEST_F(Validation, DtBiasStride) {
  p_.dt_bias.stride[1] = 2;
  ExpectInvalid({"dt_bias: expected the last dimension to be contiguous (stride 1)", "got stride 2"});
}

// --- cu_seqlens
TEST_F(Validation, CuSeqlensRank) {
  p_.cu_seqlens.ndim = 2;
  p_.cu_seqlens.shape[1] = 1;
  ExpectInvalid({"cu_seqlens: expected a 1-D tensor [N + 1]", "got 2-D [2, 1]"});
  // A 2-D tensor whose first dimension is below 2: its rank is what is wrong, not its entry count.
  p_.cu_seqlens.shape[0] = 1;
  p_.cu_seqlens.shape[1] = 2;
  ExpectInvalid({"cu_seqlens: expected a 1-D tensor [N + 1], got 2-D [1, 2]"});
}
TEST_F(Validation, CuSeqlensLength) {
  p_.cu_seqlens.shape[0] = 1;
  ExpectInvalid({"cu_seqlens: expected at least 2 entries", "got shape [1]"});
}
TEST_F(Validation, CuSeqlensDtype) {
  p_.cu_seqlens.dtype = KDA_DTYPE_F32;
  ExpectInvalid({"cu_seqlens: expected dtype i64 or i32", "got f32"});
}
TEST_F(Validation, CuSeqlensStride) {
  p_.cu_seqlens.stride[0] = 2;
  ExpectInvalid({"cu_seqlens: expected the last dimension to be contiguous (stride 1)", "got stride 2"});
}
TEST_F(Validation, CuSeqlensWithBatch) {
  for (kda_tensor* t : {&p_.q, &p_.k, &p_.v, &p_.g, &p_.beta, &p_.out}) {
    t->shape[0] = 2;
    t->shape[1] = 1;
  }
  ExpectInvalid({"q: expected batch size B = 1 when cu_seqlens is given", "got B = 2"});
}

// --- states
TEST_F(Validation, InitialStateShape) {
  p_.initial_state.shape[0] = 2;
  ExpectInvalid({"initial_state: expected shape [1, 1, 128, 128] [N, HV, V, K]", "got [2, 1, 128, 128]"});
}
TEST_F(Validation, InitialStateDtype) {
  p_.initial_state.dtype = KDA_DTYPE_F16;
  ExpectInvalid({"initial_state: expected dtype f32 or bf16", "got f16"});
}
TEST_F(Validation, InitialStateContiguity) {
  p_.initial_state.stride[2] = 2 * D;
  ExpectInvalid({"initial_state: expected a contiguous tensor (stride[2] = 128)", "got stride[2] = 256"});
}
TEST_F(Validation, FinalStateShape) {
  p_.final_state.shape[1] = 2;
  ExpectInvalid({"final_state: expected shape [1, 1, 128, 128]", "got [1, 2, 128, 128]"});
}
TEST_F(Validation, FinalStateDtype) {
  p_.final_state.dtype = KDA_DTYPE_I32;
  ExpectInvalid({"final_state: expected dtype f32 or bf16", "got i32"});
}
TEST_F(Validation, FinalStateContiguity) {
  p_.final_state.stride[3] = 2;
  ExpectInvalid({"final_state: expected the last dimension to be contiguous", "got stride 2"});
}

// --- sizes whose indexing would overflow (shapes only: no tensor memory is touched)
void set_batch_time(kda_fwd_params* p, int64_t B, int64_t T) {
  for (kda_tensor* t : {&p->q, &p->k, &p->v, &p->g, &p->beta, &p->out}) {
    t->shape[0] = B;
    t->shape[1] = T;
  }
}
TEST_F(Validation, TooManyTokens) {
  p_.cu_seqlens.data = nullptr;
  set_batch_time(&p_, 1, int64_t{1} << 31);
  ExpectInvalid({"q: sizes too large to index", "B*T = 2147483648"});
}
// B*T = 2^64 wraps to 0 in int64 if computed before checking: must still be rejected.
TEST_F(Validation, TooManyTokensProductOverflowsInt64) {
  p_.cu_seqlens.data = nullptr;
  p_.initial_state.data = p_.final_state.data = nullptr;
  set_batch_time(&p_, 4, int64_t{1} << 62);
  for (kda_tensor* t : {&p_.q, &p_.k, &p_.v, &p_.g, &p_.beta, &p_.out}) t->stride[0] = t->stride[1] = 0;
  ExpectInvalid({"q: sizes too large to index: B*T = 4*4611686018427387904 tokens must stay below 2^31"});
}
TEST_F(Validation, TooManySequences) {
  p_.initial_state.data = p_.final_state.data = nullptr;
  p_.cu_seqlens.shape[0] = (int64_t{1} << 30) + 1;
  ExpectInvalid({"q: sizes too large to index", "N = 1073741824"});
}
TEST_F(Validation, TooManyValueHeads) {
  p_.initial_state.data = p_.final_state.data = nullptr;
  p_.A_log.data = p_.dt_bias.data = nullptr;
  for (kda_tensor* t : {&p_.v, &p_.g, &p_.beta, &p_.out}) t->shape[2] = 65536;
  ExpectInvalid({"v: number of value heads", "HV = 65536", "below 65536"});
}

// --- GPU entry point on the host: device-path rules first, then the device check
// Host and device paths read every element through a pointer of its type.
TEST_F(Validation, ElementMisalignedPointer) {
  p_.q.data = static_cast<unsigned char*>(p_.q.data) + 1;
  const kda_status c = kda_fwd_cpu(&p_, KDA_CPU_RECURRENCE_F64, 1);
  EXPECT_EQ(c.code, KDA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(c.message).find("q: expected a data pointer aligned to its element size (2 bytes), got"),
            std::string::npos)
      << c.message;
}
TEST_F(Validation, DeviceMisalignedPointer) {
  p_.q.data = q_.data() + 1;  // 2 bytes off
  const kda_status s = kda_fwd(&p_, nullptr, 0, nullptr);
  EXPECT_EQ(s.code, KDA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(s.message).find("q: expected a 16-byte aligned data pointer"), std::string::npos) << s.message;
}
TEST_F(Validation, DeviceRowStride) {
  p_.k.stride[1] = 129;  // rows of 258 bytes: not a multiple of 16
  const kda_status s = kda_fwd(&p_, nullptr, 0, nullptr);
  EXPECT_EQ(s.code, KDA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(s.message).find("k: expected stride[1] to be a multiple of 16 bytes (8 elements)"),
            std::string::npos) << s.message;
  EXPECT_NE(std::string(s.message).find("got 129 elements"), std::string::npos) << s.message;
}
TEST_F(Validation, NoSm90DeviceIsReported) {
  int count = 0;
  if (cudaGetDeviceCount(&count) == cudaSuccess && count > 0) {
    int major = 0, minor = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
    if (major == 9 && minor == 0) GTEST_SKIP() << "a compute capability 9.0 GPU is present";
  }
  cudaGetLastError();
  // Host arguments all valid (a host buffer stands in for the workspace: its size and alignment are
  // checked before the device), so the device is what is reported.
  size_t bytes = 0;
  ASSERT_EQ(kda_fwd_workspace_size(&p_, &bytes).code, KDA_OK);
  std::vector<unsigned char> ws(bytes + 256);
  void* aligned = ws.data() + (256 - reinterpret_cast<uintptr_t>(ws.data()) % 256) % 256;
  const kda_status s = kda_fwd(&p_, aligned, bytes, nullptr);
  EXPECT_EQ(s.code, KDA_ERROR_UNSUPPORTED_DEVICE) << s.message;
  EXPECT_NE(std::string(s.message).find("device:"), std::string::npos) << s.message;
  EXPECT_NE(std::string(s.message).find("compute capability 9.0"), std::string::npos) << s.message;
  // What was found: no GPU at all, or another compute capability (api.cpp's check_device).
  const bool none = cudaGetDeviceCount(&count) != cudaSuccess || count == 0;
  cudaGetLastError();
  EXPECT_NE(std::string(s.message).find(none ? "found none (" : "found "), std::string::npos) << s.message;
  if (!none) {
    EXPECT_NE(std::string(s.message).find(" on device "), std::string::npos) << s.message;
  }
}

}  // namespace
}  // namespace kda::test
