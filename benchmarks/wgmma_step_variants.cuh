// The parts of flash_kda_bench_wgmma_step's kernel (wgmma_step_kernel.cuh) other than the kernel:
// the operand tiles, the `Variant` bits (what the library's chunk_recurrence_wgmma_kernel.cuh adds to
// the bare step, and the alternatives tried against the hand-off's cost), the stage images' globals,
// the wait helpers, the stage and the shared storage. Included by wgmma_step_kernel.cuh only (an
// unnamed namespace).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "src/ptx/barrier.cuh"
#include "src/tile/operand.h"
#include "src/tile/smem_layout.h"
#include "src/tile/swizzle.h"

namespace {

using namespace kda;
using tile::Swizzle;

using WqTile = tile::SwizzledTile<Swizzle::k128B, 32, 128>;  // [Wd; Qp]: N = 32 rows, K = 128 (K-major B)
using VtTile = tile::SwizzledTile<Swizzle::k128B, 16, 64>;   // V chunk: K = 16 tokens x M = 64 rows (MN-major A)
using TpTile = tile::SwizzledTile<Swizzle::k32B, 32, 16>;    // [Tb; P]: N = 32 x K = 16 tokens (K-major B)
using KrTile = tile::SwizzledTile<Swizzle::k128B, 16, 128>;  // Kr: K = 16 tokens x N = 128 (MN-major B)

// What the library's kernel (chunk_recurrence_wgmma_kernel.cuh) adds to the bare step, one bit each
// (`--variants`: each added alone to the bare step, then together, to find what makes the kernel's
// step about twice as slow as this one, docs/performance_notes.md):
enum Variant : int {
  kDecayAfter = 1,   // S·Diag(Γ) after the batch's wait (the kernel's order), not while it runs
  kGammaSmem = 2,    // Γ loaded from the stage in shared memory every step (implies kDecayAfter)
  kRing = 4,         // operands in a ring of kRingStages stages, the step's descriptors from its stage
  kTwoTp = 8,        // [U0 | O0] as two products (Tb and P hi and lo; the lo tile is zeros here)
  kOut = 16,         // O stored every step: stmatrix transpose per warp, 16-byte global stores
  kMbar = 32,        // full / empty mbarrier hand-off with a producer warp that copies nothing (needs kRing)
  kCap = 64,         // the kernel's register cap: __launch_bounds__(384, 1) gives 168 per thread (also with kMbar)
  // The hand-off's parts (with kMbar):
  kNoFence = 128,        // no proxy fence in the consumers
  kWarpArrive = 256,     // one empty arrival per consumer warp (lane 0 after __syncwarp), not per lane
  kNoHint = 512,         // try_wait without the suspend-time hint
  kProducerFence = 1024, // the proxy fence in the producer before its full arrival, none in the consumers
  kSinkArrive = 2048,    // the consumers' arrival without a returned state (mbarrier.arrive _, [bar])
  kEarlyWait = 4096,     // the next stage's full barrier waited for (and fenced) while the update runs
  kGammaEarly = 8192,    // with kEarlyWait and kGammaSmem: the next stage's Γ loaded there too (carried)
  kPairWait = 16384,     // one hand-off per two steps: stages handed over in pairs (the full wait on even
                         // steps, the empty arrival on odd ones)
  kTestWait = 32768,     // the consumers poll with mbarrier.test_wait (non-blocking) instead of try_wait
  kProbe = 65536,        // the next stage's full barrier probed once (test_wait) while the batch runs; the
                         // step waits only when that probe found it incomplete
  kCopies = 131072,      // with kMbar: a producer warpgroup copies each stage from global memory by
                         // cp.async (16-byte pieces, every producer thread arriving), as the kernel's
                         // producer does: g_images holds g_n_images stage images per CTA
  kBulk = 262144,        // with kCopies: the whole stage by one bulk copy (TMA, one thread, completion by
                         // bytes on the full barrier) instead of 16-byte cp.async from 128 threads
  kMixed = 524288,       // with kCopies | kBulk: [Wd; Qp] and Kr (12 KB) by one bulk copy, the rest (values,
                         // Tb / P, Γ: 6.9 KB) by cp.async from the 128 threads (the record's bulk probe of
                         // version 29 left about this much to cp.async)
  kTmaValues = 1048576,  // with kCopies | kBulk: the design for the kernel's producer, one thread per stage:
                         // the record in the stage's layout by two bulk copies (what precedes the values'
                         // tiles, what follows them) and each warpgroup's values by a tensor copy (box of 16
                         // tokens x 64 rows, 128B swizzle: the VtTile) from a [tokens][128] bf16 tensor
  kFourBulk = 2097152,   // with kTmaValues: the values' tiles by bulk copies of the image instead (four bulk
                         // copies per stage: is it the number of copies or the tensor copies?)
  kRelayout = 4194304,   // with kCopies: each stage image by one bulk copy into a staging buffer (two, one
                         // step ahead), then placed by the producer threads with 16-byte shared loads and
                         // stores (as a record in today's layout would have to be): is the cost the
                         // global cp.async or the per-thread shared-memory writes?
};

// kCopies: the stage images each CTA copies from (g_n_images per CTA, cycled), and where CTA 0 dumps
// its filled stage 0 (to build the images) when g_dump is set.
__device__ const uint4* g_images = nullptr;
__device__ int g_n_images = 1;
__device__ uint4* g_dump = nullptr;
// One non-blocking test of a phase (acquire when it succeeds), and a poll made of such tests.
__device__ __forceinline__ bool test_wait_once(uint64_t* bar, uint32_t parity) {
  return cuda::ptx::mbarrier_test_wait_parity(cuda::ptx::sem_acquire, cuda::ptx::scope_cta, bar, parity);
}
__device__ __forceinline__ void test_wait_parity(uint64_t* bar, uint32_t parity) {
  while (!test_wait_once(bar, parity)) {
  }
}

__device__ __forceinline__ void wait_parity(uint64_t* bar, uint32_t parity, bool hint) {
  if (hint) {
    ptx::mbar_wait(bar, parity);
  } else {
    while (!cuda::ptx::mbarrier_try_wait_parity(bar, parity)) {
    }
  }
}
__device__ __forceinline__ void arrive_sink(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(static_cast<uint32_t>(__cvta_generic_to_shared(bar)))
               : "memory");
}
constexpr int kRingStages = 8;

struct Stage {
  tile::TileBuffer<WqTile> wq;
  tile::TileBuffer<KrTile> kr;
  tile::TileBuffer<VtTile> vt[2];  // one per warpgroup (its 64 value rows)
  tile::TileBuffer<TpTile> tp, tp_lo;
  float gamma[128];
};

template <int kV>
struct Storage {
  Stage stage[(kV & kRing) ? kRingStages : 1];
  std::conditional_t<(kV & kRelayout) != 0, Stage[2], uint4[1]> staging;  // kRelayout's bulk-copy targets
  alignas(8) uint64_t staged[2];
  alignas(16) unsigned char out[8][512];  // per consumer warp: its O rows, transposed (kOut)
  alignas(8) uint64_t full[kRingStages];
  uint64_t empty[kRingStages];
};

}  // namespace
