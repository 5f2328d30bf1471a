// decode_kernel: decode (T = 1) and speculative verify (T = 1 + S) over an indexed state pool
// (docs/design.md §5), state rows in registers. Per token, for every value row s of the state
// [V, K] (128 fp32 over K):
//     s ← s ⊙ d;   u = b (v_row − s·k̂);   s ← s + u k̂;   o_row = s·(scale q̂)
// with d = e^a per key column: rows are independent, so they are spread over threads.
//
// Grid:   1-D, N·HV·kSlices CTAs: CTA x serves (sequence n, value head hv) = unit x / kSlices and
//         the slice x % kSlices of kRowsPerCta consecutive value rows.
// Block:  kThreads threads, no warp roles. Row groups of kLanes lanes (decode_common.cuh); a
//         thread owns kRows rows: row = slice·kRowsPerCta + r·kRowsPerPass + warp·kGroups + group.
// Steps:  1. start slot (state_indices[n], or [n, num_accepted_tokens[n] − 1] clamped) and the
//            sequence's tokens (cu_seqlens, clamped); an invalid slot (< 0 or >= slots): zeros to
//            the slice's output rows and exit, no state access
//         2. every state load of the thread, issued at once (16-byte, coalesced)
//         3. per block of tok_cap tokens: the warps prepare them (prepare_token), barrier,
//            then each row steps through the block's tokens (token_step: two dot products reduced
//            over the row group with shuffles); o to out; with [N, T_idx] indices the rows are
//            stored to slot idx[n, t] after token t (none where that slot is invalid)
//         4. with [N] indices (or none), the rows are stored back to the start slot.
// Shared: dynamic, decode_vector_bytes(tok_cap): the prepared vectors (2 KB per token).
// Registers: kRows x 128/kLanes state values per thread (all loads in flight at once).
#pragma once

#include <cstdint>

#include "src/kernels/sm90/decode_common.cuh"
#include "src/ptx/grid_dependency.cuh"

// Minimum resident CTAs per SM the register allocation must allow (__launch_bounds__): 2 keeps the
// 256-thread configurations within 128 registers (106-128, no spills: 2 CTAs per SM); the
// 128-thread configuration 1 is not constrained by it (96-128 registers).
#ifndef FLASH_KDA_DECODE_MIN_BLOCKS
#define FLASH_KDA_DECODE_MIN_BLOCKS 2
#endif

namespace kda::sm90 {

template <int kLanes, int kRows, int kThreads>
struct DecodeTile {
  static constexpr int kGroups = 32 / kLanes;  // row groups per warp
  static constexpr int kRowsPerPass = kThreads / kLanes;
  static constexpr int kRowsPerCta = kRowsPerPass * kRows;
  static_assert(128 % kRowsPerCta == 0, "slices of the 128 value rows");
  static constexpr int kSlices = 128 / kRowsPerCta;
};

template <int kLanes, int kRows, int kThreads, bool kF32, GateKind kGate>
__global__ void __launch_bounds__(kThreads, FLASH_KDA_DECODE_MIN_BLOCKS)
    decode_kernel(const __grid_constant__ DecodeParams p) {
  using namespace decode_detail;
  using Tile = DecodeTile<kLanes, kRows, kThreads>;
  using Cols = DecodeCols<kLanes, kF32>;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const DecodeVectors sm = DecodeVectors::carve(smem_raw, p.tok_cap);

  ptx::launch_dependents();  // the next kernel of the stream may start its prologue
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int li = lane % kLanes, group = lane / kLanes;
  const int64_t unit = blockIdx.x / Tile::kSlices;
  const int slice = static_cast<int>(blockIdx.x % Tile::kSlices);
  const int n = static_cast<int>(unit / p.HV), hv = static_cast<int>(unit % p.HV);
  int rows[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
    rows[r] = slice * Tile::kRowsPerCta + r * Tile::kRowsPerPass + warp * Tile::kGroups + group;

  ptx::wait_primary();  // everything below may read what the previous kernel wrote
  const SequenceSpan span = sequence_span(p.seq, n);
  const int64_t start = slot_at(p, n, read_column(p, n));
  // The first block's raw token inputs, loaded before anything waits on the slot index (the small,
  // latency-bound grids: 16-lane rows; elsewhere it costs more registers than it saves).
  const bool early = kLanes == 16 && warp < min(span.len, p.tok_cap);
  TokenRaw first{};
  if (early) first = load_token<kGate>(p, span, warp, hv, lane);
  const int64_t out_base = span.batch * p.out_st.b + static_cast<int64_t>(span.t0) * p.out_st.t + hv * p.out_st.h;
  if (start < 0 || start >= p.slots) {  // padding: zero output rows, no state access
    zero_outputs(p, out_base, span.len, slice * Tile::kRowsPerCta, Tile::kRowsPerCta, tid, kThreads);
    return;
  }
  if (span.len == 0) return;

  uint4 raw[kRows][Cols::kVecs];
#pragma unroll
  for (int r = 0; r < kRows; ++r) load_row_raw<kLanes, kF32>(pool_row<kF32>(p, start, hv, rows[r]), li, raw[r]);

  float s[kRows][Cols::kElems];
  for (int tb = 0; tb < span.len; tb += p.tok_cap) {
    const int block_len = min(p.tok_cap, span.len - tb);
    if (tb > 0) __syncthreads();  // the previous block's vectors are no longer read
    prepare_block<kGate, kF32>(p, sm, span, tb, block_len, n, hv, warp, kThreads / 32, lane, first, tb == 0 && early);
    __syncthreads();
    if (tb == 0) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) raw_to_float<kLanes, kF32>(raw[r], s[r]);  // first use of the loads
    }
    for (int w = 0; w < block_len; ++w) {
      float o[kRows];
      token_step<kLanes, kRows, kF32>(s, sm, w, li, rows, o);
      const int64_t out_tok = out_base + static_cast<int64_t>(tb + w) * p.out_st.t;
      if (li == 0) {
#pragma unroll
        for (int r = 0; r < kRows; ++r) p.out[out_tok + rows[r]] = to_bf16_bits(o[r]);
      }
      if (p.indices_2d) {
        const int64_t ws = sm.wslot[w];
        if (ws >= 0) {
#pragma unroll
          for (int r = 0; r < kRows; ++r) store_row<kLanes, kF32>(pool_row<kF32>(p, ws, hv, rows[r]), li, s[r]);
        }
      }
    }
  }
  if (!p.indices_2d) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) store_row<kLanes, kF32>(pool_row<kF32>(p, start, hv, rows[r]), li, s[r]);
  }
}

}  // namespace kda::sm90
