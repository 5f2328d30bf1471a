// Device checks of api.cpp that the other entry points share (api_decode.cpp).
#pragma once

#include "src/api/problem.h"

namespace kda {

// Compute capability 9.0 on the current device ("requires compute capability 9.0, found X.Y").
kda_status check_sm90_device(int* device);
// `ptr` (may be NULL) is device or managed memory of `device`, and [ptr, ptr + bytes) lies inside the
// allocation it points into (the workspace: its needed bytes).
kda_status check_device_pointer(const char* name, const void* ptr, size_t bytes, int device);
// The same for a tensor: its data and the bytes from its first to one past its last element
// (tensor_span_bytes, memory_rules.h).
kda_status check_device_tensor(const char* name, const kda_tensor& t, int device);

}  // namespace kda
