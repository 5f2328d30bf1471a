// libFuzzer entry point (clang, -fsanitize=fuzzer): the harness of fuzz_case.h. Seed it with the
// regression corpus, tests/fuzz/corpus (see tests/fuzz/CMakeLists.txt for the commands).
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_case.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
#if defined(FLASH_KDA_FUZZ_DECODE)
  kda::fuzz::run_one_decode(data, size);  // flash_kda_fuzz_decode: kda_decode's harness
#else
  kda::fuzz::run_one(data, size);
#endif
  return 0;
}
