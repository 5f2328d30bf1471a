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

void expect_struct_size_error(const kda_status& s, const char* init, size_t expected, size_t got, const char* call) {
  EXPECT_EQ(s.code, KDA_ERROR_INVALID_ARGUMENT) << call << ": " << s.message;
  const std::string want = "params.struct_size: expected " + std::to_string(expected) + " (call " + init +
                           "), got " + std::to_string(got);
  EXPECT_NE(std::string(s.message).find(want), std::string::npos) << call << ": \"" << s.message << "\" lacks \"" << want << "\"";
}

// Sizes of an older header: one field (8 bytes) short, and only the struct_size word (8 bytes with
// its padding).
constexpr size_t kShortBy = 8;
constexpr size_t kMinimal = 8;

TEST(ShortStructs, ForwardEntryPointsReadNothingPastStructSize) {
  kda_fwd_params full;
  kda_fwd_params_init(&full);
  static_assert(sizeof(kda_fwd_params) % 8 == 0, "the short copies stay 8-byte aligned");
  for (size_t bytes : {sizeof(kda_fwd_params) - kShortBy, kMinimal}) {
    ShortStruct<kda_fwd_params> p(full, bytes);
    const size_t n = sizeof(kda_fwd_params);
    size_t ws = 0;
    const kda_tensor none{};
    expect_struct_size_error(kda_fwd_workspace_size(p.get(), &ws), "kda_fwd_params_init", n, bytes, "kda_fwd_workspace_size");
    expect_struct_size_error(kda_fwd(p.get(), nullptr, 0, nullptr), "kda_fwd_params_init", n, bytes, "kda_fwd");
    expect_struct_size_error(kda_fwd_cpu(p.get(), KDA_CPU_RECURRENCE_F64, 1), "kda_fwd_params_init", n, bytes, "kda_fwd_cpu");
    expect_struct_size_error(kda_segment_transition_workspace_size(p.get(), none, none, &ws), "kda_fwd_params_init", n,
                             bytes, "kda_segment_transition_workspace_size");
    expect_struct_size_error(kda_segment_transition(p.get(), none, none, nullptr, 0, nullptr), "kda_fwd_params_init", n,
                             bytes, "kda_segment_transition");
    expect_struct_size_error(kda_fwd_prepared(p.get(), nullptr, 0, nullptr), "kda_fwd_params_init", n, bytes,
                             "kda_fwd_prepared");
  }
}

TEST(ShortStructs, DecodeEntryPointsReadNothingPastStructSize) {
  kda_decode_params full;
  kda_decode_params_init(&full);
  static_assert(sizeof(kda_decode_params) % 8 == 0, "the short copies stay 8-byte aligned");
  for (size_t bytes : {sizeof(kda_decode_params) - kShortBy, kMinimal}) {
    ShortStruct<kda_decode_params> p(full, bytes);
    const size_t n = sizeof(kda_decode_params);
    expect_struct_size_error(kda_decode(p.get(), nullptr), "kda_decode_params_init", n, bytes, "kda_decode");
    expect_struct_size_error(kda_decode_cpu(p.get(), 1), "kda_decode_params_init", n, bytes, "kda_decode_cpu");
  }
}

}  // namespace
}  // namespace kda::test
