// Random configurations of kda_fwd's option matrix on the GPU (tests/random_config.h: what is drawn),
// each against the float64 recurrence. The hand-written GPU tests each hold one feature still and vary
// another; the bugs that survive them live where several meet (a partial chunk in a packed batch, under
// a forced warm-up plan, with a bf16 initial state and grouped heads, on the single pass).
// Each configuration runs on the GPU, on the CPU float64 recurrence and on the CPU emulation of the
// kernels' arithmetic (tests/kernel_rounding.h: the float32 chunked algebra with the kernels' bf16
// operand roundings), and the GPU's relative L2 errors against float64 must be what that emulation
// predicts: out within 1.5x the emulated error + 2e-4, the final state within 2x + 1e-5, and neither
// above the ceiling of 1e-2; no NaN or Inf. (Over 1,240 configurations on an H100, 2026-12-05: GPU /
// emulated 0.99-1.25 for out; 0.80-1.28 for final states whose emulated error is at least 1e-5, up to
// 2.1 below it, where float32 summation order alone moves errors of 2-6e-6.) A fixed tolerance would
// be looser where the inputs are benign (a mutant that drops M's lo terms, 2.9e-3 against an emulated
// 1.7e-3, passes 5e-3) and fail where the arithmetic itself is at its limit (slow channels on every
// key, b up to 2: 5.1e-3 emulated, 5.6e-3 on the GPU).
// Then the configuration runs again on the GPU (bitwise identical: deterministic), and in one more
// way drawn with it, which must give the same result: a CUDA graph's replay (bitwise), the inputs as
// strided views into one fused projection row (bitwise), the state updated in place (errors by the
// same rule), int32 offsets for int64 ones (bitwise), g and beta as f32 tensors of the same values
// (bitwise, on the two kernels).
//
// Reproducible (random_config.h): FLASH_KDA_RANDOM_SEED (default 2026), FLASH_KDA_RANDOM_CONFIGS
// (default 40), FLASH_KDA_RANDOM_ONLY=i; every configuration prints its index and what was drawn.
// scripts/gpu_verify.sh runs a longer draw (its `random` stage) and a short one under compute-sanitizer.
// The same draws on the CPU, in CI: tests/test_random_matrix_cpu.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "reference/common.h"
#include "tests/gpu/gpu_harness.h"
#include "tests/host_reference.h"
#include "tests/random_config.h"
#include "tests/random_problem.h"

namespace kda::test {
namespace {

using reference::bf16_to_float;

void run_or_fail(const kda_fwd_params& prm, const std::string& what) {
  const kda_status st = run_on_gpu(prm);
  ASSERT_EQ(st.code, KDA_OK) << what << ": " << st.message;
}

// What a run's errors against float64 may be: the emulated kernel's (`emu`) by the rule above
// (gpu_harness.h's emulated_bounds), under the ceiling.
ErrorBounds bounds_from(const RunErrors& emu) {
  const ErrorBounds b = emulated_bounds(emu);
  return {std::min(kRandomMatrixCeiling, b.out), std::min(kRandomMatrixCeiling, b.state)};
}

void expect_within(const RunErrors& e, const ErrorBounds& b, const std::string& what) {
  EXPECT_EQ(e.non_finite, 0u) << what;
  EXPECT_LE(e.out, b.out) << what << " (out, against the emulated kernel's bound)";
  EXPECT_LE(e.state, b.state) << what << " (final state, against the emulated kernel's bound)";
}

void check_config(int index, const Config& c) {
  const std::string what = "#" + std::to_string(index) + " " + c.text;
  std::printf("[ random ] %s\n", what.c_str());
  const RandomProblem base = make_problem(c);

  RandomProblem ref = base;
  const ExactReference exact = reference_f64(params_of(c, ref));
  // The emulated kernel (on the CPU, every core), its errors against the same float64 run.
  RandomProblem emu = base;
  run_emulated_kernel(params_of(c, emu));
  const RunErrors em = errors_against(emu, exact);
  const ErrorBounds b = bounds_from(em);

  RandomProblem a = base;
  ASSERT_NO_FATAL_FAILURE(run_or_fail(params_of(c, a), what));
  const RunErrors e = errors_against(a, exact);
  std::printf("[ random ]   out %.3e final_state %.3e (emulated kernel %.3e, %.3e)\n", e.out, e.state, em.out, em.state);
  expect_within(e, b, what);

  RandomProblem again = base;
  ASSERT_NO_FATAL_FAILURE(run_or_fail(params_of(c, again), what));
  expect_identical(a, again, (what + ": a second run, bitwise").c_str());

  switch (c.variant) {
    case Variant::kGraph: {
      RandomProblem g = base;
      DeviceProblem dp(params_of(c, g));
      dp.poison_workspace(0xff);
      CapturedFwd graph(dp);
      ASSERT_EQ(graph.error(), "") << what;
      ASSERT_EQ(graph.status().code, KDA_OK) << what << ": " << graph.status().message;
      ASSERT_EQ(graph.replay(2), cudaSuccess) << what;
      dp.download_outputs();
      expect_identical(a, g, (what + ": graph replay vs eager").c_str());
      break;
    }
    case Variant::kStrided: {
      // q, k, v, g of each token in one fused row [q (H) | k (H) | v (HV) | g (HV)] x 128.
      RandomProblem st = base;
      const int64_t H = c.spec.H, HV = c.spec.HV, rows = c.spec.B * c.spec.T, row = (2 * H + 2 * HV) * 128;
      std::vector<uint16_t> fused(static_cast<size_t>(std::max<int64_t>(1, rows * row)));
      const int64_t off[4] = {0, H * 128, 2 * H * 128, (2 * H + HV) * 128}, width[4] = {H * 128, H * 128, HV * 128, HV * 128};
      const std::vector<uint16_t>* src[4] = {&st.q, &st.k, &st.v, &st.g};
      for (int t = 0; t < 4; ++t)
        for (int64_t i = 0; i < rows; ++i)
          std::memcpy(&fused[static_cast<size_t>(i * row + off[t])], src[t]->data() + i * width[t],
                      static_cast<size_t>(width[t]) * 2);
      kda_fwd_params prm = params_of(c, st);
      kda_tensor* views[4] = {&prm.q, &prm.k, &prm.v, &prm.g};
      for (int t = 0; t < 4; ++t) {
        views[t]->data = fused.data() + off[t];
        views[t]->stride[0] = c.spec.T * row;
        views[t]->stride[1] = row;
        views[t]->stride[2] = 128;
      }
      ASSERT_NO_FATAL_FAILURE(run_or_fail(prm, what + " (strided)"));
      expect_identical(a, st, (what + ": strided views vs contiguous").c_str());
      break;
    }
    case Variant::kInPlace: {
      RandomProblem ip = base;
      kda_fwd_params prm = params_of(c, ip);
      prm.final_state.data = prm.initial_state.data;
      ASSERT_NO_FATAL_FAILURE(run_or_fail(prm, what + " (in place)"));
      const RunErrors ei = errors_against(ip, exact, true);
      std::printf("[ random ]   in place: out %.3e final_state %.3e\n", ei.out, ei.state);
      expect_within(ei, b, what + " (in place)");
      break;
    }
    case Variant::kCuInt32: {
      Config c32 = c;
      c32.spec.cu_dtype = KDA_DTYPE_I32;
      RandomProblem p32 = make_problem(c32);
      ASSERT_NO_FATAL_FAILURE(run_or_fail(params_of(c32, p32), what + " (int32 offsets)"));
      expect_identical(a, p32, (what + ": int32 vs int64 cu_seqlens").c_str());
      break;
    }
    case Variant::kF32GateBeta: {
      RandomProblem f = base;
      std::vector<float> g32(f.g.size()), beta32(f.beta.size());
      for (size_t i = 0; i < g32.size(); ++i) g32[i] = bf16_to_float(f.g[i]);
      for (size_t i = 0; i < beta32.size(); ++i) beta32[i] = bf16_to_float(f.beta[i]);
      kda_fwd_params prm = params_of(c, f);
      prm.g.data = g32.data();
      prm.g.dtype = KDA_DTYPE_F32;
      prm.beta.data = beta32.data();
      prm.beta.dtype = KDA_DTYPE_F32;
      ASSERT_NO_FATAL_FAILURE(run_or_fail(prm, what + " (f32 g and beta)"));
      expect_identical(a, f, (what + ": f32 g and beta vs bf16").c_str());
      break;
    }
    case Variant::kNone:
      break;
  }
}

TEST(GpuRandomMatrix, ConfigurationsAgainstFloat64) {
  KDA_SKIP_WITHOUT_SM90();
  const int ran = for_each_config(random_draw(2026, 40), check_config);
  ASSERT_GT(ran, 0) << "no configuration ran (FLASH_KDA_RANDOM_ONLY beyond FLASH_KDA_RANDOM_CONFIGS?)";
}

}  // namespace
}  // namespace kda::test
