// The benchmarks' --filter: which cases of cases.json run. Host code only (tested in
// tests/test_building_blocks.cpp).
#pragma once

#include <algorithm>
#include <string>

namespace kda::bench {

// Whether `name` is selected by `filter`: a comma-separated list of parts, each a substring of the
// names it selects ("T8192_H8" selects T8192_H8 and T8192_H8_LM), or, written "=NAME", that one name
// exactly ("=T512_H32" selects T512_H32 but not B64_T512_H32). An empty filter selects every case.
inline bool matches(const std::string& filter, const std::string& name) {
  if (filter.empty()) return true;
  size_t start = 0;
  while (start <= filter.size()) {
    const size_t end = std::min(filter.find(',', start), filter.size());
    const std::string part = filter.substr(start, end - start);
    if (!part.empty() && (part[0] == '=' ? name == part.substr(1) : name.find(part) != std::string::npos))
      return true;
    start = end + 1;
  }
  return false;
}

}  // namespace kda::bench
