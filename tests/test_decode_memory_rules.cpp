// Memory rules of kda_decode (src/api/memory_rules.h, flash_kda.h "Decode and speculative verify"):
// the two written tensors, out and state_pool (updated in place), share no byte with any other
// tensor of the call (the token inputs, A_log, dt_bias, cu_seqlens, state_indices,
// num_accepted_tokens) or with each other; inputs may share memory. kda_decode_cpu and kda_decode
// (which checks everything on the host before it looks for a device) report the same error.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "flash_kda/flash_kda.h"
#include "tests/random_decode.h"

namespace kda::test {
namespace {

void ExpectRejected(const kda_decode_params& p, std::vector<std::string> parts) {
  const kda_status c = kda_decode_cpu(&p, 1);
  ASSERT_EQ(c.code, KDA_ERROR_INVALID_ARGUMENT) << kda_status_code_name(c.code) << ": " << c.message;
  const kda_status d = kda_decode(&p, nullptr);
  EXPECT_EQ(d.code, c.code) << d.message;
  EXPECT_STREQ(d.message, c.message);
  for (const std::string& part : parts)
    EXPECT_NE(std::string(c.message).find(part), std::string::npos)
        << "message \"" << c.message << "\" lacks \"" << part << "\"";
}

// 4 sequences of 2 tokens, verify indices [4, 2] with num_accepted_tokens and a pool of 12 slots.
RandomDecode Problem(kda_dtype pool = KDA_DTYPE_F32) {
  DecodeSpec s;
  s.B = 4, s.T = 2, s.slots = 12, s.pool = pool, s.idx_dims = 2, s.with_accepted = true;
  return make_random_decode(s);
}

void* PoolData(RandomDecode& d) {
  return d.spec.pool == KDA_DTYPE_F32 ? static_cast<void*>(d.pool_f32.data()) : static_cast<void*>(d.pool_bf16.data());
}

TEST(DecodeMemory, PoolOverlapsATokenInput) {
  for (kda_dtype pool : {KDA_DTYPE_F32, KDA_DTYPE_BF16}) {
    RandomDecode d = Problem(pool);
    kda_decode_params p = d.params();
    p.q.data = static_cast<char*>(PoolData(d)) + 4096;  // q read from inside a slot
    ExpectRejected(p, {"state_pool: expected memory disjoint from every other tensor (it is written)", "overlapping q"});
    p = d.params();
    p.g.data = static_cast<char*>(PoolData(d)) + pool_slot_bytes(d) * 11;  // the last slot
    ExpectRejected(p, {"state_pool: expected memory disjoint", "overlapping g"});
  }
}

TEST(DecodeMemory, PoolOverlapsTheIndicesOrAcceptedCounts) {
  RandomDecode d = Problem();
  kda_decode_params p = d.params();
  p.state_indices.data = d.pool_f32.data() + 128;
  ExpectRejected(p, {"state_pool: expected memory disjoint", "overlapping state_indices"});
  p = d.params();
  p.num_accepted_tokens.data = d.pool_f32.data() + 256;
  ExpectRejected(p, {"state_pool: expected memory disjoint", "overlapping num_accepted_tokens"});
  p = d.params();
  p.A_log.data = d.pool_f32.data();
  ExpectRejected(p, {"state_pool: expected memory disjoint", "overlapping A_log"});
}

TEST(DecodeMemory, PoolOverlapsCuSeqlens) {
  DecodeSpec s;
  s.B = 1, s.T = 5, s.slots = 4, s.idx_dims = 1, s.cu_seqlens = {0, 2, 3, 5};
  RandomDecode d = make_random_decode(s);
  kda_decode_params p = d.params();
  ASSERT_EQ(kda_decode_cpu(&p, 1).code, KDA_OK);
  int64_t* cu = reinterpret_cast<int64_t*>(d.pool_f32.data() + 64);
  for (int i = 0; i < 4; ++i) cu[i] = d.cu64[i];
  p.cu_seqlens.data = cu;
  p.cu_seqlens.dtype = KDA_DTYPE_I64;
  ExpectRejected(p, {"state_pool: expected memory disjoint", "overlapping cu_seqlens"});
}

TEST(DecodeMemory, OutOverlapsThePoolOrTheIndices) {
  RandomDecode d = Problem();
  kda_decode_params p = d.params();
  p.out.data = d.pool_f32.data() + 1024;
  ExpectRejected(p, {"out: expected memory disjoint from every other tensor (it is written)", "overlapping state_pool"});
  p = d.params();
  std::vector<uint16_t> shared(d.out.size() + 64, 0);
  p.out.data = shared.data();
  p.state_indices.data = shared.data() + d.out.size() - 8;  // out's last 16 bytes
  ExpectRejected(p, {"out: expected memory disjoint", "overlapping state_indices"});
  p = d.params();
  p.num_accepted_tokens.data = d.out.data();
  ExpectRejected(p, {"out: expected memory disjoint", "overlapping num_accepted_tokens"});
}

TEST(DecodeMemory, InputsMayShareMemory) {
  RandomDecode d = Problem();
  kda_decode_params p = d.params();
  p.k.data = p.q.data;  // read-only tensors: any aliasing is fine
  p.num_accepted_tokens.data = p.state_indices.data;
  p.num_accepted_tokens.dtype = p.state_indices.dtype;  // the first N index entries as counts
  const kda_status s = kda_decode_cpu(&p, 1);
  EXPECT_EQ(s.code, KDA_OK) << s.message;
}

TEST(DecodeMemory, PoolViewIntoALargerBufferBesideTheInputs) {
  // The pool a view with padded slots; q right after the pool's last element: disjoint.
  RandomDecode d = Problem();
  const size_t slot = 2 * 128 * 128;
  std::vector<float> big(12 * slot * 2 + 2 * slot, 0.0f);
  kda_decode_params p = d.params();
  p.state_pool.data = big.data();
  p.state_pool.stride[0] = 2 * slot;  // every other slot
  p.q.data = big.data() + 11 * 2 * slot + slot;  // just past the last slot's states
  const kda_status s = kda_decode_cpu(&p, 1);
  EXPECT_EQ(s.code, KDA_OK) << s.message;
}

}  // namespace
}  // namespace kda::test
