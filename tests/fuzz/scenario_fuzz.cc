// libFuzzer target: the scenario file reader of sweep and regress (body in fuzz_targets.h).
#include "tests/fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  prefixsim::fuzz::FuzzScenario(data, size);
  return 0;
}
