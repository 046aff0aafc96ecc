// libFuzzer target: the native model JSON reader (body in fuzz_targets.h).
#include "tests/fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  prefixsim::fuzz::FuzzModelJson(data, size);
  return 0;
}
