// Device checks of api.cpp that the other entry points share (api_decode.cpp).
#pragma once

#include "src/api/problem.h"

namespace kda {

// Compute capability 9.0 on the current device ("requires compute capability 9.0, found X.Y").
kda_status check_sm90_device(int* device);
// `ptr` (may be NULL) is device or managed memory of `device`.
kda_status check_device_pointer(const char* name, const void* ptr, int device);

}  // namespace kda
