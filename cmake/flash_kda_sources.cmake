# Sources of the flash_kda library, by layer (see docs/layout.md).
set(FLASH_KDA_SOURCES
  # core: the validated problem descriptions, status helpers, checked size arithmetic (host only,
  # shared by every layer above)
  src/core/status.cpp
  # public API: entry points, validation, dispatch to the GPU launcher or the CPU reference
  src/api/api.cpp
  src/api/validate.cpp
  src/api/memory_rules.cpp
  # context parallelism across GPUs: entry points, validation (docs/design.md §3.4)
  src/api/api_cp.cpp
  src/api/validate_cp.cpp
  # launchers: the only host code that knows grids, shared memory sizes and workspace layout
  src/launch/fwd_sm90.cu
  src/launch/prep_sm90.cu
  src/launch/fwd_workspace.cu
  src/launch/single_pass_sm90.cu
  src/launch/plan.cpp
  src/launch/cp_sm90.cu
  # tensor maps for TMA (host only; the driver function through the runtime's entry point)
  src/launch/tensor_map.cpp
  # CPU reference (sees only the public header)
  reference/recurrence_f64.cpp
  reference/chunked_f32.cpp
  reference/common.cpp
  reference/transition_f64.cpp
)
# Decode and speculative verify over an indexed state pool (kda_decode): entry points and
# validation, the launcher and its plan, the float64 CPU path.
list(APPEND FLASH_KDA_SOURCES
  src/api/api_decode.cpp
  src/api/validate_decode.cpp
  src/api/decode_check.cpp
  src/launch/decode_sm90.cu
  src/launch/decode_plan.cpp
  reference/decode_f64.cpp
)
