// Programmatic dependent launch (SM90): a kernel launched with
// cudaLaunchAttributeProgrammaticStreamSerialization may start while the previous kernel in the
// stream (its primary) is still running, once every CTA of the primary has called
// launch_dependents (or exited). Before touching anything the primary writes, it must call
// wait_primary, which blocks until the primary grid has completed and its memory is visible.
// Both are no-ops for kernels launched the ordinary way.
#pragma once

namespace kda::ptx {

// Lets the dependent grid launch early (call it at the top of the primary kernel: the dependent's
// CTAs then fill SMs as the primary's last wave drains).
__device__ __forceinline__ void launch_dependents() { asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory"); }

// Waits for the primary grid's completion and memory (every thread that reads its results calls it).
__device__ __forceinline__ void wait_primary() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }

}  // namespace kda::ptx
