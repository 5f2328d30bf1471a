// A validated forward problem: the caller's params plus the sizes derived from them.
// Produced by kda::validate (validate.cpp); consumed by the GPU launcher and the CPU reference.
#pragma once

#include <cstddef>
#include <cstdint>

#include "flash_kda/flash_kda.h"

namespace kda {

inline constexpr int64_t kHeadDim = 128;  // K = V = 128 (the only supported head size)
inline constexpr int64_t kChunk = 16;     // tokens per chunk of the chunked algorithm

struct Problem {
  const kda_fwd_params* params = nullptr;
  int64_t B = 0, T = 0, H = 0, HV = 0, K = 0, V = 0;
  int64_t N = 0;        // number of sequences: B, or cu_seqlens.shape[0] - 1
  int64_t T_total = 0;  // B * T tokens (the packed length when varlen)
  bool varlen = false;
  bool has_A_log = false, has_dt_bias = false;
  bool has_initial_state = false, has_final_state = false;

  int64_t group() const { return HV / H; }  // value heads per q/k head
  int64_t qk_head(int64_t hv) const { return hv / group(); }
};

// What validate() checks besides shapes, dtypes and strides.
enum class ValidateMode {
  kShapesOnly,  // workspace-size query: required tensors may have NULL data
  kHost,        // CPU reference: data pointers required (NULL allowed for tensors with no elements)
  kDevice       // GPU path: kHost plus row alignment for 16-byte vector loads
};

// Checks every rule that needs no device memory access. Returns KDA_OK and fills `out`, or an error
// whose message names the argument, the expectation and what was given.
// `writes_out` = false: out is a stand-in that nothing writes (kda_segment_transition): the memory
// rules on out (its rows distinct, disjoint from the inputs) are not applied.
kda_status validate(const kda_fwd_params* params, ValidateMode mode, Problem* out, bool writes_out = true);

// Status helpers shared by the API layer and the launchers.
kda_status make_ok();
kda_status make_error(kda_status_code code, const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

// Name and element size of a dtype given as a raw integer ("unknown" and 0 outside the enum).
const char* dtype_name(int32_t dtype);
size_t dtype_bytes(int32_t dtype);

// Returns the status of `expr` from the enclosing function unless it is KDA_OK.
#define KDA_RETURN_IF_ERROR(expr)             \
  do {                                        \
    kda_status kda_s_ = (expr);               \
    if (kda_s_.code != KDA_OK) return kda_s_; \
  } while (0)

}  // namespace kda
