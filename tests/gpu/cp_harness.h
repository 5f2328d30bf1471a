// GPU harness for context parallelism across GPUs (docs/design.md §3.4), on one GPU: a problem
// split along tokens into R shards and run through the building blocks as the driver
// (flash_kda.distributed) runs them on R ranks, minus the communication: per shard
// kda_segment_transition into one stacked buffer (what the all-gather produces), then
// kda_combine_transitions and kda_fwd_prepared from the combined start states. Also the
// transitions of one problem against the float64 reference.
#pragma once

#include <cstdint>
#include <vector>

#include "flash_kda/flash_kda.h"

namespace kda::test {

struct ShardedOptions {
  int32_t method = KDA_CONTEXT_AUTO;  // context_method of every shard
  int32_t split = 0;                  // context_split of every shard
  bool graph = false;                 // capture every call in one CUDA graph, replay twice
  int repeats = 1;                    // eager runs (graph: ignored)
  // kda_fwd_prepared updates its state in place (final_state is initial_state) where the shard
  // has a final state: every packed shard, and the last shard of a fixed batch with 2 or more shards
  // (its start state S(R-1), fp32); the result is then copied where it belongs. Needs an fp32
  // final state.
  bool in_place = false;
};

// Runs host params (fixed batch: every row split at `cuts`; packed: the packed tokens split at
// `cuts`; cuts strictly increasing from 0 to T or T_total) sharded, writing the host params' out
// and final state. Packed batches need an fp32 final state (or none).
kda_status run_sharded(const kda_fwd_params& host, const std::vector<int64_t>& cuts, const ShardedOptions& options);

// (D, M) of the last `num_transitions` sequences of host params on the GPU ([N_t][HV][128][128]
// each, public convention), through kda_segment_transition with the params' context options.
kda_status gpu_transitions(const kda_fwd_params& host, int64_t num_transitions, std::vector<float>* D,
                           std::vector<float>* M);

}  // namespace kda::test
