// libFuzzer target: the llmservingsim trace reader on plain, .gz or .zst bytes (body in
// fuzz_targets.h).
#include "tests/fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  prefixsim::fuzz::FuzzTrace(data, size, "llmservingsim");
  return 0;
}
