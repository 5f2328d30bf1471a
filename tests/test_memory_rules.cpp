// Rules on the memory a call's tensors occupy (src/api/memory_rules.h, issue 8 item 2): out's rows
// never alias (zero or too-small strides), written tensors share no byte with the others (out vs
// inputs and states, final_state vs everything but exactly initial_state), the workspace shares no
// byte with any tensor; the in-place state update (final_state is initial_state, same dtype) is
// supported and equals the out-of-place result bitwise on both CPU paths. Also the pointer check's
// allocation test (bytes_past_range; the driver's answer is GPU-only, GpuSafety tests it there).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "flash_kda/flash_kda.h"
#include "src/api/memory_rules.h"
#include "tests/random_problem.h"
#include "tests/validation_fixture.h"

namespace kda::test {
namespace {

// --- the pointer check's allocation test (api.cpp check_pointer; the driver's range is given here)
TEST(AllocationRange, BytesPastTheEndOfTheRange) {
  const uintptr_t start = 0x7f0000000000;
  const size_t size = size_t{2} << 20;
  EXPECT_EQ(bytes_past_range(start, size, start, size), 0u);                // fills it exactly
  EXPECT_EQ(bytes_past_range(start + 1024, size - 1024, start, size), 0u);  // ends at its end
  EXPECT_EQ(bytes_past_range(start + 1024, size, start, size), 1024u);      // 1 KiB short
  EXPECT_EQ(bytes_past_range(start, size + 1, start, size), 1u);            // one byte short
  EXPECT_EQ(bytes_past_range(start + size - 256, 12357632, start, size), 12357376u);
  EXPECT_EQ(bytes_past_range(start + 8, 1, start, size), 0u);
  EXPECT_EQ(bytes_past_range(start, 0, start, size), 0u);                   // no element
  EXPECT_EQ(bytes_past_range(start, size + 1, start, 0), 0u);               // the range not known
  // Near the top of the address space nothing wraps around.
  const uintptr_t top = UINTPTR_MAX - 4095;
  EXPECT_EQ(bytes_past_range(top, 4096, top, 4096), 0u);
  EXPECT_EQ(bytes_past_range(top, 8192, top, 4096), 4096u);
  EXPECT_EQ(bytes_past_range(top, SIZE_MAX, top, 4096), uint64_t{SIZE_MAX} - 4096);
}

// --- out's rows (strides only: every entry point, the shape-only query included)
TEST_F(Validation, OutRowsAliasWithAZeroStride) {
  p_.out.stride[1] = 0;  // both tokens' rows at the same address
  ExpectInvalid({"out: expected strides that give every element its own address", "stride[1] = 0 must be at least 1,",
                 "got shape [1, 2, 1, 128] with strides [256, 0, 128, 1]"});
}
TEST_F(Validation, OutRowsOverlapWithATooSmallStride) {
  p_.out.stride[1] = 64;  // rows overlap by half
  ExpectInvalid({"out: expected strides that give every element its own address", "stride[1] = 64"});
}
TEST_F(Validation, OutWithPaddedOrPermutedStridesIsAccepted) {
  std::vector<uint16_t> wide(4 * D, 0);
  p_.out.data = wide.data();
  p_.out.stride[1] = 3 * D;  // padded rows
  EXPECT_EQ(kda_fwd_cpu(&p_, KDA_CPU_RECURRENCE_F64, 1).code, KDA_OK);
  p_.out.stride[0] = 1;  // B = 1: any stride of a size-1 dimension is fine
  EXPECT_EQ(kda_fwd_cpu(&p_, KDA_CPU_RECURRENCE_F64, 1).code, KDA_OK);
}

// --- written tensors against the others (addresses: kda_fwd_cpu and kda_fwd)
TEST_F(Validation, OutIsQ) {
  p_.out.data = q_.data();
  ExpectAddressError({"out: expected memory disjoint from every other tensor (it is written)", "overlapping q"});
}
TEST_F(Validation, OutOverlapsVPartially) {
  std::vector<uint16_t> shared(4 * D, 0x3f80);
  p_.v.data = shared.data();
  p_.out.data = shared.data() + D;  // out's first row is v's second
  ExpectAddressError({"out: expected memory disjoint", "overlapping v"});
}
TEST_F(Validation, OutOverlapsTheGateOrBeta) {
  std::vector<uint16_t> shared(8 * D, 0x3f80);
  p_.out.data = shared.data();
  p_.g.data = shared.data() + 2 * D - 8;  // the last 16 bytes of out
  ExpectAddressError({"out: expected memory disjoint", "overlapping g"});
  p_.g.data = g_.data();
  p_.beta.data = shared.data() + 2 * D - 8;
  ExpectAddressError({"out: expected memory disjoint", "overlapping beta"});
}
TEST_F(Validation, OutOverlapsFinalState) {
  std::vector<float> shared(D * D + 2 * D, 0.0f);
  p_.final_state.data = shared.data();
  p_.out.data = shared.data() + D * D - 64;
  ExpectAddressError({"out: expected memory disjoint", "overlapping final_state"});
}
TEST_F(Validation, FinalStateOverlapsInitialStatePartially) {
  std::vector<float> shared(2 * D * D, 0.0f);
  p_.initial_state.data = shared.data();
  p_.final_state.data = shared.data() + D;  // one row further: neither disjoint nor in place
  ExpectAddressError({"final_state: expected memory disjoint from initial_state, or exactly initial_state with the "
                      "same dtype (in-place update)"});
}
TEST_F(Validation, FinalStateIsInitialStateWithAnotherDtype) {
  p_.final_state.data = p_.initial_state.data;
  p_.final_state.dtype = KDA_DTYPE_BF16;
  ExpectAddressError({"final_state: expected memory disjoint from initial_state", "got bf16", "(f32 at"});
}
TEST_F(Validation, FinalStateOverlapsAnInput) {
  std::vector<float> shared(D * D + 4 * D, 0.0f);
  p_.final_state.data = shared.data();
  p_.dt_bias.data = shared.data() + D * D - D;
  ExpectAddressError({"final_state: expected memory disjoint from every other tensor", "overlapping dt_bias"});
}
TEST_F(Validation, InputsMayShareMemory) {
  p_.k.data = p_.q.data;  // read-only tensors: any aliasing is fine
  p_.v.data = p_.q.data;
  EXPECT_EQ(kda_fwd_cpu(&p_, KDA_CPU_CHUNKED_F32, 1).code, KDA_OK);
}
TEST_F(Validation, EmptyTensorsOccupyNoMemory) {
  // T = 0: q, k, v, g, beta and out have no element; frameworks give them one stand-in pointer.
  void* const stand_in = reinterpret_cast<void*>(uintptr_t{4096});
  for (kda_tensor* t : {&p_.q, &p_.k, &p_.v, &p_.g, &p_.beta, &p_.out}) {
    t->shape[1] = 0;
    t->data = stand_in;
  }
  p_.cu_seqlens.data = nullptr;
  init_.assign(init_.size(), 0.5f);
  ASSERT_EQ(kda_fwd_cpu(&p_, KDA_CPU_RECURRENCE_F64, 1).code, KDA_OK);
  EXPECT_EQ(final_, init_);  // no token: the state passes through
}
TEST_F(Validation, ShapeOnlyQueryAcceptsOneStandInPointer) {
  // The binding sizes the workspace with every tensor at one placeholder address.
  void* const stand_in = reinterpret_cast<void*>(uintptr_t{4096});
  for (kda_tensor* t : {&p_.q, &p_.k, &p_.v, &p_.g, &p_.beta, &p_.out, &p_.A_log, &p_.dt_bias, &p_.initial_state,
                        &p_.final_state, &p_.cu_seqlens})
    t->data = stand_in;
  size_t bytes = 0;
  const kda_status s = kda_fwd_workspace_size(&p_, &bytes);
  EXPECT_EQ(s.code, KDA_OK) << s.message;
}

// --- the workspace (kda_fwd, checked before the device)
TEST_F(Validation, WorkspaceOverlapsATensor) {
  size_t bytes = 0;
  ASSERT_EQ(kda_fwd_workspace_size(&p_, &bytes).code, KDA_OK);
  // Room for final_state's 64 KiB past the workspace: its bytes stay inside this buffer (not in
  // whatever the heap holds next, initial_state perhaps, which would be another error).
  std::vector<unsigned char> buf(bytes + D * D * 4 + 4096);
  unsigned char* ws = buf.data() + (256 - reinterpret_cast<uintptr_t>(buf.data()) % 256) % 256;
  p_.final_state.data = ws + bytes - 64;  // 16-byte aligned, inside the workspace's last bytes
  const kda_status s = kda_fwd(&p_, ws, bytes, nullptr);
  EXPECT_EQ(s.code, KDA_ERROR_INVALID_ARGUMENT) << s.message;
  EXPECT_NE(std::string(s.message).find("workspace: expected memory disjoint from every tensor"), std::string::npos)
      << s.message;
  EXPECT_NE(std::string(s.message).find("overlapping final_state"), std::string::npos) << s.message;
}

// --- the in-place state update on both CPU paths: bitwise equal to the out-of-place result.
class InPlaceState : public ::testing::TestWithParam<kda_cpu_algorithm> {};

TEST_P(InPlaceState, EqualsOutOfPlace) {
  for (kda_dtype dtype : {KDA_DTYPE_F32, KDA_DTYPE_BF16}) {
    for (bool varlen : {false, true}) {
      ProblemSpec spec;
      spec.B = varlen ? 1 : 2, spec.T = varlen ? 70 : 35, spec.H = 1, spec.HV = 2;
      if (varlen) spec.cu_seqlens = {0, 0, 33, 70};  // an empty sequence passes its state through
      spec.initial_state = spec.final_state = dtype;
      RandomProblem apart = make_random_problem(spec);
      RandomProblem same = apart;
      kda_fwd_params pa = apart.params();
      ASSERT_EQ(kda_fwd_cpu(&pa, GetParam(), 3).code, KDA_OK);
      kda_fwd_params ps = same.params();
      ps.final_state.data = ps.initial_state.data;  // updated in place
      const kda_status s = kda_fwd_cpu(&ps, GetParam(), 3);
      ASSERT_EQ(s.code, KDA_OK) << s.message;
      EXPECT_EQ(same.out, apart.out) << "dtype " << dtype << " varlen " << varlen;
      if (dtype == KDA_DTYPE_F32)
        EXPECT_EQ(0, std::memcmp(same.initial_f32.data(), apart.final_f32.data(), apart.final_f32.size() * 4));
      else
        EXPECT_EQ(same.initial_bf16, apart.final_bf16);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cpu, InPlaceState, ::testing::Values(KDA_CPU_RECURRENCE_F64, KDA_CPU_CHUNKED_F32),
                         [](const auto& info) { return info.param == KDA_CPU_RECURRENCE_F64 ? "RecurrenceF64" : "ChunkedF32"; });

}  // namespace
}  // namespace kda::test
