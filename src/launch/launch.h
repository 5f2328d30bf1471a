// Host interface of the SM90 launchers (src/launch/*.cu). Plain C++: no kernel code, no CUDA headers
// beyond the stream type, so the API layer compiles with the host compiler.
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/core/problem.h"
#include "src/core/status.h"
#include "src/launch/plan.h"

namespace kda::sm90 {

// The recurrence plan (plan.h) of a validated problem on the current device (its SM count): computed
// once per call and passed to the two functions below.
RecurrencePlan fwd_plan(const Problem& problem);

// Device workspace the forward pass needs with `plan`; SIZE_MAX when it does not fit in size_t (the
// API layer reports "sizes too large").
size_t fwd_workspace_bytes(const Problem& problem, const RecurrencePlan& plan);

// Where a kda_fwd workspace of `problem` under `plan` keeps the single pass's epoch word and then its
// pieces' flags ([pieces][N*HV] 64-bit words, single_pass_fallback.cuh), or null when it has none (for
// tests: which pieces ran and which fell back).
const uint64_t* single_pass_flags(const Problem& problem, const RecurrencePlan& plan, const void* workspace);

// Enqueues the forward pass on `stream`. Preconditions: `problem` validated for the device, the
// current device is SM90, `plan` = fwd_plan(problem), `workspace` holds fwd_workspace_bytes(problem,
// plan) bytes, 256-byte aligned.
kda_status fwd(const Problem& problem, const RecurrencePlan& plan, void* workspace, kda_stream_t stream);

// Opt-in content check of cu_seqlens (synchronises `stream`): KDA_OK or an error naming the entry.
// `plan` and `prepared` as for fwd or fwd_prepared (where the workspace keeps its check word).
kda_status check_cu_seqlens(const Problem& problem, const RecurrencePlan& plan, bool prepared, void* workspace,
                            kda_stream_t stream);

// ---- Context parallelism across GPUs (cp_sm90.cu; docs/design.md §3.4) ----

// The forward pass reusing the preparation (records, chunk bounds) that kda_segment_transition left
// in `workspace` for the same inputs: no preparation launch. Workspace: fwd_prepared_workspace_bytes.
size_t fwd_prepared_workspace_bytes(const Problem& problem, const RecurrencePlan& plan);
kda_status fwd_prepared(const Problem& problem, const RecurrencePlan& plan, void* workspace, kda_stream_t stream);

// What cp_sm90.cu shares with the forward launcher: the preparation (records at the start of the
// workspace, then the check word, then the chunk bounds; `chunk_bounds` null: not computed), its
// size with the bounds, where the bounds are, the sequence layout and one recurrence launch.
// `kr_lo`: where the preparation writes Kr's low part of each sequence's last chunk (PrepParams::kr_lo),
// or null; `tail`: the counters it zeroes for the recurrence's tail jobs (PrepParams::tail), or null;
// `fallback`: the single pass's (SinglePassLaunch::piece_fail not null: only the units it flagged), or
// null.
struct SinglePassLaunch;  // (the single pass's section below)
kda_status launch_preparation(const Problem& problem, void* workspace, float* chunk_bounds, kda_stream_t stream,
                              uint8_t* kr_lo = nullptr, int32_t* tail = nullptr,
                              const SinglePassLaunch* fallback = nullptr);
size_t preparation_bytes(const Problem& problem);
float* preparation_bounds(const Problem& problem, void* workspace);
// Where the preparation's Kr low parts are (null when the build does not split the final update).
uint8_t* preparation_kr_lo(const Problem& problem, void* workspace);
SequenceLayout make_sequence_layout(const Problem& problem);
// The preparation's parameters from the call's tensors and options (records, chunk bounds, kr_lo and
// the tail's counters left null).
PrepParams preparation_params(const Problem& problem);
kda_status launch_recurrence_pass(const RecurrenceParams& rp, int64_t ctas, kda_stream_t stream, bool dependent);

// ---- The single pass (single_pass_sm90.cu; docs/design.md §3.5) ----

// What maybe_single_pass launched: nothing, the whole call (whole sequences, or a one-pass plan's
// pieces followed by their whole-sequence fallback), or a warm-up plan's bounded pieces whose units may
// have fallen back (`piece_fail` not null: the caller runs the two-kernel path on the units with a flag
// set, single_pass_fallback.cuh).
struct SinglePassLaunch {
  bool launched = false;
  const char* unmapped = nullptr;        // not launched because no tensor map describes this input
  const uint64_t* piece_fail = nullptr;  // [pieces][N*HV] (single_pass_fallback.cuh)
  uint64_t* epoch = nullptr;             // the flags' epoch, which the fallback's preparation advances
  int32_t pieces = 1;
};

// What the single pass does with a call, from the host's arithmetic alone (params.single_pass, the plan,
// shapes, dtypes, options, strides, the alignment of q, k, g and v, and whether final_state is
// initial_state; no driver call): maybe_single_pass's choice, and the workspace's size (fwd_workspace.h:
// a call the single pass covers whole, `runs` without a fallback to the two kernels, needs no records).
struct SinglePassChoice {
  bool runs = false;               // it launches (unless the driver then refuses a tensor map)
  const char* refusal = nullptr;   // KDA_SINGLE_PASS_ALWAYS on a problem it cannot take: why
  const char* unmapped = nullptr;  // the input no tensor map describes (then `runs` is false)
  int pieces = 1;                  // per sequence
  bool bounded = false;            // pieces with the decay bound's flags and a fallback
  bool redo = false;               // that fallback: the whole-sequence single pass (else the two kernels)
  bool covers_call() const { return runs && (!bounded || redo); }
};
SinglePassChoice choose_single_pass(const Problem& problem, const RecurrencePlan& plan);

// The single pass as `choice` (= choose_single_pass(problem, plan): params.single_pass, and with
// KDA_SINGLE_PASS_AUTO the plan: no sequence parallelism and enough (sequence, head) pairs to fill the
// GPU, or a bounded warm-up plan whose pieces are long enough, plan.h): the tensor maps and the launch.
// `fail_space`: the workspace's room for the pieces' epoch and flags (1 + pieces x N*HV 64-bit words,
// the pieces of plan_single_pass_pieces), which every plan with pieces has. KDA_SINGLE_PASS_ALWAYS on a
// problem it cannot take is an error naming the reason, before anything is launched.
kda_status maybe_single_pass(const Problem& problem, const RecurrencePlan& plan, const SinglePassChoice& choice,
                             uint64_t* fail_space, kda_stream_t stream, SinglePassLaunch* out);

}  // namespace kda::sm90
