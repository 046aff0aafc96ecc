// Suggestions for mistyped names (sim/util/did_you_mean.h).
#include "sim/util/did_you_mean.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace prefixsim {
namespace {

TEST(DidYouMeanTest, EditDistance) {
  EXPECT_EQ(EditDistance("replay", "replay"), 0);
  EXPECT_EQ(EditDistance("replya", "replay"), 1);  // a transposition counts once
  EXPECT_EQ(EditDistance("--kv-cache-byte", "--kv-cache-bytes"), 1);
  EXPECT_EQ(EditDistance("NEW", "new"), 0);
  EXPECT_EQ(EditDistance("", "abc"), 3);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3);
}

TEST(DidYouMeanTest, ClosestFirstAndOnlyCloseOnes) {
  const std::vector<std::string> commands = {"resolve",   "replay", "compare", "analyze",
                                             "gen-trace", "sweep",  "regress"};
  EXPECT_EQ(ClosestNames("replya", commands), (std::vector<std::string>{"replay"}));
  EXPECT_EQ(ClosestNames("comapre", commands), (std::vector<std::string>{"compare"}));
  EXPECT_TRUE(ClosestNames("frobnicate", commands).empty());
  EXPECT_TRUE(ClosestNames("replay", commands).empty()) << "an exact name is not a typo";
  const std::vector<std::string> presets = {"llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b",
                                            "qwen3-8b"};
  const std::vector<std::string> llama = ClosestNames("llama-3.1-8", presets);
  ASSERT_FALSE(llama.empty());
  EXPECT_EQ(llama.front(), "llama-3.1-8b");
  // A shortened name finds the presets that contain it.
  const std::vector<std::string> qwen = ClosestNames("qwen3", presets);
  EXPECT_EQ(qwen, (std::vector<std::string>{"qwen3-8b"}));
  EXPECT_LE(ClosestNames("llama", presets, 2).size(), 2u);
  // A name cut short comes before a near typo of another name.
  const std::vector<std::string> kimi =
      ClosestNames("kimi-k3", {"kimi-k2", "kimi-k3-like", "llama-3.1-8b"});
  EXPECT_EQ(kimi, (std::vector<std::string>{"kimi-k3-like", "kimi-k2"}));
}

TEST(DidYouMeanTest, Sentence) {
  EXPECT_EQ(DidYouMean("nwe", {"old", "new"}), "; did you mean 'new'?");
  EXPECT_EQ(DidYouMean("zzzzzzzz", {"old", "new"}), "");
  EXPECT_EQ(DidYouMean("ab", {"abc", "abd"}), "; did you mean 'abc' or 'abd'?");
}

}  // namespace
}  // namespace prefixsim
