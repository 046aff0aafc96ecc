// Readers other than mooncake: bailian, tokens, llmservingsim, lengths.
#include <gtest/gtest.h>

#include <string>

#include "sim/cli/exit_codes.h"
#include "sim/util/status_macros.h"
#include "tests/trace/trace_test_util.h"

namespace prefixsim {
namespace {

using ::prefixsim::testing::ExpandPrompt;
using ::prefixsim::testing::ExpandSegments;
using ::prefixsim::testing::ReadAll;
using ::prefixsim::testing::ReadResult;
using ::prefixsim::testing::ReadsAs;
using ::prefixsim::testing::WriteTemp;

void ExpectError(const testing::ReadResult& result, const std::string& path, int line,
                 const std::string& fragment) {
  EXPECT_EQ(result.status.code(), absl::StatusCode::kInvalidArgument) << result.status;
  EXPECT_EQ(ExitCodeFor(result.status), 2);
  std::string message(result.status.message());
  EXPECT_NE(message.find(path + ":" + std::to_string(line) + ": "), std::string::npos) << message;
  EXPECT_NE(message.find(fragment), std::string::npos) << message;
}

// ---- bailian ----

TEST(BailianReaderTest, SixteenTokenBlocksAndSessionsFollowParentChats) {
  std::string path = WriteTemp(
      "b.jsonl",
      "{\"chat_id\": 100, \"parent_chat_id\": -1, \"timestamp\": 10.5, \"input_length\": 40, "
      "\"output_length\": 8, \"type\": \"text\", \"turn\": 1, \"hash_ids\": [1, 2, 3]}\n"
      "{\"chat_id\": 200, \"parent_chat_id\": -1, \"timestamp\": 11.0, \"input_length\": 16, "
      "\"output_length\": 2, \"type\": \"text\", \"turn\": 1, \"hash_ids\": [9]}\n"
      "{\"chat_id\": 101, \"parent_chat_id\": 100, \"timestamp\": 12.25, \"input_length\": 60, "
      "\"output_length\": 5, \"type\": \"text\", \"turn\": 2, \"hash_ids\": [1, 2, 4, 5]}\n"
      "{\"chat_id\": 102, \"parent_chat_id\": 101, \"timestamp\": 13, \"input_length\": 70, "
      "\"output_length\": 5, \"type\": \"text\", \"turn\": 3, \"hash_ids\": [1, 2, 4, 5, 6]}\n");
  ReadResult result;
  ASSERT_TRUE(ReadsAs(path, "bailian", 4, &result));
  EXPECT_EQ(result.requests[0].prompt[2].length, 8u);       // 40 = 16 + 16 + 8
  EXPECT_EQ(result.requests[2].arrival_ns, 1'750'000'000);  // 12.25 s - 10.5 s
  EXPECT_EQ(result.requests[0].session_id, "100");
  EXPECT_EQ(result.requests[1].session_id, "200");
  EXPECT_EQ(result.requests[2].session_id, "100");
  EXPECT_EQ(result.requests[3].session_id, "100");  // root of 102 -> 101 -> 100
  // Blocks 1, 2, 4 in full, then block 5: 12 tokens in request 2 (60 = 3 * 16 + 12), a prefix of
  // the full block 5 of request 3.
  EXPECT_EQ(
      testing::CommonPrefix(ExpandPrompt(result.requests[2]), ExpandPrompt(result.requests[3])),
      60u);
  // Bailian and mooncake ids live in different content namespaces.
  std::string mooncake = WriteTemp("m.jsonl",
                                   "{\"timestamp\": 0, \"input_length\": 16, "
                                   "\"output_length\": 1, \"hash_ids\": [1]}\n");
  TraceOptions options;
  options.trace_block_tokens = 16;
  auto other = ReadAll(mooncake, options);
  ASSERT_TRUE(other.status.ok());
  EXPECT_NE(other.requests[0].prompt[0].content_id, result.requests[0].prompt[0].content_id);
}

TEST(BailianReaderTest, BadRecords) {
  const std::string good =
      "{\"chat_id\": 1, \"parent_chat_id\": -1, \"timestamp\": 1, \"input_length\": 16, "
      "\"output_length\": 1, \"turn\": 1, \"hash_ids\": [1]}\n";
  std::string path = WriteTemp("b1.jsonl", good +
                                               "{\"parent_chat_id\": -1, \"timestamp\": 1, "
                                               "\"input_length\": 16, \"output_length\": 1, "
                                               "\"turn\": 1, \"hash_ids\": [1]}\n");
  ExpectError(ReadAll(path, {.format = "bailian"}), path, 2, "field 'chat_id': missing");
  path = WriteTemp("b2.jsonl", good +
                                   "{\"chat_id\": 2, \"parent_chat_id\": -7, \"timestamp\": 1, "
                                   "\"input_length\": 16, \"output_length\": 1, \"turn\": 1, "
                                   "\"hash_ids\": [1]}\n");
  ExpectError(ReadAll(path), path, 2, "field 'parent_chat_id': must be an integer >= -1");
  path = WriteTemp("b3.jsonl", good +
                                   "{\"chat_id\": 2, \"parent_chat_id\": 1, \"timestamp\": 1, "
                                   "\"input_length\": 33, \"output_length\": 1, \"turn\": 2, "
                                   "\"hash_ids\": [1, 2]}\n");
  ExpectError(ReadAll(path), path, 2, "field 'hash_ids': 2 block ids do not cover input_length 33");
  path = WriteTemp("b4.jsonl", good +
                                   "{\"chat_id\": 2, \"parent_chat_id\": 1, \"timestamp\": null, "
                                   "\"input_length\": 16, \"output_length\": 1, \"turn\": 2, "
                                   "\"hash_ids\": [1]}\n");
  ExpectError(ReadAll(path), path, 2, "field 'timestamp': missing");
}

// ---- tokens ----

TEST(TokensReaderTest, LiteralPromptAndOutputSessionsAndCacheSalt) {
  std::string path = WriteTemp(
      "t.jsonl",
      "{\"arrival_s\": 2.5, \"prompt_token_ids\": [5, 6, 7], \"output_length\": 4, "
      "\"output_token_ids\": [8, 9], \"session_id\": \"s1\", \"cache_salt\": \"tenant-a\"}\n"
      "{\"arrival_s\": 3.0, \"prompt_token_ids\": [5, 6, 7, 8, 9, 10], \"output_length\": 1, "
      "\"session_id\": 42, \"cache_salt\": \"tenant-a\"}\n"
      "{\"arrival_s\": 3.5, \"prompt_token_ids\": [5], \"output_length\": 0, "
      "\"cache_salt\": \"tenant-b\"}\n"
      "{\"arrival_s\": 4, \"prompt_token_ids\": [5], \"output_length\": 2}\n");
  ReadResult result;
  ASSERT_TRUE(ReadsAs(path, "tokens", 4, &result));
  const Request& first = result.requests[0];
  EXPECT_EQ(first.prompt_tokens, 3);
  EXPECT_EQ(first.output_tokens, 4);
  EXPECT_EQ(first.literal_tokens, (std::vector<uint32_t>{5, 6, 7, 8, 9}));
  ASSERT_EQ(first.prompt.size(), 1u);
  EXPECT_EQ(first.prompt[0].content_id, ContentSegment::kLiteralContent);
  EXPECT_EQ(first.prompt[0].length, 3u);
  ASSERT_EQ(first.output.size(), 1u);
  EXPECT_EQ(first.output[0].offset, 3u);
  EXPECT_EQ(first.output[0].length, 2u);  // known part only; the engine makes up the rest
  EXPECT_EQ(first.session_id, "s1");
  EXPECT_EQ(result.requests[1].session_id, "42");
  EXPECT_TRUE(result.requests[1].output.empty());
  EXPECT_EQ(result.requests[1].arrival_ns, 500'000'000);
  // The follow-up's prompt starts with the first prompt followed by its answer.
  auto answer_then = ExpandSegments(first, first.prompt);
  auto answer = ExpandSegments(first, first.output);
  answer_then.insert(answer_then.end(), answer.begin(), answer.end());
  EXPECT_EQ(testing::CommonPrefix(answer_then, ExpandPrompt(result.requests[1])), 5u);
  EXPECT_NE(first.namespace_key, 0u);
  EXPECT_EQ(first.namespace_key, result.requests[1].namespace_key);
  EXPECT_NE(first.namespace_key, result.requests[2].namespace_key);
  EXPECT_EQ(result.requests[3].namespace_key, 0u);
}

TEST(TokensReaderTest, BadRecords) {
  const std::string good = "{\"arrival_s\": 0, \"prompt_token_ids\": [1], \"output_length\": 1}\n";
  struct Case {
    std::string line, fragment;
  } cases[] = {
      {"{\"arrival_s\": 1, \"prompt_token_ids\": [1, 2], \"output_length\": 1, "
       "\"output_token_ids\": [3, 4]}",
       "field 'output_token_ids': has 2 tokens, more than output_length 1"},
      {"{\"arrival_s\": 1, \"prompt_token_ids\": [1, -2], \"output_length\": 1}",
       "field 'prompt_token_ids': token ids must be integers"},
      {"{\"arrival_s\": 1, \"prompt_token_ids\": [], \"output_length\": 1}",
       "field 'prompt_token_ids': must not be empty"},
      {"{\"arrival_s\": \"1.0\", \"prompt_token_ids\": [1], \"output_length\": 1}",
       "field 'arrival_s': must be a non-negative number"},
      {"{\"arrival_s\": 1, \"prompt_token_ids\": [1]}", "field 'output_length': missing"},
      {"{\"arrival_s\": 1, \"prompt_token_ids\": [1], \"output_length\": 1, \"session_id\": [1]}",
       "field 'session_id': must be a string or an integer"},
      {"{\"arrival_s\": 1 \"prompt_token_ids\": [1]}", "malformed JSON"},
  };
  for (const Case& c : cases) {
    std::string path = WriteTemp("tbad.jsonl", good + c.line + "\n");
    ExpectError(ReadAll(path), path, 2, c.fragment);
  }
}

// ---- llmservingsim ----

TEST(LlmServingSimReaderTest, ReadsTokenIdsAndNanosecondArrivals) {
  std::string path = WriteTemp("l.jsonl",
                               "{\"input_toks\": 3, \"output_toks\": 2, \"arrival_time_ns\": 1000, "
                               "\"input_tok_ids\": [1, 2, 3], \"output_tok_ids\": [4, 5]}\n"
                               "{\"input_toks\": 2, \"output_toks\": 1, \"arrival_time_ns\": 2500, "
                               "\"input_tok_ids\": [1, 2], \"output_tok_ids\": [9]}\n");
  ReadResult result;
  ASSERT_TRUE(ReadsAs(path, "llmservingsim", 2, &result));
  EXPECT_EQ(result.requests[1].arrival_ns, 1500);
  EXPECT_EQ(result.requests[0].literal_tokens, (std::vector<uint32_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(result.requests[0].output[0].offset, 3u);
  EXPECT_EQ(result.requests[0].output[0].length, 2u);
  EXPECT_EQ(result.requests[1].prompt_tokens, 2);
}

TEST(LlmServingSimReaderTest, LengthsMustMatchTheIds) {
  const std::string good =
      "{\"input_toks\": 1, \"output_toks\": 1, \"arrival_time_ns\": 0, "
      "\"input_tok_ids\": [1], \"output_tok_ids\": [2]}\n";
  std::string path = WriteTemp("l1.jsonl", good +
                                               "{\"input_toks\": 3, \"output_toks\": 1, "
                                               "\"arrival_time_ns\": 5, \"input_tok_ids\": [1, 2], "
                                               "\"output_tok_ids\": [2]}\n");
  ExpectError(ReadAll(path), path, 2, "field 'input_tok_ids': has 2 tokens but input_toks is 3");
  path = WriteTemp("l2.jsonl", good +
                                   "{\"input_toks\": 1, \"output_toks\": 1, "
                                   "\"arrival_time_ns\": 5.5e400, \"input_tok_ids\": [1]}\n");
  ExpectError(ReadAll(path), path, 2, "malformed JSON");
  path = WriteTemp("l3.jsonl", good +
                                   "{\"input_toks\": 1, \"output_toks\": -1, "
                                   "\"arrival_time_ns\": 5, \"input_tok_ids\": [1]}\n");
  ExpectError(ReadAll(path), path, 2, "field 'output_toks': must be a non-negative integer");
}

// ---- lengths ----

TEST(LengthsReaderTest, HeaderNamesColumnsAndEveryRequestIsUnique) {
  std::string path = WriteTemp("a.csv",
                               "num_decode_tokens,arrived_at,extra,num_prefill_tokens\n"
                               "44,0.0,x,374\n"
                               "109,4.314579,y,396\n"
                               "\n"
                               "55,4.541877,z,374\n");
  ReadResult result;
  ASSERT_TRUE(ReadsAs(path, "lengths", 3, &result));
  EXPECT_EQ(result.stats.records, 3);
  EXPECT_EQ(result.requests[0].prompt_tokens, 374);
  EXPECT_EQ(result.requests[0].output_tokens, 44);
  EXPECT_EQ(result.requests[1].arrival_ns, 4'314'579'000);
  // Equal lengths, no shared content.
  EXPECT_NE(result.requests[0].prompt[0].content_id, result.requests[2].prompt[0].content_id);
  EXPECT_NE(result.requests[0].prompt[0].content_id, ContentSegment::kLiteralContent);
}

TEST(LengthsReaderTest, HeaderlessFilesUseArrivalPromptOutputOrder) {
  TraceOptions options;
  options.format = "lengths";
  std::string path = WriteTemp("n.csv", "0.5,100,10\n1.5,200,20\n");
  auto result = ReadAll(path, options);
  ASSERT_TRUE(result.status.ok()) << result.status;
  ASSERT_EQ(result.requests.size(), 2u);
  EXPECT_EQ(result.requests[1].prompt_tokens, 200);
  EXPECT_EQ(result.requests[1].arrival_ns, 1'000'000'000);
}

TEST(LengthsReaderTest, RawAzureTimestampsAreDateTimes) {
  std::string path = WriteTemp("azure.csv",
                               "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                               "2023-11-16 18:15:46.6805900,374,44\n"
                               "2023-11-16 18:15:50.9951690,396,109\n"
                               "2023-11-17 00:00:00,10,1\n");
  auto result = ReadAll(path);
  ASSERT_TRUE(result.status.ok()) << result.status;
  ASSERT_EQ(result.requests.size(), 3u);
  EXPECT_EQ(result.requests[0].prompt_tokens, 374);
  EXPECT_EQ(result.requests[1].output_tokens, 109);
  EXPECT_EQ(result.requests[1].arrival_ns, 4'314'579'000);
  // Across midnight: 18:15:46.68059 -> 24:00:00 is 20,653.31941 s.
  EXPECT_EQ(result.requests[2].arrival_ns, 20'653'319'410'000);
  std::string bad = WriteTemp("azure_bad.csv",
                              "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                              "2023-11-16 18:15:46,374,44\n"
                              "2023-13-16 18:15:46,374,44\n");
  ExpectError(ReadAll(bad), bad, 3, "field 'TIMESTAMP': must be a non-negative number of seconds");
}

TEST(LengthsReaderTest, BadRows) {
  const std::string header = "arrived_at,num_prefill_tokens,num_decode_tokens\n0,10,1\n";
  struct Case {
    std::string row, fragment;
  } cases[] = {
      {"soon,10,1", "field 'arrived_at': must be a non-negative number"},
      {"2023-11-16 18:15:46x,10,1", "field 'arrived_at': must be a non-negative number"},
      {"-1,10,1", "field 'arrived_at': must be a non-negative number"},
      // Seconds whose nanoseconds overflow int64 (found by trace_lengths_fuzz).
      {"663299999999999,10,1", "field 'arrived_at': time out of range"},
      {"1,-10,1", "field 'num_prefill_tokens': must be a positive integer"},
      {"1,10.5,1", "field 'num_prefill_tokens': must be a positive integer"},
      {"1,10,", "field 'num_decode_tokens': must be a non-negative integer"},
      {"1,10", "expected 3 CSV columns, got 2"},
  };
  for (const Case& c : cases) {
    std::string path = WriteTemp("bad.csv", header + c.row + "\n");
    ExpectError(ReadAll(path), path, 3, c.fragment);
  }
  std::string path = WriteTemp("hdr.csv", "when,prompt,out\n1,2,3\n");
  ExpectError(ReadAll(path), path, 1, "CSV header must name");
}

}  // namespace
}  // namespace prefixsim
