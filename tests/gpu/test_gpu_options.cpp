// The SM90 path across its options, against the CPU float64 recurrence:
// state dtypes in/out, varlen with int32/int64 cu_seqlens (empty sequences, partial chunks, T=1),
// GVA, the three gate forms and the beta / L2-norm flags, f32 g and beta, every value-row split (vsplit 1..8),
// strided inputs (and offsets past 2^31 elements), broadcast values. (The safety contract:
// test_gpu_safety.cpp.)
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "reference/common.h"
#include "tests/golden_io.h"
#include "tests/gpu/gpu_harness.h"
#include "tests/random_problem.h"

namespace kda::test {
namespace {

using Errors = GpuErrors;

TEST(GpuOptions, StateDtypeMatrix) {
  KDA_SKIP_WITHOUT_SM90();
  ProblemSpec s;
  s.B = 2;
  s.T = 45;
  s.H = s.HV = 2;
  check_state_dtype_matrix(s, "", 10, 5e-3, 4e-3);
}

TEST(GpuOptions, VarlenEdgesInt32AndInt64Agree) {
  KDA_SKIP_WITHOUT_SM90();
  ProblemSpec s;
  s.B = 1;
  s.T = 200;
  s.H = s.HV = 3;
  s.cu_seqlens = {0, 0, 1, 16, 17, 33, 33, 100, 200};
  s.seed = 21;
  check_varlen_int32_matches_int64(s, "varlen", 5e-3, 5e-3);
}

TEST(GpuOptions, SingleTokenSequencesAndEmptyBatch) {
  KDA_SKIP_WITHOUT_SM90();
  ProblemSpec s;
  s.B = 3;
  s.T = 1;
  s.H = s.HV = 4;
  RandomProblem p = make_random_problem(s);
  expect_close("T=1 B=3", gpu_vs_f64(p));
  // T = 0: the final state is the initial state.
  s.T = 0;
  RandomProblem e = make_random_problem(s);
  ASSERT_EQ(run_on_gpu(e.params()).code, KDA_OK);
  EXPECT_EQ(0, std::memcmp(e.final_f32.data(), e.initial_f32.data(), e.final_f32.size() * 4));
}

TEST(GpuOptions, GroupedValueHeads) {
  KDA_SKIP_WITHOUT_SM90();
  ProblemSpec s;
  s.T = 70;
  s.H = 2;
  s.HV = 8;
  RandomProblem p = make_random_problem(s);
  expect_close("GVA H=2 HV=8", gpu_vs_f64(p));
}

TEST(GpuOptions, GateFormsAndFlags) {
  KDA_SKIP_WITHOUT_SM90();
  {
    ProblemSpec s;
    s.T = 80;
    s.H = s.HV = 2;
    s.gate = KDA_GATE_SOFTPLUS;
    s.g_scale = 8.0f;  // per-step log-decay far below -5: exercises the unbounded path
    RandomProblem p = make_random_problem(s);
    expect_close("softplus gate, g ~ N(0, 64)", gpu_vs_f64(p));
  }
  {
    ProblemSpec s;
    s.T = 50;
    s.H = s.HV = 2;
    s.gate = KDA_GATE_PREACTIVATED;
    RandomProblem p = make_random_problem(s);
    expect_close("preactivated gate", gpu_vs_f64(p));
  }
  for (int flags = 0; flags < 4; ++flags) {
    ProblemSpec s;
    s.T = 40;
    s.H = s.HV = 2;
    s.seed = 40 + flags;
    RandomProblem p = make_random_problem(s);
    const bool neg = flags & 1, no_l2 = flags & 2;
    // Without the in-kernel L2 norm, feed unit-norm q and k.
    if (no_l2) {
      unit_norm_bf16_rows(&p.q);
      unit_norm_bf16_rows(&p.k);
    }
    const Errors e = gpu_vs_f64(p, [&](kda_fwd_params& prm) {
      prm.allow_neg_eigval = neg;
      prm.qk_l2norm = !no_l2;
    });
    char name[64];
    std::snprintf(name, sizeof(name), "allow_neg_eigval=%d qk_l2norm=%d", neg, !no_l2);
    expect_close(name, e);
  }
}

// g and beta given as f32 tensors holding bf16 values: the kernels widen bf16 exactly, so the results
// must be bitwise those of the bf16 tensors (the f32 loads of the preparation, on every gate form).
TEST(GpuOptions, Float32GateAndBetaEqualTheirBf16Values) {
  KDA_SKIP_WITHOUT_SM90();
  for (kda_gate gate : {KDA_GATE_BOUNDED, KDA_GATE_SOFTPLUS, KDA_GATE_PREACTIVATED}) {
    ProblemSpec s;
    s.B = 2;
    s.T = 250;  // a partial last chunk per row
    s.H = s.HV = 2;
    s.gate = gate;
    s.seed = 36 + static_cast<uint64_t>(gate);
    // Both on the two kernels: the single pass takes bf16 g only, and the two paths agree to rounding,
    // not bitwise (its f32 beta: GpuSinglePass.Float32BetaAndRowsWhoseNormOverflows).
    RandomProblem a = make_random_problem(s);
    kda_fwd_params pa = a.params();
    pa.single_pass = KDA_SINGLE_PASS_NEVER;
    ASSERT_EQ(run_on_gpu(pa).code, KDA_OK);
    RandomProblem b = make_random_problem(s);
    std::vector<float> g32(b.g.size()), beta32(b.beta.size());
    for (size_t i = 0; i < g32.size(); ++i) g32[i] = reference::bf16_to_float(b.g[i]);
    for (size_t i = 0; i < beta32.size(); ++i) beta32[i] = reference::bf16_to_float(b.beta[i]);
    kda_fwd_params prm = b.params();
    prm.g.data = g32.data();
    prm.g.dtype = KDA_DTYPE_F32;
    prm.beta.data = beta32.data();
    prm.beta.dtype = KDA_DTYPE_F32;
    prm.single_pass = KDA_SINGLE_PASS_NEVER;
    ASSERT_EQ(run_on_gpu(prm).code, KDA_OK);
    const std::string what = "f32 g and beta vs bf16, gate " + std::to_string(static_cast<int>(gate));
    expect_identical(a, b, what.c_str());
    // Not vacuous: the run wrote outputs.
    EXPECT_NE(std::count(b.out.begin(), b.out.end(), uint16_t{0}), static_cast<std::ptrdiff_t>(b.out.size())) << what;
  }
}

TEST(GpuOptions, EveryValueRowSplit) {
  KDA_SKIP_WITHOUT_SM90();
  // N x HV = 4, 24, 64, 160 select vsplit 8, 4, 2, 1 on a 132-SM H200 (the last one a full grid,
  // with its own kernel configuration): each must meet the golden pass rule.
  const int64_t heads[4] = {4, 24, 64, 160};
  for (int64_t h : heads) {
    ProblemSpec s;
    s.B = 1;
    s.T = 200;
    s.H = s.HV = h;
    s.seed = 50 + h;
    s.context_split = 1;  // the one-pass plan (tests/gpu/test_gpu_context.cpp covers the others)
    RandomProblem p = make_random_problem(s);
    char name[64];
    std::snprintf(name, sizeof(name), "N x HV = %lld, T = 200", static_cast<long long>(h));
    expect_close(name, gpu_vs_f64(p), 4e-3, 3e-3);
  }
}

TEST(GpuOptions, StridedInputsMatchContiguous) {
  KDA_SKIP_WITHOUT_SM90();
  ProblemSpec s;
  s.B = 2;
  s.T = 33;
  s.H = s.HV = 2;
  RandomProblem p = make_random_problem(s);
  RandomProblem strided = p;
  // Pack q, k, v, g of each (b, t) into one row [4][H][128] (as a fused projection would).
  const int64_t H = 2, row = 4 * H * 128;
  std::vector<uint16_t> packed(static_cast<size_t>(s.B * s.T * row));
  for (int64_t bt = 0; bt < s.B * s.T; ++bt)
    for (int64_t x = 0; x < H * 128; ++x) {
      packed[bt * row + 0 * H * 128 + x] = p.q[bt * H * 128 + x];
      packed[bt * row + 1 * H * 128 + x] = p.k[bt * H * 128 + x];
      packed[bt * row + 2 * H * 128 + x] = p.v[bt * H * 128 + x];
      packed[bt * row + 3 * H * 128 + x] = p.g[bt * H * 128 + x];
    }
  kda_fwd_params sp = strided.params();
  kda_tensor* views[4] = {&sp.q, &sp.k, &sp.v, &sp.g};
  for (int i = 0; i < 4; ++i) {
    views[i]->data = packed.data() + i * H * 128;
    views[i]->stride[0] = s.T * row;
    views[i]->stride[1] = row;
    views[i]->stride[2] = 128;
  }
  ASSERT_EQ(run_on_gpu(p.params()).code, KDA_OK);
  ASSERT_EQ(run_on_gpu(sp).code, KDA_OK);
  expect_identical(p, strided, "strided vs contiguous");
}

// q strided so that batch row 1 starts 2^31 + 64 elements into its buffer (a 4.3 GB view, on the host
// and the device): the preparation forms its row offsets in 64 bits (PrepParams::off32 = 0; every other
// test takes the 32-bit path), and the results are those of the contiguous q, bit for bit. T = 40: two
// whole chunks and a partial one per row.
TEST(GpuOptions, OffsetsPast2To31MatchContiguous) {
  KDA_SKIP_WITHOUT_SM90();
  ProblemSpec s;
  s.B = 2;
  s.T = 40;
  s.H = s.HV = 2;
  RandomProblem p = make_random_problem(s);
  RandomProblem far = p;
  const int64_t H = 2, row = H * 128, batch_stride = (int64_t{1} << 31) + 64;  // 16-byte multiple
  std::vector<uint16_t> big;
  try {
    big.resize(static_cast<size_t>(batch_stride + s.T * row));
  } catch (const std::bad_alloc&) {
    GTEST_SKIP() << "no 4.3 GB of host memory for the view";
  }
  for (int64_t b = 0; b < s.B; ++b)
    std::copy_n(p.q.begin() + b * s.T * row, s.T * row, big.begin() + b * batch_stride);
  kda_fwd_params fp = far.params();
  fp.q.data = big.data();
  fp.q.stride[0] = batch_stride;
  size_t free_bytes = 0, total_bytes = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);
  if (free_bytes < size_t{6} << 30) GTEST_SKIP() << "no 6 GB of free device memory for the view";
  ASSERT_EQ(run_on_gpu(p.params()).code, KDA_OK);
  ASSERT_EQ(run_on_gpu(fp).code, KDA_OK);
  expect_identical(p, far, "q's batch rows 2^31 elements apart vs contiguous");
}

// v broadcast over the value heads (head stride 0): no tensor map describes it, so the wgmma
// recurrence takes such values by cp.async (its partial-chunk path, for every chunk); the results are
// those of the same values stored per head, which come by tensor copies, bit for bit. 64 heads run on
// the wgmma recurrence, 4 heads on the mma.sync one (slices of 16 rows); T = 70: a partial last chunk.
TEST(GpuOptions, BroadcastValuesMatchMaterialized) {
  KDA_SKIP_WITHOUT_SM90();
  for (int64_t h : {64, 4}) {
    ProblemSpec s;
    s.B = 2;
    s.T = 70;
    s.H = s.HV = h;
    s.seed = 70 + h;
    s.context_split = 1;
    RandomProblem p = make_random_problem(s);
    for (int64_t bt = 0; bt < s.B * s.T; ++bt)  // every head's values are head 0's
      for (int64_t hv = 1; hv < h; ++hv)
        std::copy_n(&p.v[(bt * h) * 128], 128, &p.v[(bt * h + hv) * 128]);
    // Both on the two kernels (with 64 heads the materialised one would take the single pass, which
    // no broadcast v can: the paths agree to rounding, not bitwise).
    RandomProblem broadcast = p;
    kda_fwd_params bp = broadcast.params(), mp = p.params();
    bp.v.stride[2] = 0;
    bp.single_pass = mp.single_pass = KDA_SINGLE_PASS_NEVER;
    ASSERT_EQ(run_on_gpu(mp).code, KDA_OK);
    ASSERT_EQ(run_on_gpu(bp).code, KDA_OK);
    char name[64];
    std::snprintf(name, sizeof(name), "broadcast vs materialised v, HV = %lld", static_cast<long long>(h));
    expect_identical(p, broadcast, name);
    EXPECT_NE(std::count(p.out.begin(), p.out.end(), uint16_t{0}), static_cast<std::ptrdiff_t>(p.out.size())) << name;
  }
}

}  // namespace
}  // namespace kda::test
