// kda_decode steps from a state pool against kda_fwd over the same tokens and against the float64
// recurrence: 100 single-token decode calls against a 100-token prefill (fp32 and bf16 pools, every
// kernel configuration) and a 60-token prefill followed by 40 decode steps against the whole prefill.
// The rest of kda_decode's GPU tests: test_gpu_decode.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "reference/common.h"
#include "tests/golden_io.h"
#include "tests/gpu/gpu_harness.h"
#include "tests/random_problem.h"

namespace kda::test {
namespace {

constexpr int64_t D = 128;

void check(cudaError_t err) { ASSERT_EQ(err, cudaSuccess) << cudaGetErrorString(err); }

// Decode steps from the pool against kda_fwd over the same tokens (both on the GPU) and against
// the float64 recurrence: `prefix` tokens by kda_fwd into the pool (its final state), then T - prefix
// single-token decode calls (kernel configuration `config`, 0 = the automatic choice). Each call reads
// the slot the previous call wrote, as a programmatic dependent of it: a kernel that reads the pool
// before its griddepcontrol.wait computes from a stale state here.
void check_steps_against_prefill(kda_dtype pool_dtype, int64_t prefix, const char* what, int config = 0) {
  constexpr int64_t B = 2, T = 100, H = 2;
  ProblemSpec ps;
  ps.B = B;
  ps.T = T;
  ps.H = ps.HV = H;
  ps.initial_state = KDA_DTYPE_F32;
  ps.final_state = KDA_DTYPE_F32;
  ps.seed = 11;
  RandomProblem full = make_random_problem(ps);
  const ExactReference exact = reference_f64(full.params());
  RandomProblem prefill = full;
  ASSERT_EQ(run_on_gpu(prefill.params()).code, KDA_OK);

  DeviceProblem dp(full.params());
  kda_fwd_params& f = dp.params();
  // Pool = N slots, identity indices; fp32 or bf16.
  const size_t pool_elems = static_cast<size_t>(B * H * D * D), esz = pool_dtype == KDA_DTYPE_F32 ? 4 : 2;
  void* pool = nullptr;
  check(cudaMalloc(&pool, pool_elems * esz));
  const int64_t pool_shape[4] = {B, H, D, D};
  kda_tensor pool_t = kda_tensor_contiguous(pool, pool_dtype, 4, pool_shape);
  auto sliced = [&](kda_tensor t, int64_t t0, int64_t len) {
    t.shape[1] = len;
    t.data = static_cast<uint8_t*>(t.data) + t0 * t.stride[1] * static_cast<int64_t>(dtype_bytes(t.dtype));
    return t;
  };
  if (prefix > 0) {
    kda_fwd_params pf = f;
    for (kda_tensor* x : {&pf.q, &pf.k, &pf.v, &pf.g, &pf.beta, &pf.out}) *x = sliced(*x, 0, prefix);
    pf.final_state = pool_t;
    size_t ws_bytes = 0;
    ASSERT_EQ(kda_fwd_workspace_size(&pf, &ws_bytes).code, KDA_OK);
    void* ws = nullptr;
    check(cudaMalloc(&ws, std::max<size_t>(ws_bytes, 256)));
    const kda_status st = kda_fwd(&pf, ws, ws_bytes, nullptr);
    ASSERT_EQ(st.code, KDA_OK) << st.message;
    check(cudaDeviceSynchronize());
    cudaFree(ws);
  } else {  // the initial states, converted to the pool's dtype
    std::vector<uint16_t> bf(pool_elems);
    for (size_t i = 0; i < pool_elems; ++i) bf[i] = reference::float_to_bf16(full.initial_f32[i]);
    check(cudaMemcpy(pool, pool_dtype == KDA_DTYPE_F32 ? static_cast<const void*>(full.initial_f32.data()) : bf.data(),
                     pool_elems * esz, cudaMemcpyHostToDevice));
  }
  for (int64_t t = prefix; t < T; ++t) {
    kda_decode_params p;
    kda_decode_params_init(&p);
    p.q = sliced(f.q, t, 1);
    p.k = sliced(f.k, t, 1);
    p.v = sliced(f.v, t, 1);
    p.g = sliced(f.g, t, 1);
    p.beta = sliced(f.beta, t, 1);
    p.out = sliced(f.out, t, 1);
    p.A_log = f.A_log;
    p.dt_bias = f.dt_bias;
    p.state_pool = pool_t;  // no indices: sequence n uses slot n
    p.kernel_config = config;
    const kda_status st = kda_decode(&p, nullptr);
    ASSERT_EQ(st.code, KDA_OK) << st.message;
  }
  RandomProblem steps = full;
  dp.download_outputs();  // decode's out rows (and prefix rows from kda_fwd) into `full`'s buffers
  steps.out = full.out;
  std::vector<double> state(pool_elems);
  if (pool_dtype == KDA_DTYPE_F32) {
    std::vector<float> x(pool_elems);
    check(cudaMemcpy(x.data(), pool, pool_elems * 4, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < pool_elems; ++i) state[i] = x[i];
  } else {
    std::vector<uint16_t> x(pool_elems);
    check(cudaMemcpy(x.data(), pool, pool_elems * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < pool_elems; ++i) state[i] = reference::bf16_to_float(x[i]);
  }
  cudaFree(pool);
  const std::vector<double> out_steps = bf16_to_f64(steps.out), out_prefill = bf16_to_f64(prefill.out);
  const std::vector<double> state_prefill = f32_to_f64(prefill.final_f32);
  const double eo = rel_l2(out_steps, exact.out), es = rel_l2(state, exact.final_state);
  const double po = rel_l2(out_prefill, exact.out), pst = rel_l2(state_prefill, exact.final_state);
  const double xo = rel_l2(out_steps, out_prefill), xs = rel_l2(state, state_prefill);
  std::printf(
      "[ errors ] %-40s steps vs f64: out %.3e state %.3e | prefill vs f64: out %.3e state %.3e | steps vs "
      "prefill: out %.3e state %.3e\n",
      what, eo, es, po, pst, xo, xs);
  EXPECT_EQ(count_non_finite(out_steps) + count_non_finite(state), 0u);
  const bool f32 = pool_dtype == KDA_DTYPE_F32;  // a bf16 pool rounds the state after every step
  EXPECT_LE(eo, f32 ? 4e-3 : 1e-2) << what;
  // With an f32 pool the steps' state is float32 arithmetic on the float64 recurrence (1.1e-7 from it
  // measured), the prefill's the chunked algebra with bf16 operands (2.2e-5 from the steps): bounds ~10x
  // those (3e-3 until session 53).
  EXPECT_LE(es, f32 ? 1e-6 : 1e-2) << what;
  EXPECT_LE(xo, f32 ? 4e-3 : 1e-2) << what;
  EXPECT_LE(xs, f32 ? 2e-4 : 1e-2) << what;
}

TEST(GpuDecode, HundredStepsEqualHundredTokenPrefill) {
  KDA_SKIP_WITHOUT_SM90();
  check_steps_against_prefill(KDA_DTYPE_F32, 0, "100 decode steps, fp32 pool");
  check_steps_against_prefill(KDA_DTYPE_BF16, 0, "100 decode steps, bf16 pool");
}

// The same chain of 100 steps on every kernel configuration (the automatic choice takes one register
// configuration for this shape): each configuration's kernel waits for the previous step before it
// reads the pool. Without this test, a bulk-copy kernel that read the pool before its wait passed
// the whole suite (the mutant tests/mutants/24_decode_bulk_no_grid_wait.patch, 2026-12-04).
TEST(GpuDecode, HundredStepsOnEveryKernelConfiguration) {
  KDA_SKIP_WITHOUT_SM90();
  for (int config = 1; config <= KDA_DECODE_NUM_KERNEL_CONFIGS; ++config) {
    char what[64];
    std::snprintf(what, sizeof(what), "100 decode steps, fp32 pool, config %d", config);
    check_steps_against_prefill(KDA_DTYPE_F32, 0, what, config);
  }
}

TEST(GpuDecode, PrefillThenDecodeEqualsLongerPrefill) {
  KDA_SKIP_WITHOUT_SM90();
  check_steps_against_prefill(KDA_DTYPE_F32, 60, "60-token prefill + 40 decode steps");
}

}  // namespace
}  // namespace kda::test
