// The fixture of the host tests of context parallelism across GPUs (test_cp_api.cpp,
// test_cp_memory_rules.cpp): a valid shard in host buffers with D and M packed as the driver packs
// them, and a check that a status is an invalid-argument error whose message names given parts.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "flash_kda/flash_kda.h"

namespace kda::test {

// A valid shard: B = 2, T = 40, H = HV = 2 (host buffers), D and M for both sequences, packed in
// one [2, 2, 256, 128] buffer as the driver does.
class CpShard : public ::testing::Test {
 protected:
  static constexpr int64_t D = 128;

  void SetUp() override {
    const int64_t B = 2, T = 40, H = 2;
    x_.assign(B * T * H * D, 0x3f80);
    beta_.assign(B * T * H, 0x3f80);
    out_ = x_;
    kda_fwd_params_init(&p_);
    const int64_t s4[4] = {B, T, H, D};
    p_.q = kda_tensor_contiguous(x_.data(), KDA_DTYPE_BF16, 4, s4);
    p_.k = p_.q;
    p_.v = p_.q;
    p_.g = p_.q;
    p_.beta = kda_tensor_contiguous(beta_.data(), KDA_DTYPE_BF16, 3, s4);
    p_.out = kda_tensor_contiguous(out_.data(), KDA_DTYPE_BF16, 4, s4);
    packed_.assign(2 * 2 * 256 * D, 0.0f);
    D_ = view(packed_.data(), 2);
    M_ = view(packed_.data() + D * D, 2);
    states_.assign(4 * 2 * D * D, 0.0f);
  }

  // [rows, 2, 128, 128] view of a packed [rows, 2, 256, 128] buffer.
  static kda_tensor view(float* data, int64_t rows) {
    const int64_t shape[4] = {rows, 2, D, D};
    kda_tensor t = kda_tensor_contiguous(data, KDA_DTYPE_F32, 4, shape);
    t.stride[0] = 2 * 256 * D;
    t.stride[1] = 256 * D;
    return t;
  }

  static void ExpectNames(const kda_status& s, std::vector<std::string> parts) {
    EXPECT_EQ(s.code, KDA_ERROR_INVALID_ARGUMENT) << kda_status_code_name(s.code) << ": " << s.message;
    for (const std::string& part : parts)
      EXPECT_NE(std::string(s.message).find(part), std::string::npos) << "message \"" << s.message << "\" lacks \"" << part << "\"";
  }

  std::vector<uint16_t> x_, beta_, out_;
  std::vector<float> packed_, states_;
  kda_fwd_params p_;
  kda_tensor D_, M_;
};

}  // namespace kda::test
