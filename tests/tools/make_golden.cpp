// flash_kda_make_golden OUT_DIR [CASE ...]: writes the repository's golden-style cases
// (tests/golden_gen.h) to OUT_DIR in the shared golden format, index.json last (a folder with an
// index.json is complete). The build runs it into <build>/tests/golden (target
// flash_kda_golden_data); the tests read that folder, or $FLASH_KDA_REPO_GOLDEN_DIR.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "tests/golden_gen.h"

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help") {
    std::fprintf(stderr, "usage: %s OUT_DIR [CASE ...]   (cases: all by default)\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  std::vector<std::string> names(argv + 2, argv + argc);
  if (names.empty()) names = kda::test::repo_golden_case_names();
  const auto t0 = std::chrono::steady_clock::now();
  std::string error;
  std::remove((dir + "/index.json").c_str());  // incomplete until written again, last
  for (const std::string& name : names) {
    kda::test::GoldenCase c;
    if (!kda::test::make_repo_golden_case(name, &c, &error) || !kda::test::write_golden_case(dir, c, &error)) {
      std::fprintf(stderr, "flash_kda_make_golden: %s\n", error.c_str());
      return 1;
    }
  }
  if (!kda::test::write_golden_index(dir, names, &error)) {
    std::fprintf(stderr, "flash_kda_make_golden: %s\n", error.c_str());
    return 1;
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("flash_kda_make_golden: %zu cases in %s (%.1f s)\n", names.size(), dir.c_str(), s);
  return 0;
}
