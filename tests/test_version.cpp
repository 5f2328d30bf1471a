// kda_version_string() names the commit the library was built from: "MAJOR.MINOR.PATCH+<git rev-parse
// --short=12 HEAD>", with "-dirty" when tracked files differed from that commit, or "+unknown" without
// git (cmake/flash_kda_commit.cmake, run at every build). Checked against the source tree as it is now, so
// a library built at another commit (the configure-time value before 2026-12-06 stayed at the commit of
// the last configure across later commits) fails here until it is rebuilt.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "flash_kda/flash_kda.h"

namespace {

// The command's standard output, and whether it exited 0.
bool run(const std::string& cmd, std::string* out) {
  out->clear();
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return false;
  char buf[256];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out->append(buf, n);
  return pclose(p) == 0;
}

std::string expected_commit() {
  const std::string git = "git -C '" FLASH_KDA_SOURCE_DIR "' ";
  std::string commit, changes;
  if (!run(git + "rev-parse --short=12 HEAD 2>/dev/null", &commit)) return "unknown";
  while (!commit.empty() && (commit.back() == '\n' || commit.back() == '\r')) commit.pop_back();
  if (commit.empty()) return "unknown";
  if (!run(git + "status --porcelain --untracked-files=no 2>/dev/null", &changes) || !changes.empty())
    commit += "-dirty";
  return commit;
}

TEST(Version, NamesTheCommitItWasBuiltFrom) {
  const std::string expected = std::to_string(FLASH_KDA_VERSION_MAJOR) + "." + std::to_string(FLASH_KDA_VERSION_MINOR) +
                               "." + std::to_string(FLASH_KDA_VERSION_PATCH) + "+" + expected_commit();
  EXPECT_EQ(std::string(kda_version_string()), expected)
      << "the library's version names another state of the source tree than " FLASH_KDA_SOURCE_DIR
         " is in now: rebuild (cmake --build) before running the tests";
}

}  // namespace
