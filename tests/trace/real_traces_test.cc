// The public traces in traces/real/ (zstd copies): exact counts and
// the facts its README lists, plain and compressed.
#include <gtest/gtest.h>
#include <zstd.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "tests/trace/trace_test_util.h"

namespace prefixsim {
namespace {

using ::prefixsim::testing::ReadAll;
using ::prefixsim::testing::ReadFileBytes;

std::string RealTrace(const std::string& name) {
  return absl::StrCat(PREFIXSIM_REAL_TRACES_DIR, "/", name, ".zst");
}

class RealTracesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(RealTrace("mooncake_conversation_trace.jsonl"))) {
      GTEST_SKIP() << "real traces not found in " << PREFIXSIM_REAL_TRACES_DIR;
    }
  }
};

// Fraction of hash-id blocks (virtual segments) already seen earlier in the trace.
double SeenBeforeFraction(const std::vector<Request>& requests) {
  absl::flat_hash_set<uint64_t> seen;
  int64_t total = 0, repeated = 0;
  for (const Request& r : requests) {
    for (const ContentSegment& s : r.prompt) {
      ++total;
      repeated += !seen.insert(s.content_id).second;
    }
  }
  return static_cast<double>(repeated) / static_cast<double>(total);
}

TEST_F(RealTracesTest, MooncakeConversation) {
  auto result = ReadAll(RealTrace("mooncake_conversation_trace.jsonl"));
  ASSERT_TRUE(result.status.ok()) << result.status;
  EXPECT_EQ(result.format, "mooncake");
  ASSERT_EQ(result.requests.size(), 12031u);
  EXPECT_EQ(result.stats.arrivals_clamped, 0);
  int64_t input = 0, output = 0, max_input = 0;
  for (const Request& r : result.requests) {
    input += r.prompt_tokens;
    output += r.output_tokens;
    max_input = std::max(max_input, r.prompt_tokens);
  }
  EXPECT_EQ(max_input, 126195);
  EXPECT_NEAR(static_cast<double>(input) / 12031, 12035, 1);
  EXPECT_NEAR(static_cast<double>(output) / 12031, 343, 1);
  EXPECT_NEAR(result.requests.back().arrival_ns * 1e-9, 3537, 1);
  EXPECT_NEAR(SeenBeforeFraction(result.requests), 0.366, 0.0005);
}

TEST_F(RealTracesTest, MooncakeSynthetic) {
  auto result = ReadAll(RealTrace("mooncake_synthetic_trace.jsonl"));
  ASSERT_TRUE(result.status.ok()) << result.status;
  ASSERT_EQ(result.requests.size(), 3993u);
  int64_t input = 0, max_input = 0;
  for (const Request& r : result.requests) {
    input += r.prompt_tokens;
    max_input = std::max(max_input, r.prompt_tokens);
  }
  EXPECT_EQ(max_input, 191378);
  EXPECT_NEAR(static_cast<double>(input) / 3993, 15325, 1);
  EXPECT_NEAR(SeenBeforeFraction(result.requests), 0.640, 0.0005);
}

TEST_F(RealTracesTest, ShareGptTokens) {
  auto result = ReadAll(RealTrace("sharegpt_llama31_300_tokens.jsonl"));
  ASSERT_TRUE(result.status.ok()) << result.status;
  EXPECT_EQ(result.format, "llmservingsim");
  ASSERT_EQ(result.requests.size(), 300u);
  for (const Request& r : result.requests) {
    ASSERT_EQ(r.prompt.size(), 1u);
    EXPECT_EQ(r.prompt[0].content_id, ContentSegment::kLiteralContent);
    EXPECT_EQ(static_cast<int64_t>(r.literal_tokens.size()),
              r.prompt_tokens + (r.output.empty() ? 0 : r.output[0].length));
  }
  EXPECT_EQ(result.requests[0].prompt_tokens, 2358);
  EXPECT_EQ(result.requests[0].output_tokens, 531);
  EXPECT_EQ(result.requests[0].arrival_ns, 0);  // 46,926,808 ns in the file, relative here
}

TEST_F(RealTracesTest, AzureLengths) {
  auto result = ReadAll(RealTrace("azure2023_conv_lengths.csv"));
  ASSERT_TRUE(result.status.ok()) << result.status;
  EXPECT_EQ(result.format, "lengths");
  ASSERT_EQ(result.requests.size(), 19366u);
  EXPECT_EQ(result.requests[1].prompt_tokens, 396);
  EXPECT_EQ(result.requests[1].arrival_ns, 4'314'579'000);
  EXPECT_NEAR(SeenBeforeFraction(result.requests), 0.0, 0.0);  // nothing shared
}

// The plain text of a shipped .zst copy (one frame, its size in the header as zstd writes it).
std::string Decompressed(const std::string& path) {
  const std::string packed = ReadFileBytes(path);
  const unsigned long long size = ZSTD_getFrameContentSize(packed.data(), packed.size());
  if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN) return "";
  std::string out(size, '\0');
  const size_t n = ZSTD_decompress(out.data(), out.size(), packed.data(), packed.size());
  if (ZSTD_isError(n)) return "";
  out.resize(n);
  return out;
}

TEST_F(RealTracesTest, CompressedCopiesReadTheSame) {
  for (const std::string name :
       {"mooncake_conversation_trace.jsonl", "mooncake_synthetic_trace.jsonl",
        "sharegpt_llama31_300_tokens.jsonl", "azure2023_conv_lengths.csv"}) {
    SCOPED_TRACE(name);
    std::string content = Decompressed(RealTrace(name));
    ASSERT_FALSE(content.empty());
    auto plain = ReadAll(RealTrace(name));
    auto gz = ReadAll(testing::WriteGzip(name + ".gz", content));
    ASSERT_TRUE(gz.status.ok()) << gz.status;
    ASSERT_EQ(gz.requests.size(), plain.requests.size());
    EXPECT_EQ(gz.stats.bytes, static_cast<int64_t>(content.size()));
    EXPECT_EQ(testing::ExpandPrompt(gz.requests.back()),
              testing::ExpandPrompt(plain.requests.back()));
    EXPECT_EQ(gz.requests.back().arrival_ns, plain.requests.back().arrival_ns);
    if (name.starts_with("mooncake_conv")) {
      auto zst = ReadAll(testing::WriteZstd(name + ".zst", content));
      ASSERT_TRUE(zst.status.ok()) << zst.status;
      EXPECT_EQ(zst.requests.size(), 12031u);
    }
  }
}

TEST_F(RealTracesTest, ReplayOptionsOnTheConversationTrace) {
  const std::string path = RealTrace("mooncake_conversation_trace.jsonl");
  auto window = ReadAll(path, {.format = "", .start_s = 600, .end_s = 1200});
  ASSERT_TRUE(window.status.ok());
  EXPECT_GT(window.requests.size(), 1000u);  // ~3.4 requests/s for 600 s
  EXPECT_LT(window.requests.size(), 3000u);
  EXPECT_LT(window.requests.back().arrival_ns, 600'000'000'000);
  auto sampled = ReadAll(path, {.format = "", .session_sample_fraction = 0.1, .seed = 3});
  EXPECT_NEAR(static_cast<double>(sampled.requests.size()), 1203, 150);
}

}  // namespace
}  // namespace prefixsim
