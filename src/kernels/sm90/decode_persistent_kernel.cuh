// decode_persistent_kernel: the decode / verify step of decode_bulk_kernel.cuh on a persistent grid
// (a few CTAs per SM) that loops over work items (sequence, value head, slice of kRowsPerItem value
// rows) with two shared-memory slice buffers: the NEXT item's slice is bulk-copied into one buffer
// while the current item is stepped from the other and stored, so every CTA keeps a copy in flight
// between items (no launch, index-load and first-byte latency per item) and the grid has no wave
// tail of whole CTAs. Same arithmetic (token_step), same results as decode_kernel, bit for bit.
//
// Grid:   1-D, min(N·HV·kSlices, SMs x CTAs per SM) CTAs (decode_plan.h); CTA b serves items
//         b, b + grid, b + 2·grid, ... (a fixed assignment: deterministic). Item i: unit i / kSlices
//         (sequence n, value head hv as decode_kernel), slice i % kSlices.
// Block:  kThreads threads; pass r of an item handles rows r·kRowsPerPass + warp·kGroups + group of
//         its slice, one row per thread at a time (as decode_bulk_kernel).
// Steps:  per item, with `cur` resolved (slot, tokens), its copy issued and its first token block
//         prepared one item earlier (the first item: in the prologue):
//         1. resolve the next item; thread 0 issues its copy into the other buffer (one bulk copy
//            and mbarrier per pass)
//         2. padding (slot < 0 or >= slots): zeros to the item's output rows; else per pass: wait
//            for the pass's copy, step every token (token_step; out; [N, T_idx] indices: the row to
//            slot idx[n, t]), the row to the start slot ([N] indices). Sequences longer than
//            tok_cap prepare each block of tokens inside every pass.
//         3. barrier (the buffer and the vectors are free); the warps prepare the next item's first
//            token block (its input loads overlap its copy in flight); barrier
// Shared: dynamic: two slices (kRowsPerItem x 128 values of the pool's dtype each),
//         decode_vector_bytes(tok_cap), one mbarrier per pass and buffer.
#pragma once

#include <cstdint>
#include <type_traits>

#include "src/kernels/sm90/decode_common.cuh"
#include "src/ptx/barrier.cuh"
#include "src/ptx/bulk_copy.cuh"
#include "src/ptx/grid_dependency.cuh"

namespace kda::sm90 {

template <int kLanes, int kPasses, int kThreads, bool kF32>
struct DecodePersistentLayout {
  using Elem = typename std::conditional<kF32, float, uint16_t>::type;
  static constexpr int kGroups = 32 / kLanes;
  static constexpr int kRowsPerPass = kThreads / kLanes;
  static constexpr int kRowsPerItem = kRowsPerPass * kPasses;
  static_assert(128 % kRowsPerItem == 0, "slices of the 128 value rows");
  static constexpr int kSlices = 128 / kRowsPerItem;
  static constexpr int kItemElems = kRowsPerItem * 128;
  static constexpr int kItemBytes = kItemElems * static_cast<int>(sizeof(Elem));
  static constexpr int kPassBytes = kItemBytes / kPasses;  // one bulk copy per pass (contiguous rows)
  static_assert(kPassBytes % 16 == 0, "bulk copies move multiples of 16 bytes");
  // Dynamic shared memory: two slices, vectors of tok_cap tokens, 2 x kPasses mbarriers.
  __host__ __device__ static constexpr int bytes(int tok_cap) {
    return 2 * kItemBytes + decode_vector_bytes(tok_cap) + 2 * 8 * kPasses;
  }
};

namespace decode_detail {

// A work item resolved: its unit, first row, tokens and start slot.
struct DecodeItem {
  int n, hv, row0;
  int64_t start;
  SequenceSpan span;
  bool padding;  // start slot < 0 or >= slots: zero outputs, no state access
  bool live;     // state read, stepped and written (not padding, at least one token)
};

template <int kSlices, int kRowsPerItem>
__device__ __forceinline__ DecodeItem resolve_item(const DecodeParams& p, int64_t item) {
  DecodeItem it;
  const int64_t unit = item / kSlices;
  it.n = static_cast<int>(unit / p.HV);
  it.hv = static_cast<int>(unit % p.HV);
  it.row0 = static_cast<int>(item % kSlices) * kRowsPerItem;
  it.span = sequence_span(p.seq, it.n);
  it.start = slot_at(p, it.n, read_column(p, it.n));
  it.padding = it.start < 0 || it.start >= p.slots;
  it.live = !it.padding && it.span.len > 0;
  return it;
}

}  // namespace decode_detail

template <int kLanes, int kPasses, int kThreads, int kCtasPerSm, bool kF32, GateKind kGate>
__global__ void __launch_bounds__(kThreads, kCtasPerSm)
    decode_persistent_kernel(const __grid_constant__ DecodeParams p) {
  using namespace decode_detail;
  using L = DecodePersistentLayout<kLanes, kPasses, kThreads, kF32>;
  using Elem = typename L::Elem;
  using Cols = DecodeCols<kLanes, kF32>;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  Elem* bufs = reinterpret_cast<Elem*>(smem_raw);
  const DecodeVectors sm = DecodeVectors::carve(smem_raw + 2 * L::kItemBytes, p.tok_cap);
  uint64_t* bar = reinterpret_cast<uint64_t*>(smem_raw + 2 * L::kItemBytes + decode_vector_bytes(p.tok_cap));

  ptx::launch_dependents();
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int li = lane % kLanes, group = lane / kLanes;
  const int64_t items = static_cast<int64_t>(p.seq.N) * p.HV * L::kSlices;
  int64_t item = blockIdx.x;
  if (item >= items) return;
  if (tid == 0) {
#pragma unroll
    for (int b = 0; b < 2 * kPasses; ++b) ptx::mbar_init(&bar[b], 1);
    ptx::fence_barrier_init();
  }
  __syncthreads();  // the barriers' initialisation (before any wait on them)

  // Thread 0: the item's slice into buffer `stage`, one bulk copy per pass.
  auto issue = [&](const DecodeItem& it, int stage) {
    if (tid == 0 && it.live) {
      ptx::fence_proxy_async_shared();  // the buffer's earlier generic reads before the copy's writes
#pragma unroll
      for (int r = 0; r < kPasses; ++r) {
        ptx::mbar_arrive_expect_tx(&bar[stage * kPasses + r], L::kPassBytes);
        ptx::bulk_copy_g2s(bufs + stage * L::kItemElems + r * L::kRowsPerPass * 128,
                           pool_row<kF32>(p, it.start, it.hv, it.row0 + r * L::kRowsPerPass), L::kPassBytes,
                           &bar[stage * kPasses + r]);
      }
    }
  };

  ptx::wait_primary();  // everything below may read what the previous kernel wrote
  DecodeItem cur = resolve_item<L::kSlices, L::kRowsPerItem>(p, item);
  issue(cur, 0);
  if (cur.live && cur.span.len <= p.tok_cap)
    prepare_block<kGate, kF32>(p, sm, cur.span, 0, cur.span.len, cur.n, cur.hv, warp, kThreads / 32, lane,
                               TokenRaw{}, false);
  __syncthreads();  // the vectors
  uint32_t phase = 0;  // bit b: parity of the next completion of buffer b's barriers

  for (int stage = 0;; stage ^= 1) {
    // 1. the next item's slice in flight while this one is stepped (the other buffer was released
    //    by the barrier that ended the previous item)
    const int64_t next = item + gridDim.x;
    const bool has_next = next < items;
    DecodeItem nxt{};
    if (has_next) {
      nxt = resolve_item<L::kSlices, L::kRowsPerItem>(p, next);
      issue(nxt, stage ^ 1);
    }
    // 2. padding: zero outputs; else step and store, pass by pass as the copies land
    const int64_t out_base =
        cur.span.batch * p.out_st.b + static_cast<int64_t>(cur.span.t0) * p.out_st.t + cur.hv * p.out_st.h;
    if (cur.padding) zero_outputs(p, out_base, cur.span.len, cur.row0, L::kRowsPerItem, tid, kThreads);
    if (cur.live) {
      const bool one_block = cur.span.len <= p.tok_cap;
      const Elem* slice_rows = bufs + stage * L::kItemElems;
      const uint32_t parity = (phase >> stage) & 1u;
      for (int pass = 0; pass < kPasses; ++pass) {
        ptx::mbar_wait(&bar[stage * kPasses + pass], parity);
        const int local = pass * L::kRowsPerPass + warp * L::kGroups + group;
        const int rows[1] = {cur.row0 + local};
        float s[1][Cols::kElems];
        {
          uint4 raw[Cols::kVecs];
          load_row_raw<kLanes, kF32>(slice_rows + local * 128, li, raw);
          raw_to_float<kLanes, kF32>(raw, s[0]);
        }
        for (int tb = 0; tb < cur.span.len; tb += p.tok_cap) {
          const int block_len = min(p.tok_cap, cur.span.len - tb);
          if (!one_block) {
            __syncthreads();  // every thread is done with the previous block's vectors
            prepare_block<kGate, kF32>(p, sm, cur.span, tb, block_len, cur.n, cur.hv, warp, kThreads / 32, lane,
                                       TokenRaw{}, false);
            __syncthreads();
          }
          for (int w = 0; w < block_len; ++w) {
            float o[1];
            token_step<kLanes, 1, kF32>(s, sm, w, li, rows, o);
            if (li == 0) p.out[out_base + static_cast<int64_t>(tb + w) * p.out_st.t + rows[0]] = to_bf16_bits(o[0]);
            if (p.indices_2d) {
              const int64_t ws = sm.wslot[w];
              if (ws >= 0) store_row<kLanes, kF32>(pool_row<kF32>(p, ws, cur.hv, rows[0]), li, s[0]);
            }
          }
        }
        if (!p.indices_2d) store_row<kLanes, kF32>(pool_row<kF32>(p, cur.start, cur.hv, rows[0]), li, s[0]);
      }
      phase ^= 1u << stage;
    }
    if (!has_next) break;
    // 3. the next item's first token block (its input loads overlap its copy in flight)
    __syncthreads();  // every thread is done with buffer `stage` and the vectors
    if (nxt.live && nxt.span.len <= p.tok_cap)
      prepare_block<kGate, kF32>(p, sm, nxt.span, 0, nxt.span.len, nxt.n, nxt.hv, warp, kThreads / 32, lane,
                                 TokenRaw{}, false);
    __syncthreads();  // the vectors
    item = next;
    cur = nxt;
  }
}

}  // namespace kda::sm90
