// libFuzzer entry point (clang, -fsanitize=fuzzer): the harnesses of fuzz_case.h, one per target
// (flash_kda_fuzz: kda_fwd's; flash_kda_fuzz_decode: kda_decode's; flash_kda_fuzz_cp: the
// context-parallel entry points'). Seed them with the regression corpus, tests/fuzz/corpus (see
// tests/fuzz/CMakeLists.txt for the commands; .ci/run runs each for a short while).
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_case.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
#if defined(FLASH_KDA_FUZZ_DECODE)
  kda::fuzz::run_one_decode(data, size);  // flash_kda_fuzz_decode: kda_decode's harness
#elif defined(FLASH_KDA_FUZZ_CP)
  kda::fuzz::run_one_cp(data, size);  // flash_kda_fuzz_cp: the context-parallel entry points' harness
#else
  kda::fuzz::run_one(data, size);
#endif
  return 0;
}
