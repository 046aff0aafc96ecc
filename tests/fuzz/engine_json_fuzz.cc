// libFuzzer target: the engine JSON reader and its cross-field validation (body in fuzz_targets.h).
#include "tests/fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  prefixsim::fuzz::FuzzEngineJson(data, size);
  return 0;
}
