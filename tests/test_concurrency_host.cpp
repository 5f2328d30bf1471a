// The host side of issue 8 item 9: the library holds no mutable state that calls share, so calls
// from many threads at once give the results of the same calls made one by one. Here the CPU
// paths (each call itself multithreaded) and the workspace-size query; the GPU version with
// streams is tests/gpu/test_gpu_concurrency.cpp.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/random_problem.h"

namespace kda::test {
namespace {

TEST(HostConcurrency, CpuCallsFromManyThreadsMatchSequentialCalls) {
  std::vector<ProblemSpec> specs;
  for (int i = 0; i < 8; ++i) {
    ProblemSpec s;
    s.B = 1 + i % 2, s.T = 17 + 9 * i, s.H = 1, s.HV = 1 + i % 2;
    s.gate = static_cast<kda_gate>(i % 3);
    s.initial_state = i % 3 == 0 ? KDA_DTYPE_NONE : KDA_DTYPE_F32;
    s.final_state = i % 2 ? KDA_DTYPE_BF16 : KDA_DTYPE_F32;
    if (i == 5) s.B = 1, s.cu_seqlens = {0, 3, 3, 40, 62};
    s.seed = 700 + i;
    specs.push_back(s);
  }
  const kda_cpu_algorithm algos[2] = {KDA_CPU_RECURRENCE_F64, KDA_CPU_CHUNKED_F32};
  std::vector<RandomProblem> alone;
  for (const ProblemSpec& s : specs)
    for (kda_cpu_algorithm a : algos) {
      alone.push_back(make_random_problem(s));
      kda_fwd_params p = alone.back().params();
      const kda_status st = kda_fwd_cpu(&p, a, 1);
      ASSERT_EQ(st.code, KDA_OK) << st.message;
    }
  constexpr int kThreads = 8;
  std::vector<std::vector<RandomProblem>> got(kThreads);
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (size_t i = 0; i < specs.size(); ++i)
        for (kda_cpu_algorithm a : algos) {
          got[t].push_back(make_random_problem(specs[(i + t) % specs.size()]));
          kda_fwd_params p = got[t].back().params();
          size_t bytes = 0;
          kda_status s = kda_fwd_workspace_size(&p, &bytes);
          if (s.code == KDA_OK) s = kda_fwd_cpu(&p, a, 1 + t % 3);
          if (s.code != KDA_OK) errors[t] = s.message;
        }
    });
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_TRUE(errors[t].empty()) << errors[t];
    for (size_t i = 0; i < specs.size(); ++i)
      for (int a = 0; a < 2; ++a) {
        const RandomProblem& g = got[t][2 * i + a];
        const RandomProblem& w = alone[2 * ((i + t) % specs.size()) + a];
        EXPECT_EQ(g.out, w.out) << "thread " << t << " spec " << i;
        EXPECT_TRUE(g.final_f32.size() == w.final_f32.size() &&
                    (w.final_f32.empty() || std::memcmp(g.final_f32.data(), w.final_f32.data(), w.final_f32.size() * 4) == 0));
        EXPECT_EQ(g.final_bf16, w.final_bf16);
      }
  }
}

}  // namespace
}  // namespace kda::test
