// The seeded fuzz driver (any compiler; the fuzz build adds ASan + UBSan): replays the regression
// corpus (built in, plus files and folders given), then runs random inputs (fresh bytes, or
// mutations of the corpus) from a seed for a number of iterations or seconds. Same harness as the
// libFuzzer target (fuzz_case.h). Exit status 0; an invariant or sanitizer report aborts. --decode runs
// kda_decode's harness instead (run_one_decode: no built-in corpus; random inputs, mutated from
// random sources, and the files given); --cp the context-parallel entry points' (run_one_cp: kda_fwd's
// inputs and corpus, with D, M, the workspace and a combine laid out from a hash of each input). A random run
// that never got past the validation (no call reached the CPU path or the device check) fails: it tested
// nothing.
//
//   flash_kda_fuzz_driver [--decode | --cp] [--seed N] [--iterations N] [--seconds S] [--max-len N] [--verbose]
//                         [--no-builtin] [PATH ...]
//   flash_kda_fuzz_driver --emit-corpus DIR      (writes the regression inputs as files)
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_case.h"

namespace {

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

void collect(const std::string& path, std::vector<std::pair<std::string, std::vector<uint8_t>>>* out) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    std::fprintf(stderr, "flash_kda_fuzz_driver: cannot read %s\n", path.c_str());
    std::exit(2);
  }
  if (!S_ISDIR(st.st_mode)) {
    out->emplace_back(path, read_bytes(path));
    return;
  }
  DIR* d = opendir(path.c_str());
  std::vector<std::string> names;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') names.push_back(e->d_name);
  closedir(d);
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) collect(path + "/" + n, out);
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t seed = 1;
  long long iterations = -1;
  double seconds = 0;
  size_t max_len = 256;
  bool verbose = false, decode = false, cp = false;
  std::vector<std::pair<std::string, std::vector<uint8_t>>> corpus = kda::fuzz::regression_inputs();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) std::exit(2);
      return argv[++i];
    };
    if (a == "--seed") seed = std::strtoull(next(), nullptr, 0);
    else if (a == "--iterations") iterations = std::atoll(next());
    else if (a == "--seconds") seconds = std::atof(next());
    else if (a == "--max-len") max_len = static_cast<size_t>(std::atoll(next()));
    else if (a == "--verbose") kda::fuzz::set_verbose(verbose = true);
    else if (a == "--no-builtin") corpus.clear();  // only the inputs of the paths that follow
    else if (a == "--decode") decode = true, corpus.clear();  // (the built-in corpus is kda_fwd's)
    else if (a == "--cp") cp = true;  // (kda_fwd's inputs: its corpus serves)
    else if (a == "--emit-corpus") {
      const std::string dir = next();
      mkdir(dir.c_str(), 0755);
      for (const auto& [name, bytes] : kda::fuzz::regression_inputs()) {
        std::ofstream f(dir + "/" + name, std::ios::binary);
        f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
      }
      std::printf("wrote %zu regression inputs to %s\n", kda::fuzz::regression_inputs().size(), dir.c_str());
      return 0;
    } else if (a == "--help" || a == "-h") {
      std::printf("usage: %s [--decode | --cp] [--seed N] [--iterations N] [--seconds S] [--max-len N] [PATH ...] | --emit-corpus DIR\n",
                  argv[0]);
      return 0;
    } else {
      collect(a, &corpus);
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  auto run = decode ? kda::fuzz::run_one_decode : cp ? kda::fuzz::run_one_cp : kda::fuzz::run_one;
  auto summary = [decode, cp](const char* what) {
    if (decode) {
      const kda::fuzz::DecodeStats& d = kda::fuzz::decode_stats();
      std::printf("%s: %lld decode inputs; honest params %lld; kda_decode_cpu ran %lld; determinism checks %lld\n", what,
                  d.inputs, d.honest, d.cpu_ok, d.deterministic_checked);
      return;
    }
    if (cp) {
      const kda::fuzz::CpStats& c = kda::fuzz::cp_stats();
      std::printf("%s: %lld inputs; at the device check: kda_segment_transition %lld, kda_fwd_prepared %lld, "
                  "kda_combine_transitions %lld\n", what, c.inputs, c.transition_reached, c.prepared_reached,
                  c.combine_reached);
      return;
    }
    const kda::fuzz::Stats& s = kda::fuzz::stats();
    std::printf("%s: %lld inputs; shape query accepted %lld; honest params %lld; kda_fwd_cpu ran %lld; tame checks %lld\n",
                what, s.inputs, s.shape_query_ok, s.honest, s.cpu_ok, s.tame_checked);
  };
  for (const auto& [name, bytes] : corpus) {
    if (verbose) std::printf("%s\n", name.c_str());
    run(bytes.data(), bytes.size());
  }
  std::printf("corpus: %zu inputs replayed (%.1f s)\n", corpus.size(), elapsed());
  summary("  so far");
  std::fflush(stdout);

  if (iterations < 0 && seconds <= 0) return 0;
  std::mt19937_64 rng(seed);
  if (corpus.empty() && !decode) corpus = kda::fuzz::regression_inputs();  // mutation sources
  for (int k = 0; corpus.empty() && k < 32; ++k) {  // (decode: random sources of a header's length and some ops)
    std::vector<uint8_t> src(6 + 4 * (k % 5));
    for (uint8_t& b : src) b = static_cast<uint8_t>(rng());
    corpus.emplace_back("random source", src);
  }
  long long runs = 0;
  const double t_random = elapsed();
  std::vector<uint8_t> input;
  while ((iterations < 0 || runs < iterations) && (seconds <= 0 || elapsed() - t_random < seconds)) {
    if (rng() % 2 == 0) {  // fresh bytes
      input.resize(rng() % (max_len + 1));
      for (uint8_t& b : input) b = static_cast<uint8_t>(rng());
    } else {  // a corpus input, mutated: byte changes, appended random ops, truncation
      input = corpus[rng() % corpus.size()].second;
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits; ++e) {
        const uint64_t what = rng() % 3;
        if (what == 0 && !input.empty()) input[rng() % input.size()] = static_cast<uint8_t>(rng());
        if (what == 1) for (int k = 0; k < 11; ++k) input.push_back(static_cast<uint8_t>(rng()));
        if (what == 2 && !input.empty()) input.resize(rng() % (input.size() + 1));
      }
    }
    run(input.data(), input.size());
    ++runs;
  }
  const double t = elapsed() - t_random;
  std::printf("random: %lld inputs in %.1f s (%.0f per second), seed %llu: no invariant broken\n", runs, t,
              t > 0 ? runs / t : 0.0, static_cast<unsigned long long>(seed));
  summary("  total");
  // A run whose inputs never got past the validation tested nothing but the refusals: a failure.
  bool reached = true;
  if (decode) {
    const kda::fuzz::DecodeStats& d = kda::fuzz::decode_stats();
    reached = d.honest > 0 && d.cpu_ok > 0 && d.deterministic_checked > 0;
  } else if (cp) {
    const kda::fuzz::CpStats& c = kda::fuzz::cp_stats();
    reached = c.transition_reached > 0 && c.prepared_reached > 0 && c.combine_reached > 0;
  } else {
    const kda::fuzz::Stats& s = kda::fuzz::stats();
    reached = s.shape_query_ok > 0 && s.cpu_ok > 0 && s.tame_checked > 0;
  }
  if (runs > 0 && !reached) {
    std::printf("FAILED: no input of this run reached every call it checks (see the counts above)\n");
    return 1;
  }
  return 0;
}
