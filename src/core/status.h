// Status helpers shared by every host layer (API, launchers, CPU reference): a kda_status with a
// formatted message, dtype names and sizes, early return on error. Host only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "flash_kda/flash_kda.h"

namespace kda {

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
