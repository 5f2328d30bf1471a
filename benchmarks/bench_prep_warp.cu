// flash_kda_bench_prep_warp: issue 10's cheaper preparation measured before it is built. Runs the
// library's chunk_prep_kernel (bounded gate, no chunk bounds) and benchmarks/prep_warp_kernel.cuh on
// the same random inputs, compares every field of every chunk record, and times both (median of
// CUDA-graph replays of one launch). Not a kernel of the library (docs/performance_notes.md).
//
// Check: per field (Wd, Qp, Kr as bf16; Tb and P as hi + lo; Γ), the relative L2 difference against the
// library's record and the share of bit-identical elements; PASS when every field's relative L2 is
// below 4e-3 (a few bf16 roundings: the two kernels sum the norms, the gate's cumulative sum and A, M
// in different orders) and nothing is NaN or Inf. T need not be a multiple of 16: the warp preparation's
// partial-chunk kernel (kPartial) then runs, checked the same way (two such default cases).
// --warps W (a list): the same timings with each kernel held to at most W resident warps per SM (its
// dynamic shared memory raised until only that many fit): what either preparation achieves on the
// part of an SM a single-pass kernel could give it beside its consumer warpgroups.
// Usage: flash_kda_bench_prep_warp [--cases T:H,T:H,...] [--nw 1|2|4] [--warps W,W,...]
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "benchmarks/bench_common.cuh"
#include "benchmarks/prep_warp_kernel.cuh"
#include "benchmarks/prep_warp_host.h"
#include "src/kernels/sm90/chunk_prep_kernel.cuh"
#include "src/kernels/sm90/fast_div.h"
#include "src/launch/tensor_map.h"

namespace {

struct FieldDiff {
  const char* name;
  double num = 0, den = 0;
  size_t same = 0, count = 0, bad = 0;
  void add(double ref, double x, bool identical) {
    if (!std::isfinite(x)) ++bad;
    num += (x - ref) * (x - ref);
    den += ref * ref;
    same += identical;
    ++count;
  }
  double rel() const { return den > 0 ? std::sqrt(num / den) : std::sqrt(num); }
};

}  // namespace

int main(int argc, char** argv) {
  using namespace kda;
  using namespace kda::sm90;
  // The last two: a partial last chunk (8 and 4 valid tokens), records compared as every other.
  std::vector<std::pair<int, int>> cases = {{8192, 64}, {8192, 8}, {2048, 12}, {4096, 32}, {1024, 4}, {1000, 12}, {4100, 8}};
  int nw = 2;
  std::vector<int> warp_limits;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--warps" && i + 1 < argc)
      for (char* tok = std::strtok(argv[++i], ","); tok; tok = std::strtok(nullptr, ",")) warp_limits.push_back(std::atoi(tok));
    if (std::string(argv[i]) == "--nw" && i + 1 < argc) nw = std::atoi(argv[++i]);
    if (std::string(argv[i]) == "--cases" && i + 1 < argc) {
      cases.clear();
      for (char* tok = std::strtok(argv[++i], ","); tok; tok = std::strtok(nullptr, ",")) {
        int T = 0, H = 0;
        if (std::sscanf(tok, "%d:%d", &T, &H) == 2) cases.push_back({T, H});
      }
    }
  }
  using namespace kda::bench;
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const int64_t D = 128;
  bool ok = true;
  std::printf("%-8s %-4s %10s %10s %10s %8s  %s\n", "T", "H", "lib ms", "warp ms", "warp/lib", "nw",
              "check: field rel-L2 (bit-identical share)");
  for (const auto& tc : cases) {
    const int T = tc.first, H = tc.second;
    const size_t tok = static_cast<size_t>(T) * H;
    const int64_t nvc = (T + 15) / 16;  // the last chunk partial when T is not a multiple of 16
    uint16_t *q, *k, *g, *beta;
    float *A_log, *dt_bias;
    uint8_t *rec_ref, *rec;
    const size_t rec_bytes = static_cast<size_t>(H) * nvc * ChunkRecord::kBytes;
    CUDA_OK(cudaMalloc(&q, tok * D * 2));
    CUDA_OK(cudaMalloc(&k, tok * D * 2));
    CUDA_OK(cudaMalloc(&g, tok * D * 2));
    CUDA_OK(cudaMalloc(&beta, tok * 2));
    CUDA_OK(cudaMalloc(&A_log, H * 4));
    CUDA_OK(cudaMalloc(&dt_bias, H * D * 4));
    CUDA_OK(cudaMalloc(&rec_ref, rec_bytes));
    CUDA_OK(cudaMalloc(&rec, rec_bytes));
    fill_bf16<<<1024, 256>>>(q, tok * D, 11);
    fill_bf16<<<1024, 256>>>(k, tok * D, 12);
    fill_bf16<<<1024, 256>>>(g, tok * D, 14);
    fill_bf16<<<1024, 256>>>(beta, tok, 15);
    fill_f32<<<1, 256>>>(A_log, H, 17, false);
    fill_f32<<<64, 256>>>(dt_bias, H * D, 18, false);
    CUDA_OK(cudaMemset(rec, 0xff, rec_bytes));
    CUDA_OK(cudaDeviceSynchronize());

    PrepParams pp = bench_prep::dense_prep_params(q, k, g, beta, A_log, dt_bias, H, T);
    PrepParams pw = pp;
    pp.records = rec_ref;
    pw.records = rec;

    CUtensorMap maps[3];
    {
      const kda_status s = bench_prep::make_qkg_maps(q, k, g, H, T, &maps[0], &maps[1], &maps[2]);
      if (s.code != KDA_OK) {
        std::fprintf(stderr, "tensor map: %s\n", s.message);
        return 2;
      }
    }
    // Dynamic shared memory that leaves room for at most `warps` resident warps per SM (0: natural).
    auto limited = [](int natural, int warps_per_cta, int warps) {
      if (warps <= 0) return natural;
      const int ctas = std::max(1, warps / warps_per_cta);
      return std::max(natural, std::min(232448, 233472 / ctas - 1024 - 128));
    };
    int limit = 0;
    auto lib = [&] {
      auto kernel = chunk_prep_kernel<GateKind::kBounded, false>;
      const int smem = limited(static_cast<int>(sizeof(PrepSmem<GateKind::kBounded>)), 4, limit);
      CUDA_OK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      kernel<<<dim3(static_cast<unsigned>(nvc), H), 128, smem, stream>>>(pp);
      CUDA_OK(cudaGetLastError());
    };
    auto warp = [&] {
      auto launch = [&](auto kernel, int w) {
        const int smem = limited(w * static_cast<int>(sizeof(bench_prep::WarpSmem)) + 1024, w, limit);
        CUDA_OK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        kernel<<<dim3(static_cast<unsigned>((nvc + w - 1) / w), H), 32 * w, smem, stream>>>(maps[0], maps[1],
                                                                                             maps[2], pw);
        CUDA_OK(cudaGetLastError());
      };
      // Whole chunks, or the kernel with the partial last chunk's masks (T not a multiple of 16).
      if (T % 16 != 0) launch(bench_prep::prep_warp_kernel<1, true>, 1);
      else if (nw == 1) launch(bench_prep::prep_warp_kernel<1>, 1);
      else if (nw == 4) launch(bench_prep::prep_warp_kernel<4>, 4);
      else launch(bench_prep::prep_warp_kernel<2>, 2);
    };
    lib();
    warp();
    CUDA_OK(cudaStreamSynchronize(stream));
    std::vector<uint8_t> hr(rec_bytes), hw(rec_bytes);
    CUDA_OK(cudaMemcpy(hr.data(), rec_ref, rec_bytes, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(hw.data(), rec, rec_bytes, cudaMemcpyDeviceToHost));
    FieldDiff f[6] = {{"Wd"}, {"Qp"}, {"Kr"}, {"Tb"}, {"P"}, {"G"}};
    for (size_t r = 0; r < static_cast<size_t>(H) * nvc; ++r) {
      const uint8_t* a = hr.data() + r * ChunkRecord::kBytes;
      const uint8_t* b = hw.data() + r * ChunkRecord::kBytes;
      auto u16 = [](const uint8_t* p, size_t i) {
        uint16_t x;
        std::memcpy(&x, p + 2 * i, 2);
        return x;
      };
      for (size_t i = 0; i < 8192 / 2; ++i) {
        const uint16_t x = u16(a, i), y = u16(b, i);
        const size_t row = (i * 2 % ChunkRecord::kWqPanelBytes) / 128;
        f[row < 16 ? 0 : 1].add(bench::bf16_bits_value(x), bench::bf16_bits_value(y), x == y);
      }
      for (size_t i = 0; i < 4096 / 2; ++i) {
        const uint16_t x = u16(a + ChunkRecord::kKrOffset, i), y = u16(b + ChunkRecord::kKrOffset, i);
        f[2].add(bench::bf16_bits_value(x), bench::bf16_bits_value(y), x == y);
      }
      for (int fld = 0; fld < 2; ++fld) {
        const uint32_t hi_off = fld == 0 ? ChunkRecord::kTbHiOffset : ChunkRecord::kPHiOffset;
        const uint32_t lo_off = fld == 0 ? ChunkRecord::kTbLoOffset : ChunkRecord::kPLoOffset;
        for (size_t i = 0; i < 256; ++i) {
          const uint16_t xh = u16(a + hi_off, i), xl = u16(a + lo_off, i), yh = u16(b + hi_off, i), yl = u16(b + lo_off, i);
          f[3 + fld].add(bench::bf16_bits_value(xh) + bench::bf16_bits_value(xl), bench::bf16_bits_value(yh) + bench::bf16_bits_value(yl), xh == yh && xl == yl);
        }
      }
      for (size_t i = 0; i < 128; ++i) {
        float x, y;
        std::memcpy(&x, a + ChunkRecord::kGammaOffset + 4 * i, 4);
        std::memcpy(&y, b + ChunkRecord::kGammaOffset + 4 * i, 4);
        f[5].add(x, y, x == y);
      }
    }
    bool pass = true;
    std::string check;
    for (const FieldDiff& d : f) {
      char buf[96];
      std::snprintf(buf, sizeof(buf), "%s %.2e (%.0f%%)%s ", d.name, d.rel(), 100.0 * d.same / std::max<size_t>(1, d.count),
                    d.bad ? " NONFINITE" : "");
      check += buf;
      pass = pass && d.rel() < 4e-3 && d.bad == 0;
    }
    ok = ok && pass;
    const double t_lib = graph_ms(stream, lib);
    const double t_warp = graph_ms(stream, warp);
    const double t_lib2 = graph_ms(stream, lib);
    const double t_warp2 = graph_ms(stream, warp);
    std::printf("%-8d %-4d %10.4f %10.4f %10.3f %8d  %s%s  (second round %.4f / %.4f)\n", T, H, t_lib, t_warp,
                t_warp / t_lib, nw, check.c_str(), pass ? "PASS" : "FAIL", t_lib2, t_warp2);
    for (int w : warp_limits) {
      limit = w;
      const double a = graph_ms(stream, lib), b = graph_ms(stream, warp);
      const double sms = 132.0, chunks = static_cast<double>(H) * nvc;
      std::printf("  at most %2d warps per SM: lib %.4f ms (%.2f us per chunk per SM), warp %.4f ms (%.2f us)\n", w, a,
                  1e3 * a * sms / chunks, b, 1e3 * b * sms / chunks);
      limit = 0;
    }
    std::fflush(stdout);
    for (void* ptr : {(void*)q, (void*)k, (void*)g, (void*)beta, (void*)A_log, (void*)dt_bias, (void*)rec_ref, (void*)rec})
      CUDA_OK(cudaFree(ptr));
  }
  return ok ? 0 : 1;
}
