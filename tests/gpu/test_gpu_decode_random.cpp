// Random configurations of kda_decode's option matrix on the GPU (tests/random_decode_config.h: what is
// drawn, and the rule), each against the float64 recurrence (kda_decode_cpu's oracle, unrounded).
// The decode kernels keep every value in float32 between the bf16 inputs and the stored results, so
// the rule is correct rounding up to float32's error: every stored output and pool value within half a
// unit in the last place of its dtype of the float64 value, plus 1e-3 (outputs) or 1e-4 (states) of its
// row's root mean square; the slots the call does not write bitwise unchanged; no NaN or Inf. Truncated
// bf16 stores and a bf16 intermediate (tests/mutants 33-35) fail it: killed on an H100, 2026-12-05,
// where the GPU's float32 part stayed at 1.2e-5 (outputs) and 8.2e-6 (states) of the row rms over 1,260
// configurations. (33 and 35 passed the hand-written decode tests' relative-L2 tolerances of the time.)
// Each configuration then runs in one more way that must give the same bits: a CUDA graph's replay,
// another kernel configuration with the other trusted_pointers value, or the same call again.
//
// Reproducible: FLASH_KDA_RANDOM_SEED (default 2026), FLASH_KDA_RANDOM_CONFIGS (default 60),
// FLASH_KDA_RANDOM_ONLY=i; scripts/gpu_verify.sh's `random` stage runs a longer draw.
// The same draws on the CPU, in CI: tests/test_decode_random_cpu.cpp.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "tests/gpu/decode_harness.h"
#include "tests/gpu/gpu_harness.h"
#include "tests/random_decode_config.h"

namespace kda::test {
namespace {

void check(cudaError_t err) { ASSERT_EQ(err, cudaSuccess) << cudaGetErrorString(err); }

// Runs the configuration on the GPU into `d` (uploaded, downloaded), eagerly or by a graph's replay.
void run_gpu(const DecodeConfig& c, RandomDecode& d, int config, bool trusted, bool graph, const std::string& what) {
  DeviceDecode dd(d);
  kda_decode_params& p = dd.params();
  set_shared_flags(p, c.beta_probs, c.unit_qk, c.neg, c.scale, trusted);
  p.kernel_config = config;
  if (!graph) {
    const kda_status st = kda_decode(&p, nullptr);
    ASSERT_EQ(st.code, KDA_OK) << what << ": " << st.message;
  } else {
    cudaStream_t s = nullptr;
    ASSERT_NO_FATAL_FAILURE(check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)));
    cudaGraph_t g = nullptr;
    cudaGraphExec_t ge = nullptr;
    ASSERT_NO_FATAL_FAILURE(check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal)));
    const kda_status st = kda_decode(&p, s);
    ASSERT_NO_FATAL_FAILURE(check(cudaStreamEndCapture(s, &g)));
    ASSERT_EQ(st.code, KDA_OK) << what << " (captured): " << st.message;
    ASSERT_NO_FATAL_FAILURE(check(cudaGraphInstantiate(&ge, g, 0)));
    ASSERT_NO_FATAL_FAILURE(check(cudaGraphLaunch(ge, s)));
    ASSERT_NO_FATAL_FAILURE(check(cudaStreamSynchronize(s)));
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    cudaStreamDestroy(s);
  }
  dd.download();
}

struct Worst {
  double out = 0, pool = 0, out_residual = -1, pool_residual = -1;
  size_t written = 0;
};

void check_config(int index, const DecodeConfig& c, Worst* worst) {
  const std::string what = "#" + std::to_string(index) + " " + c.text;
  std::printf("[ decode-random ] %s\n", what.c_str());
  const RandomDecode base = make_decode(c);
  RandomDecode ref = base;
  const DecodeExact exact = decode_exact(decode_params_of(c, ref));

  RandomDecode a = base;
  ASSERT_NO_FATAL_FAILURE(run_gpu(c, a, c.kernel_config, c.trusted, false, what));
  const DecodeCheck k = check_decode(a, base, exact);
  std::printf("[ decode-random ]   out %.3f pool %.3f of the allowance (float32 residual %.1e, %.1e of the row rms); "
              "%zu state values written\n",
              k.out.worst, k.pool.worst, k.out.residual, k.pool.residual, k.written);
  EXPECT_EQ(k.out.non_finite + k.pool.non_finite, 0u) << what;
  EXPECT_LE(k.out.worst, 1.0) << what << " (out: element " << k.out.at << ")";
  EXPECT_LE(k.pool.worst, 1.0) << what << " (pool: element " << k.pool.at << ")";
  EXPECT_EQ(k.untouched_changed, 0u) << what << " (pool values the call does not write)";
  worst->out = std::max(worst->out, k.out.worst);
  worst->pool = std::max(worst->pool, k.pool.worst);
  worst->out_residual = std::max(worst->out_residual, k.out.residual);
  worst->pool_residual = std::max(worst->pool_residual, k.pool.residual);
  worst->written += k.written;

  RandomDecode b = base;
  const bool graph = c.variant == DecodeVariant::kGraph;
  const bool other = c.variant == DecodeVariant::kOtherConfig;
  ASSERT_NO_FATAL_FAILURE(
      run_gpu(c, b, other ? c.other_config : c.kernel_config, other ? !c.trusted : c.trusted, graph, what));
  EXPECT_EQ(b.out, a.out) << what << " (the variant's out differs)";
  EXPECT_EQ(b.pool_f32, a.pool_f32) << what << " (the variant's pool differs)";
  EXPECT_EQ(b.pool_bf16, a.pool_bf16) << what << " (the variant's pool differs)";
}

TEST(GpuDecodeRandomMatrix, EachStoredValueCorrectlyRoundedAndEveryVariantBitwise) {
  KDA_SKIP_WITHOUT_SM90();
  Worst worst;
  const int ran = for_each_decode_config(random_draw(2026, 60), [&](int index, const DecodeConfig& c) {
    check_config(index, c, &worst);
  });
  std::printf("[ decode-random ] %d configurations: worst out %.3f, pool %.3f of the allowance; float32 residual "
              "%.1e (out), %.1e (pool) of the row rms; %zu state values written\n",
              ran, worst.out, worst.pool, worst.out_residual, worst.pool_residual, worst.written);
  EXPECT_GT(ran, 0);
  EXPECT_GT(worst.written, 0u);
}

}  // namespace
}  // namespace kda::test
