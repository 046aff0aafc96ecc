// libFuzzer target: one vLLM KV event batch in msgpack (body in fuzz_targets.h).
#include "tests/fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  prefixsim::fuzz::FuzzKvEventsMsgpack(data, size);
  return 0;
}
