// Context parallelism across GPUs on the host (docs/design.md §3.4): the transition plan
// (src/launch/plan.h) and every argument rule of the new entry points (src/api/validate_cp.cpp)
// that can be checked without a GPU: each error names the argument, the expectation and what was
// given. Calls with valid arguments on host memory stop at the device checks.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "flash_kda/flash_kda.h"
#include "tests/cp_fixture.h"
#include "src/launch/plan.h"

namespace kda::test {
namespace {

constexpr int64_t D = 128;
constexpr int kH200 = 132;

sm90::TransitionPlan plan(int64_t units, int64_t chunks, int forced = 0, int32_t method = KDA_CONTEXT_AUTO,
                          bool warmup_valid = true) {
  sm90::PlanRequest r;
  r.units = units;
  r.chunks = chunks;
  r.sms = kH200;
  r.forced_segments = forced;
  r.method = method;
  r.warmup_valid = warmup_valid;
  return sm90::plan_transition(r);
}

TEST(CpPlan, MethodFollowsTheOptions) {
  EXPECT_EQ(plan(8, 32768).method, sm90::SplitMethod::kWarmup);
  EXPECT_EQ(plan(8, 32768, 0, KDA_CONTEXT_WARMUP).method, sm90::SplitMethod::kWarmup);
  EXPECT_EQ(plan(8, 32768, 0, KDA_CONTEXT_EXACT).method, sm90::SplitMethod::kExact);
  EXPECT_EQ(plan(8, 32768, 0, KDA_CONTEXT_AUTO, false).method, sm90::SplitMethod::kExact);
}

TEST(CpPlan, SegmentsFillTheSmsAndAreHonouredWhenForced) {
  // A 512K-token shard, 8 heads: the exact layout splits enough to fill the SMs, modelled far
  // below the one-segment chain; the bounded method's fallback takes more segments (shorter chains
  // for the few units that fall back) at a modelled cost within 10% of that.
  const sm90::TransitionPlan p = plan(8, 32768, 0, KDA_CONTEXT_EXACT);
  const sm90::TransitionPlan one = plan(8, 32768, 1);
  EXPECT_GE(p.segments, 4);
  EXPECT_LT(p.cost_us, 0.2 * one.cost_us);
  const sm90::TransitionPlan b = plan(8, 32768);
  EXPECT_GE(b.segments, p.segments);
  EXPECT_GE(b.segments, 32);
  EXPECT_LE(b.cost_us, 1.1 * p.cost_us + 1e-9);
  EXPECT_EQ(one.segments, 1);
  for (int n : {1, 2, 5, 64}) EXPECT_EQ(plan(3, 10, n).segments, n);  // even beyond the chunk count
  for (int64_t chunks : {0, 1, 3}) EXPECT_LE(plan(8, chunks).segments, std::max<int64_t>(chunks, 1));
  for (int64_t units : {1, 8, 64, 4096})
    for (int64_t chunks : {1, 100, 65536}) {
      const sm90::TransitionPlan q = plan(units, chunks);
      EXPECT_TRUE(q.vsplit == 1 || q.vsplit == 2 || q.vsplit == 4 || q.vsplit == 8);
      EXPECT_GE(q.segments, 1);
      EXPECT_LE(q.segments, sm90::kMaxContextSegments);
    }
  EXPECT_EQ(sm90::transition_slots(p), 2 * p.vsplit * p.segments);
  EXPECT_EQ(sm90::transition_scratch_bytes(3, p), 3u * p.segments * 2u * D * D * 4u);
}

class CpApi : public CpShard {
 protected:
  // The error of kda_segment_transition_workspace_size and of kda_segment_transition (validation
  // comes before the device checks).
  void ExpectTransitionError(std::vector<std::string> parts) {
    size_t bytes = 0;
    ExpectNames(kda_segment_transition_workspace_size(&p_, D_, M_, &bytes), parts);
    ExpectNames(kda_segment_transition(&p_, D_, M_, nullptr, 0, nullptr), parts);
  }
};

// The entry points' own argument checks (api_cp.cpp; found untested by `HOST_FILES=src/api/api_cp.cpp
// scripts/mutants.sh host`, 2026-12-04): a NULL bytes pointer, NULL params, a struct_size from another
// version of the header, each named, for the size query and for the calls.
TEST_F(CpApi, NullPointersAndStructSizeAreNamed) {
  size_t bytes = 0;
  ExpectNames(kda_segment_transition_workspace_size(&p_, D_, M_, nullptr), {"bytes: expected a non-null pointer, got NULL"});
  ExpectNames(kda_segment_transition_workspace_size(nullptr, D_, M_, &bytes), {"params: expected a non-null pointer, got NULL"});
  ExpectNames(kda_segment_transition(nullptr, D_, M_, nullptr, 0, nullptr), {"params: expected a non-null pointer, got NULL"});
  ExpectNames(kda_fwd_prepared(nullptr, nullptr, 0, nullptr), {"params: expected a non-null pointer, got NULL"});
  kda_fwd_params old = p_;
  old.struct_size = sizeof(kda_fwd_params) - 8;
  const std::string expect = "params.struct_size: expected " + std::to_string(sizeof(kda_fwd_params)) + " (call " +
                             "kda_fwd_params_init), got " + std::to_string(sizeof(kda_fwd_params) - 8);
  ExpectNames(kda_segment_transition_workspace_size(&old, D_, M_, &bytes), {expect});
  ExpectNames(kda_segment_transition(&old, D_, M_, nullptr, 0, nullptr), {expect});
  ExpectNames(kda_fwd_prepared(&old, nullptr, 0, nullptr), {expect});
}

TEST_F(CpApi, WorkspaceCoversTheTransitionAndThePreparedForward) {
  size_t fwd = 0, prep_only = 0, with_dm = 0;
  ASSERT_EQ(kda_fwd_workspace_size(&p_, &fwd).code, KDA_OK);
  ASSERT_EQ(kda_segment_transition_workspace_size(&p_, kda_tensor{}, kda_tensor{}, &prep_only).code, KDA_OK);
  const kda_status s = kda_segment_transition_workspace_size(&p_, D_, M_, &with_dm);
  ASSERT_EQ(s.code, KDA_OK) << s.message;
  EXPECT_GE(prep_only, fwd);  // the forward's needs, plus the chunk bounds
  // The transition's scratch (4 units x (end state + transition) at least) follows the preparation
  // (records and chunk bounds), whose size is at least the one-pass forward's (records alone); the
  // prepared forward's own regions after the preparation overlap that scratch (used later).
  kda_fwd_params one_pass = p_;
  one_pass.context_split = 1;
  size_t records = 0;
  ASSERT_EQ(kda_fwd_workspace_size(&one_pass, &records).code, KDA_OK);
  EXPECT_GE(with_dm, records + 2u * 2u * 2u * D * D * 4u);
  EXPECT_GT(with_dm, prep_only);
  // The last sequence only: fewer transitions, less scratch.
  size_t last = 0;
  ASSERT_EQ(kda_segment_transition_workspace_size(&p_, view(packed_.data(), 1), view(packed_.data() + D * D, 1), &last).code,
            KDA_OK);
  EXPECT_LT(last, with_dm);
  // The states and out of the params do not matter.
  p_.out = kda_tensor{};
  size_t again = 0;
  ASSERT_EQ(kda_segment_transition_workspace_size(&p_, D_, M_, &again).code, KDA_OK);
  EXPECT_EQ(again, with_dm);
}

// The workspace size by params.single_pass (design.md §3.5): AUTO runs these few pairs on the two
// kernels (their records), for the planner's plan and for forced bounded warm-up plans (2 and 4
// pieces) alike, as NEVER does; ALWAYS runs whole sequences on the single pass (T = 40 is no whole
// number of chunks: no pieces), which covers the call and needs no records.
TEST_F(CpApi, ForwardWorkspaceByTheSinglePassChoice) {
  for (int32_t split : {0, 2, 4}) {
    kda_fwd_params q = p_;
    q.context_split = split;
    q.context_method = split == 0 ? KDA_CONTEXT_AUTO : KDA_CONTEXT_WARMUP;
    size_t sizes[3] = {};
    const int32_t choices[3] = {KDA_SINGLE_PASS_AUTO, KDA_SINGLE_PASS_NEVER, KDA_SINGLE_PASS_ALWAYS};
    for (int c = 0; c < 3; ++c) {
      q.single_pass = choices[c];
      ASSERT_EQ(kda_fwd_workspace_size(&q, &sizes[c]).code, KDA_OK) << "split " << split << ", choice " << choices[c];
    }
    EXPECT_EQ(sizes[0], sizes[1]) << "split " << split;
    EXPECT_GE(sizes[1], size_t{2} * 2 * 3 * 14848) << "split " << split << ": the records";
    EXPECT_LE(sizes[2], size_t{512}) << "split " << split << ": the check word and nothing else";
  }
}

// The Kr low parts of the final states' last updates (kernel_params.h, kr_lo): two of 4 KiB per
// (sequence, value head), for the last chunk and the one before. kda_fwd reserves them when it stores final states; the preparation that
// kda_segment_transition leaves always holds them, so that kda_fwd_prepared finds them whatever
// its final state.
TEST_F(CpApi, WorkspaceHoldsTheKrLowParts) {
  const size_t per_unit = 2 * 16 * 128 * 2, units = 2 * 2;  // two [16][128] bf16 tiles; B = 2 sequences x H = 2 heads
  kda_fwd_params no_state = p_;  // SetUp passes no states
  const int64_t s4[4] = {2, 2, D, D};
  kda_fwd_params with_state = p_;
  with_state.final_state = kda_tensor_contiguous(states_.data(), KDA_DTYPE_F32, 4, s4);
  size_t without = 0, with = 0, prep_only = 0, prep_only_with = 0;
  ASSERT_EQ(kda_fwd_workspace_size(&no_state, &without).code, KDA_OK);
  ASSERT_EQ(kda_fwd_workspace_size(&with_state, &with).code, KDA_OK);
  EXPECT_GE(with, without + units * per_unit);
  EXPECT_LE(with, without + units * per_unit + 256);  // one alignment at most
  ASSERT_EQ(kda_segment_transition_workspace_size(&no_state, kda_tensor{}, kda_tensor{}, &prep_only).code, KDA_OK);
  ASSERT_EQ(kda_segment_transition_workspace_size(&with_state, kda_tensor{}, kda_tensor{}, &prep_only_with).code,
            KDA_OK);
  EXPECT_EQ(prep_only, prep_only_with);  // the final state does not change the preparation
  EXPECT_GE(prep_only, with);
}

TEST_F(CpApi, TransitionOnlyOneOfDAndM) {
  M_ = kda_tensor{};
  ExpectTransitionError({"D and M", "both", "D only"});
}

TEST_F(CpApi, TransitionTooManySequences) {
  std::vector<float> big(3 * 2 * 256 * D);
  D_ = view(big.data(), 3);
  M_ = view(big.data() + D * D, 3);
  ExpectTransitionError({"D:", "[1, N]", "N = 2", "[3, 2, 128, 128]"});
}

TEST_F(CpApi, TransitionWrongDtypeShapeAndStrides) {
  D_.dtype = KDA_DTYPE_BF16;
  ExpectTransitionError({"D:", "f32", "bf16"});
  SetUp();
  M_.shape[1] = 3;
  ExpectTransitionError({"M:", "[2, 2, 128, 128]", "[2, 3, 128, 128]"});
  SetUp();
  D_.stride[2] = 256;
  ExpectTransitionError({"D:", "stride[2] = 128", "256"});
  SetUp();
  M_.stride[1] = 256 * D + 2;
  ExpectTransitionError({"M:", "stride[1]", "multiple of 4", std::to_string(256 * D + 2)});
  SetUp();
  D_.ndim = 3;
  ExpectTransitionError({"D:", "4-D", "3-D"});
  D_.shape[0] = 0;  // the rank is named first, before the transition count it would read
  ExpectTransitionError({"D: expected a 4-D tensor [N_t, HV, V, K], got 3-D"});
}

TEST_F(CpApi, TransitionValidatesTheShardLikeKdaFwd) {
  p_.g.dtype = KDA_DTYPE_F16;
  ExpectTransitionError({"g:", "bf16 or f32", "f16"});
  SetUp();
  p_.struct_size = 3;
  ExpectTransitionError({"params.struct_size", "kda_fwd_params_init", "3"});
}

TEST_F(CpApi, ValidArgumentsReachTheDeviceChecks) {
  // Host memory: no SM90 GPU here (unsupported device) or, with one, the pointer check. The
  // workspace is checked on the host first (size, alignment, memory rules), as kda_fwd's.
  size_t bytes = 0;
  ASSERT_EQ(kda_segment_transition_workspace_size(&p_, D_, M_, &bytes).code, KDA_OK);
  std::vector<unsigned char> buf(bytes + 256);
  void* ws = buf.data() + (256 - reinterpret_cast<uintptr_t>(buf.data()) % 256) % 256;
  const kda_status s = kda_segment_transition(&p_, D_, M_, ws, bytes, nullptr);
  EXPECT_TRUE(s.code == KDA_ERROR_UNSUPPORTED_DEVICE || s.code == KDA_ERROR_INVALID_ARGUMENT) << s.message;
  EXPECT_NE(s.code, KDA_OK);
  const kda_status f = kda_fwd_prepared(&p_, ws, bytes, nullptr);
  EXPECT_TRUE(f.code == KDA_ERROR_UNSUPPORTED_DEVICE || f.code == KDA_ERROR_INVALID_ARGUMENT) << f.message;
}

TEST_F(CpApi, WorkspaceIsCheckedOnTheHostBeforeTheDevice) {
  size_t bytes = 0;
  ASSERT_EQ(kda_segment_transition_workspace_size(&p_, D_, M_, &bytes).code, KDA_OK);
  ASSERT_GT(bytes, 0u);
  const kda_status s = kda_segment_transition(&p_, D_, M_, nullptr, bytes - 1, nullptr);
  EXPECT_EQ(s.code, KDA_ERROR_WORKSPACE_TOO_SMALL) << s.message;
  EXPECT_NE(std::string(s.message).find("kda_segment_transition_workspace_size"), std::string::npos) << s.message;
  ExpectNames(kda_segment_transition(&p_, D_, M_, nullptr, bytes, nullptr), {"workspace:", "got NULL"});
  std::vector<unsigned char> buf(bytes + 512);
  unsigned char* ws = buf.data() + (256 - reinterpret_cast<uintptr_t>(buf.data()) % 256) % 256 + 16;
  ExpectNames(kda_segment_transition(&p_, D_, M_, ws, bytes, nullptr), {"workspace:", "256-byte aligned"});
  ExpectNames(kda_fwd_prepared(&p_, ws, bytes, nullptr), {"workspace:", "256-byte aligned"});
}

// The header's promise to the driver (flash_kda.h, kda_fwd_prepared): the bytes of
// kda_segment_transition_workspace_size, with D and M or with neither, cover kda_fwd_prepared on the
// same params whatever its out and states, and cover kda_segment_transition itself. Checked on 400
// random valid shards (fixed batches and packed ones, lengths 0-2000, GVA, states of either dtype or
// none, every gate, method, split and single-pass choice): each call given exactly the query's bytes
// gets past every host check to the device (none here; with a GPU, the pointer check refuses the
// stand-in addresses). The tensors are stand-in addresses, never dereferenced: no host check reads data.
TEST(CpWorkspace, TheQueryCoversThePreparedForwardOnRandomShards) {
  std::mt19937_64 rng(20261206);
  auto pick = [&](int n) { return static_cast<int64_t>(rng() % static_cast<uint64_t>(n)); };
  uintptr_t next = uintptr_t{1} << 40;  // disjoint 256-byte aligned stand-in ranges
  auto place = [&](kda_dtype dt, int ndim, const int64_t* shape) {
    kda_tensor t = kda_tensor_contiguous(reinterpret_cast<void*>(next), dt, ndim, shape);
    int64_t elems = 1;
    for (int d = 0; d < ndim; ++d) elems *= shape[d];
    next += (static_cast<uintptr_t>(elems) * (dt == KDA_DTYPE_BF16 ? 2 : 4) / 256 + 2) * 256;
    return t;
  };
  auto reached_device = [](const kda_status& s) {
    return s.code == KDA_ERROR_UNSUPPORTED_DEVICE || std::string(s.message).find("expected CUDA device memory") != std::string::npos;
  };
  int calls = 0;
  for (int it = 0; it < 400; ++it) {
    const bool varlen = pick(2) == 1;
    const int64_t N = 1 + pick(4), H = 1 + pick(4), HV = H * (1 + pick(2)), longest = pick(3) == 0 ? 2000 : 300;
    std::vector<int64_t> lens(N);
    int64_t total = 0;
    for (int64_t& l : lens) total += (l = pick(longest + 1));
    const int64_t B = varlen ? 1 : N, T = varlen ? total : lens[0];
    const int64_t sq[4] = {B, T, H, D}, sv[4] = {B, T, HV, D}, ss[4] = {N, HV, D, D}, s2[2] = {HV, D}, n1 = N + 1;
    kda_fwd_params p;
    kda_fwd_params_init(&p);
    p.q = place(KDA_DTYPE_BF16, 4, sq);
    p.k = place(KDA_DTYPE_BF16, 4, sq);
    p.v = place(KDA_DTYPE_BF16, 4, sv);
    p.g = place(KDA_DTYPE_BF16, 4, sv);
    p.beta = place(KDA_DTYPE_BF16, 3, sv);
    p.out = place(KDA_DTYPE_BF16, 4, sv);
    if (pick(2)) {
      p.A_log = place(KDA_DTYPE_F32, 1, &HV);
      p.dt_bias = place(KDA_DTYPE_F32, 2, s2);
    }
    const int64_t in_state = pick(3), out_state = pick(3);
    if (in_state) p.initial_state = place(in_state == 1 ? KDA_DTYPE_BF16 : KDA_DTYPE_F32, 4, ss);
    if (out_state) p.final_state = place(out_state == 1 ? KDA_DTYPE_BF16 : KDA_DTYPE_F32, 4, ss);
    if (varlen) p.cu_seqlens = place(pick(2) ? KDA_DTYPE_I32 : KDA_DTYPE_I64, 1, &n1);
    p.qk_l2norm = pick(4) != 0;
    p.allow_neg_eigval = pick(4) == 0;
    p.beta_sigmoid = static_cast<int32_t>(pick(2));
    p.gate = static_cast<kda_gate>(pick(3));
    p.context_split = pick(3) == 0 ? static_cast<int32_t>(pick(9)) : 0;
    p.context_method = static_cast<int32_t>(pick(3));
    p.single_pass = static_cast<int32_t>(pick(3));
    const int64_t nt = 1 + pick(N), sd[4] = {nt, HV, D, D};
    const kda_tensor Dt = place(KDA_DTYPE_F32, 4, sd), Mt = place(KDA_DTYPE_F32, 4, sd);
    const std::string what = "shard " + std::to_string(it) + ": B " + std::to_string(B) + " T " + std::to_string(T) +
                             " H " + std::to_string(H) + " HV " + std::to_string(HV) + (varlen ? " packed" : "") +
                             " states " + std::to_string(in_state) + "/" + std::to_string(out_state) + " split " +
                             std::to_string(p.context_split) + " method " + std::to_string(p.context_method);
    size_t none = 0, with_dm = 0;
    const kda_status a = kda_segment_transition_workspace_size(&p, kda_tensor{}, kda_tensor{}, &none);
    const kda_status b = kda_segment_transition_workspace_size(&p, Dt, Mt, &with_dm);
    ASSERT_EQ(a.code, KDA_OK) << what << ": " << a.message;
    ASSERT_EQ(b.code, KDA_OK) << what << ": " << b.message;
    void* ws = reinterpret_cast<void*>(next);
    next += (with_dm / 256 + 2) * 256;
    for (size_t bytes : {none, with_dm}) {
      const kda_status f = kda_fwd_prepared(&p, ws, bytes, nullptr);
      EXPECT_TRUE(reached_device(f)) << what << ", " << bytes << " bytes: " << f.message;
    }
    const kda_status t = kda_segment_transition(&p, Dt, Mt, ws, with_dm, nullptr);
    const kda_status t0 = kda_segment_transition(&p, kda_tensor{}, kda_tensor{}, ws, none, nullptr);
    EXPECT_TRUE(reached_device(t)) << what << ": " << t.message;
    EXPECT_TRUE(reached_device(t0)) << what << " (no D, M): " << t0.message;
    calls += 4;
  }
  EXPECT_EQ(calls, 1600);  // every shard ran its calls
}

TEST_F(CpApi, CombineArgumentRules) {
  // R = 2 shards of N = 1 sequence: D and M rows 0 (shard 0) and 1 (shard 1).
  const kda_tensor out = view(states_.data(), 2);
  const kda_tensor none{};
  ExpectNames(kda_combine_transitions(0, D_, M_, none, out, none, nullptr), {"num_shards", "R", "got 0"});
  ExpectNames(kda_combine_transitions(3, D_, M_, none, out, none, nullptr), {"D:", "R = num_shards = 3", "[2, 2, 128, 128]"});
  ExpectNames(kda_combine_transitions(2, D_, M_, none, none, none, nullptr), {"start_states and end_state", "neither"});
  kda_tensor M1 = view(packed_.data() + D * D, 1);
  ExpectNames(kda_combine_transitions(2, D_, M1, none, out, none, nullptr), {"M:", "[2, 2, 128, 128]", "[1, 2, 128, 128]"});
  std::vector<uint16_t> init16(2 * D * D);
  const int64_t ishape[4] = {1, 2, D, D};
  kda_tensor init = kda_tensor_contiguous(init16.data(), KDA_DTYPE_F16, 4, ishape);
  ExpectNames(kda_combine_transitions(2, D_, M_, init, out, none, nullptr), {"initial_state", "f32 or bf16", "f16"});
  init.dtype = KDA_DTYPE_BF16;
  init.shape[0] = 2;
  ExpectNames(kda_combine_transitions(2, D_, M_, init, out, none, nullptr), {"initial_state", "[1, 2, 128, 128]", "[2, 2, 128, 128]"});
  // The device's own rules (found by scripts/mutants.sh host, 2026-12-04: without them, other checks
  // refused these arguments for other reasons, or none did): D and M present, D's rank before its
  // row count, 16-byte aligned matrices.
  kda_tensor D0 = D_;
  D0.data = nullptr;
  ExpectNames(kda_combine_transitions(2, D0, M_, none, out, none, nullptr), {"D: expected a tensor, got NULL data"});
  kda_tensor M0 = M_;
  M0.data = nullptr;
  ExpectNames(kda_combine_transitions(2, D_, M0, none, out, none, nullptr), {"M: expected a tensor, got NULL data"});
  kda_tensor D3 = D_;
  D3.ndim = 3;
  D3.shape[0] = 3;  // not a multiple of R = 2 either: the rank is what is named
  ExpectNames(kda_combine_transitions(2, D3, M_, none, out, none, nullptr),
              {"D: expected a 4-D tensor [R*N, HV, V, K], got 3-D"});
  kda_tensor Dm = D_;
  Dm.data = static_cast<float*>(D_.data) + 1;  // 4-byte aligned only
  ExpectNames(kda_combine_transitions(2, Dm, M_, none, out, none, nullptr), {"D: expected a 16-byte aligned data pointer"});
  // The grid bound, N x HV < 2^27 (one CTA per 8 rows of every matrix): 2^23 sequences x 16 heads,
  // D and M broadcast views of one matrix, end_state never touched (the bound comes before the memory
  // rules and before any pointer is used); one head fewer passes the bound and stops at a later rule.
  const int64_t big_shape[4] = {int64_t{1} << 23, 16, D, D};
  kda_tensor Db = kda_tensor_contiguous(D_.data, KDA_DTYPE_F32, 4, big_shape);
  Db.stride[0] = Db.stride[1] = 0;
  kda_tensor Mb = Db;
  Mb.data = M_.data;
  const kda_tensor end_big = kda_tensor_contiguous(states_.data(), KDA_DTYPE_F32, 4, big_shape);
  ExpectNames(kda_combine_transitions(1, Db, Mb, none, none, end_big, nullptr),
              {"D: sizes too large: N x HV = 8388608 x 16", "must stay below 2^27"});
  kda_tensor Db15 = Db, Mb15 = Mb, end15 = end_big;
  Db15.shape[1] = Mb15.shape[1] = end15.shape[1] = 15;
  const kda_status below = kda_combine_transitions(1, Db15, Mb15, none, none, end15, nullptr);
  EXPECT_NE(below.code, KDA_OK);
  EXPECT_EQ(std::string(below.message).find("2^27"), std::string::npos) << below.message;
  std::printf("[ check ] one head fewer: %s\n", below.message);
  // A contiguous tensor whose element count passes 2^63: initial_state [2, 2^50, 128, 128] (HV = 2^50
  // from broadcast D and M) is refused by its size before its strides are compared with the dense ones.
  const int64_t huge_shape[4] = {2, int64_t{1} << 50, D, D};
  kda_tensor Dh = kda_tensor_contiguous(D_.data, KDA_DTYPE_F32, 4, huge_shape);
  Dh.stride[0] = Dh.stride[1] = 0;
  kda_tensor Mh = Dh;
  Mh.data = M_.data;
  kda_tensor init_huge = kda_tensor_contiguous(states_.data(), KDA_DTYPE_F32, 4, huge_shape);
  init_huge.stride[0] = 0;  // the dense stride (2^64) is not representable
  ExpectNames(kda_combine_transitions(1, Dh, Mh, init_huge, none, end_big, nullptr),
              {"initial_state: sizes too large to index: shape [2, 1125899906842624, 128, 128] has more than 2^63 elements"});
  kda_tensor end = view(states_.data(), 2);
  ExpectNames(kda_combine_transitions(2, D_, M_, none, none, end, nullptr), {"end_state", "[1, 2, 128, 128]", "[2, 2, 128, 128]"});
  end.shape[0] = 1;
  end.stride[0] = 6;  // not a multiple of 4... and shape[0] = 1 makes it irrelevant: accepted
  const kda_status ok = kda_combine_transitions(2, D_, M_, none, none, end, nullptr);
  EXPECT_TRUE(ok.code == KDA_ERROR_UNSUPPORTED_DEVICE || ok.code == KDA_ERROR_INVALID_ARGUMENT) << ok.message;
  if (ok.code == KDA_ERROR_INVALID_ARGUMENT) {
    EXPECT_NE(std::string(ok.message).find("memory"), std::string::npos) << ok.message;
  }
}

}  // namespace
}  // namespace kda::test
