// Recurrence plan: value-row slices and context-parallel segments (plan.h).
#include "src/launch/plan.h"

#include <algorithm>

#include "src/api/checked_math.h"

namespace kda::sm90 {
namespace {

// Measured step time of one 16-token chunk, in microseconds, for a CTA owning 128 / vsplit value
// rows with an SM to itself (H200, docs/performance_notes.md): the chain's dependent latency
// shrinks with fewer rows per CTA.
double step_us(int vsplit) {
  switch (vsplit) {
    case 1: return 1.05;
    case 2: return 0.90;
    case 4: return 0.74;
    default: return 0.70;
  }
}

// Fixed cost of a wave of CTAs (state load and store, filling the copy ring); extra launches of the
// context-parallel path (pass 2, the combine) and the combine's sequential steps (one 128 x 128
// float32 product per middle segment). Fitted to a sweep of forced segment counts on the H200
// (scripts/gpu_verify.sh cpsweep; docs/performance_notes.md).
constexpr double kWaveUs = 4.0;
constexpr double kExtraLaunchesUs = 4.0;
constexpr double kCombineStepUs = 2.7;  // measured 2.6-2.8 (Nsight Compute, T8192_H8, T65536_H8)
// Context parallelism must beat the one-pass plan by this factor under the model (the model is
// coarse; an even trade is not worth two extra launches and the extra workspace).
constexpr double kRequiredGain = 0.9;

int64_t waves(int64_t ctas, int sms) { return (ctas + sms - 1) / sms; }

// Largest of 1, 2, 4, 8 keeping units x vsplit <= sms (at least 1).
int one_pass_vsplit(int64_t units, int sms) {
  int vsplit = 1;
  while (vsplit < 8 && units * vsplit * 2 <= sms) vsplit *= 2;
  return vsplit;
}

RecurrencePlan one_pass(int64_t units, int64_t chunks, int sms) {
  RecurrencePlan p;
  p.segments = 1;
  p.vsplit_first = p.vsplit_second = one_pass_vsplit(units, sms);
  p.cost_us = static_cast<double>(waves(units * p.vsplit_first, sms)) *
              (static_cast<double>(chunks) * step_us(p.vsplit_first) + kWaveUs);
  return p;
}

// Best slices for P segments. The passes' costs are separable: each pass takes the slice count
// that is fastest for it. `single_wave`: only plans whose passes fit in one wave of CTAs.
bool best_for_segments(int64_t units, int64_t chunks, int sms, int P, bool single_wave, RecurrencePlan* out) {
  const double per = static_cast<double>((chunks + P - 1) / P);
  double best[2] = {0, 0};
  int vbest[2] = {0, 0};
  for (int pass = 0; pass < 2; ++pass)
    for (int v = 1; v <= 8; v *= 2) {
      RecurrencePlan p;
      p.segments = P;
      p.vsplit_first = p.vsplit_second = v;
      const int64_t w = waves(pass == 0 ? first_pass_ctas(units, p) : second_pass_ctas(units, p), sms);
      if (single_wave && w > 1) continue;
      const double cost = static_cast<double>(w) * (per * step_us(v) + kWaveUs);
      if (vbest[pass] == 0 || cost < best[pass]) {
        best[pass] = cost;
        vbest[pass] = v;
      }
    }
  if (vbest[0] == 0 || vbest[1] == 0) return false;
  out->segments = P;
  out->vsplit_first = vbest[0];
  out->vsplit_second = vbest[1];
  out->cost_us = best[0] + best[1] + kExtraLaunchesUs + kCombineStepUs * std::max(P - 2, 0);
  return true;
}

}  // namespace

RecurrencePlan plan_recurrence(int64_t units, int64_t chunks, int sms, int forced_segments) {
  sms = std::max(sms, 1);
  units = std::max<int64_t>(units, 1);
  chunks = std::max<int64_t>(chunks, 0);
  const RecurrencePlan whole = one_pass(units, chunks, sms);
  if (forced_segments == 1) return whole;
  if (forced_segments > 1) {
    RecurrencePlan p;
    best_for_segments(units, chunks, sms, std::min(forced_segments, kMaxContextSegments), false, &p);
    return p;
  }
  // Context parallelism only where the one-pass plan leaves SMs idle (a full grid gains nothing
  // from extra chains); several waves of CTAs are allowed (measured: T = 65536, H = 8 runs faster
  // with 17 segments in two waves than with 9 in one).
  RecurrencePlan best = whole;
  if (units * 2 > sms) return best;
  for (int P = 2; P <= kMaxContextSegments; ++P) {
    // The launches and the combine alone grow with P: once they pass the best cost, stop.
    if (kExtraLaunchesUs + kCombineStepUs * std::max(P - 2, 0) >= best.cost_us) break;
    RecurrencePlan p;
    best_for_segments(units, chunks, sms, P, false, &p);
    if (p.cost_us < best.cost_us && p.cost_us < kRequiredGain * whole.cost_us) best = p;
  }
  return best;
}

size_t context_workspace_bytes(int64_t units, const RecurrencePlan& plan) {
  if (plan.segments <= 1) return 0;
  const size_t per_unit = static_cast<size_t>(2 * plan.segments - 3) * 128 * 128 * sizeof(float);
  return sat_mul(sat_size(units), per_unit);  // SIZE_MAX: does not fit (N x HV huge, forced split)
}

}  // namespace kda::sm90
