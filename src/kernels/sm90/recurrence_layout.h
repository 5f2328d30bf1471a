// The mma.sync recurrence's block and shared memory (chunk_recurrence_kernel.cuh; its launcher in
// src/launch/fwd_sm90.cu sizes the launch from it). Moved out of the kernel's file unchanged
// (scripts/same_code.py: the kernels' sm_90a code identical).
//
// Shared: kStages (9 to 12, filling ~200 KB) x (record 14848 B + values 16 x (32·kRowGroups + 16) B,
//         rows padded by 16 bytes so ldmatrix is conflict-free), per row group a 16x16 bf16 output
//         tile, the partial-sum exchange (2 parities x warps x 2 KB, when kColSplit > 1), then the
//         barriers.
#pragma once

#include <cstdint>

#include "src/kernels/sm90/chunk_record.cuh"
#include "src/kernels/sm90/kernel_params.h"

namespace kda::sm90 {

template <int kRowGroups, int kColSplit, int kCtasPerSm = 1>
struct RecurrenceLayout {
  static constexpr int kWarps = kRowGroups * kColSplit;       // consumer warps
  static constexpr int kRows = 16 * kRowGroups;                // value rows per CTA
  static constexpr int kTiles = 16 / kColSplit;                // state n-tiles (8 key columns) per warp
  static constexpr int kSteps = 8 / kColSplit;                 // k-steps (16 key columns) per warp
  static constexpr uint32_t kValueRowBytes = kRows * 2 + 16;  // padded
  static constexpr uint32_t kValueOffset = ChunkRecord::kBytes;
  static constexpr uint32_t kStageBytes = ChunkRecord::kBytes + 16 * kValueRowBytes;
  static constexpr uint32_t kExchangeBytes = kColSplit > 1 ? 2u * kWarps * 2048u : 0u;
  // As many stages as fit in ~200 KB per SM (at most 12): a chunk's copies take microseconds to
  // land while a chunk step takes a fraction of one, so the ring must hold many chunks in flight.
  static constexpr uint32_t kStageBudget = 200u * 1024u / kCtasPerSm - kExchangeBytes - kRowGroups * 512u;
  static constexpr int kStages = kStageBudget / kStageBytes < 12 ? static_cast<int>(kStageBudget / kStageBytes) : 12;
  static constexpr uint32_t kOutOffset = kStages * kStageBytes;  // per row group 16x16 bf16
  static constexpr uint32_t kExchangeOffset = kOutOffset + kRowGroups * 512;
  // Kr's low parts for a sequence's last updates (RecurrenceParams::kr_lo; kKrLoSlots, slot 0 the last
  // chunk's), in the layout of the record's Kr.
  static constexpr uint32_t kKrLoOffset = kExchangeOffset + kExchangeBytes;
  static constexpr uint32_t kBarrierOffset = kKrLoOffset + kKrLoSlots * kKrLoBytes;
  static constexpr uint32_t kBytes = kBarrierOffset + 2 * kStages * 8;
  static constexpr int kThreads = 32 * (kWarps + 1);
  static_assert(16 % kColSplit == 0 && kColSplit <= 8, "column split divides the 16 n-tiles into k-step pairs");
  static_assert(kRowGroups <= 15, "one named barrier per row group (ids 1..15)");
  static_assert(kStages >= 3, "at least three stages");
  static_assert(kStageBytes % 16 == 0 && kOutOffset % 16 == 0 && kBarrierOffset % 8 == 0, "alignment");
};

}  // namespace kda::sm90
