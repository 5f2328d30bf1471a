// Status helpers (status.h).
#include "src/core/status.h"

#include <cstdarg>
#include <cstdio>

namespace kda {

kda_status make_ok() {
  kda_status s;
  s.code = KDA_OK;
  s.message[0] = '\0';
  return s;
}

kda_status make_error(kda_status_code code, const char* fmt, ...) {
  kda_status s;
  s.code = code;
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(s.message, sizeof(s.message), fmt, args);
  va_end(args);
  return s;
}

const char* dtype_name(int32_t dtype) {
  switch (dtype) {
    case KDA_DTYPE_NONE: return "none";
    case KDA_DTYPE_BF16: return "bf16";
    case KDA_DTYPE_F32: return "f32";
    case KDA_DTYPE_I32: return "i32";
    case KDA_DTYPE_I64: return "i64";
    case KDA_DTYPE_F16: return "f16";
    case KDA_DTYPE_F64: return "f64";
  }
  return "unknown";
}

size_t dtype_bytes(int32_t dtype) {
  switch (dtype) {
    case KDA_DTYPE_BF16: case KDA_DTYPE_F16: return 2;
    case KDA_DTYPE_F32: case KDA_DTYPE_I32: return 4;
    case KDA_DTYPE_I64: case KDA_DTYPE_F64: return 8;
  }
  return 0;
}

}  // namespace kda
