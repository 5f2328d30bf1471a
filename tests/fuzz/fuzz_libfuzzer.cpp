// libFuzzer entry point (clang, -fsanitize=fuzzer): the harness of fuzz_case.h. Seed it with the
// regression corpus, tests/fuzz/corpus (see tests/fuzz/CMakeLists.txt for the commands).
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_case.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kda::fuzz::run_one(data, size);
  return 0;
}
