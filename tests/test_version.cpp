// kda_version_string() names the commit the library was built from: "MAJOR.MINOR.PATCH+<git rev-parse
// --short=12 HEAD>", with "-dirty" when tracked files differed from that commit, or "+unknown" without
// git or in a copy vendored into another repository (cmake/flash_kda_commit.cmake, run at every build).
// Checked against the source tree as it is now, so a library built at another commit (the
// configure-time value before 2026-12-06 stayed at the commit of the last configure across later
// commits) fails here until it is rebuilt.
#include <gtest/gtest.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
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

void chomp(std::string* s) {
  while (!s->empty() && (s->back() == '\n' || s->back() == '\r')) s->pop_back();
}

// The same rule as cmake/flash_kda_commit.cmake: "unknown" unless the source folder is the top of a git
// work tree (a copy vendored into another repository names no commit of its own).
std::string expected_commit() {
  const std::string git = "git -C '" FLASH_KDA_SOURCE_DIR "' ";
  std::string top, commit, changes;
  if (!run(git + "rev-parse --show-toplevel 2>/dev/null", &top)) return "unknown";
  chomp(&top);
  char top_real[PATH_MAX], src_real[PATH_MAX];
  if (realpath(top.c_str(), top_real) == nullptr || realpath(FLASH_KDA_SOURCE_DIR, src_real) == nullptr ||
      std::string(top_real) != src_real)
    return "unknown";
  if (!run(git + "rev-parse --short=12 HEAD 2>/dev/null", &commit)) return "unknown";
  chomp(&commit);
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
