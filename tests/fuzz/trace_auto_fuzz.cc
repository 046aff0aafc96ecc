// libFuzzer target: trace format detection, then the detected reader (body in fuzz_targets.h).
#include "tests/fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  prefixsim::fuzz::FuzzTrace(data, size, "");
  return 0;
}
