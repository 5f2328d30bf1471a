// The fixture of the validation tests (test_validation*.cpp, test_memory_rules.cpp): a valid
// problem (B = 1, T = 2, H = HV = 1, every optional tensor present) in host buffers, and
// ExpectError, which checks that both host entry points report the same error for the params.
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "flash_kda/flash_kda.h"

namespace kda::test {

// A valid problem: B = 1, T = 2, H = HV = 1, every optional tensor present.
class Validation : public ::testing::Test {
 protected:
  static constexpr int64_t D = 128;

  void SetUp() override {
    q_.assign(2 * D, 0x3f80), k_ = q_, v_ = q_, g_ = q_, out_ = q_;
    beta_.assign(2, 0x3f80);
    A_log_.assign(1, 0.5f), dt_bias_.assign(D, 0.1f);
    init_.assign(D * D, 0.0f), final_.assign(D * D, 0.0f);
    cu_ = {0, 2};
    kda_fwd_params_init(&p_);
    const int64_t s4[4] = {1, 2, 1, D}, sst[4] = {1, 1, D, D}, sdt[2] = {1, D}, sa[1] = {1}, scu[1] = {2};
    p_.q = kda_tensor_contiguous(q_.data(), KDA_DTYPE_BF16, 4, s4);
    p_.k = kda_tensor_contiguous(k_.data(), KDA_DTYPE_BF16, 4, s4);
    p_.v = kda_tensor_contiguous(v_.data(), KDA_DTYPE_BF16, 4, s4);
    p_.g = kda_tensor_contiguous(g_.data(), KDA_DTYPE_BF16, 4, s4);
    p_.beta = kda_tensor_contiguous(beta_.data(), KDA_DTYPE_BF16, 3, s4);
    p_.out = kda_tensor_contiguous(out_.data(), KDA_DTYPE_BF16, 4, s4);
    p_.A_log = kda_tensor_contiguous(A_log_.data(), KDA_DTYPE_F32, 1, sa);
    p_.dt_bias = kda_tensor_contiguous(dt_bias_.data(), KDA_DTYPE_F32, 2, sdt);
    p_.initial_state = kda_tensor_contiguous(init_.data(), KDA_DTYPE_F32, 4, sst);
    p_.final_state = kda_tensor_contiguous(final_.data(), KDA_DTYPE_F32, 4, sst);
    p_.cu_seqlens = kda_tensor_contiguous(cu_.data(), KDA_DTYPE_I64, 1, scu);
  }

  // The status of the invalid params: the same code and message from both entry points, except
  // that the workspace-size query looks at shapes only and accepts NULL data.
  void ExpectError(kda_status_code code, std::initializer_list<const char*> parts) {
    const kda_status c = kda_fwd_cpu(&p_, KDA_CPU_RECURRENCE_F64, 1);
    ASSERT_EQ(c.code, code) << kda_status_code_name(c.code) << ": " << c.message;
    size_t bytes = 0;
    const kda_status s = kda_fwd_workspace_size(&p_, &bytes);
    if (s.code == KDA_OK) {
      EXPECT_NE(std::string(c.message).find("got NULL data"), std::string::npos)
          << "only NULL data is accepted by the shape-only query; got \"" << c.message << "\"";
    } else {
      EXPECT_EQ(s.code, c.code);
      EXPECT_STREQ(c.message, s.message);
    }
    for (const char* part : parts) EXPECT_NE(std::string(c.message).find(part), std::string::npos)
        << "message \"" << c.message << "\" lacks \"" << part << "\"";
  }
  void ExpectInvalid(std::initializer_list<const char*> parts) { ExpectError(KDA_ERROR_INVALID_ARGUMENT, parts); }

  // A rule on addresses (src/api/memory_rules.h): kda_fwd_cpu and kda_fwd (which validates before
  // it looks for a device) report it; the shape-only query, which may be given stand-in pointers,
  // accepts the params.
  void ExpectAddressError(std::initializer_list<const char*> parts) {
    const kda_status c = kda_fwd_cpu(&p_, KDA_CPU_RECURRENCE_F64, 1);
    ASSERT_EQ(c.code, KDA_ERROR_INVALID_ARGUMENT) << kda_status_code_name(c.code) << ": " << c.message;
    const kda_status d = kda_fwd(&p_, nullptr, 0, nullptr);
    EXPECT_EQ(d.code, c.code) << d.message;
    EXPECT_STREQ(d.message, c.message);
    size_t bytes = 0;
    const kda_status s = kda_fwd_workspace_size(&p_, &bytes);
    EXPECT_EQ(s.code, KDA_OK) << s.message;
    for (const char* part : parts) EXPECT_NE(std::string(c.message).find(part), std::string::npos)
        << "message \"" << c.message << "\" lacks \"" << part << "\"";
  }

  std::vector<uint16_t> q_, k_, v_, g_, beta_, out_;
  std::vector<float> A_log_, dt_bias_, init_, final_;
  std::vector<int64_t> cu_;
  kda_fwd_params p_;
};

}  // namespace kda::test
