// The forward pass's workspace size (kda_fwd_workspace_size; docs/design.md §3.5): a call that the
// single pass covers whole (whole sequences, or pieces whose fallback is the whole-sequence single
// pass) needs no records, only the check word and the pieces' flags; every other call keeps the two
// kernels' records. Shapes only: the data pointers are stand-ins, never dereferenced (the host machine
// has no GPU; the SM count is then 132, the H200's). The GPU side of the same rule is
// GpuSinglePass.WarmPiecesFallBackToWholeSequencesInASmallWorkspace (tests/gpu).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "flash_kda/flash_kda.h"
#include "src/launch/plan.h"

namespace kda::test {
namespace {

constexpr int64_t D = 128;
constexpr size_t kRecordBytesPerChunk = 14848;  // ChunkRecord::kBytes (14.5 KiB per 16-token chunk and head)

// Stand-in device addresses, far apart (never dereferenced: kda_fwd_workspace_size reads shapes, and
// kda_fwd stops at the workspace size, which it checks before the device).
void* at(int i, uintptr_t offset = 0) { return reinterpret_cast<void*>((uintptr_t{1} << 40) + (uintptr_t(i) << 36) + offset); }

// B sequences of T tokens, H = HV heads, bf16 inputs, fp32 initial and final states (not in place).
struct Shape {
  int64_t B, T, H;
};
kda_fwd_params params(Shape s, int32_t single_pass = KDA_SINGLE_PASS_AUTO) {
  kda_fwd_params p;
  kda_fwd_params_init(&p);
  const int64_t x[4] = {s.B, s.T, s.H, D}, b[3] = {s.B, s.T, s.H}, st[4] = {s.B, s.H, D, D}, a[1] = {s.H},
                dt[2] = {s.H, D};
  p.q = kda_tensor_contiguous(at(0), KDA_DTYPE_BF16, 4, x);
  p.k = kda_tensor_contiguous(at(1), KDA_DTYPE_BF16, 4, x);
  p.v = kda_tensor_contiguous(at(2), KDA_DTYPE_BF16, 4, x);
  p.g = kda_tensor_contiguous(at(3), KDA_DTYPE_BF16, 4, x);
  p.beta = kda_tensor_contiguous(at(4), KDA_DTYPE_BF16, 3, b);
  p.out = kda_tensor_contiguous(at(5), KDA_DTYPE_BF16, 4, x);
  p.A_log = kda_tensor_contiguous(at(6), KDA_DTYPE_F32, 1, a);
  p.dt_bias = kda_tensor_contiguous(at(7), KDA_DTYPE_F32, 2, dt);
  p.initial_state = kda_tensor_contiguous(at(8), KDA_DTYPE_F32, 4, st);
  p.final_state = kda_tensor_contiguous(at(9), KDA_DTYPE_F32, 4, st);
  p.single_pass = single_pass;
  return p;
}

size_t bytes_of(const kda_fwd_params& p) {
  size_t bytes = 0;
  const kda_status s = kda_fwd_workspace_size(&p, &bytes);
  EXPECT_EQ(s.code, KDA_OK) << s.message;
  return bytes;
}

size_t records_of(Shape s) { return static_cast<size_t>(s.B * ((s.T + 15) / 16) * s.H) * kRecordBytesPerChunk; }

// T8192_H64 (the case): the planner's bounded warm-up in 2 pieces, on the single pass, whose
// fallback is the whole-sequence single pass (RecurrencePlan::single_pass_redo): no records.
TEST(WorkspaceSize, TheSinglePassAloneNeedsNoRecords) {
  const Shape t8192_h64{1, 8192, 64};
  const size_t never = bytes_of(params(t8192_h64, KDA_SINGLE_PASS_NEVER));
  const size_t automatic = bytes_of(params(t8192_h64));
  EXPECT_GE(never, records_of(t8192_h64));  // the two kernels' records
  EXPECT_LE(automatic * 8, never) << "the issue's target: at most 1/8 of the two kernels' workspace";
  // The check word and the 2 pieces' epoch and flags: 256 + 256-aligned (1 + 2 x 64) x 8 bytes.
  EXPECT_EQ(automatic, 256u + 1032u);
  EXPECT_EQ(bytes_of(params(t8192_h64, KDA_SINGLE_PASS_ALWAYS)), automatic);

  // Plans that split no sequence, on the single pass (whole sequences or its own pieces): no records.
  for (Shape s : {Shape{16, 4096, 32}, Shape{64, 512, 32}, Shape{1, 8192, 96}, Shape{8, 16384, 16}}) {
    const size_t a = bytes_of(params(s)), n = bytes_of(params(s, KDA_SINGLE_PASS_NEVER));
    EXPECT_GE(n, records_of(s)) << s.B << " x " << s.T << " x " << s.H;
    EXPECT_LT(a, size_t{64} << 10) << s.B << " x " << s.T << " x " << s.H;
  }
}

// Where the two kernels may run, the workspace keeps their records: KDA_SINGLE_PASS_NEVER, plans the
// single pass does not take or whose pieces fall back to the two kernels, and inputs it cannot read.
TEST(WorkspaceSize, TheTwoKernelsKeepTheirRecords) {
  const Shape t8192_h64{1, 8192, 64};
  const size_t never = bytes_of(params(t8192_h64, KDA_SINGLE_PASS_NEVER));
  auto expect_records = [&](const kda_fwd_params& p, size_t expected, const char* what) {
    EXPECT_EQ(bytes_of(p), expected) << what;
  };
  {  // in place: the single pass runs no pieces, and the planner's plan is the two kernels' warm-up
    kda_fwd_params p = params(t8192_h64);
    p.final_state.data = p.initial_state.data;
    expect_records(p, never, "in place");
  }
  {  // a q whose base is not 16-byte aligned: no tensor map
    kda_fwd_params p = params(t8192_h64);
    p.q.data = at(0, 2);
    expect_records(p, never, "q at an address 2 bytes past 16-byte alignment");
  }
  {  // NULL data (a shape-only query that gives no pointers): counted as unaligned
    kda_fwd_params p = params(t8192_h64);
    p.v.data = nullptr;
    expect_records(p, never, "NULL v");
  }
  {  // a broadcast dimension (g's heads at stride 0)
    kda_fwd_params p = params(t8192_h64);
    p.g.stride[2] = 0;
    p.g.stride[1] = D;
    p.g.stride[0] = 8192 * D;
    expect_records(p, never, "g broadcast over heads");
  }
  {  // a gate the single pass does not take
    kda_fwd_params p = params(t8192_h64), n = params(t8192_h64, KDA_SINGLE_PASS_NEVER);
    p.gate = n.gate = KDA_GATE_SOFTPLUS;
    expect_records(p, bytes_of(n), "softplus gate");
  }
  // T32768_H32: 4 pieces, whose fallback is the two kernels (their own warm-up in 3 segments).
  const Shape t32768_h32{1, 32768, 32};
  EXPECT_EQ(bytes_of(params(t32768_h32)), bytes_of(params(t32768_h32, KDA_SINGLE_PASS_NEVER)));
  EXPECT_GE(bytes_of(params(t32768_h32)), records_of(t32768_h32));
  // Few pairs on short sequences (T512_H32, two kernels): unchanged.
  const Shape t512_h32{1, 512, 32};
  EXPECT_EQ(bytes_of(params(t512_h32)), bytes_of(params(t512_h32, KDA_SINGLE_PASS_NEVER)));
}

// kda_fwd checks the size for its own pointers before the device: a workspace sized for separate
// initial and final states is too small for the same call in place (the two kernels then run), and
// the error says so by name and numbers. (A q that is not 16-byte aligned, the other pointer that
// changes the size, is refused by kda_fwd whatever the workspace.)
TEST(WorkspaceSize, TheSameCallInPlaceNeedsTheRecords) {
  const Shape t8192_h64{1, 8192, 64};
  const size_t small = bytes_of(params(t8192_h64));
  kda_fwd_params p = params(t8192_h64);
  p.final_state.data = p.initial_state.data;
  const size_t needed = bytes_of(p);
  ASSERT_GT(needed, small);
  const kda_status s = kda_fwd(&p, at(10), small, nullptr);
  ASSERT_EQ(s.code, KDA_ERROR_WORKSPACE_TOO_SMALL) << s.message;
  const std::string expected = "workspace: expected at least " + std::to_string(needed) +
                               " bytes (kda_fwd_workspace_size), got " + std::to_string(small);
  EXPECT_NE(std::string(s.message).find(expected), std::string::npos) << s.message;
  // The workspace of the query for the same call: no size error (the call then stops at the device).
  const kda_status t = kda_fwd(&p, at(10), needed, nullptr);
  EXPECT_NE(t.code, KDA_ERROR_WORKSPACE_TOO_SMALL) << t.message;
}

// The planner's choice of fallback (plan.h, RecurrencePlan::single_pass_redo): the whole-sequence
// single pass where the two kernels' own fallback is one pass, the two kernels where it splits.
TEST(WorkspaceSize, TheWholeSequenceFallbackWhereTheTwoKernelsWouldRunWholeSequencesToo) {
  for (int64_t units : {int64_t{32}, int64_t{40}, int64_t{48}, int64_t{64}}) {
    for (int64_t chunks : {int64_t{256}, int64_t{512}, int64_t{2048}}) {
      sm90::PlanRequest r;
      r.units = units;
      r.chunks = chunks;
      r.sms = 132;
      const sm90::RecurrencePlan p = sm90::plan_recurrence(r);
      if (p.method != sm90::SplitMethod::kWarmup) {
        EXPECT_FALSE(p.single_pass_redo);
        continue;
      }
      EXPECT_EQ(p.single_pass_redo, p.segments == 1) << units << " units x " << chunks << " chunks";
      r.method = KDA_CONTEXT_WARMUP;  // a forced method: never (the single pass only runs planned pieces)
      EXPECT_FALSE(sm90::plan_recurrence(r).single_pass_redo) << units << " units x " << chunks << " chunks";
    }
  }
  sm90::PlanRequest t8192_h64;
  t8192_h64.units = 64;
  t8192_h64.chunks = 512;
  EXPECT_TRUE(sm90::plan_recurrence(t8192_h64).single_pass_redo);
  sm90::PlanRequest t32768_h32;
  t32768_h32.units = 32;
  t32768_h32.chunks = 2048;
  EXPECT_FALSE(sm90::plan_recurrence(t32768_h32).single_pass_redo);
  // The plan keeps the SM count it was made for (the single pass's choice reads it, not the driver).
  EXPECT_EQ(sm90::plan_recurrence(t32768_h32).sms, 132);
  t32768_h32.sms = 100;
  EXPECT_EQ(sm90::plan_recurrence(t32768_h32).sms, 100);
  t32768_h32.forced_segments = 1;  // (the early return of a plan without splits too)
  EXPECT_EQ(sm90::plan_recurrence(t32768_h32).sms, 100);
}

}  // namespace
}  // namespace kda::test
