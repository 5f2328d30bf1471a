// kda_decode's argument validation (every argument named with what was expected and what was given,
// before any kernel; NULL params on both entry points) and its launch plan (src/launch/decode_plan.h:
// the kernel configurations, the automatic choice per shape). No GPU needed. The decode arithmetic on
// the CPU: test_decode_cpu.cpp.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "src/api/decode_problem.h"
#include "src/launch/decode_plan.h"
#include "tests/random_decode.h"

namespace kda::test {
namespace {

constexpr int64_t D = 128;

// ---- validation -----------------------------------------------------------------------------------

std::string validation_message(kda_decode_params p) {
  DecodeProblem dp;
  const kda_status st = validate_decode(&p, ValidateMode::kDevice, &dp);
  return st.code == KDA_OK ? "" : st.message;
}

TEST(DecodeValidation, NullParams) {
  for (const kda_status& st : {kda_decode_cpu(nullptr, 1), kda_decode(nullptr, nullptr)}) {
    EXPECT_EQ(st.code, KDA_ERROR_INVALID_ARGUMENT);
    EXPECT_STREQ(st.message, "params: expected a non-null pointer, got NULL");
  }
}

// A gate outside the enum, as a C caller may pass it: named by both entry points, and read as an
// integer all the way (the decode fuzz harness found it copied through the enum type, which UBSan
// reports; CI runs this test in its sanitizer build).
TEST(DecodeValidation, GateOutsideTheEnumIsNamed) {
  DecodeSpec s;
  s.B = 1;
  s.T = 1;
  s.slots = 2;
  RandomDecode d = make_random_decode(s);
  for (const int32_t raw : {3, 255, -1}) {
    kda_decode_params p = d.params();
    std::memcpy(&p.gate, &raw, sizeof(raw));
    EXPECT_NE(validation_message(p).find("gate: expected"), std::string::npos) << validation_message(p);
    const kda_status cpu = kda_decode_cpu(&p, 1);
    EXPECT_EQ(cpu.code, KDA_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(cpu.message).find("gate: expected"), std::string::npos) << cpu.message;
  }
}

// The pool and the index tensors with data pointers off their element size: named by both entry points
// before anything is read (the decode fuzz harness found a misaligned pool read by the CPU path).
TEST(DecodeValidation, MisalignedPoolAndIndicesAreNamed) {
  DecodeSpec s;
  s.B = 2;
  s.T = 2;
  s.slots = 4;
  s.idx_dims = 2;
  s.idx_dtype = KDA_DTYPE_I64;
  s.with_accepted = true;
  RandomDecode d = make_random_decode(s);
  ASSERT_EQ(validation_message(d.params()), "");
  struct Case {
    kda_tensor kda_decode_params::*field;
    const char* name;
    int offset;  // bytes: below the element size
  };
  for (const Case& c : {Case{&kda_decode_params::state_pool, "state_pool", 2},
                        Case{&kda_decode_params::state_indices, "state_indices", 4},
                        Case{&kda_decode_params::num_accepted_tokens, "num_accepted_tokens", 1}}) {
    kda_decode_params p = d.params();
    kda_tensor& t = p.*c.field;
    t.data = static_cast<char*>(t.data) + c.offset;
    const std::string want = std::string(c.name) + ": expected a data pointer aligned to its element size";
    // (The device path's validation may name the pool's 16-byte row alignment first.)
    const std::string dev = validation_message(p);
    EXPECT_EQ(dev.rfind(std::string(c.name) + ": expected a ", 0), 0u) << dev;
    EXPECT_NE(dev.find("aligned"), std::string::npos) << dev;
    const kda_status cpu = kda_decode_cpu(&p, 1);
    EXPECT_EQ(cpu.code, KDA_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(cpu.message).find(want), std::string::npos) << cpu.message;
  }
}

TEST(DecodeValidation, NamesTheArgument) {
  DecodeSpec s;
  s.B = 2;
  s.T = 2;
  s.slots = 4;
  RandomDecode d = make_random_decode(s);
  EXPECT_EQ(validation_message(d.params()), "");
  {
    kda_decode_params p = d.params();
    p.state_pool.data = nullptr;
    EXPECT_NE(validation_message(p).find("state_pool: expected a tensor"), std::string::npos);
  }
  {
    // Rank, slot count and the inner dimensions' layout of the pool, each by its own message (found by
    // scripts/mutants.sh host: with a check removed a later one refused the pool for another reason).
    kda_decode_params p = d.params();
    p.state_pool.ndim = 3;
    p.state_pool.shape[0] = -1;
    EXPECT_NE(validation_message(p).find("state_pool: expected a 4-D tensor [slots, HV, V, K], got 3-D"),
              std::string::npos)
        << validation_message(p);
    p = d.params();
    p.state_pool.shape[0] = -1;
    EXPECT_NE(validation_message(p).find("state_pool: expected slots = shape[0] >= 0, got [-1, 2, 128, 128]"),
              std::string::npos)
        << validation_message(p);
    p = d.params();
    p.state_pool.stride[2] = 2 * D;  // rows of K apart by 2K: not the kernels' [V, K] tile
    EXPECT_NE(validation_message(p).find("state_pool: expected dimensions 1..3 [HV, V, K] contiguous"),
              std::string::npos)
        << validation_message(p);
    p = d.params();
    p.state_indices.ndim = 3;
    EXPECT_NE(validation_message(p).find("state_indices: expected a 1-D [N] or 2-D [N, T_idx] tensor, got 3-D"),
              std::string::npos)
        << validation_message(p);
  }
  {
    kda_decode_params p = d.params();
    p.state_pool.shape[1] = 3;
    EXPECT_NE(validation_message(p).find("state_pool: expected shape [4, 2, 128, 128]"), std::string::npos)
        << validation_message(p);
  }
  {
    kda_decode_params p = d.params();
    p.state_pool.stride[0] = 2 * D * D - 8;
    EXPECT_NE(validation_message(p).find("state_pool: expected stride[0] >= HV*V*K"), std::string::npos)
        << validation_message(p);
    p.state_pool.stride[0] = 3 * D * D;  // a view into a larger buffer: fine
    p.state_pool.shape[0] = 2;
    EXPECT_EQ(validation_message(p), "");
  }
  {
    kda_decode_params p = d.params();
    p.state_indices.dtype = KDA_DTYPE_F32;
    EXPECT_NE(validation_message(p).find("state_indices: expected dtype i32 or i64, got f32"), std::string::npos)
        << validation_message(p);
  }
  {
    kda_decode_params p = d.params();
    p.state_indices.shape[0] = 3;
    EXPECT_NE(validation_message(p).find("state_indices: expected shape [2]"), std::string::npos)
        << validation_message(p);
  }
  {
    kda_decode_params p = d.params();
    p.num_accepted_tokens = p.state_indices;
    EXPECT_NE(validation_message(p).find("num_accepted_tokens: requires 2-D state_indices"), std::string::npos);
  }
  {
    kda_decode_params p = d.params();
    p.state_indices.data = nullptr;  // sequence n uses slot n: needs slots >= N
    p.state_pool.shape[0] = 1;
    EXPECT_NE(validation_message(p).find("state_pool: expected at least N = 2 slots"), std::string::npos)
        << validation_message(p);
  }
  {
    kda_decode_params p = d.params();
    p.kernel_config = KDA_DECODE_NUM_KERNEL_CONFIGS + 1;
    EXPECT_NE(validation_message(p).find("kernel_config"), std::string::npos);
  }
  {
    kda_decode_params p = d.params();
    p.trusted_pointers = 2;
    EXPECT_NE(validation_message(p).find("trusted_pointers: expected 0 (check every pointer) or 1, got 2"),
              std::string::npos)
        << validation_message(p);
    p.trusted_pointers = 1;  // accepted (the CPU path ignores the promise)
    EXPECT_EQ(validation_message(p), "");
  }
  {
    kda_decode_params p = d.params();
    p.lower_bound = -6;  // kda_fwd's rules apply to the token tensors and options
    EXPECT_NE(validation_message(p).find("lower_bound: expected a value in [-5, 0)"), std::string::npos);
    p = d.params();
    p.struct_size = 3;  // decode's own size named (kda_fwd's rule would name kda_fwd_params')
    EXPECT_NE(validation_message(p).find("params.struct_size: expected " + std::to_string(sizeof(kda_decode_params)) +
                                         " (call kda_decode_params_init), got 3"),
              std::string::npos)
        << validation_message(p);
  }
  {
    DecodeSpec v = s;
    v.idx_dims = 2;
    v.idx_cols = 1;  // fewer columns than tokens
    RandomDecode e = make_random_decode(v);
    EXPECT_NE(validation_message(e.params()).find("state_indices: expected shape [N, T_idx] with T_idx >= 2"),
              std::string::npos)
        << validation_message(e.params());
  }
}

// ---- the plan -------------------------------------------------------------------------------------

TEST(DecodePlan, ConfigurationsAndAutomaticChoice) {
  for (int c = 1; c <= KDA_DECODE_NUM_KERNEL_CONFIGS; ++c) {
    const sm90::DecodeConfig& k = sm90::kDecodeConfigs[c - 1];
    EXPECT_EQ(128 % k.rows_per_cta(), 0) << c;
    EXPECT_TRUE(k.lanes == 8 || k.lanes == 16) << c;
    EXPECT_EQ(k.threads % 32, 0) << c;
    for (bool single : {false, true}) {
      const sm90::DecodePlan p = sm90::plan_decode(10, 132, c, true, single);
      EXPECT_EQ(p.config, c);  // a forced configuration is kept
      EXPECT_EQ(p.ctas, 10 * k.slices());
    }
  }
  // The benchmark's cases on a 132-SM H200: few heads -> 16 small CTAs per head (latency); from 132
  // heads on -> the bulk-copy configurations (verify blocks: 4, 5; decode: their 2-warp splits 6, 7).
  for (bool f32 : {true, false})
    for (bool single : {false, true}) {
      EXPECT_EQ(sm90::plan_decode(8, 132, 0, f32, single).config, 1);  // B1 H8
      EXPECT_EQ(sm90::plan_decode(8, 132, 0, f32, single).ctas, 128);
      EXPECT_EQ(sm90::plan_decode(32, 132, 0, f32, single).config, 1);  // 512 CTAs of 8 rows
      EXPECT_EQ(sm90::plan_decode(0, 132, 0, f32, single).ctas, 0);
    }
  EXPECT_EQ(sm90::plan_decode(256, 132, 0, true, false).config, 4);  // verify B32 H8: 1.9 CTAs per SM with 5
  EXPECT_EQ(sm90::plan_decode(256, 132, 0, false, false).config, 4);
  EXPECT_EQ(sm90::plan_decode(256, 132, 0, true, true).config, 6);  // decode B32 H8
  EXPECT_EQ(sm90::plan_decode(256, 132, 0, true, true).ctas, 1024);
  EXPECT_EQ(sm90::plan_decode(256, 132, 0, false, true).config, 6);
  EXPECT_EQ(sm90::plan_decode(100, 132, 0, true, true).config, 2);  // < 132 heads: as before
  // From 264 heads on: fp32 pools keep two 32 KB halves per head, bf16 pools one 32 KB CTA per
  // head, for decode too (the split is for grids under 4 CTAs per SM: B32 H8 above).
  EXPECT_EQ(sm90::plan_decode(2048, 132, 0, true, false).config, 4);  // verify B256 H8
  EXPECT_EQ(sm90::plan_decode(2048, 132, 0, true, true).config, 4);   // decode B256 H8
  EXPECT_EQ(sm90::plan_decode(1024, 132, 0, true, true).config, 4);   // decode B32 H32: 2048 CTAs
  EXPECT_EQ(sm90::plan_decode(12288, 132, 0, true, true).config, 4);
  EXPECT_EQ(sm90::plan_decode(2048, 132, 0, false, false).config, 5);
  EXPECT_EQ(sm90::plan_decode(12288, 132, 0, false, false).config, 5);
  EXPECT_EQ(sm90::plan_decode(2048, 132, 0, false, true).config, 5);
  EXPECT_EQ(sm90::plan_decode(12288, 132, 0, false, true).config, 5);
  EXPECT_EQ(sm90::plan_decode(12288, 132, 0, false, true).ctas, 12288);
  // The split's boundary: 263 heads of two fp32 halves (526 CTAs < 4 x 132) split, 264 do not.
  EXPECT_EQ(sm90::plan_decode(263, 132, 0, true, true).config, 6);
  EXPECT_EQ(sm90::plan_decode(264, 132, 0, true, true).config, 4);
}

}  // namespace
}  // namespace kda::test
