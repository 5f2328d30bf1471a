// Device checks of api.cpp that the other entry points share (api_decode.cpp, api_cp.cpp).
#pragma once

#include <cstddef>

#include "src/api/memory_rules.h"
#include "src/api/problem.h"

namespace kda {

// Compute capability 9.0 on the current device ("requires compute capability 9.0, found X.Y").
kda_status check_sm90_device(int* device);
// `ptr` (may be NULL) is device or managed memory of `device`, and [ptr, ptr + bytes) lies inside the
// allocation it points into (the workspace: its needed bytes).
kda_status check_device_pointer(const char* name, const void* ptr, size_t bytes, int device);
// The same for each tensor of a call, in order (the first failure is reported): its data and the bytes
// from its first to one past its last element (tensor_span_bytes).
kda_status check_device_tensors(const NamedTensor* tensors, size_t count, int device);

}  // namespace kda
