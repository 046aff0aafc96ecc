// Helpers of the HTML report's tests: cutting a page into pieces, and the hybrid-against-full
// replays the block-size cliff and the miss causes are checked on.
#ifndef PREFIXSIM_TESTS_REPORT_HTML_TEST_UTIL_H_
#define PREFIXSIM_TESTS_REPORT_HTML_TEST_UTIL_H_

#include <string>
#include <vector>

#include "prefixsim/engine.h"
#include "tests/engine/engine_test_util.h"

namespace prefixsim {
namespace testing_html {

// The text from `open` to the next `close` ("" if absent).
inline std::string Section(const std::string& s, const std::string& open,
                           const std::string& close) {
  const size_t a = s.find(open);
  if (a == std::string::npos) return "";
  const size_t b = s.find(close, a);
  return b == std::string::npos ? "" : s.substr(a, b - a);
}

// Prompts of `lengths` tokens sharing one token sequence, a second apart, replayed on a hybrid
// plan (full attention with 16-token blocks, sliding window with 24: S = A = 48, docs/semantics.md
// §7) and on full attention alone (A = 16): {"hybrid", "full"}. Each request finds the earlier
// prompts cached.
inline std::vector<ReplayResult> HybridAndFullReplays(const std::vector<int>& lengths) {
  using testing_kv::Group;
  const KvPlan hybrid = testing_kv::Plan(
      {Group(LayerKind::kFullAttention, 16), Group(LayerKind::kSlidingWindow, 24, /*window=*/1024)},
      /*num_blocks=*/256, /*s=*/48, /*h=*/8, /*a=*/48);
  const KvPlan full = testing_kv::Unitary(LayerKind::kFullAttention, 16, 256);
  std::vector<Request> reqs;
  for (size_t i = 0; i < lengths.size(); ++i) {
    reqs.push_back(
        testing_engine::Req(i, 1000.0 * static_cast<double>(i), testing_kv::Iota(lengths[i]), 2));
  }
  ReplayResult h = testing_engine::MustReplay(hybrid, testing_engine::SmallEngine(512), reqs);
  ReplayResult f = testing_engine::MustReplay(full, testing_engine::SmallEngine(512), reqs);
  h.policy = "hybrid";
  f.policy = "full";
  return {h, f};
}

}  // namespace testing_html
}  // namespace prefixsim

#endif  // PREFIXSIM_TESTS_REPORT_HTML_TEST_UTIL_H_
