// kda_decode on the GPU against the CPU float64 path (kda_decode_cpu) and against kda_fwd:
// fp32 / bf16 pools, int32 / int64 indices, the three gates, GVA, pre-activated inputs, padding
// and out-of-range slots, a poisoned pool (unnamed slots bitwise untouched), verify with every
// num_accepted_tokens value, packed sequences, a strided pool view, every kernel configuration
// bitwise identical and deterministic, CUDA-graph capture, the opt-in content check, bad cu_seqlens
// contents clamped as on the CPU. Decode steps against kda_fwd over the same tokens:
// test_gpu_decode_steps.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "reference/common.h"
#include "tests/golden_io.h"
#include "tests/gpu/decode_harness.h"
#include "tests/gpu/gpu_harness.h"
#include "tests/random_decode.h"
#include "tests/random_problem.h"

namespace kda::test {
namespace {

constexpr int64_t D = 128;

void check(cudaError_t err) { ASSERT_EQ(err, cudaSuccess) << cudaGetErrorString(err); }

double reference_rel_l2_bf16(const std::vector<uint16_t>& x, const std::vector<uint16_t>& ref) {
  return rel_l2(bf16_to_f64(x), bf16_to_f64(ref));
}

TEST(GpuDecode, MatrixAgainstFloat64) {
  KDA_SKIP_WITHOUT_SM90();
  int case_id = 0;
  for (kda_dtype pool : {KDA_DTYPE_F32, KDA_DTYPE_BF16})
    for (kda_gate gate : {KDA_GATE_BOUNDED, KDA_GATE_SOFTPLUS, KDA_GATE_PREACTIVATED}) {
      DecodeSpec s;
      s.B = 3;
      s.T = 1;
      s.H = 2;
      s.HV = 4;  // GVA
      s.slots = 5;
      s.pool = pool;
      s.gate = gate;
      s.g_scale = gate == KDA_GATE_SOFTPLUS ? 8.0f : 1.0f;  // very negative decays too
      s.idx_dtype = (case_id++ % 2) ? KDA_DTYPE_I64 : KDA_DTYPE_I32;
      s.seed = 100 + case_id;
      RandomDecode d = make_random_decode(s);
      char name[96];
      std::snprintf(name, sizeof(name), "decode pool %s gate %d idx %s", pool == KDA_DTYPE_F32 ? "f32" : "bf16", gate,
                    s.idx_dtype == KDA_DTYPE_I64 ? "i64" : "i32");
      expect_decode_close(name, decode_gpu_vs_cpu(d), kDecodeOutTol, decode_pool_tol(pool));
    }
  // Without the fused activations: g is the log-decay, beta a probability, q and k unit vectors
  // (no in-kernel L2 norm); doubled beta.
  DecodeSpec s;
  s.B = 2;
  s.H = s.HV = 2;
  s.slots = 2;
  s.gate = KDA_GATE_PREACTIVATED;
  s.idx_dims = 0;  // sequence n uses slot n
  RandomDecode d = make_random_decode(s);
  unit_norm_bf16_rows(&d.q);
  unit_norm_bf16_rows(&d.k);
  for (auto& b : d.beta) b = reference::float_to_bf16(1.0f / (1.0f + std::exp(-reference::bf16_to_float(b))));
  RandomDecode ref = d;
  kda_decode_params pc = ref.params();
  pc.beta_sigmoid = 0;
  pc.qk_l2norm = 0;
  ASSERT_EQ(kda_decode_cpu(&pc, 0).code, KDA_OK);
  DeviceDecode dd(d);
  dd.params().beta_sigmoid = 0;
  dd.params().qk_l2norm = 0;
  ASSERT_EQ(kda_decode(&dd.params(), nullptr).code, KDA_OK);
  dd.download();
  RandomDecode neg = make_random_decode(s);
  RandomDecode neg_ref = neg;
  DeviceDecode dn(neg);
  dn.params().allow_neg_eigval = 1;
  ASSERT_EQ(kda_decode(&dn.params(), nullptr).code, KDA_OK);
  dn.download();
  kda_decode_params pn = neg_ref.params();
  pn.allow_neg_eigval = 1;
  ASSERT_EQ(kda_decode_cpu(&pn, 0).code, KDA_OK);
  size_t bad = 0;
  const double e1 = reference_rel_l2_bf16(d.out, ref.out), e2 = reference_rel_l2_bf16(neg.out, neg_ref.out);
  for (float x : d.pool_f32) bad += !std::isfinite(x);
  std::printf("[ errors ] preactivated, no L2 norm: out %.3e; allow_neg_eigval: out %.3e\n", e1, e2);
  EXPECT_EQ(bad, 0u);
  EXPECT_LE(e1, kDecodeOutTol);
  EXPECT_LE(e2, kDecodeOutTol);
}

TEST(GpuDecode, EveryConfigurationBitwiseIdenticalAndDeterministic) {
  KDA_SKIP_WITHOUT_SM90();
  for (kda_dtype pool : {KDA_DTYPE_F32, KDA_DTYPE_BF16})
    for (int shape = 0; shape < 3; ++shape) {
      // decode (T = 1, [N]); verify (T = 3, [N, 3]); packed sequences of 1, 8 and 1 tokens with
      // [N, 8] indices: 4 tokens are prepared per block (the mean length), so the long one takes
      // two blocks.
      DecodeSpec s;
      s.B = 3;
      s.T = shape == 1 ? 3 : 1;
      s.H = 1;
      s.HV = 2;
      s.pool = pool;
      s.idx_dims = shape == 0 ? 1 : 2;
      if (shape == 2) s.cu_seqlens = {0, 1, 9, 10};
      s.slots = 3 * (shape == 2 ? 8 : s.T) + 2;
      s.seed = 7 + shape;
      const RandomDecode base = make_random_decode(s);
      RandomDecode first = base;
      ASSERT_EQ(run_decode_gpu(first, 1).code, KDA_OK);
      for (int config = 1; config <= KDA_DECODE_NUM_KERNEL_CONFIGS; ++config)
        for (int rep = 0; rep < 2; ++rep) {
          RandomDecode d = base;
          // The second repetition with trusted_pointers = 1 (only the pointer queries skipped).
          const kda_status st = run_decode_gpu(d, config, 1, 0, rep);
          ASSERT_EQ(st.code, KDA_OK) << st.message;
          EXPECT_EQ(d.out, first.out) << "config " << config << " shape " << shape << " pool " << pool;
          EXPECT_EQ(d.pool_f32, first.pool_f32) << "config " << config << " shape " << shape;
          EXPECT_EQ(d.pool_bf16, first.pool_bf16) << "config " << config << " shape " << shape;
        }
      RandomDecode ref = base;
      ASSERT_EQ(run_decode_cpu(ref).code, KDA_OK);
      char name[64];
      std::snprintf(name, sizeof(name), "configurations, shape %d pool %s", shape,
                    pool == KDA_DTYPE_F32 ? "f32" : "bf16");
      DecodeErrors e;
      e.out = reference_rel_l2_bf16(first.out, ref.out);
      e.pool = rel_l2(pool_values(first), pool_values(ref));
      expect_decode_close(name, e, kDecodeOutTol, decode_pool_tol(pool));
    }
}

TEST(GpuDecode, PaddingOutOfRangeAndPoisonedPool) {
  KDA_SKIP_WITHOUT_SM90();
  for (int config = 0; config <= KDA_DECODE_NUM_KERNEL_CONFIGS; ++config)
    for (kda_dtype pool : {KDA_DTYPE_F32, KDA_DTYPE_BF16}) {
      DecodeSpec s;
      s.B = 6;
      s.T = 2;
      s.H = 1;
      s.HV = 2;
      s.slots = 20;
      s.pool = pool;
      s.idx_dims = 2;
      s.seed = 50 + config;
      RandomDecode d = make_random_decode(s);
      d.set_index(1, 0, -1);  // padding: zero outputs, its other slot untouched
      d.set_index(3, 0, 20);  // >= slots: never accessed (an error under check_indices), as padding
      d.set_index(4, 1, -1);  // no write after token 1
      // Slots that no running sequence writes are poisoned (NaN): they must come back bitwise unchanged.
      std::vector<bool> written(20, false);
      for (int64_t n : {0, 2, 4, 5})
        for (int64_t t = 0; t < 2; ++t) {
          const int64_t slot = d.index(n, t);
          if (slot >= 0 && slot < 20) written[slot] = true;
        }
      for (int64_t slot = 0; slot < 20; ++slot)
        if (!written[slot]) std::memset(const_cast<uint8_t*>(pool_slot(d, slot)), 0xff, pool_slot_bytes(d));
      std::fill(d.out.begin(), d.out.end(), 0x7fc0);
      const RandomDecode before = d;
      RandomDecode ref = d;
      ASSERT_EQ(run_decode_gpu(d, config).code, KDA_OK);
      ASSERT_EQ(run_decode_cpu(ref).code, KDA_OK);
      for (int64_t slot = 0; slot < 20; ++slot) {
        const bool same = std::memcmp(pool_slot(d, slot), pool_slot(before, slot), pool_slot_bytes(d)) == 0;
        EXPECT_EQ(same, !written[slot]) << "config " << config << " slot " << slot;
      }
      for (int64_t n : {1, 3})
        for (int64_t t = 0; t < 2; ++t)
          for (int64_t i = 0; i < 2 * D; ++i) ASSERT_EQ(d.out[((n * 2 + t) * 2) * D + i], 0) << "padding output";
      for (uint16_t x : d.out) ASSERT_NE(x, 0x7fc0) << "an output row was not written";
      EXPECT_LE(reference_rel_l2_bf16(d.out, ref.out), kDecodeOutTol);
    }
}

TEST(GpuDecode, VerifyEveryAcceptedCountAndPacked) {
  KDA_SKIP_WITHOUT_SM90();
  constexpr int64_t T = 4;
  for (kda_dtype pool : {KDA_DTYPE_F32, KDA_DTYPE_BF16}) {
    DecodeSpec s;
    s.B = T + 2;
    s.T = T;
    s.H = 2;
    s.HV = 2;
    s.slots = (T + 2) * T + 3;
    s.pool = pool;
    s.idx_dims = 2;
    s.with_accepted = true;
    s.accepted_dtype = KDA_DTYPE_I64;
    s.seed = 70;
    RandomDecode d = make_random_decode(s);
    for (int64_t n = 0; n <= T; ++n) d.set_accepted(n, n);  // 0 .. T
    d.set_index(T + 1, 2, -1);
    expect_decode_close(std::string("verify T=4, accepted 0..4, pool ") + (pool == KDA_DTYPE_F32 ? "f32" : "bf16"),
                        decode_gpu_vs_cpu(d), kDecodeOutTol, decode_pool_tol(pool));
  }
  // Packed sequences of 1, 3, 0 and 2 tokens with a slot per token (int64 indices), and 1-D indices.
  for (int dims : {1, 2}) {
    DecodeSpec s;
    s.cu_seqlens = {0, 1, 4, 4, 6};
    s.H = 1;
    s.HV = 3;
    s.slots = 14;
    s.idx_dims = dims;
    s.idx_cols = 3;
    s.idx_dtype = KDA_DTYPE_I64;
    s.seed = 80 + dims;
    RandomDecode d = make_random_decode(s);
    expect_decode_close(dims == 2 ? "packed verify, [N, 3] indices" : "packed, [N] indices", decode_gpu_vs_cpu(d),
                        kDecodeOutTol, kDecodePoolF32Tol);
  }
}

// Unchecked cu_seqlens contents (check_indices = 0): the kernels clamp every entry to [0, T_total]
// and make a sequence whose end lies before its start empty (sequence_map.cuh), as the CPU path does
// (reference/common.h). {4, 6, 0, 4}: sequence 1 ends before it starts; {0, 2, 9, 6}: an entry past
// T_total. The empty sequence's pool slots (poisoned) must come back bitwise unchanged, the other
// sequences must match the CPU path, and every output row is written. Without it, kernels that
// stored a never-loaded state for a negative length (tests/mutants/26_seq_no_order_clamp.patch) or
// ran past T_total (25_seq_no_upper_clamp.patch) passed the suite.
TEST(GpuDecode, BadCuSeqlensContentsAreClampedAsOnTheCpu) {
  KDA_SKIP_WITHOUT_SM90();
  const std::vector<std::vector<int64_t>> lists = {{4, 6, 0, 4}, {0, 2, 9, 6}};
  const int64_t empty_seq[2] = {1, 2};
  for (size_t b = 0; b < lists.size(); ++b)
    for (int dims : {1, 2})
      for (int config = 0; config <= KDA_DECODE_NUM_KERNEL_CONFIGS; ++config) {
        DecodeSpec s;
        s.cu_seqlens = {0, 2, 4, 6};  // shapes for 6 packed tokens in 3 sequences
        s.H = 1;
        s.HV = 2;
        s.idx_dims = dims;
        s.idx_cols = 4;  // the longest sequence of either list
        s.slots = 3 * 4 + 2;
        s.seed = 90 + 10 * b + dims;
        RandomDecode d = make_random_decode(s);
        d.cu64 = lists[b];
        const int64_t e = empty_seq[b];
        std::vector<int64_t> poisoned;
        for (int64_t t = 0; t < (dims == 1 ? 1 : 4); ++t) poisoned.push_back(d.index(e, t));
        for (int64_t slot : poisoned) std::memset(const_cast<uint8_t*>(pool_slot(d, slot)), 0xff, pool_slot_bytes(d));
        std::fill(d.out.begin(), d.out.end(), 0x7fc0);
        const RandomDecode before = d;
        RandomDecode ref = d;
        const kda_status st = run_decode_gpu(d, config);
        ASSERT_EQ(st.code, KDA_OK) << st.message;
        ASSERT_EQ(run_decode_cpu(ref).code, KDA_OK);
        char where[96];
        std::snprintf(where, sizeof(where), "list %zu, %d-D indices, config %d", b, dims, config);
        for (int64_t slot : poisoned) {
          EXPECT_EQ(std::memcmp(pool_slot(d, slot), pool_slot(before, slot), pool_slot_bytes(d)), 0)
              << where << ": the empty sequence's slot " << slot << " was written";
          // Equal on both sides now; the error metrics below then see no NaN.
          std::memset(const_cast<uint8_t*>(pool_slot(d, slot)), 0, pool_slot_bytes(d));
          std::memset(const_cast<uint8_t*>(pool_slot(ref, slot)), 0, pool_slot_bytes(ref));
        }
        for (uint16_t x : d.out) ASSERT_NE(x, 0x7fc0) << where << ": an output row was not written";
        DecodeErrors err;
        err.out = reference_rel_l2_bf16(d.out, ref.out);
        err.pool = rel_l2(pool_values(d), pool_values(ref));
        for (double x : pool_values(d)) err.non_finite += !std::isfinite(x);
        for (double x : bf16_to_f64(d.out)) err.non_finite += !std::isfinite(x);
        expect_decode_close(std::string("bad cu_seqlens, ") + where, err, kDecodeOutTol, kDecodePoolF32Tol);
      }
}

TEST(GpuDecode, StridedPoolView) {
  KDA_SKIP_WITHOUT_SM90();
  // A pool that is a view into a larger buffer: stride[0] = 3 x HV x V x K.
  DecodeSpec s;
  s.B = 2;
  s.H = s.HV = 1;
  s.slots = 6;  // the buffer; the view has 2 slots at every third state
  s.idx_dims = 1;
  RandomDecode d = make_random_decode(s);
  d.set_index(0, 0, 1);
  d.set_index(1, 0, 0);
  RandomDecode ref = d;
  auto view = [](kda_decode_params& p) {
    p.state_pool.shape[0] = 2;
    p.state_pool.stride[0] = 3 * D * D;
  };
  DeviceDecode dd(d);
  view(dd.params());
  ASSERT_EQ(kda_decode(&dd.params(), nullptr).code, KDA_OK);
  dd.download();
  kda_decode_params pc = ref.params();
  view(pc);
  ASSERT_EQ(kda_decode_cpu(&pc, 0).code, KDA_OK);
  EXPECT_LE(reference_rel_l2_bf16(d.out, ref.out), kDecodeOutTol);
  const std::vector<double> a = pool_values(d), b = pool_values(ref);
  EXPECT_LE(rel_l2(a, b), kDecodePoolF32Tol);
  for (int64_t slot : {1, 2, 4, 5})  // outside the view
    EXPECT_EQ(0, std::memcmp(pool_slot(d, slot), pool_slot(ref, slot), pool_slot_bytes(d)));
}

TEST(GpuDecode, GraphCaptureAndReplay) {
  KDA_SKIP_WITHOUT_SM90();
  DecodeSpec s;
  s.B = 4;
  s.T = 2;
  s.H = 1;
  s.HV = 2;
  s.slots = 9;
  s.idx_dims = 2;
  s.with_accepted = true;
  RandomDecode graph = make_random_decode(s);
  RandomDecode eager = graph;
  ASSERT_EQ(run_decode_gpu(eager, 0, 2).code, KDA_OK);  // two steps in place
  DeviceDecode dd(graph);
  cudaStream_t stream;
  check(cudaStreamCreate(&stream));
  cudaGraph_t g;
  cudaGraphExec_t exec;
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  const kda_status st = kda_decode(&dd.params(), stream);
  check(cudaStreamEndCapture(stream, &g));
  ASSERT_EQ(st.code, KDA_OK) << st.message;
  check(cudaGraphInstantiate(&exec, g, 0));
  for (int i = 0; i < 2; ++i) check(cudaGraphLaunch(exec, stream));
  check(cudaStreamSynchronize(stream));
  dd.download();
  EXPECT_EQ(graph.out, eager.out);
  EXPECT_EQ(graph.pool_f32, eager.pool_f32);
  // The check synchronises: refused under capture, with a message naming it.
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  dd.params().check_indices = 1;
  const kda_status refused = kda_decode(&dd.params(), stream);
  cudaGraph_t g2;
  cudaStreamEndCapture(stream, &g2);
  cudaGetLastError();
  EXPECT_EQ(refused.code, KDA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(refused.message).find("check_indices"), std::string::npos) << refused.message;
  if (g2) cudaGraphDestroy(g2);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(g);
  cudaStreamDestroy(stream);
}

TEST(GpuDecode, ContentCheckMatchesTheCpuCheck) {
  KDA_SKIP_WITHOUT_SM90();
  DecodeSpec s;
  s.B = 3;
  s.T = 2;
  s.H = 1;
  s.HV = 1;
  s.slots = 10;
  s.idx_dims = 2;
  s.with_accepted = true;
  auto both = [&](RandomDecode d, const char* expect) {
    RandomDecode gpu = d, cpu = d;
    const kda_status g = run_decode_gpu(gpu, 0, 1, /*check_indices=*/1);
    const kda_status c = run_decode_cpu(cpu, 1);
    std::printf("[ check ] %s\n", g.message);
    EXPECT_EQ(g.code, c.code) << expect;
    EXPECT_STREQ(g.message, c.message) << expect;
    if (expect[0] == '\0') {
      EXPECT_EQ(g.code, KDA_OK) << g.message;
    } else {
      EXPECT_NE(std::string(g.message).find(expect), std::string::npos) << g.message;
    }
  };
  RandomDecode ok = make_random_decode(s);
  both(ok, "");
  RandomDecode range = ok;
  range.set_index(1, 1, 10);
  both(range, "state_indices[1, 1] = 10");
  RandomDecode dup = ok;
  dup.set_index(2, 0, ok.index(0, 1));
  both(dup, "and in state_indices[2, 0] (sequence 2)");
  RandomDecode acc = ok;
  acc.set_accepted(1, -1);
  both(acc, "num_accepted_tokens[1] = -1");
  DecodeSpec v = s;
  v.cu_seqlens = {0, 2, 5, 6};
  v.idx_cols = 2;
  RandomDecode len = make_random_decode(v);
  both(len, "sequence 1 of length 3");
  len.cu64 = {1, 2, 5, 6};
  both(len, "cu_seqlens[0] = 0, got 1");
}

}  // namespace
}  // namespace kda::test
