// flash_kda_rounding_study [CASE ...]: where precision matters, measured on the CPU rounding
// emulation (reference::ChunkedRounding, the float32 chunked algebra with chosen operands rounded to
// bf16 or carried as bf16 hi + lo pairs) against the float64 recurrence. Prints, per case, the
// relative L2 error of the bf16 out and of the fp32 final state for each operand-precision variant
// (one change at a time from the kernel's), then the geometric mean over the cases.
//
// Cases: the standard random case of spec §3 (B=1, T=300, H=4, lower_bound -5, fp32 initial
// state, seed 300) and the repository's generated golden-style cases (tests/golden_gen.h), made
// in memory. Run it to decide where a kernel pays for a hi/lo split (docs/performance_notes.md,
// "Where precision matters"); tests/test_rounding_flags.cpp checks that every flag takes effect.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "reference/common.h"
#include "src/api/problem.h"
#include "tests/golden_gen.h"
#include "tests/golden_io.h"
#include "tests/kernel_rounding.h"
#include "tests/random_problem.h"

namespace {

using kda::reference::ChunkedRounding;

struct Variant {
  const char* name;
  ChunkedRounding r;
};

std::vector<Variant> variants() {
  std::vector<Variant> v;
  const ChunkedRounding k = kda::test::kernel_rounding();  // the kernels' (tests/kernel_rounding.h)
  v.push_back({"kernel", k});
  ChunkedRounding r = k;
  r.split_p_operands = false;
  v.push_back({"P in float32 (before v23)", r});
  r = k;
  r.round_a_operands = r.round_wide_left = r.round_wide_kd = false;
  v.push_back({"before v21 (prep all hi+lo)", r});
  r = k;
  r.split_u = true;
  v.push_back({"U hi+lo (FLASH_KDA_SPLIT_U=1)", r});
  r = k;
  r.split_u = r.split_kr = true;
  v.push_back({"U,Kr hi+lo", r});
  r = k;
  r.round_m_operands = true;
  v.push_back({"M from bf16 Qd,Ki", r});
  r = k;
  r.split_state_operand = false;
  v.push_back({"S operand bf16", r});
  r = k;
  r.split_kr = true;
  v.push_back({"Kr hi+lo", r});
  r = k;
  r.round_small = true;
  v.push_back({"Tb,P bf16 (times V)", r});
  r = k;
  r.tf32_am_operands = true;
  v.push_back({"A,M,Qd from tf32", r});
  r = k;
  r.split_update_last_chunks = 0;
  v.push_back({"every update U,Kr bf16 (before 2026-12-01)", r});
  for (int n : {2, 4}) {
    r = k;
    r.split_update_last_chunks = n;
    v.push_back({n == 2 ? "U,Kr hi+lo last 2 chunks" : "U,Kr hi+lo last 4 chunks", r});
  }
  return v;
}

struct Errors {
  double out = 0, state = 0;
};

// Runs the chunked path on `params` (host buffers) with `r`; errors of the api-rounded results.
Errors run(const kda_fwd_params& params, const ChunkedRounding& r, const std::vector<uint16_t>& out_bits,
           const std::vector<float>& state, const std::vector<double>& eo, const std::vector<double>& es) {
  kda::Problem problem;
  kda_status s = kda::validate(&params, kda::ValidateMode::kHost, &problem);
  if (s.code != KDA_OK) {
    std::fprintf(stderr, "validate: %s\n", s.message);
    std::exit(1);
  }
  s = kda::reference::fwd_chunked_f32(problem, r, 0);
  if (s.code != KDA_OK) {
    std::fprintf(stderr, "fwd_chunked_f32: %s\n", s.message);
    std::exit(1);
  }
  Errors e;
  e.out = kda::test::rel_l2(kda::test::bf16_to_f64(out_bits), eo);
  e.state = kda::test::rel_l2(kda::test::f32_to_f64(state), es);
  return e;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace kda::test;
  std::vector<std::string> names(argv + 1, argv + argc);
  const bool all = names.empty();
  if (all) names = repo_golden_case_names();
  const std::vector<Variant> vs = variants();
  std::vector<double> log_out(vs.size(), 0.0), log_state(vs.size(), 0.0);
  int cases = 0;

  std::printf("%-24s", "case");
  for (const Variant& v : vs) std::printf(" | %s", v.name);
  std::printf("\n");
  auto print_row = [&](const std::string& name, const std::vector<Errors>& es) {
    std::printf("%-24s", name.c_str());
    for (size_t i = 0; i < es.size(); ++i) {
      std::printf(" | %.2e / %.2e", es[i].out, es[i].state);
      log_out[i] += std::log(es[i].out);
      log_state[i] += std::log(es[i].state);
    }
    std::printf("\n");
    std::fflush(stdout);
    ++cases;
  };

  if (all) {  // the standard random case (spec §3)
    ProblemSpec spec;
    spec.B = 1;
    spec.T = 300;
    spec.H = spec.HV = 4;
    spec.seed = 300;
    RandomProblem p = make_random_problem(spec);
    kda_fwd_params params = p.params();
    kda::Problem problem;
    if (kda::validate(&params, kda::ValidateMode::kHost, &problem).code != KDA_OK) return 1;
    std::vector<double> eo(p.out.size()), es(p.final_f32.size());
    if (kda::reference::fwd_recurrence_f64_ex(problem, 0, eo.data(), es.data()).code != KDA_OK) return 1;
    std::vector<Errors> row;
    for (const Variant& v : vs) {
      params = p.params();
      row.push_back(run(params, v.r, p.out, p.final_f32, eo, es));
    }
    print_row("standard (spec §3)", row);
  }
  for (const std::string& name : names) {
    GoldenCase c;
    std::string error;
    if (!make_repo_golden_case(name, &c, &error)) {
      std::fprintf(stderr, "%s\n", error.c_str());
      return 1;
    }
    const std::vector<double> eo = c.find("expected_o")->to_f64();
    const std::vector<double> es = c.find("expected_final_state")->to_f64();
    std::vector<Errors> row;
    for (const Variant& v : vs) {
      HostOutputs outs = make_host_outputs(c);
      const kda_fwd_params params = make_host_params(c, &outs);
      row.push_back(run(params, v.r, outs.out, outs.final_state, eo, es));
    }
    print_row(name, row);
  }
  std::printf("%-24s", "geometric mean");
  for (size_t i = 0; i < vs.size(); ++i)
    std::printf(" | %.2e / %.2e", std::exp(log_out[i] / cases), std::exp(log_state[i] / cases));
  std::printf("\n");
  return 0;
}
