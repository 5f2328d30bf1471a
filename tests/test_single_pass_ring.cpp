// The single pass's ring (src/kernels/sm90/single_pass_layout.h) on the CPU: its hand-over between eight
// preparation warps and the consumer simulated under random interleavings (no wait ever two phases
// behind its barrier), the walk's in-flight chunk and launcher rule, the walk's arithmetic against
// division, and the bounded pieces' drop, stop and drain. The wgmma recurrence's stage: test_wgmma_stage.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "src/kernels/sm90/single_pass_layout.h"
#include "src/ptx/register_budget.h"

namespace kda::test {
namespace {

// The single pass's hand-over (single_pass_layout.h) under random interleavings: eight preparation warps
// (warp w writes steps w, w + 8, ...: it waits for the empty barrier of step j - kRing, the stage's
// previous use, then completes the full barrier of slot j % kSlots) and one consumer (steps in order:
// it waits for the full barrier, then completes the empty one). An mbarrier wait by phase parity is
// only sound when the barrier is not two phases past the awaited one; every wait here checks that, and
// every completion checks that it completes the slot's next phase (one writer per phase, in order).
// (The same simulation with more stages than slots, 3 stages on 2 slots or 5 on 4, reports thousands of
// violations: checked 2026-12-01 with a copy of it.)
TEST(SinglePassRing, HandOverNeverRunsTwoPhasesAheadOfAWait) {
  using Lay = sm90::SinglePassLayout;
  EXPECT_EQ(Lay::kSlots % Lay::kPrepWarps, 0);
  EXPECT_LT(Lay::kRing, Lay::kSlots);
  EXPECT_TRUE(ptx::setmaxnreg_fits(Lay::kThreads, {Lay::kPrepRegs, Lay::kPrepRegs, Lay::kConsumerRegs}));
  EXPECT_TRUE(ptx::setmaxnreg_fits(Lay::kThreads, {Lay::kPrepRegsAlt, Lay::kPrepRegsAlt, Lay::kConsumerRegsAlt}));
  EXPECT_LE(tile::smem_bytes<Lay::Storage>(), size_t{232448});
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const int steps = 500 + static_cast<int>(seed) * 7;
    std::vector<int> full(Lay::kSlots, 0), empty(Lay::kSlots, 0);  // completed phases per slot
    std::vector<int> next(Lay::kPrepWarps);                         // each warp's next step
    for (int w = 0; w < Lay::kPrepWarps; ++w) next[w] = w;
    int consumed = 0;
    std::mt19937_64 rng(seed);
    auto ready_to_write = [&](int j) {  // the stage's previous step consumed
      if (j < Lay::kRing) return true;
      const int prev = j - Lay::kRing, slot = prev % Lay::kSlots, phase = prev / Lay::kSlots;
      EXPECT_LE(empty[slot], phase + 1) << "empty barrier two phases ahead of the wait for step " << prev;
      return empty[slot] > phase;
    };
    while (consumed < steps) {
      std::vector<int> runnable;  // warps 0..7, the consumer as 8
      for (int w = 0; w < Lay::kPrepWarps; ++w)
        if (next[w] < steps && ready_to_write(next[w])) runnable.push_back(w);
      {
        const int slot = consumed % Lay::kSlots, phase = consumed / Lay::kSlots;
        EXPECT_LE(full[slot], phase + 1) << "full barrier two phases ahead of the wait for step " << consumed;
        if (full[slot] > phase) runnable.push_back(Lay::kPrepWarps);
      }
      ASSERT_FALSE(runnable.empty()) << "deadlock at step " << consumed << ", seed " << seed;
      const int who = runnable[rng() % runnable.size()];
      if (who < Lay::kPrepWarps) {
        const int j = next[who], slot = j % Lay::kSlots;
        ASSERT_EQ(full[slot], j / Lay::kSlots) << "step " << j << " completes its slot's next phase";
        ++full[slot];
        next[who] += Lay::kPrepWarps;
      } else {
        const int slot = consumed % Lay::kSlots;
        ASSERT_EQ(empty[slot], consumed / Lay::kSlots) << "step " << consumed;
        ++empty[slot];
        ++consumed;
      }
    }
  }
}

// A walk of several units per CTA (single_pass_kernel.cuh's kWalk): the ring's steps run on across
// units, and Kr's low part of a unit's last chunk sits in one buffer (st.kr_lo), written by the warp that
// prepares that chunk (at the earliest as soon as it has handed over its previous chunk) and read by the
// consumer at that step. Under random interleavings, with the hand-over rules above: the consumer has
// taken the previous unit's last step before any warp may write the next one's, for units of
// kSinglePassWalkMinChunks chunks or more. (The same simulation with units of 8 chunks reports the
// overwrite: kMinChunks is what makes one buffer enough.)
int walk_kr_lo_overwrites(int chunks, int units, uint64_t seed) {
  using Lay = sm90::SinglePassLayout;
  const int steps = chunks * units;
  std::vector<int> full(Lay::kSlots, 0), empty(Lay::kSlots, 0);
  std::vector<int> next(Lay::kPrepWarps);
  for (int w = 0; w < Lay::kPrepWarps; ++w) next[w] = w;
  int consumed = 0, overwrites = 0;
  std::mt19937_64 rng(seed);
  auto ready_to_write = [&](int j) {
    if (j < Lay::kRing) return true;
    const int prev = j - Lay::kRing;
    return empty[prev % Lay::kSlots] > prev / Lay::kSlots;
  };
  // Warp w may write kr_lo for its next step once it has handed over the one before (or at its start).
  auto writes_kr_lo_now = [&](int j) {
    if (j >= steps || j % chunks != chunks - 1) return;
    const int previous_last = j - chunks;  // the unit before's last step, whose kr_lo the consumer reads
    if (previous_last >= 0 && consumed <= previous_last) ++overwrites;
  };
  for (int w = 0; w < Lay::kPrepWarps; ++w) writes_kr_lo_now(next[w]);
  while (consumed < steps) {
    std::vector<int> runnable;
    for (int w = 0; w < Lay::kPrepWarps; ++w)
      if (next[w] < steps && ready_to_write(next[w])) runnable.push_back(w);
    if (full[consumed % Lay::kSlots] > consumed / Lay::kSlots) runnable.push_back(Lay::kPrepWarps);
    if (runnable.empty()) return -1;  // deadlock
    const int who = runnable[rng() % runnable.size()];
    if (who < Lay::kPrepWarps) {
      ++full[next[who] % Lay::kSlots];
      next[who] += Lay::kPrepWarps;
      writes_kr_lo_now(next[who]);
    } else {
      ++empty[consumed % Lay::kSlots];
      ++consumed;
    }
  }
  return overwrites;
}

TEST(SinglePassRing, WalkKeepsOneUnitsLastChunkInFlight) {
  for (uint64_t seed = 1; seed <= 20; ++seed)
    for (int chunks : {sm90::kSinglePassWalkMinChunks, sm90::kSinglePassWalkMinChunks + 5, 64}) {
      const int r = walk_kr_lo_overwrites(chunks, 9, seed);
      ASSERT_GE(r, 0) << "deadlock, " << chunks << " chunks, seed " << seed;
      EXPECT_EQ(r, 0) << chunks << " chunks per unit, seed " << seed;
    }
  // The rule is not vacuous: units of 8 chunks would overwrite a last chunk's Kr still to be read.
  int seen = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed) seen += walk_kr_lo_overwrites(8, 9, seed) > 0;
  EXPECT_GT(seen, 0);
}

// The launcher's rule for a walk (single_pass_walks): only whole sequences of a fixed-length batch in
// whole chunks, more units than SMs, kSinglePassWalkMinChunks to kSinglePassWalkMaxChunks chunks each
// (the minimum is the ring's rule above; outside the maximum a walk measured slower).
TEST(SinglePassRing, WalkOnlyWhereTheLauncherRuleAllows) {
  const int lo = sm90::kSinglePassWalkMinChunks, hi = sm90::kSinglePassWalkMaxChunks;
  EXPECT_TRUE(sm90::single_pass_walks(true, 1, 2048, 132, 32));  // B64_T512_H32
  EXPECT_TRUE(sm90::single_pass_walks(true, 1, 133, 132, lo));
  EXPECT_TRUE(sm90::single_pass_walks(true, 1, 133, 132, hi));
  EXPECT_FALSE(sm90::single_pass_walks(true, 1, 8192, 132, 8));     // B256_T128_H32: shorter than the ring allows
  EXPECT_FALSE(sm90::single_pass_walks(true, 1, 133, 132, lo - 1));
  EXPECT_FALSE(sm90::single_pass_walks(true, 1, 133, 132, hi + 1));
  EXPECT_FALSE(sm90::single_pass_walks(true, 1, 512, 132, 256));    // B16_T4096_H32
  EXPECT_FALSE(sm90::single_pass_walks(true, 1, 132, 132, 32));     // no more units than SMs
  EXPECT_FALSE(sm90::single_pass_walks(true, 2, 2048, 132, 32));    // pieces
  EXPECT_FALSE(sm90::single_pass_walks(false, 1, 2048, 132, 32));   // packed or a partial chunk
}

// The walk's arithmetic without divisions (walk_advance_chunk, walk_advance_unit; single_pass_kernel.cuh
// and single_pass_prep_role.cuh) against the divisions it replaces: every preparation warp's ring steps
// j = warp, warp + 8, ... map to chunk j mod steps of unit j / steps, and the consumers' unit advanced
// by the grid at each boundary is (unit0 + k · grid) / HV, mod HV, for grids smaller and larger than HV.
TEST(SinglePassRing, WalkArithmeticMatchesDivision) {
  using Lay = sm90::SinglePassLayout;
  int checked = 0;
  for (int steps = Lay::kPrepWarps; steps <= 70; ++steps)
    for (int warp = 0; warp < Lay::kPrepWarps; ++warp) {
      const int units = 5;
      int c = warp, next = 0;
      for (int j = warp; j < units * steps; j += Lay::kPrepWarps) {
        const int k = next;
        ASSERT_EQ(c, j % steps) << "steps " << steps << ", warp " << warp << ", step " << j;
        ASSERT_EQ(k, j / steps) << "steps " << steps << ", warp " << warp << ", step " << j;
        sm90::walk_advance_chunk(c, next, Lay::kPrepWarps, steps);
        ++checked;
      }
    }
  for (int HV : {1, 2, 3, 8, 32, 64, 96, 131, 132, 133, 500})
    for (int grid : {1, 7, 78, 132, 264})
      for (int unit0 = 0; unit0 < grid; unit0 += std::max(1, grid / 5)) {
        int seq = unit0 / HV, hv = unit0 % HV;
        for (int k = 1; k < 40; ++k) {
          sm90::walk_advance_unit(seq, hv, grid, HV);
          const int64_t u = unit0 + static_cast<int64_t>(k) * grid;
          ASSERT_EQ(seq, u / HV) << "HV " << HV << ", grid " << grid << ", unit0 " << unit0 << ", k " << k;
          ASSERT_EQ(hv, u % HV) << "HV " << HV << ", grid " << grid << ", unit0 " << unit0 << ", k " << k;
          ++checked;
        }
      }
  EXPECT_GT(checked, 10000);
}

// The bounded pieces' hand-over (single_pass_kernel.cuh, design.md §3.5 "Pieces") under random
// interleavings: a piece's warps prepare nc <= kSinglePassWarmupCap candidate chunks first (steps 0 ..
// nc - 1), each candidate's warp arrives on the decision barrier at its acquire, and once all have
// arrived every role decides alike: the piece falls back (seeded, or a candidate prepared after the
// abort, whose bound is then +inf), or it drops skip = nc - w candidates and ring step r is chunk step
// r + skip (warp (r + skip) % 8). At any time the unit may be aborted (another piece fell back): a warp
// starting a chunk after that hands it over marked, and the consumer leaves its loop at the first marked
// step and only drains the rest. Checked: no deadlock, every parity wait within one phase, each slot's
// phases completed in order by one writer, the consumer takes exactly the steps the warps hand over,
// and nothing marked is computed. (Checked 2026-12-02 with copies of it: a consumer that stops at the
// first marked step instead of draining deadlocks; warps that hand over by chunk step instead of ring
// step leave steps unconsumed.)
// recheck: the hand-over reads the abort again (a chunk started before the abort but handed over after
// it goes marked: lead (a) of docs/performance_notes.md, version 48, not built in the kernel yet); the
// same invariants must hold both ways.
// precheck: the build knob FLASH_KDA_SP_PRECHECK (single_pass_precheck.cuh). For a checked piece the
// consumer's first action is the verdict; each warp, having issued its first chunk's boxes, waits for it
// before anything else. A refused piece (which the full rule then refuses too: the precheck is sound,
// tests/test_warmup_bound.cpp) hands nothing over and every role leaves; a piece taken goes on as
// before. Piece 0 (no candidates) may be refused too (it reads piece 1's).
void bounded_pieces_ring(bool recheck, bool precheck = false) {
  using Lay = sm90::SinglePassLayout;
  const int cap = sm90::kSinglePassWarmupCap;
  int fell_back = 0, aborted = 0, dropped = 0, marked_late = 0, verdicts = 0, refused_pieces = 0, left_refused = 0,
      piece0_refused = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    std::mt19937_64 rng(seed * 7919);
    const int nc = static_cast<int>(rng() % (cap + 1));            // 0: piece 0 (no candidates)
    const int real = 1 + static_cast<int>(rng() % 60);             // the piece's own chunks
    const int steps_prep = nc + real;
    bool seeded_fail_forced = false;                                // (refused by the precheck)
    const bool seeded_fail = nc > 0 && rng() % 4 == 0;              // the bound asks for more than the cap
    const int seeded_skip = nc > 0 ? static_cast<int>(rng() % nc) : 0;  // nc - w, w in 1..nc
    const bool may_abort = rng() % 2 == 0;
    const bool checked = precheck && rng() % 4 != 0;
    const bool refused = checked && rng() % 3 == 0;
    bool verdict = false;  // the consumer's verdict given (checked pieces)
    // A piece with candidates that the precheck refuses fails the full rule too (its soundness); piece 0,
    // which has none, learns it from the verdict alone.
    if (refused && nc > 0) seeded_fail_forced = true;
    struct Warp {
      int j;
      bool started = false, dead = false, arrived = false, stopped = false;
    };
    std::vector<Warp> warps(Lay::kPrepWarps);
    for (int w = 0; w < Lay::kPrepWarps; ++w) warps[w].j = w;
    std::vector<int> full(Lay::kSlots, 0), empty(Lay::kSlots, 0);
    std::vector<int> marked;  // per ring step handed over: 1 marked
    int arrivals = 0, consumed = 0;
    bool abort = false, cand_dead = false, consumer_done = false, draining = false;
    int computed_after_mark = 0;
    auto decided = [&] { return nc == 0 || arrivals == nc; };
    auto fails = [&] { return seeded_fail || seeded_fail_forced || cand_dead; };
    auto skip = [&] { return nc == 0 ? 0 : seeded_skip; };
    auto ready_to_write = [&](int r) {
      if (r < Lay::kRing) return true;
      const int prev = r - Lay::kRing, slot = prev % Lay::kSlots, phase = prev / Lay::kSlots;
      EXPECT_LE(empty[slot], phase + 1) << "seed " << seed;
      return empty[slot] > phase;
    };
    for (int guard = 0;; ++guard) {
      ASSERT_LT(guard, 100000) << "no progress, seed " << seed;
      std::vector<int> runnable;  // 0..7 warps' next action, 8 the consumer, 9 the abort
      for (int w = 0; w < Lay::kPrepWarps; ++w) {
        Warp& W = warps[w];
        if (W.stopped || W.j >= steps_prep) continue;
        if (checked && W.started && W.j == w && !verdict) continue;  // its first chunk waits for the verdict
        if (checked && refused && W.started && W.j == w) {
          runnable.push_back(w);  // it leaves
          continue;
        }
        if (!W.started || (W.j < nc && !W.arrived)) {
          runnable.push_back(w);
          continue;
        }
        if (!decided()) continue;
        if (fails()) {
          runnable.push_back(w);  // it stops
          continue;
        }
        const int r = W.j - skip();
        if (r < 0 || ready_to_write(r)) runnable.push_back(w);
      }
      if (!consumer_done) {
        if (checked && !verdict) {
          runnable.push_back(Lay::kPrepWarps);  // the verdict (then, refused, it leaves)
        } else if (!decided()) {
        } else if (fails()) {
          runnable.push_back(Lay::kPrepWarps);
        } else {
          const int steps = steps_prep - skip();
          if (consumed == steps) {
            runnable.push_back(Lay::kPrepWarps);
          } else {
            const int slot = consumed % Lay::kSlots, phase = consumed / Lay::kSlots;
            EXPECT_LE(full[slot], phase + 1) << "seed " << seed;
            if (full[slot] > phase) runnable.push_back(Lay::kPrepWarps);
          }
        }
      }
      if (may_abort && !abort) runnable.push_back(Lay::kPrepWarps + 1);
      bool warps_done = true;
      for (const Warp& W : warps) warps_done = warps_done && (W.stopped || W.j >= steps_prep);
      if (runnable.empty() || (runnable.size() == 1 && runnable[0] == Lay::kPrepWarps + 1 && warps_done && consumer_done)) {
        ASSERT_TRUE(warps_done && consumer_done) << "deadlock, seed " << seed;
        break;
      }
      const int who = runnable[rng() % runnable.size()];
      if (who == Lay::kPrepWarps + 1) {
        abort = true;
      } else if (who == Lay::kPrepWarps) {
        if (checked && !verdict) {
          verdict = true;
          consumer_done = refused;
          ++verdicts;
        } else if (fails() || consumed == steps_prep - skip()) {
          consumer_done = true;
        } else {
          const int slot = consumed % Lay::kSlots;
          draining = draining || marked[consumed] != 0;
          if (!draining && marked[consumed]) ++computed_after_mark;
          ASSERT_EQ(empty[slot], consumed / Lay::kSlots) << "seed " << seed;
          ++empty[slot];
          ++consumed;
        }
      } else {
        Warp& W = warps[who];
        if (checked && refused && W.started && W.j == who) {
          W.stopped = true;  // refused: it leaves at its first chunk, once the boxes have landed
          ++left_refused;
        } else if (!W.started) {  // the chunk starts: its boxes, and whether the unit is already aborted
          W.started = true;
          W.dead = abort;
        } else if (W.j < nc && !W.arrived) {  // a candidate's bound (+inf when dead) arrives
          W.arrived = true;
          ++arrivals;
          cand_dead = cand_dead || W.dead;
        } else if (fails()) {
          W.stopped = true;
        } else {
          const int r = W.j - skip();
          if (r >= 0) {
            const int slot = r % Lay::kSlots;
            ASSERT_EQ(full[slot], r / Lay::kSlots) << "step " << r << " completes its slot's next phase, seed " << seed;
            ++full[slot];
            if (static_cast<int>(marked.size()) <= r) marked.resize(r + 1, -1);
            ASSERT_EQ(marked[r], -1) << "step " << r << " handed over twice, seed " << seed;
            const bool late = recheck && !W.dead && abort;
            marked_late += late;
            marked[r] = W.dead || late ? 1 : 0;
          }
          W.j += Lay::kPrepWarps;
          W.started = W.arrived = W.dead = false;
        }
      }
    }
    // What was handed over is exactly what the consumer took (none left in a slot, none missing; nothing
    // at all where the piece fell back).
    int handed = 0;
    for (int f : full) handed += f;
    const bool gave_up = fails() || refused;
    EXPECT_EQ(handed, gave_up ? 0 : consumed) << "seed " << seed;
    if (!gave_up) {
      EXPECT_EQ(consumed, steps_prep - skip()) << "seed " << seed;
      for (int r = 0; r < consumed; ++r) EXPECT_GE(marked[r], 0) << "step " << r << " never handed over, seed " << seed;
    }
    EXPECT_EQ(computed_after_mark, 0) << "seed " << seed;
    if (refused) {
      EXPECT_EQ(arrivals, 0) << "a refused piece's candidates never reach the decision, seed " << seed;
      EXPECT_EQ(consumed, 0) << "seed " << seed;
    }
    refused_pieces += refused;
    piece0_refused += refused && nc == 0;
    fell_back += gave_up;
    aborted += abort;
    dropped += !gave_up && skip() > 0;
  }
  // The seeds reach every path.
  EXPECT_GT(fell_back, 20);
  EXPECT_GT(aborted, 50);
  EXPECT_GT(dropped, 20);
  if (recheck) {
    EXPECT_GT(marked_late, 20) << "hand-overs marked at the hand-over, not at the chunk's start";
  }
  if (precheck) {
    EXPECT_GT(verdicts, 150);
    EXPECT_GT(refused_pieces, 30);
    EXPECT_GT(left_refused, 100) << "warps leaving at their first chunk";
    EXPECT_GT(piece0_refused, 5) << "piece 0 refused (it learns it from the verdict alone)";
  }
}

TEST(SinglePassRing, BoundedPiecesDropStopAndDrainInStep) { bounded_pieces_ring(false); }
TEST(SinglePassRing, BoundedPiecesDropStopAndDrainWithAbortReadAtHandOver) { bounded_pieces_ring(true); }
TEST(SinglePassRing, BoundedPiecesRefusedByThePrecheckHandNothingOver) { bounded_pieces_ring(false, true); }

}  // namespace
}  // namespace kda::test
