// The decode plan (decode_plan.h).
#include "src/launch/decode_plan.h"

namespace kda::sm90 {

DecodePlan plan_decode(int64_t units, int sms, int forced_config, bool pool_f32, bool single_token) {
  int config = forced_config;
  if (config < 1 || config > KDA_DECODE_NUM_KERNEL_CONFIGS) {
    config = 1;
    const int64_t sm_count = sms > 0 ? sms : 1;
    auto ctas = [&](int c) { return units * kDecodeConfigs[c - 1].slices(); };
    for (int c = pool_f32 ? kDecodeAutoConfigsF32 : kDecodeAutoConfigsBf16; c >= 1; --c) {
      if (ctas(c) >= kDecodeMinCtasPerSm * sm_count) {
        config = c;
        break;
      }
    }
    if (single_token && ctas(config) < kDecodeSplitBelowCtasPerSm * sm_count) {
      if (config == 4) config = 6;
      if (config == 5) config = 7;
    }
  }
  DecodePlan plan;
  plan.config = config;
  plan.slices = kDecodeConfigs[config - 1].slices();
  plan.ctas = units * plan.slices;
  return plan;
}

}  // namespace kda::sm90
