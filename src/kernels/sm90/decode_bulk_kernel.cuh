// decode_bulk_kernel: the decode / verify step of decode_kernel.cuh with the CTA's state slice
// brought into shared memory by one bulk copy (the copy engine, cp.async.bulk): the slice's rows are
// contiguous in the pool (kRowsPerCta x 512 bytes for fp32), so a single instruction puts the whole
// slice in flight without holding registers, and several CTAs per SM keep ~150 KB of loads in
// flight. Same arithmetic (token_step), same results as decode_kernel, bit for bit.
//
// Grid:   1-D, N·HV·kSlices CTAs as decode_kernel (kRowsPerCta = kThreads/kLanes x kPasses rows).
// Block:  kThreads threads; pass r handles rows r·kRowsPerPass + warp·kGroups + group of the slice,
//         one row per thread at a time, loaded from shared memory into registers.
// Steps:  0. the last warp's lane 0, before griddepcontrol.wait: an L2 prefetch of the slice the indices name
//            at that moment (guess_start_slot; the copy in step 2 then usually hits L2)
//         1. start slot and sequence as decode_kernel (padding: zeros out, exit)
//         2. thread 0: one mbarrier and one bulk copy per pass (its rows are contiguous)
//         3. the warps prepare the tokens (one block of up to tok_cap tokens), barrier
//         4'. each pass waits for its own copy (reads of later passes overlap the earlier passes'
//            arithmetic and stores)
//         4. per pass: the row from shared memory, every token (token_step; out; [N, T_idx]
//            indices: the row to slot idx[n, t]), then the row to the start slot ([N] indices).
//            Sequences longer than tok_cap re-prepare each block of tokens inside every pass.
// Shared: dynamic: the slice (kRowsPerCta x 128 values of the pool's dtype), decode_vector_bytes
//         (tok_cap), one mbarrier per pass.
#pragma once

#include <cstdint>
#include <type_traits>

#include "src/kernels/sm90/decode_common.cuh"
#include "src/ptx/barrier.cuh"
#include "src/ptx/bulk_copy.cuh"
#include "src/ptx/grid_dependency.cuh"

// Minimum resident CTAs per SM the register allocation must allow (__launch_bounds__): 1 leaves
// ptxas free (~105 registers: 4 CTAs of 128 threads per SM); 5 caps it at 96 registers (a few
// spilled words) so that 5 CTAs (5 x 34 KB of shared memory) fit.
#ifndef FLASH_KDA_DECODE_BULK_MIN_BLOCKS
#define FLASH_KDA_DECODE_BULK_MIN_BLOCKS 1
#endif

// L2 prefetch of the state slice before griddepcontrol.wait (1) or none (0).
#ifndef FLASH_KDA_DECODE_L2_PREFETCH
#define FLASH_KDA_DECODE_L2_PREFETCH 1
#endif

namespace kda::sm90 {

inline constexpr bool kL2Prefetch = FLASH_KDA_DECODE_L2_PREFETCH != 0;

template <int kLanes, int kPasses, int kThreads, bool kF32>
struct DecodeBulkLayout {
  using Elem = typename std::conditional<kF32, float, uint16_t>::type;
  static constexpr int kGroups = 32 / kLanes;
  static constexpr int kRowsPerPass = kThreads / kLanes;
  static constexpr int kRowsPerCta = kRowsPerPass * kPasses;
  static_assert(128 % kRowsPerCta == 0, "slices of the 128 value rows");
  static constexpr int kSlices = 128 / kRowsPerCta;
  static constexpr int kSliceBytes = kRowsPerCta * 128 * static_cast<int>(sizeof(Elem));
  static constexpr int kPassBytes = kSliceBytes / kPasses;  // one bulk copy per pass (contiguous rows)
  static_assert(kPassBytes % 16 == 0, "bulk copies move multiples of 16 bytes");
  // Dynamic shared memory: slice, vectors of tok_cap tokens, one mbarrier per pass.
  __host__ __device__ static constexpr int bytes(int tok_cap) {
    return kSliceBytes + decode_vector_bytes(tok_cap) + 8 * kPasses + 8;
  }
};

template <int kLanes, int kPasses, int kThreads, bool kF32, GateKind kGate>
__global__ void __launch_bounds__(kThreads, FLASH_KDA_DECODE_BULK_MIN_BLOCKS)
    decode_bulk_kernel(const __grid_constant__ DecodeParams p) {
  using namespace decode_detail;
  using L = DecodeBulkLayout<kLanes, kPasses, kThreads, kF32>;
  using Elem = typename L::Elem;
  using Cols = DecodeCols<kLanes, kF32>;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  Elem* slice_rows = reinterpret_cast<Elem*>(smem_raw);
  const DecodeVectors sm = DecodeVectors::carve(smem_raw + L::kSliceBytes, p.tok_cap);
  uint64_t* bar = reinterpret_cast<uint64_t*>(smem_raw + L::kSliceBytes + decode_vector_bytes(p.tok_cap));

  ptx::launch_dependents();
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int li = lane % kLanes, group = lane / kLanes;
  const int64_t unit = blockIdx.x / L::kSlices;
  const int slice = static_cast<int>(blockIdx.x % L::kSlices);
  const int n = static_cast<int>(unit / p.HV), hv = static_cast<int>(unit % p.HV);
  const int row0 = slice * L::kRowsPerCta;

  // While the previous grid may still run: an L2 prefetch of the slice the index names now, so
  // that the copy after the wait finds it in L2 (a stale guess only costs bandwidth). By the last
  // warp: thread 0's own path to the copy (wait, index, copy) gains no load.
  if (kL2Prefetch && tid == kThreads - 32) {
    const int64_t guess = guess_start_slot(p, n);
    if (guess >= 0 && guess < p.slots) ptx::bulk_prefetch_l2(pool_row<kF32>(p, guess, hv, row0), L::kSliceBytes);
  }
  ptx::wait_primary();
  const SequenceSpan span = sequence_span(p.seq, n);
  const int64_t start = slot_at(p, n, read_column(p, n));
  // The first block's raw token inputs, loaded before anything waits on the slot index.
  const bool early = warp < min(span.len, p.tok_cap);
  TokenRaw first{};
  if (early) first = load_token<kGate>(p, span, warp, hv, lane);
  const int64_t out_base = span.batch * p.out_st.b + static_cast<int64_t>(span.t0) * p.out_st.t + hv * p.out_st.h;
  if (start < 0 || start >= p.slots) {  // padding: zero output rows, no state access
    zero_outputs(p, out_base, span.len, row0, L::kRowsPerCta, tid, kThreads);
    return;
  }
  if (span.len == 0) return;

  if (tid == 0) {
    // One copy and one barrier per pass, so that pass 0 computes (and stores) while the later
    // passes' rows are still arriving: reads and writes of the pool overlap within the CTA.
#pragma unroll
    for (int r = 0; r < kPasses; ++r) ptx::mbar_init(&bar[r], 1);
    ptx::fence_barrier_init();
#pragma unroll
    for (int r = 0; r < kPasses; ++r) {
      ptx::mbar_arrive_expect_tx(&bar[r], L::kPassBytes);
      ptx::bulk_copy_g2s(slice_rows + r * L::kRowsPerPass * 128,
                         pool_row<kF32>(p, start, hv, row0 + r * L::kRowsPerPass), L::kPassBytes, &bar[r]);
    }
  }
  const bool one_block = span.len <= p.tok_cap;
  if (one_block) prepare_block<kGate, kF32>(p, sm, span, 0, span.len, n, hv, warp, kThreads / 32, lane, first, early);
  __syncthreads();  // the vectors and the barriers' initialisation

  for (int pass = 0; pass < kPasses; ++pass) {
    ptx::mbar_wait(&bar[pass], 0);
    const int local = pass * L::kRowsPerPass + warp * L::kGroups + group;
    const int rows[1] = {row0 + local};
    float s[1][Cols::kElems];
    {
      uint4 raw[Cols::kVecs];
      load_row_raw<kLanes, kF32>(slice_rows + local * 128, li, raw);
      raw_to_float<kLanes, kF32>(raw, s[0]);
    }
    for (int tb = 0; tb < span.len; tb += p.tok_cap) {
      const int block_len = min(p.tok_cap, span.len - tb);
      if (!one_block) {
        __syncthreads();  // every thread is done with the previous block's vectors
        prepare_block<kGate, kF32>(p, sm, span, tb, block_len, n, hv, warp, kThreads / 32, lane, first, false);
        __syncthreads();
      }
      for (int w = 0; w < block_len; ++w) {
        float o[1];
        token_step<kLanes, 1, kF32>(s, sm, w, li, rows, o);
        if (li == 0) p.out[out_base + static_cast<int64_t>(tb + w) * p.out_st.t + rows[0]] = to_bf16_bits(o[0]);
        if (p.indices_2d) {
          const int64_t ws = sm.wslot[w];
          if (ws >= 0) store_row<kLanes, kF32>(pool_row<kF32>(p, ws, hv, rows[0]), li, s[0]);
        }
      }
    }
    if (!p.indices_2d) store_row<kLanes, kF32>(pool_row<kF32>(p, start, hv, rows[0]), li, s[0]);
  }
}

}  // namespace kda::sm90
