// A params struct from an older, shorter header (struct_size below this library's sizeof) is refused
// by name, and no byte past its end is read: each entry point that takes kda_fwd_params or
// kda_decode_params gets a struct whose last byte is the last readable byte of a page, the next
// page mapped PROT_NONE, so any read past it faults. Without GPU (the checks come before the
// device's) and on the GPU machine alike.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "flash_kda/flash_kda.h"

namespace kda::test {
namespace {

// The first `bytes` bytes of `full`, with struct_size = bytes, ending at a page that cannot be read.
template <typename P>
class ShortStruct {
 public:
  ShortStruct(const P& full, size_t bytes) : page_(static_cast<size_t>(sysconf(_SC_PAGESIZE))) {
    void* m = mmap(nullptr, 2 * page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(m, MAP_FAILED);
    base_ = static_cast<unsigned char*>(m);
    EXPECT_EQ(mprotect(base_ + page_, page_, PROT_NONE), 0);
    at_ = base_ + page_ - bytes;
    std::memcpy(at_, &full, bytes);
    const uint32_t size = static_cast<uint32_t>(bytes);
    std::memcpy(at_ + offsetof(P, struct_size), &size, sizeof(size));
  }
  ~ShortStruct() { munmap(base_, 2 * page_); }
  ShortStruct(const ShortStruct&) = delete;
  ShortStruct& operator=(const ShortStruct&) = delete;
  const P* get() const { return reinterpret_cast<const P*>(at_); }

 private:
  size_t page_;
  unsigned char* base_ = nullptr;
  unsigned char* at_ = nullptr;
};

// Sizes of an older header: one field (8 bytes) short, and only the struct_size word (8 bytes with
// its padding).
constexpr size_t kShortBy = 8;
constexpr size_t kMinimal = 8;

// For each short size of P: `calls(params, what)` runs the entry points on a short copy of the struct
// `init` fills, and each status it returns through `what(status, name)` must name the size.
template <typename P, typename Calls>
void each_short_struct(void (*init)(P*), const char* init_name, Calls calls) {
  static_assert(sizeof(P) % 8 == 0, "the short copies stay 8-byte aligned");
  P full;
  init(&full);
  for (size_t bytes : {sizeof(P) - kShortBy, kMinimal}) {
    ShortStruct<P> p(full, bytes);
    const std::string want = "params.struct_size: expected " + std::to_string(sizeof(P)) + " (call " + init_name +
                             "), got " + std::to_string(bytes);
    calls(p.get(), [&](const kda_status& s, const char* call) {
      EXPECT_EQ(s.code, KDA_ERROR_INVALID_ARGUMENT) << call << ": " << s.message;
      EXPECT_NE(std::string(s.message).find(want), std::string::npos)
          << call << ": \"" << s.message << "\" lacks \"" << want << "\"";
    });
  }
}

TEST(ShortStructs, ForwardEntryPointsReadNothingPastStructSize) {
  each_short_struct<kda_fwd_params>(kda_fwd_params_init, "kda_fwd_params_init", [](const kda_fwd_params* p, auto what) {
    size_t ws = 0;
    const kda_tensor none{};
    what(kda_fwd_workspace_size(p, &ws), "kda_fwd_workspace_size");
    what(kda_fwd(p, nullptr, 0, nullptr), "kda_fwd");
    what(kda_fwd_cpu(p, KDA_CPU_RECURRENCE_F64, 1), "kda_fwd_cpu");
    what(kda_segment_transition_workspace_size(p, none, none, &ws), "kda_segment_transition_workspace_size");
    what(kda_segment_transition(p, none, none, nullptr, 0, nullptr), "kda_segment_transition");
    what(kda_fwd_prepared(p, nullptr, 0, nullptr), "kda_fwd_prepared");
  });
}

TEST(ShortStructs, DecodeEntryPointsReadNothingPastStructSize) {
  each_short_struct<kda_decode_params>(kda_decode_params_init, "kda_decode_params_init",
                                       [](const kda_decode_params* p, auto what) {
                                         what(kda_decode(p, nullptr), "kda_decode");
                                         what(kda_decode_cpu(p, 1), "kda_decode_cpu");
                                       });
}

}  // namespace
}  // namespace kda::test
