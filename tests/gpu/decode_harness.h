// GPU harness of the decode tests: mirrors a host RandomDecode (tests/random_decode.h) on the
// device, runs kda_decode (eagerly or through a captured CUDA graph) and copies out and the state
// pool back; the CPU oracle (kda_decode_cpu, float64) on a copy; error metrics.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "flash_kda/flash_kda.h"
#include "tests/random_decode.h"

namespace kda::test {

// Device copy of every tensor of a RandomDecode (same shapes and strides).
class DeviceDecode {
 public:
  explicit DeviceDecode(RandomDecode& host);
  ~DeviceDecode();
  DeviceDecode(const DeviceDecode&) = delete;
  DeviceDecode& operator=(const DeviceDecode&) = delete;

  kda_decode_params& params() { return dev_; }
  void upload();    // every tensor, pool and out included
  void download();  // out and the pool back into the host buffers (synchronises)

 private:
  RandomDecode& host_;
  kda_decode_params host_params_;
  kda_decode_params dev_;
  std::vector<void*> allocations_;
};

// Runs kda_decode on the device for `d` (uploaded first, downloaded after): `repeats` calls with
// kernel_config `config`.
kda_status run_decode_gpu(RandomDecode& d, int config = 0, int repeats = 1, int check_indices = 0,
                          int trusted_pointers = 0);

// The CPU float64 path on `d` in place.
kda_status run_decode_cpu(RandomDecode& d, int check_indices = 0);

// Relative L2 errors of a GPU run against the CPU run on a copy: out, and the named slots of the
// pool (every slot, since unnamed ones are equal on both sides).
struct DecodeErrors {
  double out = 0, pool = 0;
  size_t non_finite = 0;
};
DecodeErrors decode_gpu_vs_cpu(RandomDecode& d, int config = 0);
void expect_decode_close(const std::string& what, const DecodeErrors& e, double out_tol, double pool_tol);

// Pool values as doubles (fp32 or bf16).
std::vector<double> pool_values(const RandomDecode& d);

}  // namespace kda::test
