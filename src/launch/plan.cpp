// Recurrence plan: value-row slices, exact combine and bounded warm-up (plan.h).
#include "src/launch/plan.h"

#include <algorithm>
#include <vector>

#include "src/core/checked_math.h"

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
// Bounded warm-up: chunks of warm-up assumed per piece (one at lower_bound -5 on random gates),
// the cost of a launch whose CTAs find nothing to do (the combine and pass 2 when no unit falls
// back: since they run as tail jobs of pass 1, recurrence_tail.cuh, kept as a bias against marginal
// warm-up plans), and how much slower than the best exact plan the fallback may be (pass 1's slices are
// shared by the pieces and the fallback: the best slices for the pieces may cost the fallback up to
// this factor; measured on the H200, docs/performance_notes.md).
constexpr double kWarmupChunksEstimate = 1.0;
constexpr double kIdleLaunchUs = 2.0;
constexpr double kFallbackSlack = 1.2;
// Across GPUs, bounded transitions: the exact layout (the fallback) may cost this much more than the
// best one when every unit falls back, for shorter chains when few do.
constexpr double kBoundedSlack = 1.1;

int64_t waves(int64_t ctas, int sms) { return (ctas + sms - 1) / sms; }

// Largest of 1, 2, 4, 8 keeping units x vsplit <= sms (at least 1).
int one_pass_vsplit(int64_t units, int sms) {
  int vsplit = 1;
  while (vsplit < 8 && units * vsplit * 2 <= sms) vsplit *= 2;
  return vsplit;
}

double pass_cost(int64_t ctas, double chain, int vsplit, int sms) {
  return static_cast<double>(waves(ctas, sms)) * (chain * step_us(vsplit) + kWaveUs);
}

// The one pass with fixed slices.
RecurrencePlan one_pass_with(int64_t units, int64_t chunks, int sms, int vsplit) {
  RecurrencePlan p;
  p.vsplit_first = p.vsplit_second = vsplit;
  p.cost_us = pass_cost(units * vsplit, static_cast<double>(chunks), vsplit, sms);
  return p;
}

// The one pass with the slices that fill the SMs.
RecurrencePlan one_pass(int64_t units, int64_t chunks, int sms) {
  return one_pass_with(units, chunks, sms, one_pass_vsplit(units, sms));
}

// Costs of the exact combine for every P in [2, kMaxContextSegments] and pass-1 slice count, each
// with pass 2's fastest slices: the passes' costs are separable, so one table serves the best exact
// plan with free or fixed pass-1 slices (computed once per plan; ~500 model evaluations).
struct ExactTable {
  static constexpr int kV[4] = {1, 2, 4, 8};
  double cost[kMaxContextSegments + 1][4] = {};  // [P][index of the pass-1 slice count]
  int v2[kMaxContextSegments + 1] = {};
  // Pass 2 in pass 1's slices (a warm-up plan's fallback: its pass 2 runs as tail jobs of pass 1's
  // grid, recurrence_tail.cuh).
  double cost_same[kMaxContextSegments + 1][4] = {};
  int max_P = 1;

  ExactTable(int64_t units, int64_t chunks, int sms, int only_P) {
    const int lo = only_P > 1 ? only_P : 2, hi = only_P > 1 ? only_P : kMaxContextSegments;
    // The launches and the combine alone grow with P: once they cost more than the slowest one-pass
    // plan, no larger P can beat any one-pass plan (the reference of every use of the table).
    double limit = 0;
    for (int v : kV) limit = std::max(limit, pass_cost(units * v, static_cast<double>(chunks), v, sms));
    for (int P = lo; P <= hi; ++P) {
      const double fixed = kExtraLaunchesUs + kCombineStepUs * std::max(P - 2, 0);
      if (only_P <= 1 && fixed >= limit) break;
      max_P = P;
      const double per = static_cast<double>((chunks + P - 1) / P);
      double best2 = 0;
      for (int v : kV) {
        const double c = pass_cost(units * v * (P - 1), per, v, sms);
        if (v2[P] == 0 || c < best2) {
          best2 = c;
          v2[P] = v;
        }
      }
      for (int i = 0; i < 4; ++i) {
        const double pass1 = pass_cost(units * kV[i] * (2 * P - 3), per, kV[i], sms);
        cost[P][i] = pass1 + best2 + fixed;
        cost_same[P][i] = pass1 + pass_cost(units * kV[i] * (P - 1), per, kV[i], sms) + fixed;
      }
    }
  }
  RecurrencePlan plan(int P, int i, bool same_slices = false) const {
    RecurrencePlan p;
    p.method = SplitMethod::kExact;
    p.segments = P;
    p.vsplit_first = kV[i];
    p.vsplit_second = same_slices ? kV[i] : v2[P];
    p.cost_us = same_slices ? cost_same[P][i] : cost[P][i];
    return p;
  }
  // Best exact plan (P >= 2) with pass-1 slices kV[i] (i < 0: any); `fallback` is returned when
  // nothing beats it.
  RecurrencePlan best(int i, RecurrencePlan fallback, bool same_slices = false) const {
    for (int P = 2; P <= max_P; ++P)
      for (int j = 0; j < 4; ++j) {
        const double c = same_slices ? cost_same[P][j] : cost[P][j];
        if ((i < 0 || j == i) && c > 0 && c < fallback.cost_us) fallback = plan(P, j, same_slices);
      }
    return fallback;
  }
};

// The warm-up path when no unit falls back: pieces of ceil(C/pieces) + w chunks in one pass (piece 0
// one more chunk and no warm-up, the last piece one fewer plus the final state: piece_first_chunk), plus
// the launches the fallback keeps (they find nothing to do).
double warmup_cost(int64_t units, int64_t chunks, int sms, int pieces, int vsplit, int fallback_segments) {
  const double chain = static_cast<double>((chunks + pieces - 1) / pieces) + (pieces > 1 ? kWarmupChunksEstimate : 0);
  const int idle_launches = fallback_segments >= 3 ? 2 : fallback_segments == 2 ? 1 : 0;
  return pass_cost(units * vsplit * pieces, chain, vsplit, sms) + kIdleLaunchUs * idle_launches;
}

// The warm-up plan with `forced` pieces (0: chosen) whose pass-1 slices its fallback shares: the
// fastest whose fallback (the best exact plan, or the one pass, with those slices) stays within
// kFallbackSlack of `exact_cost`; with forced pieces, the fallback has as many segments.
// Pass 1's grid has max(pieces, 2 x segments - 3) slots per unit (first_pass_slots): the exact
// layout's slots beyond the pieces idle when nothing falls back, yet each must start, wait for the
// preparation and read the bounds. Where the grid then exceeds the SMs they queue on the SMs the
// pieces leave free (T8192_H16_N1: 112 such CTAs on 4 SMs, 6% of the call, 2026-12-01), so a chosen
// plan's fallback has no more pass-1 slots than pieces unless its whole grid fits on the SMs.
RecurrencePlan warmup(int64_t units, int64_t chunks, int sms, int forced, double exact_cost, const ExactTable& table) {
  RecurrencePlan best;
  bool found = false;
  for (int i = 0; i < 4; ++i) {
    const int v = ExactTable::kV[i];
    // The best fallback so far (the one pass, or exact plans of at most `next - 1` segments), its
    // segment bound growing with P: one pass over the table per slice count (host time of a new
    // shape's plan, which a varlen call with a new packed length pays).
    RecurrencePlan running = one_pass_with(units, chunks, sms, v);
    int next = 2;
    for (int P = forced > 1 ? forced : 2; P <= (forced > 1 ? forced : kMaxContextSegments); ++P) {
      const int64_t max_slots = std::max<int64_t>(P, sms / (units * v));
      for (; next <= table.max_P && 2 * next - 3 <= max_slots; ++next) {
        const double c = table.cost_same[next][i];
        if (c > 0 && c < running.cost_us) running = table.plan(next, i, true);
      }
      // The fallback's pass 2 in pass 1's slices (same_slices): it runs in pass 1's kernel instance.
      const RecurrencePlan fb = forced > 1 ? table.plan(forced, i, true) : running;
      if (forced <= 1 && fb.cost_us > kFallbackSlack * exact_cost) continue;
      const double cost = warmup_cost(units, chunks, sms, P, v, fb.segments);
      if (!found || cost < best.cost_us) {
        found = true;
        best.method = SplitMethod::kWarmup;
        best.pieces = P;
        best.segments = fb.segments;
        best.vsplit_first = v;
        best.vsplit_second = v;  // the fallback's pass 2 runs in pass 1's grid (recurrence_tail.cuh)
        best.cost_us = cost;
        best.fallback_cost_us = fb.cost_us;
      }
    }
  }
  return best;  // not found (method kNone): no fallback within kFallbackSlack for any piece count
}

}  // namespace

int64_t first_pass_slots(const RecurrencePlan& p) {
  const int64_t exact_slots = p.segments >= 2 ? 2 * p.segments - 3 : 1;
  switch (p.method) {
    case SplitMethod::kNone: return p.vsplit_first;
    case SplitMethod::kExact: return p.vsplit_first * exact_slots;
    case SplitMethod::kWarmup: return p.vsplit_first * std::max<int64_t>(p.pieces, exact_slots);
  }
  return p.vsplit_first;
}

int64_t second_pass_slots(const RecurrencePlan& p) {
  return p.method == SplitMethod::kNone || p.segments < 2 ? 0 : static_cast<int64_t>(p.vsplit_second) * (p.segments - 1);
}

double single_pass_cost(int64_t units, int64_t chunks, int sms, int pieces) {
  sms = std::max(sms, 1);
  pieces = std::max(pieces, 1);
  const double chain =
      static_cast<double>((chunks + pieces - 1) / pieces) + (pieces > 1 ? kSinglePassPieceOverhead : 0.0);
  const int64_t ctas = std::max<int64_t>(units, 1) * pieces;
  const int64_t full = ctas / sms, rest = ctas % sms;
  const double last = rest == 0 ? 0.0
                                : kSinglePassIdleStep + (1.0 - kSinglePassIdleStep) * static_cast<double>(rest) / sms;
  return chain * (static_cast<double>(full) + last);
}

int single_pass_split(int64_t units, int64_t chunks, int sms) {
  if (!single_pass_fills(units, sms)) return 1;  // (the single pass would not take whole sequences)
  const double whole = single_pass_cost(units, chunks, sms, 1);
  int best = 1;
  double best_cost = kSinglePassPiecesGain * whole;
  for (int P = 2; P <= kSinglePassMaxPieces && (chunks + P - 1) / P >= kSinglePassMinPieceChunks; ++P) {
    if (units * P > 0x7fffffff) break;
    const double c = single_pass_cost(units, chunks, sms, P);
    if (c < best_cost) {
      best = P;
      best_cost = c;
    }
  }
  return best;
}

namespace {
RecurrencePlan choose_plan(const PlanRequest& r) {
  const int sms = std::max(r.sms, 1);
  const int64_t units = std::max<int64_t>(r.units, 1);
  const int64_t chunks = std::max<int64_t>(r.chunks, 0);
  const RecurrencePlan whole = one_pass(units, chunks, sms);
  if (r.forced_segments == 1) return whole;
  const bool warm = r.warmup_valid && r.method != KDA_CONTEXT_EXACT;
  const int forced = std::min(r.forced_segments, kMaxContextSegments);
  if (forced > 1) {
    const ExactTable table(units, chunks, sms, forced);
    if (r.method == KDA_CONTEXT_WARMUP && warm) return warmup(units, chunks, sms, forced, 0.0, table);
    RecurrencePlan best = table.plan(forced, 0);
    for (int i = 1; i < 4; ++i)
      if (table.cost[forced][i] < best.cost_us) best = table.plan(forced, i);
    return best;
  }
  // Sequence parallelism only where the one-pass plan leaves SMs idle (a full grid gains nothing
  // from extra chains); several waves of CTAs are allowed (measured: T = 65536, H = 8 runs faster
  // with 17 segments in two waves than with 9 in one). The single pass, one CTA per pair, may still
  // cut the sequences (its own bounded pieces, plan.h's single_pass_split).
  if (units * 2 > sms) {
    RecurrencePlan w = whole;
    if (warm && r.method == KDA_CONTEXT_AUTO) w.single_pass_pieces = single_pass_split(units, chunks, sms);
    return w;
  }
  const ExactTable table(units, chunks, sms, 0);
  RecurrencePlan best = table.best(-1, whole);
  if (best.cost_us >= kRequiredGain * whole.cost_us) best = whole;
  if (warm) {
    RecurrencePlan w = warmup(units, chunks, sms, 0, best.cost_us, table);
    if (w.method == SplitMethod::kWarmup && r.method == KDA_CONTEXT_AUTO)
      w.single_pass_redo = w.segments == 1;
    if (w.method == SplitMethod::kWarmup && w.cost_us < kRequiredGain * best.cost_us) return w;
    if (r.method == KDA_CONTEXT_WARMUP && w.method == SplitMethod::kWarmup && w.cost_us < best.cost_us) return w;
  }
  return best;
}
}  // namespace

RecurrencePlan plan_recurrence(const PlanRequest& r) {
  RecurrencePlan p = choose_plan(r);
  p.sms = std::max(r.sms, 1);
  return p;
}

size_t context_workspace_bytes(int64_t units, const RecurrencePlan& plan) {
  if (plan.method == SplitMethod::kNone || plan.segments <= 1) return 0;
  const size_t per_unit = static_cast<size_t>(2 * plan.segments - 3) * 128 * 128 * sizeof(float);
  return sat_mul(sat_size(units), per_unit);  // SIZE_MAX: does not fit (N x HV huge, forced split)
}

TransitionPlan plan_transition(const PlanRequest& r) {
  const int sms = std::max(r.sms, 1);
  const int64_t units = std::max<int64_t>(r.units, 1);
  const int64_t chunks = std::max<int64_t>(r.chunks, 0);
  const int forced = std::min(r.forced_segments, kMaxContextSegments);
  const bool bounded = r.warmup_valid && r.method != KDA_CONTEXT_EXACT;
  // Per candidate: the pass (two chains per segment, no output products: the forward's step time is
  // an upper bound), the fold's sequential steps and its launch.
  std::vector<TransitionPlan> candidates;
  for (int P = forced >= 1 ? forced : 1; P <= (forced >= 1 ? forced : kMaxContextSegments); ++P) {
    if (forced < 1 && P > 1 && P > chunks) break;  // more segments than chunks: empty ones, no gain
    for (int v : {1, 2, 4, 8}) {
      TransitionPlan c;
      c.segments = P;
      c.vsplit = v;
      c.cost_us = pass_cost(units * 2 * P * v, static_cast<double>((chunks + P - 1) / P), v, sms) +
                  kCombineStepUs * (P - 1) + kExtraLaunchesUs;
      candidates.push_back(c);
    }
  }
  TransitionPlan best = candidates.front();
  for (const TransitionPlan& c : candidates)
    if (c.cost_us < best.cost_us) best = c;
  // Bounded: the exact layout serves only the units whose bound fails, usually few of them, whose
  // chains are shorter with more segments: the most segments within kBoundedSlack of the best plan
  // for all units (the idle slots of the others exit at once).
  if (bounded && forced < 1) {
    const double limit = kBoundedSlack * best.cost_us;
    for (const TransitionPlan& c : candidates)
      if (c.cost_us <= limit && (c.segments > best.segments || (c.segments == best.segments && c.cost_us < best.cost_us)))
        best = c;
  }
  best.method = bounded ? SplitMethod::kWarmup : SplitMethod::kExact;
  return best;
}

size_t transition_scratch_bytes(int64_t units, const TransitionPlan& plan) {
  return static_cast<size_t>(units) * static_cast<size_t>(plan.segments) * 2 * 128 * 128 * sizeof(float);
}

bool offsets_fit_int32(const kda_tensor& t) {
  constexpr int64_t kMax = (int64_t{1} << 31) - 1;
  int64_t reach = 0;  // 16 token strides past the last offset, then the tensor's reach
  if (t.ndim < 2 || !checked_mul<int64_t>(16, t.stride[1], &reach) || reach > kMax) return false;
  return add_tensor_reach(t, kMax, &reach) < 0;
}

}  // namespace kda::sm90
