#include <gtest/gtest.h>

#include <algorithm>
#include <ostream>
#include <string>

#include "sim/cli/exit_codes.h"
#include "sim/util/status_macros.h"
#include "tests/trace/trace_test_util.h"

namespace prefixsim {
namespace {

using ::prefixsim::testing::ExpandPrompt;
using ::prefixsim::testing::ReadAll;
using ::prefixsim::testing::ReadResult;
using ::prefixsim::testing::ReadsAs;
using ::prefixsim::testing::SharedFullBlocks;
using ::prefixsim::testing::WriteTemp;

TEST(MooncakeReaderTest, ExpandsHashIdsToBlocksWithARemainderLastBlock) {
  std::string path =
      WriteTemp("m.jsonl",
                "{\"timestamp\": 0, \"input_length\": 1100, \"output_length\": 7, "
                "\"hash_ids\": [4, 9, 2]}\n"
                "{\"timestamp\": 1500, \"input_length\": 1024, \"output_length\": 0, "
                "\"hash_ids\": [4, 9]}\n");
  ReadResult result;
  ASSERT_TRUE(ReadsAs(path, "mooncake", 2, &result));
  const Request& first = result.requests[0];
  EXPECT_EQ(first.id, 0u);
  EXPECT_EQ(first.arrival_ns, 0);
  EXPECT_EQ(first.prompt_tokens, 1100);
  EXPECT_EQ(first.output_tokens, 7);
  ASSERT_EQ(first.prompt.size(), 3u);
  EXPECT_EQ(first.prompt[0].length, 512u);
  EXPECT_EQ(first.prompt[1].length, 512u);
  EXPECT_EQ(first.prompt[2].length, 76u);  // 1100 - 1024: only the remainder
  for (const ContentSegment& s : first.prompt) {
    EXPECT_NE(s.content_id, ContentSegment::kLiteralContent);
    EXPECT_EQ(s.offset, 0u);
  }
  EXPECT_NE(first.prompt[0].content_id, first.prompt[1].content_id);
  EXPECT_TRUE(first.literal_tokens.empty());
  EXPECT_TRUE(first.session_id.empty());

  const Request& second = result.requests[1];
  EXPECT_EQ(second.id, 1u);
  EXPECT_EQ(second.arrival_ns, 1'500'000'000);  // ms -> ns
  // Same hash id, same content.
  EXPECT_EQ(second.prompt[0].content_id, first.prompt[0].content_id);
  EXPECT_EQ(second.prompt[1].content_id, first.prompt[1].content_id);
  EXPECT_EQ(SharedFullBlocks(first, second, 1), 1024u);
}

TEST(MooncakeReaderTest, TraceBlockTokensChangesTheBlockSize) {
  std::string path = WriteTemp("m16.jsonl",
                               "{\"timestamp\": 0, \"input_length\": 40, \"output_length\": 1, "
                               "\"hash_ids\": [1, 2, 3]}\n");
  TraceOptions options;
  options.trace_block_tokens = 16;
  auto result = ReadAll(path, options);
  ASSERT_TRUE(result.status.ok()) << result.status;
  ASSERT_EQ(result.requests[0].prompt.size(), 3u);
  EXPECT_EQ(result.requests[0].prompt[2].length, 8u);
  // With the default 512, three ids cannot cover 40 tokens.
  auto strict = ReadAll(path);
  EXPECT_EQ(strict.status.code(), absl::StatusCode::kInvalidArgument);
}

// A token-level trace with the same sharing structure: hash id h -> a run of distinct literal
// tokens (h * 1000 + i). Both must share exactly the same prefixes at every block size.
TEST(MooncakeReaderTest, HashIdsBehaveLikeTokenTracesWithTheSameSharing) {
  constexpr int kBlock = 4;
  const std::vector<std::pair<int, std::vector<int>>> records = {
      {10, {1, 2, 3}}, {7, {1, 2}},        {13, {1, 2, 3, 4}}, {11, {1, 2, 5}},
      {5, {1, 6}},     {14, {1, 2, 3, 4}}, {3, {7}},           {9, {1, 2, 3}}};
  std::string mooncake, tokens;
  for (size_t r = 0; r < records.size(); ++r) {
    const auto& [length, ids] = records[r];
    mooncake += "{\"timestamp\": " + std::to_string(r) +
                ", \"input_length\": " + std::to_string(length) +
                ", \"output_length\": 1, \"hash_ids\": [";
    tokens += "{\"arrival_s\": " + std::to_string(r) +
              ", \"output_length\": 1, "
              "\"prompt_token_ids\": [";
    for (size_t b = 0; b < ids.size(); ++b) {
      mooncake += (b ? ", " : "") + std::to_string(ids[b]);
      for (int i = 0; i < kBlock && static_cast<int>(b) * kBlock + i < length; ++i) {
        tokens += (b || i ? ", " : "") + std::to_string(ids[b] * 1000 + i);
      }
    }
    mooncake += "]}\n";
    tokens += "]}\n";
  }
  TraceOptions options;
  options.trace_block_tokens = kBlock;
  auto from_hashes = ReadAll(WriteTemp("h.jsonl", mooncake), options);
  auto from_tokens = ReadAll(WriteTemp("t.jsonl", tokens));
  ASSERT_TRUE(from_hashes.status.ok()) << from_hashes.status;
  ASSERT_TRUE(from_tokens.status.ok()) << from_tokens.status;
  ASSERT_EQ(from_tokens.format, "tokens");
  ASSERT_EQ(from_hashes.requests.size(), records.size());
  int compared_nonzero = 0;
  for (size_t a = 0; a < records.size(); ++a) {
    EXPECT_EQ(from_hashes.requests[a].prompt_tokens, from_tokens.requests[a].prompt_tokens);
    for (size_t b = 0; b < records.size(); ++b) {
      for (size_t block_size : {1, 2, 3, 4, 5, 8}) {
        size_t hashed =
            SharedFullBlocks(from_hashes.requests[a], from_hashes.requests[b], block_size);
        size_t exact =
            SharedFullBlocks(from_tokens.requests[a], from_tokens.requests[b], block_size);
        EXPECT_EQ(hashed, exact) << "requests " << a << ", " << b << " block " << block_size;
        compared_nonzero += hashed > 0;
      }
    }
  }
  EXPECT_GT(compared_nonzero, 50);  // the structure really shares
  // The partial last block (request 1: ids {1,2}, 7 tokens -> block 2 has 3 tokens) is a prefix
  // of the full block with the same id in request 0.
  auto partial = ExpandPrompt(from_hashes.requests[1]);
  auto full = ExpandPrompt(from_hashes.requests[0]);
  EXPECT_TRUE(std::equal(partial.begin(), partial.end(), full.begin()));
}

struct BadRecordCase {
  std::string name;
  std::string second_line;        // line 2 of the file; line 1 is valid
  std::string expected_fragment;  // must appear in the error message
};

// Short names in ctest listings instead of a byte dump.
void PrintTo(const BadRecordCase& c, std::ostream* os) { *os << c.name; }

class MooncakeBadRecordTest : public ::testing::TestWithParam<BadRecordCase> {};

TEST_P(MooncakeBadRecordTest, NamesFileLineAndField) {
  const BadRecordCase& c = GetParam();
  std::string path = WriteTemp(
      "bad.jsonl",
      "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [0]}\n" +
          c.second_line + "\n");
  auto result = ReadAll(path);
  EXPECT_EQ(result.status.code(), absl::StatusCode::kInvalidArgument) << result.status;
  EXPECT_EQ(ExitCodeFor(result.status), 2);
  std::string message(result.status.message());
  EXPECT_NE(message.find(path + ":2: "), std::string::npos) << message;
  EXPECT_NE(message.find(c.expected_fragment), std::string::npos) << message;
  EXPECT_EQ(result.requests.size(), 1u);  // the good first record was delivered
}

INSTANTIATE_TEST_SUITE_P(
    Errors, MooncakeBadRecordTest,
    ::testing::Values(
        BadRecordCase{"MalformedJson", "{\"timestamp\": 1, \"input_length\": 10,",
                      "malformed JSON"},
        BadRecordCase{"NotAnObject", "[1, 2, 3]", "expected a JSON object"},
        BadRecordCase{"MissingInputLength",
                      "{\"timestamp\": 1, \"output_length\": 1, \"hash_ids\": [0]}",
                      "field 'input_length': missing"},
        BadRecordCase{"MissingHashIds",
                      "{\"timestamp\": 1, \"input_length\": 10, \"output_length\": 1}",
                      "field 'hash_ids': missing"},
        BadRecordCase{
            "NegativeOutputLength",
            "{\"timestamp\": 1, \"input_length\": 10, \"output_length\": -3, \"hash_ids\": [0]}",
            "field 'output_length': must be a non-negative integer"},
        BadRecordCase{
            "ZeroInputLength",
            "{\"timestamp\": 1, \"input_length\": 0, \"output_length\": 3, \"hash_ids\": []}",
            "field 'input_length': must be a positive integer"},
        BadRecordCase{
            "FractionalInputLength",
            "{\"timestamp\": 1, \"input_length\": 10.5, \"output_length\": 3, \"hash_ids\": [0]}",
            "field 'input_length'"},
        BadRecordCase{"StringTimestamp",
                      "{\"timestamp\": \"soon\", \"input_length\": 10, \"output_length\": 1, "
                      "\"hash_ids\": [0]}",
                      "field 'timestamp': must be a non-negative number"},
        BadRecordCase{
            "NegativeTimestamp",
            "{\"timestamp\": -5, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [0]}",
            "field 'timestamp': must be a non-negative number"},
        BadRecordCase{"TooFewHashIds",
                      "{\"timestamp\": 1, \"input_length\": 1025, \"output_length\": 1, "
                      "\"hash_ids\": [0, 1]}",
                      "field 'hash_ids': 2 block ids do not cover input_length 1025"},
        BadRecordCase{
            "TooManyHashIds",
            "{\"timestamp\": 1, \"input_length\": 100, \"output_length\": 1, \"hash_ids\": [0, 1]}",
            "field 'hash_ids': 2 block ids do not cover input_length 100"},
        BadRecordCase{
            "NegativeHashId",
            "{\"timestamp\": 1, \"input_length\": 100, \"output_length\": 1, \"hash_ids\": [-1]}",
            "field 'hash_ids': block ids must be non-negative integers"},
        BadRecordCase{
            "HashIdsNotArray",
            "{\"timestamp\": 1, \"input_length\": 100, \"output_length\": 1, \"hash_ids\": 5}",
            "field 'hash_ids': must be an array"}),
    [](const ::testing::TestParamInfo<BadRecordCase>& info) { return info.param.name; });

}  // namespace
}  // namespace prefixsim
