// libFuzzer target: the step-time CSV of the table cost model (body in fuzz_targets.h).
#include "tests/fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  prefixsim::fuzz::FuzzStepTable(data, size);
  return 0;
}
