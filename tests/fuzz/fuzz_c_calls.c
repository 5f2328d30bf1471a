/* The calls of the fuzz harness that pass enum values as plain integers, in C (where an enum is an
   int): a C caller may pass any value, and the library must read it as an integer. From C++, the
   same call would itself load an out-of-range enum (undefined behaviour in the harness). */
#include <stdint.h>

#include "flash_kda/flash_kda.h"

kda_tensor kda_fuzz_tensor_contiguous(void* data, int32_t dtype, int32_t ndim, const int64_t* shape) {
  return kda_tensor_contiguous(data, (kda_dtype)dtype, ndim, shape);
}

kda_status kda_fuzz_fwd_cpu(const kda_fwd_params* params, int32_t algorithm, int32_t num_threads) {
  return kda_fwd_cpu(params, (kda_cpu_algorithm)algorithm, num_threads);
}
