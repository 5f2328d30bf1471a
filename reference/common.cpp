// Non-template helpers of the CPU reference (see common.h): bf16 rounding from double, output and
// state stores, clamped sequence ranges, and the thread pool over (sequence, value head).
#include "reference/common.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace kda::reference {

uint16_t double_to_bf16(double x) {
  if (std::isnan(x)) return 0x7fc0;
  if (x == 0.0 || std::isinf(x)) return float_to_bf16(static_cast<float>(x));  // exact (keeps the sign)
  // Round to 8 significant bits: the quantum is 2^(e-8) for |x| in [2^(e-1), 2^e), and never below
  // bf16's subnormal step 2^-133. Scaling by a power of two is exact; nearbyint rounds ties to even.
  int e = 0;
  std::frexp(x, &e);
  const int qexp = std::max(e - 8, -133);
  const double r = std::ldexp(std::nearbyint(std::ldexp(x, -qexp)), qexp);
  if (std::fabs(r) >= 0x1p128) return x > 0 ? 0x7f80 : 0xff80;  // overflow to +-inf
  return float_to_bf16(static_cast<float>(r));                   // r is a bf16 value: exact
}

namespace {

template <class R>
void store_out_row_impl(const kda_tensor& out, int64_t token, int64_t head, int64_t T, int64_t n, const R* src) {
  uint16_t* dst = static_cast<uint16_t*>(out.data) + row_offset(out, token, head, T);
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<R, double>)
      dst[i] = double_to_bf16(src[i]);
    else
      dst[i] = float_to_bf16(src[i]);
  }
}

template <class R>
void store_state_impl(const Problem& pr, const kda_tensor& t, int64_t n, int64_t hv, const R* S) {
  if (t.data == nullptr) return;
  const int64_t count = pr.V * pr.K;
  const int64_t base = (n * pr.HV + hv) * count;
  if (t.dtype == KDA_DTYPE_F32) {
    float* dst = static_cast<float*>(t.data) + base;
    for (int64_t i = 0; i < count; ++i) dst[i] = static_cast<float>(S[i]);
  } else {
    uint16_t* dst = static_cast<uint16_t*>(t.data) + base;
    for (int64_t i = 0; i < count; ++i) {
      if constexpr (std::is_same_v<R, double>)
        dst[i] = double_to_bf16(S[i]);
      else
        dst[i] = float_to_bf16(S[i]);
    }
  }
}

}  // namespace

void store_out_row(const kda_tensor& out, int64_t token, int64_t head, int64_t T, int64_t n, const double* src) {
  store_out_row_impl(out, token, head, T, n, src);
}
void store_out_row(const kda_tensor& out, int64_t token, int64_t head, int64_t T, int64_t n, const float* src) {
  store_out_row_impl(out, token, head, T, n, src);
}
void store_state(const Problem& pr, const kda_tensor& t, int64_t n, int64_t hv, const double* S) {
  store_state_impl(pr, t, n, hv, S);
}
void store_state(const Problem& pr, const kda_tensor& t, int64_t n, int64_t hv, const float* S) {
  store_state_impl(pr, t, n, hv, S);
}

SeqRange sequence_range(const Problem& pr, int64_t n) {
  SeqRange r;
  if (!pr.varlen) {
    r.bos = n * pr.T;
    r.eos = r.bos + pr.T;
    return r;
  }
  const kda_tensor& cu = pr.params->cu_seqlens;
  auto entry = [&](int64_t i) -> int64_t {
    if (cu.dtype == KDA_DTYPE_I32) return static_cast<const int32_t*>(cu.data)[i];
    return static_cast<const int64_t*>(cu.data)[i];
  };
  r.bos = std::clamp<int64_t>(entry(n), 0, pr.T_total);
  r.eos = std::clamp<int64_t>(entry(n + 1), r.bos, pr.T_total);
  return r;
}

kda_status for_each_seq_head(int64_t N, int64_t HV, int num_threads,
                             const std::function<void(int64_t n, int64_t hv)>& fn) {
  const int64_t items = N * HV;
  if (num_threads <= 0) num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int64_t workers = std::min<int64_t>(num_threads, items);
  std::atomic<int64_t> next{0};
  std::mutex error_mutex;
  std::string error;
  auto work = [&]() {
    try {
      for (int64_t i = next.fetch_add(1); i < items; i = next.fetch_add(1)) fn(i / HV, i % HV);
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(error_mutex);
      error = e.what();
      next.store(items);  // stop the others early
    }
  };
  std::vector<std::thread> threads;
  for (int64_t w = 1; w < workers; ++w) {
    try {
      threads.emplace_back(work);
    } catch (const std::exception&) {
      break;  // could not start more threads: the calling thread and those started do the work
    }
  }
  work();
  for (std::thread& t : threads) t.join();
  if (!error.empty())
    return make_error(KDA_ERROR_INVALID_ARGUMENT, "cpu reference: a worker failed (%s)", error.c_str());
  return make_ok();
}

}  // namespace kda::reference
