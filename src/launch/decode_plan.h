// How kda_decode lays out its one kernel (src/kernels/sm90/decode_kernel.cuh): the thread
// configuration and the value-row slices per (sequence, value head). Host code only (no CUDA), so
// the choice is unit-tested on the CPU (tests/test_decode_cpu.cpp).
//
// A configuration: lanes per state row (8 or 16; each lane holds 128/lanes key columns), rows
// per thread, threads per CTA, and where the state goes: registers (decode_kernel.cuh, every load
// of a thread issued at once) or a shared-memory slice filled by one bulk copy
// (decode_bulk_kernel.cuh; "rows per thread" are then passes over the slice, one row at a time).
// rows per CTA = threads / lanes x rows per thread; each (sequence, head) is served by
// 128 / rows-per-CTA CTAs (slices). Every configuration gives bitwise-identical results.
#pragma once

#include <cstdint>

#include "flash_kda/flash_kda.h"

namespace kda::sm90 {

struct DecodeConfig {
  int lanes;            // lanes per state row
  int rows_per_thread;  // registers: rows a thread holds (all loads issued at once); bulk: passes
  int threads;          // per CTA
  bool bulk;            // state slice in shared memory by one bulk copy (else in registers)
  constexpr int rows_per_cta() const { return threads / lanes * rows_per_thread; }
  constexpr int slices() const { return 128 / rows_per_cta(); }
};

// Configuration c (1..KDA_DECODE_NUM_KERNEL_CONFIGS) is kDecodeConfigs[c - 1].
inline constexpr DecodeConfig kDecodeConfigs[KDA_DECODE_NUM_KERNEL_CONFIGS] = {
    {16, 1, 128, false},  // 1:  8 rows per CTA, 16 CTAs per head: latency (few heads), 8 values per lane
    {8, 1, 256, false},   // 2: 32 rows per CTA,  4 CTAs per head
    {8, 2, 256, false},   // 3: 64 rows per CTA,  2 CTAs per head, 8 loads in flight per thread
    {8, 4, 128, true},    // 4: 64 rows per CTA,  2 CTAs per head, the 32 KB slice (fp32) in one bulk copy
    {8, 8, 128, true},    // 5: 128 rows per CTA, 1 CTA per head: the whole state (32 KB bf16, 64 KB fp32)
    {8, 4, 64, true},     // 6: 32 rows per CTA, 4 CTAs per head, 2 warps: decode's split of configuration 4
    {8, 8, 64, true},     // 7: 64 rows per CTA, 2 CTAs per head, 2 warps: decode's split of configuration 5
};

// The automatic choice considers configurations 1..4 for fp32 pools and 1..5 for bf16 pools
// (measured on the H200, docs/performance_notes.md: a whole bf16 state per CTA, 32 KB in one bulk
// copy, streams the pool 10-13% faster than two 16 KB halves; for fp32 the 64 KB CTA is no faster).
// Decode (one token per sequence) takes the 64-thread split of the chosen bulk configuration
// (configuration 4 -> 6 and 5 -> 7: half the rows per CTA, twice the CTAs) only while the unsplit grid
// has fewer than kDecodeSplitBelowCtasPerSm CTAs per SM (B32 H8: 512 CTAs on 132 SMs). Since the
// L2 prefetch before griddepcontrol.wait, larger grids run 0.4-1% faster unsplit (2026-12-01 06:33
// UTC: B256 H8 72.5 against 73.2 us, B1024 H12 bf16 219.5 against 221.8 us), B32 H8 0.8% slower.
inline constexpr int kDecodeAutoConfigsF32 = 4;
inline constexpr int kDecodeAutoConfigsBf16 = 5;
inline constexpr int kDecodeSplitBelowCtasPerSm = 4;

// The automatic choice asks for at least this many CTAs per SM before it takes a configuration
// with more rows per CTA.
inline constexpr int kDecodeMinCtasPerSm = 2;

struct DecodePlan {
  int config = 1;    // 1..KDA_DECODE_NUM_KERNEL_CONFIGS
  int slices = 16;   // CTAs per (sequence, value head)
  int64_t ctas = 0;  // grid size: units x slices
};

// units = sequences x value heads; sms = streaming multiprocessors; forced_config: 0 = automatic
// (the highest-numbered configuration of 1..kDecodeAutoConfigs* for the pool's dtype, i.e. the fewest
// and longest-lived CTAs, that still gives >= kDecodeMinCtasPerSm CTAs per SM; configuration 1 when
// none does; with single_token (every prepared block is one token: decode) and fewer than
// kDecodeSplitBelowCtasPerSm CTAs per SM, bulk configurations 4 and 5 become 6 and 7), else that
// configuration.
DecodePlan plan_decode(int64_t units, int sms, int forced_config, bool pool_f32, bool single_token);

}  // namespace kda::sm90
