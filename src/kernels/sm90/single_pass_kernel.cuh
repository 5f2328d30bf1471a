// single_pass_kernel: the forward pass in one launch and without the chunk record in global memory
// (issue 10; docs/design.md §3.5). One CTA per (sequence, value head), or per (piece, sequence, value
// head) in the kPieces instance (sequence parallelism by the bounded warm-up: the candidates' decay
// bounds decide each piece's warm-up, a unit that needs more falls back after the grid, to the two
// kernels or to this kernel's whole-sequence instance, single_pass_fallback.cuh; or a forced warm-up,
// testing only), or, in the kWalk instance (version 46), one CTA per SM that walks several whole
// sequences' units in turn with the ring running on across them (single_pass_walks, single_pass_layout.h):
//
//   eight preparation warps   warp w prepares chunks w, w + 8, ... (single_pass_prep_role.cuh, over
//                             warp_prep.cuh's RecordTo::kLate):
//                             q, k, g by tensor copies into its own boxes, the chunk's §2.1 quantities
//                             computed there, and only once T and P exist it takes the chunk's ring
//                             stage (waiting for the stage's previous chunk to be consumed), starts the
//                             values' two tensor copies into it and writes the stage's record part
//                             ([Wd; Qp], Kr, [Tb; P] hi / lo, Γ) in the layout wgmma reads (wgmma_stage.h);
//   one consumer warpgroup    both 64-row halves of the state in wgmma accumulators (two Acc<128>),
//                             each chunk's step of chunk_recurrence_wgmma_kernel.cuh on both halves
//                             (step_batch, then S += bf16(U)·Kr), the outputs stored per warp.
//
// The ring: 3 stages (the eight warps' 19 KB each leave room for three), ring step r in stage r % 3
// (r = the chunk's index in the CTA's walk: for bounded pieces, after the dropped candidates),
// handed over on barrier slot r % 24 (full: the preparing warp's 32 lanes plus lane 0's expected
// bytes of the values; empty: the 128 consumer threads), so that a warp waiting for its stage's
// previous chunk is never two phases behind on a barrier. setmaxnreg 136 (preparation) / 232
// (consumers): two consumer warpgroups beside the eight warps would get too few registers for
// ptxas to keep a step's wgmma batch unserialised (its note C7512; docs/performance_notes.md, "The
// preparation taking its stage late").
//
// A sequence's last update, when the call stores final states, carries U and Kr as hi + lo pairs
// (as the two-kernel path's, RecurrenceParams::kr_lo): the warp preparing the last chunk writes Kr's
// low part into `kr_lo` of the shared storage.
//
// Build knobs per instance (the halves' overlap, the register split) and the order in which packed
// sequences of different lengths take the CTAs (longest_first): single_pass_options.cuh.
//
// Limits (the launcher checks them, single_pass_sm90.cu): the bounded gate with g in bf16, q, k, g and
// v that tensor maps describe ([B, T, heads, 128], or [1, B*T, heads, 128] with cu_seqlens). kPartial:
// a sequence may end inside a chunk (T not a multiple of 16, or cu_seqlens): its padding rows masked as
// design.md §2.4 says, its values by cp.async (3-5% slower, so a separate instance).
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

#include "src/kernels/sm90/wgmma_step.cuh"  // step_batch, step_update
#include "src/kernels/sm90/kernel_params.h"
#include "src/kernels/sm90/recurrence_task.cuh"                // store_out_rows
#include "src/kernels/sm90/sequence_map.cuh"
#include "src/kernels/sm90/single_pass_fallback.cuh"
#include "src/kernels/sm90/single_pass_layout.h"
#include "src/kernels/sm90/single_pass_options.cuh"
#include "src/kernels/sm90/single_pass_precheck.cuh"
#include "src/kernels/sm90/warp_prep.cuh"
#include "src/kernels/sm90/single_pass_prep_role.cuh"
#include "src/kernels/sm90/wgmma_stage.h"
#include "src/ptx/barrier.cuh"
#include "src/ptx/cp_async.cuh"
#include "src/ptx/grid_dependency.cuh"
#include "src/ptx/register_budget.h"
#include "src/ptx/tma.cuh"
#include "src/ptx/warpgroup.cuh"
#include "src/ptx/wgmma.cuh"
#include "src/tile/fragments.cuh"
#include "src/tile/operand.h"
#include "src/tile/smem_layout.h"

namespace kda::sm90 {

// kPieces: sequences cut into p.pieces pieces, bounded (p.piece_fail set) or with a forced warm-up
// (testing and measuring only; SinglePassParams::pieces); false: whole sequences (p.pieces = 1), all
// of them or, as the fallback of bounded pieces (p.redo_fail set), those whose pieces fell back.
template <bool kPartial, bool kPieces = false, bool kWalk = false>
__global__ void __launch_bounds__(SinglePassLayout::kThreads, 1)
    single_pass_kernel(const __grid_constant__ SinglePassParams p, const __grid_constant__ CUtensorMap qmap,
                       const __grid_constant__ CUtensorMap kmap, const __grid_constant__ CUtensorMap gmap,
                       const __grid_constant__ CUtensorMap vmap) {
  using Lay = SinglePassLayout;
  using L = Lay::L;
  using S_t = tile::Acc<128>;
  using XO_t = tile::Acc<32>;
  constexpr int kRing = Lay::kRing, kSlots = Lay::kSlots;
  constexpr bool kAltRegs = alt_register_split(kPartial, kPieces, kWalk);  // (setmaxnreg of both roles below)
  extern __shared__ unsigned char smem_raw[];
  Lay::Storage& st = *tile::smem_storage<Lay::Storage>(smem_raw);
  const int unit0 = static_cast<int>(blockIdx.x % static_cast<unsigned>(p.units));  // (piece-major blocks)
  const int piece = static_cast<int>(blockIdx.x / static_cast<unsigned>(p.units));
  int seq = unit0 / p.HV;
  const int hv = unit0 % p.HV;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  // kWalk (whole sequences of a fixed-length batch in whole chunks): a grid smaller than the units walks
  // them in turn, CTA b units b, b + gridDim.x, ... (the launcher gives it one CTA per SM where the units
  // outnumber the SMs and hold 16 to 64 chunks each: single_pass_walks in single_pass_layout.h), the ring's steps running on
  // across units so that the preparation warps start the next unit while the consumers finish this one
  // (docs/design.md §3.5: ~5 us per unit of ring fill and drain otherwise). walk_units: this CTA's.
  static_assert(!kWalk || (!kPieces && !kPartial), "a walk: whole sequences in whole chunks");
  const int walk_units = kWalk ? (p.units - unit0 + static_cast<int>(gridDim.x) - 1) / static_cast<int>(gridDim.x) : 1;
  // The sequence (a batch row, or cu_seqlens' entries clamped to the packed length: never out of
  // bounds, sequence_map.cuh); cu_seqlens is read after the wait below.
  SequenceSpan span;
  // The chunks: the preparation warps prepare [c_first, c_end) (steps of them); the consumers walk
  // [c_first + skip, c_end), from the initial state when that is chunk 0 (else from zero), with outputs
  // from c_out on, the final state when `fin`. Pieces: c_out = c0 is the piece's first chunk and the
  // nc chunks before it are warm-up candidates; forced, the warm-up is all of them (skip = 0); bounded
  // (`bounded`), the preparation records their decay bounds in st.wbound, and once those have arrived
  // on st.decide every role decides the same warm-up w from them (warmup_chunks): skip = nc - w, or no
  // warm-up within the cap suffices and the piece falls back (piece_fail) with nothing computed.
  int c_first = 0, c_out = 0, steps = 0, nc = 0;
  bool fin = true;
  const bool bounded = kPieces && p.forced_warmup == 0;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kSlots; ++s) {
      ptx::mbar_init(&st.full[s], 33);   // the preparing warp's lanes, and lane 0's expected value bytes
      ptx::mbar_init(&st.empty[s], 128);  // every consumer thread
    }
    ptx::fence_barrier_init();
  }
  if (warp < Lay::kPrepWarps && lane == 0) {
    ptx::mbar_init(&st.prep[warp].bar, 1);
    ptx::fence_barrier_init();
  }
  // The four tensor maps into the cache while the previous kernel may still run (parameters, not
  // inputs: no wait needed), by lanes 1-4 of warp 0 beside thread 0's barrier setup.
  if (warp == 0 && lane >= 1 && lane <= 4)
    ptx::prefetch_tensor_map(lane == 1 ? &qmap : lane == 2 ? &kmap : lane == 3 ? &gmap : &vmap);
  // Nothing of the inputs is read before the caller's previous kernel is done (a programmatic
  // dependent launch); a dependent of this kernel waits for all of it in turn.
  ptx::wait_primary();
  ptx::launch_dependents();
  if (!kPieces && p.redo_fail != nullptr) {  // the pieces' whole-sequence fallback: only their failed units
    if (blockIdx.x == 0 && threadIdx.x == 0) *p.redo_epoch += 1;
    if (!single_pass_fell_back(p.redo_fail, p.redo_pieces, p.units, unit0)) return;  // (the same in every thread)
  }
  if (p.pp.seq.cu_seqlens != nullptr && p.pp.seq.N <= kLongestFirstMax) seq = longest_first(p.pp.seq, seq);
  __shared__ int32_t cta_seq;
  if (threadIdx.x == 0) cta_seq = seq;  // (read after the barrier below)
  span = sequence_span(p.pp.seq, seq);
  {
    const int nchunks = (span.len + 15) / 16;
    steps = nchunks;
    if (kPieces) {
      const int per = (nchunks + p.pieces - 1) / p.pieces;
      const int c0 = piece_first_chunk(piece, per, nchunks), c_end = piece_first_chunk(piece + 1, per, nchunks);
      // Piece 0 and empty pieces never fall back: their flag word at once (single_pass_fallback.cuh).
      if (p.piece_fail != nullptr && threadIdx.x == 0) {
        st.abort = 0;
        st.epoch = *p.epoch;  // (this call's: the fallback's first kernel advances it after the grid)
        if (piece == 0 || c0 >= nchunks) ptx::st_relaxed(p.piece_fail + blockIdx.x, piece_word(st.epoch, false));
      }
      if (c0 >= nchunks && piece != 0) return;  // an empty piece (every thread: no barrier met yet)
      c_out = c0;
      nc = piece == 0 ? 0 : min(bounded ? kSinglePassWarmupCap : p.forced_warmup, c0);
      c_first = c0 - nc;
      steps = c_end - c_first;
      fin = c_end == nchunks;
      if (threadIdx.x == 0) {
        st.nc = bounded ? nc : 0;
        st.c0 = c0;
        if (bounded && nc > 0) {
          ptx::mbar_init(&st.decide, nc);  // one arrival per candidate chunk's warp
          ptx::fence_barrier_init();
        }
        if constexpr (kPrecheck) {  // the piece whose candidates the precheck reads: this one, piece 1 for piece 0
          const int cq = piece == 0 ? piece_first_chunk(1, per, nchunks) : c0;
          st.pre_c0 = bounded && cq < nchunks && cq > kSinglePassWarmupCap ? cq : 0;
          if (st.pre_c0 > 0) {
            ptx::mbar_init(&st.pre_bar, 1);  // consumer thread 0, with the verdict
            ptx::fence_barrier_init();
          }
        }
      }
    }
  }
  const bool final_split = kFinalSplit && (!kPieces || fin) && p.final_state != nullptr && steps > 0;
  // Its updates (final_split_chunks: the last chunk, and the one before where the last is short; whole
  // chunks without kPartial), of the steps prepared (the consumers take as many of theirs below).
  const int split_steps = final_split ? min(kPartial ? final_split_chunks(span.len) : 1, steps) : 0;
  if (threadIdx.x < 128) st.dtb[threadIdx.x] = p.pp.dt_bias != nullptr ? p.pp.dt_bias[hv * 128 + threadIdx.x] : 0.0f;
  __syncthreads();

  if (warp < Lay::kPrepWarps) {
    // ---- Preparation warps (single_pass_prep_role.cuh) ---------------------------------------------
    ptx::setmaxnreg_dec<kAltRegs ? Lay::kPrepRegsAlt : Lay::kPrepRegs>();
    const SinglePassWalk walk{span, unit0, hv, c_first, c_out, steps, nc, fin, bounded, split_steps, walk_units};
    single_pass_prepare<kPartial, kPieces, kWalk>(p, st, &qmap, &kmap, &gmap, &vmap, walk, warp, lane);
    return;
  }

  // ---- The consumer warpgroup: value rows 0..63 in S, 64..127 in S2 ----------------------------------
  ptx::setmaxnreg_inc<kAltRegs ? Lay::kConsumerRegsAlt : Lay::kConsumerRegs>();
  const int t = threadIdx.x & 127, wi = t >> 5;
  int c_start = c_first;
  if constexpr (kPieces && kPrecheck) {  // (single_pass_precheck.cuh; st.pre_c0 is 0 but for bounded pieces)
    const int cq = *static_cast<volatile int32_t*>(&st.pre_c0);
    if (cq > 0) {
      const bool fails = precheck_fails(p.pp, span, hv, cq, st.dtb, st.pre_max, t);
      if (t == 0) {
        st.pre_fail = fails;
        ptx::mbar_arrive(&st.pre_bar);  // (release: the verdict, for the preparation warps' wait)
        if (fails) ptx::st_relaxed(p.piece_fail + blockIdx.x, piece_word(st.epoch, true));
      }
      if (fails) return;  // nothing handed over: the preparation warps leave at their first chunk
    }
  }
  if (kPieces) {
    const int skip = bounded && nc > 0 ? decide_warmup(st) : 0;
    const bool ok = skip >= 0;
    if (bounded && nc > 0 && t == 0) ptx::st_relaxed(p.piece_fail + blockIdx.x, piece_word(st.epoch, !ok));
    if (!ok) return;  // (the preparation warps hand nothing over either)
    c_start += skip;  // (>= 0 here)
    steps -= skip;
  }
  // (The unit's index again at the end, from shared memory: live through the chunk loop beside both
  // states it made the consumers spill.)
  auto unit_of = [&] { return static_cast<int64_t>(*static_cast<volatile int32_t*>(&cta_seq)) * p.HV + hv; };
  int walk_k = 0;  // kWalk: the unit of the walk the consumers are on (unit unit0 + walk_k · gridDim.x)
  // kWalk: that unit's batch row and head, for its outputs (updated at each boundary: no division per
  // step), per consumer warp in shared memory and read at each output store: kept in registers through
  // the chunk loop they cost the walk instance a spilled word, stored at the unit's start and reloaded
  // beside the step's wgmma (cuobjdump, 2026-12-03). Lane 0 of each warp updates its pair between __syncwarp()s.
  __shared__ int32_t walk_pos[4][2];
  if constexpr (kWalk) {
    if (lane == 0) walk_pos[wi][0] = seq, walk_pos[wi][1] = hv;
    __syncwarp();
  }
  auto unit_now = [&]() -> int64_t {
    if constexpr (kWalk) return static_cast<int64_t>(unit0) + static_cast<int64_t>(walk_k) * gridDim.x;
    else return unit_of();
  };
  S_t S, S2;
  auto load_state = [&](S_t& Sh, int row0) {
    const int64_t base = (unit_now() * 128 + row0) * 128;
#pragma unroll
    for (int e = 0; e < S_t::kCount; e += 2) {
      const int64_t idx = base + S_t::row(t, e) * 128 + S_t::col(t, e);
      if (p.initial_state == nullptr || (kPieces && c_start > 0)) {  // (a piece after its warm-up: from zero)
        Sh.v[e] = Sh.v[e + 1] = 0.0f;
      } else if (p.initial_is_f32) {
        const float2 x = *reinterpret_cast<const float2*>(static_cast<const float*>(p.initial_state) + idx);
        Sh.v[e] = x.x;
        Sh.v[e + 1] = x.y;
      } else {
        const __nv_bfloat162 x =
            *reinterpret_cast<const __nv_bfloat162*>(static_cast<const __nv_bfloat16*>(p.initial_state) + idx);
        Sh.v[e] = __low2float(x);
        Sh.v[e + 1] = __high2float(x);
      }
    }
  };
  auto store_state = [&](const S_t& Sh, int row0) {
    const int64_t base = (unit_now() * 128 + row0) * 128;
#pragma unroll
    for (int e = 0; e < S_t::kCount; e += 2) {
      const int64_t idx = base + S_t::row(t, e) * 128 + S_t::col(t, e);
      if (p.final_is_f32)
        *reinterpret_cast<float2*>(static_cast<float*>(p.final_state) + idx) = make_float2(Sh.v[e], Sh.v[e + 1]);
      else
        *reinterpret_cast<__nv_bfloat162*>(static_cast<__nv_bfloat16*>(p.final_state) + idx) =
            __floats2bfloat162_rn(Sh.v[e], Sh.v[e + 1]);
    }
  };
  load_state(S, 0);
  load_state(S2, 64);
  // The unit whose outputs the steps store (kWalk: the walk's current one, its batch row and head from
  // walk_pos, advanced at each boundary; a span kept live through the loop made the consumers spill).
  auto out_span = [&]() -> SequenceSpan {
    if constexpr (kWalk) {
      SequenceSpan o;
      o.batch = *static_cast<volatile int32_t*>(&walk_pos[wi][0]);
      o.t0 = 0;
      o.len = p.pp.seq.T;
      o.vbase = 0;
      return o;
    } else {
      return span;
    }
  };
  auto out_hv = [&]() -> int {
    if constexpr (kWalk) return *static_cast<volatile int32_t*>(&walk_pos[wi][1]);
    else return hv;
  };
  RecurrenceParams rp{};  // what store_out_rows reads: the output and its strides
  rp.out = p.out;
  rp.out_st = p.out_st;
  unsigned char* out_tile = st.out[wi];
  auto smem = [](const void* x) { return static_cast<uint32_t>(__cvta_generic_to_shared(x)); };
  // One 64-row half's step on chunk i (stage stg): chunk_recurrence_wgmma_kernel's step; kFinal: one of
  // the last updates, with U and Kr as hi + lo pairs (U_lo·Kr + U·Kr_lo + U·Kr; Kr's low part at lo).
  auto step = [&](S_t& Sh, int half, typename L::Stage& stg, int c, bool out, auto kFinal, const unsigned char* lo) {
    XO_t xo, uo;
    wgmma_recurrence_detail::step_batch<L>(Sh, t, stg, half, uo, xo);
    wgmma_recurrence_detail::step_update<L, decltype(kFinal)::value, false>(Sh, uo, stg, lo);
    if (out) {  // O = O0 + Oin, this warp's 16 rows (not for a piece's warm-up chunks)
      float o[2][4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        o[0][e] = uo.v[8 + e] + xo.v[8 + e];
        o[1][e] = uo.v[12 + e] + xo.v[12 + e];
      }
      store_out_rows(o, out_tile, rp, out_span(), out_hv(), c, kPartial ? min(16, span.len - 16 * c) : 16,
                     64 * half + 16 * wi, lane);
    }
    if (half == 1 || !half0_update_in_flight(kPartial, kPieces, decltype(kFinal)::value)) {
      ptx::wgmma_wait_group<0>();
      S.fence_operand();
      S2.fence_operand();
    }
  };
  // Bounded pieces: at the first stage handed over marked (st.skip; the same shared word for all 128
  // consumer threads) the loop ends, and the rest of the ring is only drained: nothing more is computed
  // or stored (the unit falls back). Returns false there (the stage's full barrier waited for, its
  // empty one not yet arrived on).
  auto chunk = [&](int j, auto kFinal) {  // ring step j: chunk c_start + j
    const int s = j % kRing, slot = j % kSlots, c = kPieces ? c_start + j : j;
    auto& stg = st.stage[s];
    ptx::mbar_wait(&st.full[slot], (j / kSlots) & 1);
    if (bounded && *static_cast<volatile int32_t*>(&st.skip[s]) != 0) return false;
    ptx::fence_proxy_async_shared();  // the stage's record part came through the generic proxy
    const unsigned char* lo = st.kr_lo[kPartial && decltype(kFinal)::value ? steps - 1 - j : 0].bytes;
    step(S, 0, stg, c, !kPieces || c >= c_out, kFinal, lo);
    step(S2, 1, stg, c, !kPieces || c >= c_out, kFinal, lo);
    ptx::mbar_arrive(&st.empty[slot]);
    return true;
  };
  int j = 0;
  if constexpr (kWalk) {
    // Unit after unit: at each boundary the finished unit's final state goes out and the next one's
    // initial state comes in, while the preparation warps are already on the next unit's chunks (the
    // ring's step j runs on; steps >= kSinglePassWalkMinChunks where walk_units > 1: the launcher's rule).
    // Each unit's chunks as in the loop below (its last one apart where final_split), the boundary
    // between units outside the steps' loop.
    auto walk_step = [&](int c, auto kFinal) {  // ring step j: chunk c of the walk's current unit
      auto& stg = st.stage[j % kRing];
      ptx::mbar_wait(&st.full[j % kSlots], (j / kSlots) & 1);
      ptx::fence_proxy_async_shared();  // the stage's record part came through the generic proxy
      step(S, 0, stg, c, true, kFinal, st.kr_lo[0].bytes);  // (whole chunks: the last one's split alone)
      step(S2, 1, stg, c, true, kFinal, st.kr_lo[0].bytes);
      ptx::mbar_arrive(&st.empty[j % kSlots]);
      ++j;
    };
    const int plain = final_split ? steps - 1 : steps;
    for (int k = 0; k < walk_units; ++k) {
      if (k > 0) {
        if (p.final_state != nullptr) {
          store_state(S, 0);
          store_state(S2, 64);
        }
        ++walk_k;
        // The unit gridDim.x further, as its (row, head) pair (once per unit, not per step).
        __syncwarp();  // every lane's reads of the old pair done
        if (lane == 0) {
          int ws = walk_pos[wi][0], wh = walk_pos[wi][1];
          walk_advance_unit(ws, wh, static_cast<int>(gridDim.x), p.HV);
          walk_pos[wi][0] = ws;
          walk_pos[wi][1] = wh;
        }
        __syncwarp();
        load_state(S, 0);
        load_state(S2, 64);
      }
      for (int c = 0; c < plain; ++c) walk_step(c, std::false_type{});
      if (final_split) walk_step(steps - 1, std::true_type{});
    }
  } else {
    const int split = min(split_steps, steps);  // (steps: the consumers' own, after a skip)
    const int plain = steps - split;
    while (j < plain && chunk(j, std::false_type{})) ++j;
    if constexpr (kPartial)  // (whole chunks split the last one alone)
      if (j == plain && split == 2 && chunk(j, std::true_type{})) ++j;
    if (j == steps - 1 && split >= 1 && chunk(j, std::true_type{})) ++j;
  }
  const bool skipped = bounded && j < steps;
  if (skipped) {  // (bounded pieces only) step j's stage came marked: drain the ring
    ptx::mbar_arrive(&st.empty[j % kSlots]);
    for (++j; j < steps; ++j) {  // (bounded pieces: not a walk)
      ptx::mbar_wait(&st.full[j % kSlots], (j / kSlots) & 1);
      ptx::mbar_arrive(&st.empty[j % kSlots]);
    }
  }

  // A piece that stopped because its unit falls back says so itself too (single_pass_fallback.cuh).
  if (bounded && skipped && t == 0) ptx::st_relaxed(p.piece_fail + blockIdx.x, piece_word(st.epoch, true));
  if (p.final_state != nullptr && (!kPieces || fin) && !skipped) {
    store_state(S, 0);
    store_state(S2, 64);
  }
}

}  // namespace kda::sm90
