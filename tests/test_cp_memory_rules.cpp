// Memory rules of the building blocks of context parallelism across GPUs (src/api/memory_rules.h,
// flash_kda.h last section): what each entry point writes shares no byte with what it reads or with
// its other outputs, and every written matrix has its own memory, all checked on the host before the
// device is looked at (so these tests run without a GPU).
//  - kda_segment_transition: D and M (written) against the shard's inputs, each other and the
//    workspace (D and M may be interleaved views of one packed buffer; out and the states of the
//    params are ignored, so they may be anywhere);
//  - kda_fwd_prepared: the workspace (holding the preparation) against every tensor;
//  - kda_combine_transitions: start_states and end_state against D, M, initial_state and each other
//    (the header: outputs never overlap the inputs; no in-place end state).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "flash_kda/flash_kda.h"
#include "tests/cp_fixture.h"

namespace kda::test {
namespace {

// The shard of tests/cp_fixture.h (B = 2, T = 40, H = HV = 2; D and M packed in one buffer).
class CpMemory : public CpShard {
 protected:
  // A contiguous [rows, 2, 128, 128] f32 tensor.
  static kda_tensor dense(float* data, int64_t rows) {
    const int64_t shape[4] = {rows, 2, D, D};
    return kda_tensor_contiguous(data, KDA_DTYPE_F32, 4, shape);
  }

  // Valid arguments on host memory stop at the device checks: no SM90 GPU here, or (with one) the
  // pointers' memory type; never at a memory rule.
  static void ExpectAccepted(const kda_status& s) {
    const std::string m = s.message;
    EXPECT_TRUE(s.code == KDA_ERROR_UNSUPPORTED_DEVICE ||
                (s.code == KDA_ERROR_INVALID_ARGUMENT && m.find("disjoint") == std::string::npos &&
                 m.find("own address") == std::string::npos))
        << kda_status_code_name(s.code) << ": " << m;
  }

  // A 256-byte aligned host workspace of the size kda_segment_transition needs for (D_, M_).
  unsigned char* Workspace(size_t* bytes) {
    EXPECT_EQ(kda_segment_transition_workspace_size(&p_, D_, M_, bytes).code, KDA_OK);
    ws_.assign(*bytes + 65536 + 4096, 0);  // room for tensors placed at its end (they stay in it)
    return ws_.data() + (256 - reinterpret_cast<uintptr_t>(ws_.data()) % 256) % 256;
  }

  std::vector<unsigned char> ws_;
};

// ---- kda_segment_transition: D and M against the shard's inputs --------------------------------

TEST_F(CpMemory, TransitionDOverlapsQ) {
  p_.q.data = packed_.data() + 64;  // inside D's first matrix (16-byte aligned)
  ExpectNames(kda_segment_transition(&p_, D_, M_, nullptr, 0, nullptr),
              {"D: expected memory disjoint from every other tensor (it is written)", "overlapping q"});
  size_t bytes = 0;  // the shape-only query compares no pointer
  EXPECT_EQ(kda_segment_transition_workspace_size(&p_, D_, M_, &bytes).code, KDA_OK);
}

TEST_F(CpMemory, TransitionMOverlapsBetaOrCuSeqlens) {
  // The last bytes of the packed buffer belong to M's last matrix only.
  p_.beta.data = packed_.data() + packed_.size() - 1024;
  ExpectNames(kda_segment_transition(&p_, D_, M_, nullptr, 0, nullptr), {"M: expected memory disjoint", "overlapping beta"});
  SetUp();
  // A packed shard of two sequences whose cu_seqlens sits inside M.
  const int64_t s4[4] = {1, 80, 2, D}, scu[1] = {3};
  for (kda_tensor* t : {&p_.q, &p_.k, &p_.v, &p_.g}) *t = kda_tensor_contiguous(x_.data(), KDA_DTYPE_BF16, 4, s4);
  p_.beta = kda_tensor_contiguous(beta_.data(), KDA_DTYPE_BF16, 3, s4);
  p_.out = kda_tensor_contiguous(out_.data(), KDA_DTYPE_BF16, 4, s4);
  int64_t* cu = reinterpret_cast<int64_t*>(packed_.data() + packed_.size() - 256);
  cu[0] = 0, cu[1] = 40, cu[2] = 80;
  p_.cu_seqlens = kda_tensor_contiguous(cu, KDA_DTYPE_I64, 1, scu);
  ExpectNames(kda_segment_transition(&p_, D_, M_, nullptr, 0, nullptr), {"M: expected memory disjoint", "overlapping cu_seqlens"});
}

TEST_F(CpMemory, TransitionDOverlapsALogOrDtBias) {
  std::vector<float> dt(2 * D, 0.0f), alog(2, 0.0f);
  const int64_t sdt[2] = {2, D}, sa[1] = {2};
  p_.A_log = kda_tensor_contiguous(alog.data(), KDA_DTYPE_F32, 1, sa);
  // M's matrix of row 0, head 1: inside D's byte range (D is checked first).
  p_.dt_bias = kda_tensor_contiguous(packed_.data() + 3 * D * D, KDA_DTYPE_F32, 2, sdt);
  ExpectNames(kda_segment_transition(&p_, D_, M_, nullptr, 0, nullptr), {"D: expected memory disjoint", "overlapping dt_bias"});
  p_.dt_bias.data = dt.data();
  p_.A_log.data = packed_.data() + 16;
  ExpectNames(kda_segment_transition(&p_, D_, M_, nullptr, 0, nullptr), {"D: expected memory disjoint", "overlapping A_log"});
}

// ---- D against M ----------------------------------------------------------------------------------

TEST_F(CpMemory, TransitionDAndMTheSameMemory) {
  M_ = D_;
  ExpectNames(kda_segment_transition(&p_, D_, M_, nullptr, 0, nullptr),
              {"M: expected memory disjoint from D", "interleaved", "overlapping D"});
}

TEST_F(CpMemory, TransitionDAndMInterleavedButOverlapping) {
  M_ = view(packed_.data() + D * D / 2, 2);  // half a matrix further: every M matrix straddles two
  ExpectNames(kda_segment_transition(&p_, D_, M_, nullptr, 0, nullptr), {"M: expected memory disjoint from D", "overlapping D"});
  SetUp();
  M_ = dense(packed_.data() + D * D, 2);  // contiguous M starting at D's second matrix
  ExpectNames(kda_segment_transition(&p_, D_, M_, nullptr, 0, nullptr), {"M: expected memory disjoint from D", "overlapping D"});
}

TEST_F(CpMemory, TransitionPackedViewsAreAcceptedEitherWay) {
  size_t bytes = 0;
  unsigned char* ws = Workspace(&bytes);
  ExpectAccepted(kda_segment_transition(&p_, D_, M_, ws, bytes, nullptr));  // D's rows, then M's
  M_ = view(packed_.data(), 2);
  D_ = view(packed_.data() + D * D, 2);  // M's rows, then D's
  ExpectAccepted(kda_segment_transition(&p_, D_, M_, ws, bytes, nullptr));
  std::vector<float> apart(2 * 2 * D * D);  // separate buffers
  D_ = dense(apart.data(), 2);
  M_ = view(packed_.data(), 2);
  ExpectAccepted(kda_segment_transition(&p_, D_, M_, ws, bytes, nullptr));
  // One sequence, one head: the packed views' matrices are adjacent.
  const int64_t s4[4] = {1, 40, 1, D};
  for (kda_tensor* t : {&p_.q, &p_.k, &p_.v, &p_.g, &p_.out}) *t = kda_tensor_contiguous(x_.data(), KDA_DTYPE_BF16, 4, s4);
  p_.beta = kda_tensor_contiguous(beta_.data(), KDA_DTYPE_BF16, 3, s4);
  D_ = view(packed_.data(), 1), M_ = view(packed_.data() + D * D, 1);
  D_.shape[1] = M_.shape[1] = 1;
  ws = Workspace(&bytes);
  ExpectAccepted(kda_segment_transition(&p_, D_, M_, ws, bytes, nullptr));
}

TEST_F(CpMemory, TransitionRowsOfDOrMAlias) {
  D_.stride[1] = 0;  // both heads' matrices at one address
  const std::vector<std::string> parts = {"D: expected strides that give every element its own address", "stride[1] = 0"};
  ExpectNames(kda_segment_transition(&p_, D_, M_, nullptr, 0, nullptr), parts);
  size_t bytes = 0;  // strides only: the shape-only query too
  ExpectNames(kda_segment_transition_workspace_size(&p_, D_, M_, &bytes), parts);
  SetUp();
  M_.stride[0] = 256 * D;  // row 1 head 0 = row 0 head 1
  ExpectNames(kda_segment_transition(&p_, D_, M_, nullptr, 0, nullptr),
              {"M: expected strides that give every element its own address", "= 32768 must be at least 49152"});
}

TEST_F(CpMemory, TransitionIgnoresOutAndTheStates) {
  // out, initial_state and final_state are not read by the transition (flash_kda.h).
  p_.out.data = packed_.data();
  const int64_t sst[4] = {2, 2, D, D};
  p_.initial_state = kda_tensor_contiguous(packed_.data(), KDA_DTYPE_F32, 4, sst);
  p_.final_state = p_.initial_state;
  size_t bytes = 0;
  unsigned char* ws = Workspace(&bytes);
  ExpectAccepted(kda_segment_transition(&p_, D_, M_, ws, bytes, nullptr));
}

TEST_F(CpMemory, TransitionShapeOnlyQueryAcceptsOneStandInPointer) {
  void* const stand_in = reinterpret_cast<void*>(uintptr_t{4096});
  for (kda_tensor* t : {&p_.q, &p_.k, &p_.v, &p_.g, &p_.beta, &p_.out, &D_, &M_}) t->data = stand_in;
  size_t bytes = 0;
  const kda_status s = kda_segment_transition_workspace_size(&p_, D_, M_, &bytes);
  EXPECT_EQ(s.code, KDA_OK) << s.message;
}

// ---- the workspace (written: the preparation kda_fwd_prepared reuses) ---------------------------

TEST_F(CpMemory, TransitionWorkspaceOverlapsATensor) {
  size_t bytes = 0;
  unsigned char* ws = Workspace(&bytes);
  p_.q.data = ws + bytes - 64;
  ExpectNames(kda_segment_transition(&p_, D_, M_, ws, bytes, nullptr),
              {"workspace: expected memory disjoint from every tensor", "overlapping q"});
  SetUp();
  ws = Workspace(&bytes);
  D_ = view(reinterpret_cast<float*>(ws), 2);
  M_ = view(reinterpret_cast<float*>(ws) + D * D, 2);
  ExpectNames(kda_segment_transition(&p_, D_, M_, ws, bytes, nullptr),
              {"workspace: expected memory disjoint from every tensor", "overlapping D"});
  SetUp();
  ws = Workspace(&bytes);
  ExpectAccepted(kda_segment_transition(&p_, D_, M_, ws, bytes, nullptr));
}

// ---- kda_fwd_prepared ------------------------------------------------------------------------------

TEST_F(CpMemory, PreparedWorkspaceOverlapsATensor) {
  size_t bytes = 0;
  unsigned char* ws = Workspace(&bytes);
  p_.out.data = ws + 256;  // would overwrite the preparation
  ExpectNames(kda_fwd_prepared(&p_, ws, bytes, nullptr),
              {"workspace: expected memory disjoint from every tensor", "overlapping out"});
  p_.out.data = out_.data();
  const int64_t sst[4] = {2, 2, D, D};
  p_.final_state = kda_tensor_contiguous(ws + 4096, KDA_DTYPE_F32, 4, sst);
  ExpectNames(kda_fwd_prepared(&p_, ws, bytes, nullptr),
              {"workspace: expected memory disjoint from every tensor", "overlapping final_state"});
}

TEST_F(CpMemory, PreparedOutAndStatesFollowKdaFwdsRules) {
  size_t bytes = 0;
  unsigned char* ws = Workspace(&bytes);
  p_.out.data = x_.data();  // out is q
  ExpectNames(kda_fwd_prepared(&p_, ws, bytes, nullptr), {"out: expected memory disjoint", "overlapping q"});
  p_.out.data = out_.data();
  const int64_t sst[4] = {2, 2, D, D};
  p_.initial_state = kda_tensor_contiguous(states_.data(), KDA_DTYPE_F32, 4, sst);
  p_.final_state = p_.initial_state;  // in place: allowed
  ExpectAccepted(kda_fwd_prepared(&p_, ws, bytes, nullptr));
  p_.final_state.data = states_.data() + D;  // one row further: neither disjoint nor in place
  ExpectNames(kda_fwd_prepared(&p_, ws, bytes, nullptr), {"final_state: expected memory disjoint from initial_state"});
}

// ---- kda_combine_transitions ----------------------------------------------------------------------

TEST_F(CpMemory, CombineOutputsOverlapTheInputs) {
  // R = 2 shards of N = 1 sequence.
  const kda_tensor none{};
  const kda_tensor start = dense(packed_.data(), 2);  // D's and M's buffer
  ExpectNames(kda_combine_transitions(2, D_, M_, none, start, none, nullptr),
              {"start_states: expected memory disjoint from every other tensor (it is written)", "overlapping D"});
  std::vector<float> apart(2 * 2 * D * D);
  D_ = dense(apart.data(), 2);
  M_ = dense(packed_.data(), 2);
  const kda_tensor end = dense(packed_.data() + D * D, 1);  // M's second and third matrices
  ExpectNames(kda_combine_transitions(2, D_, M_, none, none, end, nullptr),
              {"end_state: expected memory disjoint", "overlapping M"});
}

TEST_F(CpMemory, CombineEndStateIsNotInitialState) {
  const kda_tensor none{};
  const kda_tensor init = dense(states_.data(), 1);
  // The header: outputs must not overlap the inputs (no in-place end state).
  ExpectNames(kda_combine_transitions(2, D_, M_, init, none, init, nullptr),
              {"end_state: expected memory disjoint", "overlapping initial_state"});
  const kda_tensor start = dense(states_.data() + D * D, 2);
  ExpectNames(kda_combine_transitions(2, D_, M_, init, start, none, nullptr),
              {"start_states: expected memory disjoint", "overlapping initial_state"});
}

TEST_F(CpMemory, CombineOutputsOverlapEachOther) {
  const kda_tensor none{};
  const kda_tensor start = dense(states_.data(), 2);
  kda_tensor end = dense(states_.data() + 2 * D * D, 1);  // start_states' second row
  ExpectNames(kda_combine_transitions(2, D_, M_, none, start, end, nullptr),
              {"start_states: expected memory disjoint", "overlapping end_state"});
  end = dense(states_.data() + 2 * 2 * D * D, 1);  // just after: disjoint
  ExpectAccepted(kda_combine_transitions(2, D_, M_, none, start, end, nullptr));
}

TEST_F(CpMemory, CombineOutputRowsAlias) {
  const kda_tensor none{};
  kda_tensor start = dense(states_.data(), 2);
  start.stride[0] = 0;  // both shards' start states at one address
  ExpectNames(kda_combine_transitions(2, D_, M_, none, start, none, nullptr),
              {"start_states: expected strides that give every element its own address", "stride[0] = 0"});
  // Inputs may alias: D and M with every row at one address (the same transition twice).
  D_.stride[0] = 0;
  M_.stride[0] = 0;
  ExpectAccepted(kda_combine_transitions(2, D_, M_, none, dense(states_.data(), 2), none, nullptr));
  // Inputs may share memory with each other.
  ExpectAccepted(kda_combine_transitions(2, D_, D_, none, dense(states_.data(), 2), none, nullptr));
}

}  // namespace
}  // namespace kda::test
