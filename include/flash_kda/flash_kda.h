/*
 * FlashKDA public C API: Kimi Delta Attention forward (prefill) for NVIDIA Hopper.
 *
 * Host-only header: no CUDA kernel headers, no PyTorch. C and C++ callers include this file and link
 * flash_kda::flash_kda (CMake). The operation, its numerics and its limits are described in
 * docs/design.md; the contract (shapes, dtypes, errors) is summarised here.
 *
 * Tensors are described by kda_tensor (data pointer, dtype, shape, strides in elements). For
 * kda_fwd the pointers are CUDA device pointers on the current device; for kda_fwd_cpu they are
 * host pointers. An optional tensor is absent when its data pointer is NULL.
 *
 *   q, k            [B, T, H, K]   bf16
 *   v               [B, T, HV, V]  bf16          HV = H or a multiple of H (grouped value heads)
 *   g               [B, T, HV, K]  bf16 or f32   raw gate (or log-decay when gate = PREACTIVATED)
 *   beta            [B, T, HV]     bf16 or f32   logits (or probabilities when beta_sigmoid = 0)
 *   out             [B, T, HV, V]  bf16          written
 *   A_log           [HV]           f32, optional (absent: exp(A_log) = 1)
 *   dt_bias         [HV, K] or [HV*K] f32, optional (absent: 0)
 *   initial_state   [N, HV, V, K]  bf16 or f32, optional (absent: zeros)
 *   final_state     [N, HV, V, K]  bf16 or f32, optional, written
 *   cu_seqlens      [N + 1]        i32 or i64, optional; then B must be 1 (packed variable-length batch)
 *
 * K = V = 128. The last dimension of every tensor must be contiguous (stride 1); the other strides
 * are free (non-negative) for q, k, v, g, beta and out; states, A_log, dt_bias and cu_seqlens must
 * be contiguous. Data pointers are aligned to their element size (kda_fwd: rows to 16 bytes).
 *
 * Memory: inputs may share memory with each other. Every element of out has its own address
 * (strides that make rows alias are rejected). out and final_state share no byte with any other
 * tensor or the workspace, with one exception: final_state may be exactly initial_state (same
 * pointer and dtype), the state then being updated in place. Overlap is judged on the byte range
 * from a tensor's first to its last element, so a written tensor interleaved with another inside
 * one allocation is rejected too.
 *
 * Contract of kda_fwd: it validates everything that can be checked without touching device memory
 * and returns an error naming the argument, the expectation and what was given before any kernel
 * runs. It then enqueues work on `stream` and returns: no allocation, no synchronisation, no host
 * read of device data (unless check_cu_seqlens is set, see below). It can be captured in a CUDA graph.
 * Results are deterministic (bitwise identical for identical inputs).
 */
#ifndef FLASH_KDA_FLASH_KDA_H_
#define FLASH_KDA_FLASH_KDA_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FLASH_KDA_VERSION_MAJOR 0
#define FLASH_KDA_VERSION_MINOR 1
#define FLASH_KDA_VERSION_PATCH 0

/* Largest segment count kda_fwd_params.context_split accepts. */
#define KDA_MAX_CONTEXT_SPLIT 64

/* Same type as cudaStream_t (declared here so the header needs no CUDA include). NULL = default stream. */
typedef struct CUstream_st* kda_stream_t;

typedef enum kda_dtype {
  KDA_DTYPE_NONE = 0,
  KDA_DTYPE_BF16 = 1,
  KDA_DTYPE_F32 = 2,
  KDA_DTYPE_I32 = 3,
  KDA_DTYPE_I64 = 4,
  KDA_DTYPE_F16 = 5, /* never accepted; named so that error messages can say what was given */
  KDA_DTYPE_F64 = 6  /* never accepted; idem */
} kda_dtype;

/* A strided view: element (i0, i1, ...) lives at data + sum(i_d * stride[d]) elements. */
typedef struct kda_tensor {
  void* data; /* NULL: absent */
  kda_dtype dtype;
  int32_t ndim; /* 1..4 */
  int64_t shape[4];
  int64_t stride[4]; /* in elements */
} kda_tensor;

typedef enum kda_gate {
  /* a = lower_bound * sigmoid(exp(A_log) * (g + dt_bias)), lower_bound in [-5, 0) */
  KDA_GATE_BOUNDED = 0,
  /* a = -exp(A_log) * softplus(g + dt_bias) (unbounded below; Kimi-Linear-48B) */
  KDA_GATE_SOFTPLUS = 1,
  /* a = g: g already holds the per-step natural-log decay (<= 0); A_log, dt_bias ignored */
  KDA_GATE_PREACTIVATED = 2
} kda_gate;

/* How long sequences are split into pieces run in parallel on one GPU (docs/design.md §3.1-§3.2). */
typedef enum kda_context_method {
  KDA_CONTEXT_AUTO = 0,   /* the planner picks one pass, the exact combine or the bounded warm-up */
  KDA_CONTEXT_EXACT = 1,  /* exact combine: segment transitions, a float32 combine, a second pass */
  /* Bounded warm-up: each piece starts a few chunks early from a zero state, as many as the gates
     need for the dropped part to be <= 2^-24 of the state (decided on the device, spec §10); a
     (sequence, head) whose gates decay too slowly for that runs the exact combine instead. Needs
     qk_l2norm = 1 and allow_neg_eigval = 0 (else the exact combine is used). */
  KDA_CONTEXT_WARMUP = 2
} kda_context_method;

/* Whether kda_fwd runs the forward pass as one kernel (the single pass: preparation and recurrence in
   one CTA per (sequence, head), no chunk records in the workspace) or as the preparation and the
   recurrence (two kernels, sequence parallelism). */
typedef enum kda_single_pass {
  KDA_SINGLE_PASS_AUTO = 0,   /* the single pass where it takes the problem and is faster on this GPU
                                 (on decaying gates: it may cut sequences into pieces; where gates
                                 decay slowly a (sequence, head) then falls back: to the single pass
                                 on whole sequences where the two kernels would run whole sequences
                                 too (1.0-1.1x the two kernels' time there; with pairs for most of
                                 the SMs 1.13-1.19x whole sequences'), else to the two kernels
                                 (about 1.15x their time); README.md) */
  KDA_SINGLE_PASS_NEVER = 1,  /* always the two kernels */
  KDA_SINGLE_PASS_ALWAYS = 2  /* always the single pass; KDA_ERROR_UNSUPPORTED where it does not take
                                 the problem (a gate other than BOUNDED, g not bf16, q, k, g or v
                                 without a tensor map: see the message) */
} kda_single_pass;

typedef struct kda_fwd_params {
  uint32_t struct_size; /* sizeof(kda_fwd_params); kda_fwd_params_init sets it */
  kda_tensor q, k, v, g, beta;
  kda_tensor out;
  kda_tensor A_log, dt_bias;
  kda_tensor initial_state, final_state;
  kda_tensor cu_seqlens;
  double scale;         /* output scale, usually 1/sqrt(K); |scale| <= 65536 (the kernels use it in
                           fp32; the CPU float64 recurrence in float64) */
  double lower_bound;   /* KDA_GATE_BOUNDED only: in [-5, 0), non-zero in fp32 (idem) */
  kda_gate gate;        /* enum fields (here and in kda_tensor) are validated as integers */
  int32_t beta_sigmoid;     /* 1: beta holds logits, b = sigmoid(beta); 0: b = beta */
  int32_t qk_l2norm;        /* 1: q and k are L2-normalised over K inside (eps 1e-6 under the sqrt) */
  int32_t allow_neg_eigval; /* 1: b is doubled (b in (0, 2)) */
  /* Opt-in: check the contents of cu_seqlens on the device (starts at 0, non-decreasing, entries
     <= B*T) and return KDA_ERROR_INVALID_ARGUMENT naming the first bad entry. This synchronises
     the stream and cannot be used under CUDA-graph capture. Without it, bad contents never cause
     an out-of-bounds access: each entry is clamped to [0, B*T]; non-decreasing contents then give
     well-defined results, while a decreasing entry (two sequences covering the same tokens) leaves
     the rows of out and the final states of the sequences involved unspecified (possibly
     different from run to run). kda_fwd_cpu reads cu_seqlens on the host: it always rejects
     decreasing entries, and applies the whole check when this flag is set. */
  int32_t check_cu_seqlens;
  /* Intra-card context parallelism (GPU only; the CPU paths ignore it): 0 = automatic (long
     sequences with few heads are split into segments when that is faster on this GPU); 1 = never;
     n in [2, KDA_MAX_CONTEXT_SPLIT] = split every sequence into n segments. Results differ between
     plans by rounding only (each plan is deterministic); the workspace size depends on the plan. */
  int32_t context_split;
  /* kda_context_method (GPU only): which method splits sequences when they are split. With
     context_split >= 2 and KDA_CONTEXT_AUTO the exact combine is used. */
  int32_t context_method;
  /* Testing and tuning only (GPU, KDA_CONTEXT_WARMUP): 0 = warm-up length chosen from the bound;
     n > 0 = every piece warms up exactly n chunks (or back to the sequence start), ignoring the
     bound: the results are then approximate. */
  int32_t context_warmup_chunks;
  /* 1: the caller guarantees that every data pointer of the call (tensors, workspace) is device or
     managed memory of the current device, as a framework that placed the tensors itself does (the
     PyTorch binding sets it after its own device checks) and that each tensor's elements (the
     workspace's bytes) lie inside the allocation its pointer is in; the per-pointer query
     (cuPointerGetAttributes, 0.05-0.2 us each, 0.6-2.4 us per call by host) is then skipped. A pointer that breaks
     the promise faults in the kernel instead of being reported. 0 (default): every pointer is
     checked first: device or managed memory of the current device, and the bytes from it to one past
     the tensor's last element (the workspace's needed bytes) inside the allocation it points into, as
     the driver reports it (for virtual-memory mappings, the reserved range); a buffer too small for its
     shape is refused by name with the shortfall. Any other value is rejected. The CPU entry points
     ignore it. */
  int32_t trusted_pointers;
  /* kda_single_pass (GPU kda_fwd only; kda_fwd_prepared and the CPU entry points ignore it). The
     workspace size depends on it (kda_fwd_workspace_size: KDA_SINGLE_PASS_NEVER gives the two
     kernels' size, which covers every choice). */
  int32_t single_pass;
} kda_fwd_params;

typedef enum kda_status_code {
  KDA_OK = 0,
  KDA_ERROR_INVALID_ARGUMENT = 1, /* shape, dtype, stride, value or pointer not as required */
  KDA_ERROR_UNSUPPORTED = 2,      /* valid in principle, not implemented (e.g. K != 128) */
  KDA_ERROR_UNSUPPORTED_DEVICE = 3, /* not a compute capability 9.0 GPU, or no GPU */
  KDA_ERROR_WORKSPACE_TOO_SMALL = 4,
  KDA_ERROR_CUDA = 5               /* a CUDA runtime call failed */
} kda_status_code;

typedef struct kda_status {
  int32_t code;       /* kda_status_code */
  char message[512];  /* empty on success */
} kda_status;

/* Zero-initialise params, set struct_size and the usual defaults (BOUNDED gate with lower_bound -5,
   beta_sigmoid = qk_l2norm = 1, scale = 1/sqrt(128)). */
void kda_fwd_params_init(kda_fwd_params* params);

/* A contiguous (row-major) tensor view of the given shape. A rank outside [0, 4], or a NULL shape
   with a positive rank, gives a tensor of rank -1 that every entry point rejects; strides past
   int64 saturate at INT64_MAX (rejected as too large). */
kda_tensor kda_tensor_contiguous(void* data, kda_dtype dtype, int32_t ndim, const int64_t* shape);

/* Bytes of device workspace kda_fwd needs for these params (depends on shapes, options and, through
   the automatic context_split, the current device's SM count; an error when it would not fit in
   size_t). Validates params like kda_fwd, from shapes only: data pointers are never read. A call
   that the single pass covers whole needs no chunk records, only a few hundred bytes (T8192 x 64
   heads: 1,288 bytes against 468 MiB on the two kernels; docs/design.md §3.5). The pointers matter
   in two ways only: a NULL q, k, g or v gives the two kernels' size, and so does final_state at the
   same address as initial_state where the plan then runs the two kernels (in place, the single pass
   cuts no sequence). So one stand-in pointer for every tensor gives a size that covers the call
   with any valid pointers; the call's own pointers give its exact size; KDA_SINGLE_PASS_NEVER gives
   the two kernels' size, which covers every choice. */
kda_status kda_fwd_workspace_size(const kda_fwd_params* params, size_t* bytes);

/* Validate, then enqueue the forward pass on `stream` (CUDA device pointers, current device,
   which must have compute capability 9.0). `workspace` is device memory of at least
   kda_fwd_workspace_size bytes, 256-byte aligned; its contents on entry do not matter. Every
   argument the host can check (params, memory rules, workspace size and alignment) is checked
   before the device and the pointers' memory types. Thread-safe: calls from several host threads
   on several streams, each with its own workspace, give the results of the same calls made one by
   one (the library holds no mutable state but a once-per-device kernel attribute). */
kda_status kda_fwd(const kda_fwd_params* params, void* workspace, size_t workspace_bytes,
                   kda_stream_t stream);

typedef enum kda_cpu_algorithm {
  KDA_CPU_RECURRENCE_F64 = 0, /* token-by-token recurrence in float64 (the oracle) */
  KDA_CPU_CHUNKED_F32 = 1     /* the GPU kernel's chunked algebra (chunk 16) in float32 */
} kda_cpu_algorithm;

/* Same operation on host pointers, multithreaded over (sequence, value head); num_threads <= 0
   uses the machine's hardware concurrency. Validates like kda_fwd. */
kda_status kda_fwd_cpu(const kda_fwd_params* params, kda_cpu_algorithm algorithm, int32_t num_threads);

const char* kda_status_code_name(int32_t code);
/* "MAJOR.MINOR.PATCH+COMMIT": COMMIT is the 12-digit git commit the library was built from, followed by
   "-dirty" when tracked files differed from it, or "unknown" when the source folder was not the top of a
   git checkout (no git, an archive, a copy inside another repository). */
const char* kda_version_string(void);
/* CUDA runtime version the library was built with (e.g. 13000) and the SM architectures its
   kernels were compiled for, as a string such as "90a". */
int32_t kda_build_cuda_version(void);
const char* kda_build_architectures(void);

/* =======================================================================================
 * Decode and speculative verify over an indexed state pool (serving engines; docs/design.md §5)
 *
 * Serving engines keep one state per request slot in a pool and run a few tokens per request per
 * step. kda_decode runs the same recurrence as kda_fwd (same gates, flags, GVA, fp32 arithmetic,
 * bf16 output) on T tokens per sequence, reading each sequence's start state from the pool and
 * writing states back into it in place (no gather or scatter copies):
 *
 *   q, k, v, g, beta, out, A_log, dt_bias, cu_seqlens   as for kda_fwd (a [B, T, ...] batch, or a
 *                                    packed [1, T_total, ...] batch with cu_seqlens [N + 1])
 *   state_pool           [slots, HV, V, K] f32 or bf16, read and written in place. The inner three
 *                        dimensions contiguous; stride[0] >= HV*V*K free (a view into a larger
 *                        buffer); the state stays fp32 inside the kernel whatever the pool's dtype.
 *   state_indices        i32 or i64, optional (absent: sequence n uses slot n, slots >= N):
 *                          [N]         read slot idx[n], run the tokens, write the final state
 *                                      back to idx[n] (decode: T = 1; longer sequences also work);
 *                          [N, T_idx]  verify: the state after token t is written to slot
 *                                      idx[n, t] (no write where idx[n, t] < 0); the start state
 *                                      is read from idx[n, 0], or from idx[n, a - 1] with
 *                                      a = num_accepted_tokens[n] clamped to [1, T_idx] (so a = 0
 *                                      reads idx[n, 0], never idx[n, -1]). Without cu_seqlens
 *                                      T_idx >= T is required; with cu_seqlens, tokens t >= T_idx
 *                                      of a longer sequence write no state.
 *   num_accepted_tokens  [N] i32 or i64, optional; only with 2-D state_indices.
 *
 * A sequence whose start slot is negative (padding, e.g. -1) or >= slots gets zeros in its output
 * rows and no state access at all. A sequence of length 0 writes nothing. Slots no sequence names
 * are never touched. No two sequences may name the same slot in one call (the result would depend
 * on timing); entries >= slots are never accessed but are errors. check_indices = 1 verifies all of
 * this on the device before running (and the contents of cu_seqlens): it synchronises the stream,
 * cannot be used under CUDA-graph capture, and returns KDA_ERROR_INVALID_ARGUMENT naming the first
 * bad entry. Without it, bad contents never cause an out-of-bounds access.
 *
 * Memory: inputs may share memory with each other; out and state_pool (both written) share no
 * byte with any other tensor or with each other (judged on byte ranges, as for kda_fwd); rows of
 * out never alias (as kda_fwd's) nor do slots (stride[0] >= HV*V*K). All checked before any kernel.
 *
 * kda_decode needs no workspace, allocates nothing, does not synchronise and can be captured in a
 * CUDA graph: one kernel launch (check_indices adds a stream-ordered scratch allocation of 4 bytes
 * per slot and a synchronisation). Results are deterministic and do not depend on kernel_config.
 */

/* Kernel configurations kda_decode_params.kernel_config can force (1..KDA_DECODE_NUM_KERNEL_CONFIGS). */
#define KDA_DECODE_NUM_KERNEL_CONFIGS 7

typedef struct kda_decode_params {
  uint32_t struct_size; /* sizeof(kda_decode_params); kda_decode_params_init sets it */
  kda_tensor q, k, v, g, beta;
  kda_tensor out;
  kda_tensor A_log, dt_bias;
  kda_tensor state_pool;
  kda_tensor state_indices;
  kda_tensor num_accepted_tokens;
  kda_tensor cu_seqlens;
  double scale;       /* as kda_fwd_params */
  double lower_bound; /* as kda_fwd_params */
  kda_gate gate;
  int32_t beta_sigmoid, qk_l2norm, allow_neg_eigval; /* as kda_fwd_params */
  int32_t check_indices; /* opt-in device check of state_indices, num_accepted_tokens, cu_seqlens */
  /* 0: the kernel configuration is chosen from N x HV, the tokens per sequence and the GPU;
     1..KDA_DECODE_NUM_KERNEL_CONFIGS forces one (benchmarking; every configuration gives
     bitwise-identical results). */
  int32_t kernel_config;
  /* As kda_fwd_params.trusted_pointers. */
  int32_t trusted_pointers;
} kda_decode_params;

/* Zero-initialise params, set struct_size and the defaults of kda_fwd_params_init. */
void kda_decode_params_init(kda_decode_params* params);

/* Validate (every rule that needs no device memory access, messages as kda_fwd's), then enqueue the
   decode / verify step on `stream` (CUDA device pointers, current device of compute capability 9.0). */
kda_status kda_decode(const kda_decode_params* params, kda_stream_t stream);

/* The same on host pointers: the float64 token-by-token recurrence (the oracle), multithreaded over
   (sequence, value head); num_threads <= 0 uses the hardware concurrency. out is rounded to bf16
   once, states to the pool's dtype once per write. check_indices checks the contents on the host.
   Always, at no cost on host memory: packed sequences that cover the same tokens once cu_seqlens is
   clamped (their output rows are unspecified on the GPU) are an error naming cu_seqlens. */
kda_status kda_decode_cpu(const kda_decode_params* params, int32_t num_threads);

/* ---- Context parallelism across GPUs: building blocks (docs/design.md §3.4) --------------------
 *
 * A sequence sharded along tokens: for each shard and (sequence, value head), in float32,
 *
 *     S_end = S_start · Mᵀ + D        S, D: [V, K] (V-first, as the states); M: [K, K]
 *
 * D is the shard's end state from a zero start; M the product of the per-token maps
 * s -> (I - b k̂k̂ᵀ) Diag(e^a) s (latest token on the left) acting on each state row s as a column
 * vector, so that shards compose as S(r+1) = S(r)·M_rᵀ + D_r. No communication happens in these
 * functions: a driver (Python: flash_kda.distributed) exchanges (D, M) between the ranks.
 *
 * Matrix tensors (D, M, start_states, end_state): float32, every [128, 128] matrix dense (stride[3]
 * = 1, stride[2] = 128); stride[0] and stride[1] free (>= 0, multiples of 4 elements), data 16-byte
 * aligned; so D and M may be views of one packed buffer [.., HV, V + K, K] (D's rows, then M's).
 *
 * Memory (checked on the host before the device, messages naming both tensors): every matrix of a
 * written tensor (D, M, start_states, end_state) has its own memory (no zero or too-small
 * stride[0] / stride[1]); written tensors share no byte with the inputs of the call, the workspace
 * or each other, judged on byte ranges as for kda_fwd, with one exception: D and M may interleave
 * (same shape and strides, matrices sharing no byte, as in the packed layout above, either order).
 * The workspace shares no byte with any tensor of the call. Inputs may share memory. */

/* Bytes of device workspace for kda_segment_transition followed by kda_fwd_prepared on the same
   params (the larger of the two; the preparation they share stays at the start). D and M as for
   kda_segment_transition (both absent: the preparation only). Shape-only. */
kda_status kda_segment_transition_workspace_size(const kda_fwd_params* params, kda_tensor D, kda_tensor M,
                                                 size_t* bytes);

/* (D, M) of the LAST N_t sequences of the shard described by params (q, k, v, g, beta, gate
   options, scale, cu_seqlens, context_split / context_method; out, initial_state and final_state
   are ignored): D [N_t, HV, V, K] f32 and M [N_t, HV, K, K] f32, 1 <= N_t <= N; row i is sequence
   N - N_t + i (a fixed batch: N_t = B; in a packed shard only the last sequence can continue on
   the next rank: N_t = 1). D and M both absent: only the preparation runs. Either way the
   preparation of every sequence (chunk records, decay bounds) is left in `workspace` for
   kda_fwd_prepared.
   Method (params.context_method): KDA_CONTEXT_EXACT runs every chunk (P segments in parallel, then
   a float32 fold); otherwise, when the decay bound applies (qk_l2norm = 1, allow_neg_eigval = 0),
   a (sequence, head) uses only its last w <= 4 chunks, w such that the product of their decay
   bounds is <= 2^-24 (the rule kda_fwd applies inside a GPU, spec §10): S_start·Mᵀ + D then
   equals the exact end state up to 2^-24 of the states' norms, M being accurate to 2^-23 in
   absolute terms; pairs whose gates do not prove that run every chunk, decided on the device.
   context_split forces the number of segments of the exact computation. Enqueued on `stream`;
   no allocation, no synchronisation; capturable in a CUDA graph. Every host check (arguments,
   memory rules, workspace size and alignment) comes before the device checks. */
kda_status kda_segment_transition(const kda_fwd_params* params, kda_tensor D, kda_tensor M, void* workspace,
                                  size_t workspace_bytes, kda_stream_t stream);

/* kda_fwd for the same shard, reusing the preparation that the previous kda_segment_transition
   call with the same params (inputs, options) left in the same `workspace` (stream-ordered, nothing
   written in between): q, k, g, beta, A_log, dt_bias, cu_seqlens, scale and the gate options must be
   unchanged; v, out, initial_state (typically the combined start state) and final_state are free.
   workspace_bytes: at least kda_segment_transition_workspace_size. Memory rules of kda_fwd (out and
   final_state disjoint from every other tensor, final_state may be exactly initial_state), and the
   workspace, which holds the preparation, shares no byte with any tensor. */
kda_status kda_fwd_prepared(const kda_fwd_params* params, void* workspace, size_t workspace_bytes,
                            kda_stream_t stream);

/* Start states of R consecutive shards of N sequences (HV value heads): S(0) = initial_state (or
   zeros), S(r+1) = S(r)·M_rᵀ + D_r, in float32 on the device (fixed summation order). Row r·N + n
   of D [R·N, HV, V, K] and M [R·N, HV, K, K] is shard r of sequence n. initial_state [N, HV, V, K]
   f32 or bf16, contiguous, optional. Outputs (at least one): start_states [R·N, HV, V, K] f32
   (S(r) of sequence n at row r·N + n) and end_state [N, HV, V, K] f32 (S(R)). Outputs must not
   overlap the inputs or each other (end_state cannot be initial_state: no in-place update), and
   every output matrix has its own memory (all checked, with a named error). */
kda_status kda_combine_transitions(int64_t num_shards, kda_tensor D, kda_tensor M, kda_tensor initial_state,
                                   kda_tensor start_states, kda_tensor end_state, kda_stream_t stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FLASH_KDA_FLASH_KDA_H_ */
