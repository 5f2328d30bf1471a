// Parameters of the SM90 kernels, filled by the launchers (src/launch/fwd_sm90.cu, prep_sm90.cu and the
// others beside them). Plain data.
#pragma once

#include <cstdint>

namespace kda::sm90 {

// How sequences are split for parallelism (src/launch/plan.h).
enum class SplitMethod : int32_t {
  kNone = 0,    // whole sequences in one pass
  kExact = 1,   // exact combine
  kWarmup = 2,  // bounded warm-up, exact fallback per unit
};
// Most segments or warm-up pieces per sequence (KDA_MAX_CONTEXT_SPLIT).
inline constexpr int kMaxContextSegments = 64;
// Longest warm-up a piece may take before its unit falls back to the exact path (chunks).
inline constexpr int kWarmupCap = 4;
// The decay bound a warm-up must reach: log2 of the relative contribution of the true start state
// that may be dropped (spec §10: 2^-24).
inline constexpr float kWarmupLog2Bound = -24.0f;

// The single pass's piece flag word (single_pass_fallback.cuh): the call's epoch, offset so that
// workspace garbage of one repeated byte (a fresh or poisoned buffer) never reads as a flag of its own
// epoch (tests/test_plan.cpp checks all 256), and whether the piece fell back.
inline constexpr uint64_t kPieceEpochOffset = 0x9E3779B97F4A7C15ull;
#if defined(__CUDACC__)
__host__ __device__
#endif
constexpr uint64_t piece_word(uint64_t epoch, bool fell_back) {
  return ((epoch + kPieceEpochOffset) << 1) | (fell_back ? 1u : 0u);
}

// Where the sequences are: fixed-length rows of a [B, T] batch, or packed by cu_seqlens.
struct SequenceLayout {
  const void* cu_seqlens;  // nullptr: N = B sequences of T tokens
  int32_t cu_is_i64;
  int32_t N;
  int32_t T;        // tokens per batch row (fixed mode)
  int32_t T_total;  // B * T
  int64_t num_vchunks;  // virtual chunks per value head (records per head in the workspace)
  // Fixed mode: the sequence of virtual chunk vc is vc / chunks-per-row, by fast_div(vc, per_magic)
  // when per_fast (num_vchunks · chunks-per-row < 2^32: exact, fast_div.h), else by a division.
  uint32_t per_magic;
  int32_t per_fast;
};

// Strides in elements of a [B, T, heads, D] tensor (D contiguous).
struct Strides4 {
  int64_t b, t, h;
};

struct PrepParams {
  SequenceLayout seq;
  const uint16_t* q;  // bf16 bits
  const uint16_t* k;
  const void* g;      // bf16 or f32
  const void* beta;   // bf16 or f32
  Strides4 q_st, k_st, g_st, beta_st;
  const float* A_log;    // nullptr: exp(A_log) = 1
  const float* dt_bias;  // [HV * 128] or nullptr
  int32_t H, HV, group;
  uint32_t group_magic;  // fast_div_magic(group) (fast_div.h): the query head hv / group without a division
  int32_t g_is_f32, beta_is_f32;
  int32_t beta_sigmoid, qk_l2norm, allow_neg_eigval;
  float scale, lower_bound;
  // 1 when every element offset of q, k, g and beta, and each plus 16 token strides, is below 2^31
  // (offsets_fit_int32, plan.h): prepare_chunk forms its row offsets in 32-bit arithmetic.
  int32_t off32;
  uint8_t* records;  // [HV][num_vchunks] ChunkRecord
  // [HV][num_vchunks] or nullptr: per chunk, the largest over key channels of the chunk's summed
  // log2-decay (the bounded warm-up's decay bound, spec §10); +inf where the bound does not hold
  // (a positive or NaN decay, b outside [0, 2]).
  float* chunk_bounds;
  // [N][HV][kKrLoSlots][16][128] bf16 (the record's wide layout) or nullptr: for the last chunks of
  // each sequence that the final split covers (final_split_chunks; slot 0 the last, 1 the one before),
  // Kr's low part Kr − bf16(Kr), with which the recurrence's updates there carry Kr as a hi + lo pair
  // (RecurrenceParams::kr_lo). Written by the CTA of that chunk only.
  uint8_t* kr_lo = nullptr;
  // RecurrenceParams::tail, or nullptr: zeroed (the header by CTA (0, 0), each unit's words by the
  // CTA of its sequence's index and head) before the recurrence may read it.
  int32_t* tail = nullptr;
  // The single pass's fallback (single_pass_fallback.cuh), or nullptr: only the chunks of units whose
  // pieces set a flag in sp_fail ([sp_pieces][N*HV]) are prepared, the grid striding over the chunks.
  const uint64_t* sp_fail = nullptr;
  int32_t sp_pieces = 0;
  uint64_t* sp_epoch = nullptr;  // the flags' epoch (single_pass_fallback.cuh): advanced by CTA (0, 0)
};

// Which pass of the recurrence a launch runs (src/launch/plan.h).
enum class RecurrencePass : int32_t {
  kWhole = 0,   // whole sequences, initial state to final state
  kFirst = 1,   // context parallelism: segment 0, and the middle segments' end states and transitions
  kSecond = 2,  // context parallelism: segments 1..P-1 from their combined start states
  // Across GPUs (src/launch/cp_sm90.cu): per segment, its end state from zero (Lp) and its
  // transition (Mp), into cp_states [units][P][2][128][128]; no outputs. With method kWarmup, a unit
  // whose decay bound holds runs one segment: its last w <= kWarmupCap chunks.
  kTransition = 3,
};

struct RecurrenceParams {
  SequenceLayout seq;
  const uint16_t* v;  // bf16 bits
  uint16_t* out;
  Strides4 v_st, out_st;
  const void* initial_state;  // [N, HV, 128, 128] or nullptr
  void* final_state;
  int32_t initial_is_f32, final_is_f32;
  int32_t HV, vsplit;
  const uint8_t* records;
  // Sequence parallelism (src/launch/plan.h). CTAs are ordered slot-major: block = slot·units +
  // unit, unit = sequence·HV + value head.
  SplitMethod method;
  RecurrencePass pass;
  int32_t units;
  int32_t segments;       // exact combine (or the warm-up's fallback): P
  float* cp_states;       // [N*HV][P-1][128][128]: E0, Lp; after the combine, the start states
  float* cp_transitions;  // [N*HV][P-2][128][128]: Mp
  // Bounded warm-up (method kWarmup, pass kFirst; the fallback flags also in pass kSecond):
  int32_t pieces;
  int32_t forced_warmup;      // > 0: every piece warms up exactly this many chunks (testing)
  const float* chunk_bounds;  // PrepParams::chunk_bounds
  int32_t* unit_fallback;     // [N*HV]: 1 when the unit runs the exact path (pass 1 writes it)
  // Bounded warm-up with final_state == initial_state (in place): pass 1 writes its final states here
  // ([N*HV][128][128], final_state's dtype) instead, and deferred_final_kernel copies them once pass 1
  // is complete, since in pass 1 the CTA writing a unit's final state (its last piece) is not the one
  // reading its initial state (piece 0, and pieces whose warm-up reaches the first chunk).
  void* deferred_final = nullptr;
  // Unit u is sequence seq_offset + u / HV (the transition pass computes the last sequences only).
  int32_t seq_offset = 0;
  // PrepParams::kr_lo, or nullptr. When set, the updates of a sequence's last final_split_chunks
  // chunks in a CTA that stores the final state (its walk ends at the sequence's end) carry U and Kr
  // as bf16 hi + lo pairs (U_lo·Kr + U·Kr_lo + U·Kr): the final state keeps those tokens' rounding,
  // which the gates erase from earlier chunks (state error 2.2e-3 -> 1.7e-5 on the standard case in
  // the rounding emulation, docs/performance_notes.md "The final state's last update as hi + lo pairs").
  const uint8_t* kr_lo = nullptr;
  // Bounded warm-up through kda_fwd (pass kFirst, segments >= 2): the fallback's combine and pass 2
  // run as tail jobs of this grid (recurrence_tail.cuh) instead of two more launches that find
  // nothing to do on decaying gates. tail: kTailHeaderWords + kTailWordsPerUnit x units int32 words,
  // zeroed by this call's preparation (PrepParams::tail); nullptr: the separate launches
  // (kda_fwd_prepared, the exact method). Jobs [0, tail_combine_jobs) combine tail_combine_rows rows of
  // a unit's start states; jobs [tail_combine_jobs, tail_jobs) are pass 2's slots (slot-major).
  int32_t* tail = nullptr;
  int32_t tail_combine_jobs = 0;
  int32_t tail_jobs = 0;
  // 1: each pass-2 slot is two tail jobs of 64 value rows (h = job & 1), run by one consumer
  // warpgroup each (chunk_recurrence_wgmma_kernel with two warpgroups only), when the grid has
  // CTAs for twice the slots: a tail's few pass-2 chains then take twice the SMs.
  int32_t tail_half = 0;
  int32_t tail_combine_rows = 16;  // 8 or 16 (recurrence_tail.cuh)
  // The single pass's fallback (single_pass_fallback.cuh; warm-up plans, pass kFirst), or nullptr: a
  // unit none of whose pieces set a flag in sp_fail ([sp_pieces][units]) was computed by the single pass:
  // its CTAs idle and it counts as decided, bounded (no fallback, no tail job).
  const uint64_t* sp_fail = nullptr;
  int32_t sp_pieces = 0;
};

// RecurrenceParams::tail: a header (the units decided and fallen back, as one 64-bit word; the CTAs
// past their wait; the next tail ticket), then per unit its decision (0 none yet, 1 bounded, 2
// fallback), its finished pass-1 jobs and its finished combine jobs.
inline constexpr int kTailHeaderWords = 4;
inline constexpr int kTailWordsPerUnit = 3;

// The bytes of one Kr low part (a [16][128] bf16 tile in the record's wide layout).
inline constexpr int kKrLoBytes = 16 * 128 * 2;

// The final split (RecurrenceParams::kr_lo) covers at least this many of a sequence's last tokens: its
// last chunk, and the chunk before where the last holds fewer (a sequence of 16n + 1 to 16n + 7
// tokens). With only the last chunk split, the final state kept the unsplit rounding of the chunk
// before wherever the last was short: in the rounding emulation 4.6e-4 against 3.1e-5 (one token in
// the last chunk, standard gates), 1.2e-3 against 9.8e-5 (lower bound -1); at 8 tokens and more the
// second chunk changed nothing measurable (docs/performance_notes.md, "The final split over the last
// 8 tokens"). Each (sequence, head) has kKrLoSlots Kr low parts: slot 0 the last chunk's, 1 the one before.
inline constexpr int kFinalSplitTokens = 8;
inline constexpr int kKrLoSlots = 2;
// How many of a sequence's last chunks (of `len` tokens, len >= 1) the final split covers: 1 or 2.
#if defined(__CUDACC__)
__host__ __device__
#endif
constexpr int final_split_chunks(int64_t len) {
  return len > 16 && (len - 1) % 16 + 1 < kFinalSplitTokens ? 2 : 1;
}
// The first chunk of segment s of P (exact plans, recurrence_task.cuh) of a sequence of `chunks` chunks
// and `len` tokens: s · ceil(chunks / P), but at most chunks - final_split_chunks(len) for s >= 1, so
// that the last segment holds the chunks of the final split (its walk stores the final state) and
// never is empty where the sequence is not: with s · per alone a sequence of 5 chunks in 4 segments
// ended in an empty segment, and its final state had no final split. (Earlier segments may then be
// empty.) Segment s covers [segment_first_chunk(s), segment_first_chunk(s + 1)), s + 1 = P: chunks.
#if defined(__CUDACC__)
__host__ __device__
#endif
constexpr int segment_first_chunk(int s, int P, int chunks, int64_t len) {
  if (s <= 0) return 0;
  if (s >= P) return chunks;
  const int per = (chunks + P - 1) / P;
  const int cap = chunks - final_split_chunks(len);
  const int first = s * per < cap ? s * per : cap;
  return first > 0 ? first : 0;
}

// The final state's last update as hi + lo pairs (1) or as every other update (0: no Kr low part
// is written or read); a build knob, for measuring what it costs.
#ifndef FLASH_KDA_FINAL_SPLIT
#define FLASH_KDA_FINAL_SPLIT 1
#endif
inline constexpr bool kFinalSplit = FLASH_KDA_FINAL_SPLIT != 0;

// U of the state updates other than a final state's last one (that one: kFinalSplit above) as one bf16
// (0, default) or a bf16 hi + lo pair (1), in both recurrence kernels (chunk_recurrence_kernel.cuh,
// chunk_recurrence_wgmma_kernel.cuh; the single pass keeps one bf16). Measured before kFinalSplit
// existed, the pair took the relative state error of the standard case from 2.18e-3 to 1.63e-3 (GPU and
// rounding emulation agree) at +11-12% recurrence time on mma.sync and +6-11% on wgmma (one more product
// per update on the chain; docs/performance_notes.md, "Where precision matters"). A build knob.
#ifndef FLASH_KDA_SPLIT_U
#define FLASH_KDA_SPLIT_U 0
#endif
inline constexpr bool kSplitU = FLASH_KDA_SPLIT_U != 0;

// single_pass_kernel (single_pass_kernel.cuh): the forward pass in one launch; q, k, g and v also come
// as tensor maps (kernel parameters of their own).
struct SinglePassParams {
  PrepParams pp;  // the preparation's inputs and options (records, chunk_bounds, kr_lo, tail unused)
  const uint16_t* v;
  uint16_t* out;
  Strides4 v_st, out_st;
  const void* initial_state;  // [N, HV, 128, 128] or nullptr
  void* final_state;          // idem (may be initial_state itself: each CTA reads its unit before writing it)
  int32_t initial_is_f32, final_is_f32;
  int32_t HV;
  int32_t units;  // N * HV
  // Pieces of each sequence (recurrence_task.cuh's piece_first_chunk; 1: whole sequences), CTAs
  // piece-major: block = piece · units + unit. Piece p >= 1 warms up from a zero state over the chunks
  // before its first: forced_warmup > 0, exactly that many (context_warmup_chunks, testing only); 0, as
  // many as the decay bound asks (the bounded warm-up, design.md §3.2, with the single pass's own chunk
  // bounds), and where no warm-up within kSinglePassWarmupCap chunks suffices the piece computes nothing
  // and sets its flag in piece_fail ([pieces][units] words, every CTA writing its own on every call:
  // epoch << 1 | fell back, with the call's epoch from *epoch; single_pass_fallback.cuh), and the
  // launcher's fallback (the two-kernel path on the units with a flag set) computes its unit.
  int32_t pieces, forced_warmup;
  uint64_t* piece_fail;
  const uint64_t* epoch;
  // The whole-sequence fallback of bounded pieces (whole sequences only, pieces = 1; a one-pass plan's
  // single_pass_pieces, plan.h): launched after the pieces' grid, this launch runs only the units for
  // which one of redo_pieces pieces set its flag in redo_fail ([redo_pieces][units]) and advances
  // *redo_epoch (CTA 0) for the next call. Null: every unit (an ordinary launch).
  const uint64_t* redo_fail;
  uint64_t* redo_epoch;
  int32_t redo_pieces;
};

// deferred_final_kernel (deferred_final_kernel.cuh): the final states pass 1 of an in-place
// bounded warm-up left in the workspace, to final_state.
struct DeferredFinalParams {
  const void* deferred;   // [units][vecs_per_unit] 16-byte pieces
  void* final_state;
  int32_t units;
  int32_t vecs_per_unit;         // 16-byte pieces of one [128][128] state
  int32_t segments;              // the fallback's P: units that fell back with P >= 2 write theirs in pass 2
  const int32_t* unit_fallback;
};

// The combine of the context-parallel path: S(p+1) = Sp·Mp + Lp for p = 1..P-2, in place.
struct CombineParams {
  float* cp_states;
  const float* cp_transitions;
  int32_t segments;
  const int32_t* unit_fallback;  // bounded warm-up: skip units that did not fall back (else nullptr)
};

}  // namespace kda::sm90
