// Behaviour shared by every format: detection, options, arrival order, and the contract every
// registered reader must keep.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <string>

#include "prefixsim/trace.h"
#include "sim/cli/exit_codes.h"
#include "sim/util/status_macros.h"
#include "tests/trace/trace_test_util.h"

namespace prefixsim {
namespace {

using ::prefixsim::testing::ReadAll;
using ::prefixsim::testing::WriteGzip;
using ::prefixsim::testing::WriteTemp;
using ::prefixsim::testing::WriteZstd;

// A tokens trace: `sessions` sessions of `turns` turns, session s turn t at (t * sessions + s) s.
std::string SessionTrace(int sessions, int turns) {
  std::string text;
  for (int t = 0; t < turns; ++t) {
    for (int s = 0; s < sessions; ++s) {
      text += "{\"arrival_s\": " + std::to_string(t * sessions + s) + ", \"session_id\": \"s" +
              std::to_string(s) + "\", \"prompt_token_ids\": [1, 2], \"output_length\": 1}\n";
    }
  }
  return text;
}

std::string MooncakeLine(int64_t timestamp_ms) {
  return "{\"timestamp\": " + std::to_string(timestamp_ms) +
         ", \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [0]}\n";
}

TEST(TraceOptionsTest, MaxRequests) {
  std::string path = WriteTemp("s.jsonl", SessionTrace(5, 4));
  auto result = ReadAll(path, {.format = "", .max_requests = 7});
  ASSERT_TRUE(result.status.ok());
  ASSERT_EQ(result.requests.size(), 7u);
  EXPECT_EQ(result.requests.back().id, 6u);
}

TEST(TraceOptionsTest, TimeWindowIsRelativeToTheFirstRecordAndArrivalsToTheFirstKept) {
  std::string text;
  for (int i = 0; i < 10; ++i) text += MooncakeLine(100'000 + i * 1000);  // 100 s, 101 s, ...
  std::string path = WriteTemp("w.jsonl", text);
  auto result = ReadAll(path, {.format = "", .start_s = 2.5, .end_s = 6});
  ASSERT_TRUE(result.status.ok());
  ASSERT_EQ(result.requests.size(), 3u);  // records at +3, +4, +5 s
  EXPECT_EQ(result.requests[0].arrival_ns, 0);
  EXPECT_EQ(result.requests[2].arrival_ns, 2'000'000'000);
  EXPECT_EQ(result.requests[0].id, 0u);
  EXPECT_EQ(result.stats.skipped_by_window, 3);
}

// A window or sample that keeps no record is bad input (exit 2), not a replay of nothing with a
// hit rate of 0: past the last record, between two records, or a sample too thin for the trace.
TEST(TraceOptionsTest, AWindowOrSampleThatKeepsNothingIsAnError) {
  std::string text;
  for (int i = 0; i < 10; ++i) text += MooncakeLine(100'000 + i * 1000);
  const std::string path = WriteTemp("empty_window.jsonl", text);
  for (const TraceOptions& options :
       {TraceOptions{.format = "", .start_s = 60},
        TraceOptions{.format = "", .start_s = 2.2, .end_s = 2.8},
        TraceOptions{.format = "", .session_sample_fraction = 1e-9, .seed = 1}}) {
    auto result = ReadAll(path, options);
    ASSERT_FALSE(result.status.ok());
    EXPECT_EQ(result.status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(ExitCodeFor(result.status), 2);
    EXPECT_NE(result.status.message().find(path), std::string::npos) << result.status;
    EXPECT_NE(result.status.message().find("no record falls in the trace window"),
              std::string::npos)
        << result.status;
  }
  // One record kept is a trace.
  EXPECT_TRUE(ReadAll(path, {.format = "", .start_s = 9}).status.ok());
}

TEST(TraceOptionsTest, TimeScaleStretchesArrivals) {
  std::string path =
      WriteTemp("t.jsonl", MooncakeLine(0) + MooncakeLine(1000) + MooncakeLine(3000));
  auto faster = ReadAll(path, {.format = "", .time_scale = 0.5});
  ASSERT_TRUE(faster.status.ok());
  EXPECT_EQ(faster.requests[1].arrival_ns, 500'000'000);
  EXPECT_EQ(faster.requests[2].arrival_ns, 1'500'000'000);
  auto slower = ReadAll(path, {.format = "", .time_scale = 3});
  EXPECT_EQ(slower.requests[2].arrival_ns, 9'000'000'000);
}

TEST(TraceOptionsTest, SessionSamplingKeepsWholeSessionsReproducibly) {
  std::string path = WriteTemp("s.jsonl", SessionTrace(400, 3));
  auto sampled = ReadAll(path, {.format = "", .session_sample_fraction = 0.25, .seed = 7});
  auto again = ReadAll(path, {.format = "", .session_sample_fraction = 0.25, .seed = 7});
  auto other_seed = ReadAll(path, {.format = "", .session_sample_fraction = 0.25, .seed = 8});
  ASSERT_TRUE(sampled.status.ok());
  std::map<std::string, int> turns_per_session;
  for (const Request& r : sampled.requests) ++turns_per_session[r.session_id];
  for (const auto& [session, turns] : turns_per_session) EXPECT_EQ(turns, 3) << session;
  EXPECT_GT(turns_per_session.size(), 70u);  // ~100 of 400
  EXPECT_LT(turns_per_session.size(), 130u);
  EXPECT_EQ(sampled.stats.skipped_by_sampling,
            1200 - static_cast<int64_t>(sampled.requests.size()));
  std::set<std::string> first, second, third;
  for (const Request& r : sampled.requests) first.insert(r.session_id);
  for (const Request& r : again.requests) second.insert(r.session_id);
  for (const Request& r : other_seed.requests) third.insert(r.session_id);
  EXPECT_EQ(first, second);
  EXPECT_NE(first, third);
  // Ids stay dense after sampling.
  for (size_t i = 0; i < sampled.requests.size(); ++i) EXPECT_EQ(sampled.requests[i].id, i);
}

TEST(TraceOptionsTest, BackwardsArrivalsAreClampedAndCounted) {
  std::string path =
      WriteTemp("b.jsonl", MooncakeLine(0) + MooncakeLine(5000) + MooncakeLine(4000) +
                               MooncakeLine(4500) + MooncakeLine(6000));
  auto result = ReadAll(path);
  ASSERT_TRUE(result.status.ok());
  EXPECT_EQ(result.stats.arrivals_clamped, 2);
  ASSERT_EQ(result.requests.size(), 5u);
  EXPECT_EQ(result.requests[2].arrival_ns, 5'000'000'000);
  EXPECT_EQ(result.requests[3].arrival_ns, 5'000'000'000);
  EXPECT_EQ(result.requests[4].arrival_ns, 6'000'000'000);
}

TEST(TraceOptionsTest, StrictArrivalOrderRejectsTheLine) {
  std::string path =
      WriteTemp("b.jsonl", MooncakeLine(0) + MooncakeLine(5000) + MooncakeLine(4000));
  auto result = ReadAll(path, {.format = "", .reject_backwards_arrivals = true});
  EXPECT_EQ(result.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(
      result.status.message().find(path + ":3: field 'timestamp': arrival time goes backwards"),
      std::string::npos)
      << result.status;
}

TEST(TraceOptionsTest, InvalidOptionsAreRejected) {
  std::string path = WriteTemp("o.jsonl", MooncakeLine(0));
  for (const TraceOptions& options : {TraceOptions{.format = "", .time_scale = 0},
                                      TraceOptions{.format = "", .session_sample_fraction = 0},
                                      TraceOptions{.format = "", .session_sample_fraction = 1.5},
                                      TraceOptions{.format = "", .max_requests = -1},
                                      TraceOptions{.format = "", .start_s = 5, .end_s = 2},
                                      TraceOptions{.format = "", .trace_block_tokens = -16},
                                      TraceOptions{.format = "nonsense"}}) {
    auto reader = OpenTrace(path, options);
    EXPECT_EQ(reader.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

// Tokens per hash id means something only where records are hash ids: a token-level trace
// refuses it (it would be silently ignored), naming the trace, its format and the formats that
// take it; the hash-id formats still do.
TEST(TraceOptionsTest, BlockTokensOnATraceWithoutHashIdsIsAnError) {
  const std::string tokens = WriteTemp(
      "t.jsonl", "{\"arrival_s\": 0, \"prompt_token_ids\": [1, 2, 3], \"output_length\": 1}\n");
  ASSERT_TRUE(OpenTrace(tokens).ok());
  auto reader = OpenTrace(tokens, TraceOptions{.format = "", .trace_block_tokens = 16});
  ASSERT_EQ(reader.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(reader.status().message(),
            tokens +
                ": `trace_block_tokens` sets the tokens per hash id of bailian and mooncake "
                "traces; this trace is tokens, which has none");
  EXPECT_TRUE(
      OpenTrace(WriteTemp("m.jsonl", MooncakeLine(0)), {.format = "", .trace_block_tokens = 16})
          .ok());
}

TEST(TraceOptionsTest, DetectionFailuresAndMissingFiles) {
  EXPECT_EQ(OpenTrace("/no/such/trace.jsonl").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ExitCodeFor(OpenTrace("/no/such/trace.jsonl").status()), 2);
  EXPECT_EQ(OpenTrace(WriteTemp("e.jsonl", "\n\n")).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto unknown = OpenTrace(WriteTemp("u.jsonl", "{\"foo\": 1}\n"));
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("`format`"), std::string::npos);
  std::string broken = WriteTemp("x.jsonl", "{\"timestamp\": 0, \"input_length\n");
  auto malformed = OpenTrace(broken);
  EXPECT_NE(malformed.status().message().find(broken + ":1: malformed JSON"), std::string::npos)
      << malformed.status();
  // A forced format that does not match the records fails on the first record, naming the field.
  auto forced = ReadAll(WriteTemp("f.jsonl", MooncakeLine(0)), {.format = "tokens"});
  EXPECT_NE(forced.status.message().find("field 'arrival_s': missing"), std::string::npos);
  // A forced format on an empty file is an empty trace, not an error.
  auto empty = ReadAll(WriteTemp("e2.jsonl", ""), {.format = "mooncake"});
  EXPECT_TRUE(empty.status.ok());
  EXPECT_TRUE(empty.requests.empty());
}

// One small valid sample per registered format. A new format must add one here.
const std::map<std::string, std::string>& SamplePerFormat() {
  static const auto* samples = new std::map<std::string, std::string>{
      {"mooncake", MooncakeLine(0) +
                       "{\"timestamp\": 7, \"input_length\": 600, \"output_length\": 3, "
                       "\"hash_ids\": [0, 1]}\n"},
      {"bailian",
       "{\"chat_id\": 1, \"parent_chat_id\": -1, \"timestamp\": 1.5, \"input_length\": 20, "
       "\"output_length\": 2, \"turn\": 1, \"hash_ids\": [3, 4]}\n"
       "{\"chat_id\": 2, \"parent_chat_id\": 1, \"timestamp\": 2.5, \"input_length\": 40, "
       "\"output_length\": 2, \"turn\": 2, \"hash_ids\": [3, 4, 5]}\n"},
      {"tokens", SessionTrace(2, 2)},
      {"llmservingsim",
       "{\"input_toks\": 2, \"output_toks\": 1, \"arrival_time_ns\": 10, \"input_tok_ids\": [1, "
       "2], "
       "\"output_tok_ids\": [3]}\n"
       "{\"input_toks\": 3, \"output_toks\": 1, \"arrival_time_ns\": 20, \"input_tok_ids\": [1, 2, "
       "3], "
       "\"output_tok_ids\": [4]}\n"},
      {"lengths", "arrived_at,num_prefill_tokens,num_decode_tokens\n0,10,1\n1.5,20,2\n"},
  };
  return *samples;
}

TEST(TraceReaderContractTest, EveryRegisteredFormatKeepsTheRequestContract) {
  const auto formats = RegisteredTraceFormats();
  EXPECT_EQ(formats.size(), 5u);
  for (const std::string& format : formats) {
    SCOPED_TRACE(format);
    auto sample = SamplePerFormat().find(format);
    ASSERT_NE(sample, SamplePerFormat().end()) << "add a sample for the new format";
    auto plain = ReadAll(WriteTemp("c.trace", sample->second));
    ASSERT_TRUE(plain.status.ok()) << plain.status;
    EXPECT_EQ(plain.format, format);  // auto-detected
    ASSERT_GE(plain.requests.size(), 2u);
    int64_t previous_arrival = 0;
    for (size_t i = 0; i < plain.requests.size(); ++i) {
      const Request& r = plain.requests[i];
      EXPECT_EQ(r.id, i);
      EXPECT_GE(r.arrival_ns, previous_arrival);
      previous_arrival = r.arrival_ns;
      int64_t prompt = 0;
      for (const ContentSegment& s : r.prompt) {
        prompt += s.length;
        EXPECT_GT(s.length, 0u);
        if (s.content_id == ContentSegment::kLiteralContent) {
          EXPECT_LE(s.offset + s.length, r.literal_tokens.size());
        }
      }
      EXPECT_EQ(prompt, r.prompt_tokens);
      EXPECT_GT(r.prompt_tokens, 0);
      int64_t output = 0;
      for (const ContentSegment& s : r.output) {
        output += s.length;
        if (s.content_id == ContentSegment::kLiteralContent) {
          EXPECT_LE(s.offset + s.length, r.literal_tokens.size());
        }
      }
      EXPECT_LE(output, r.output_tokens);
    }
    EXPECT_EQ(plain.requests[0].arrival_ns, 0);
    // Compressed copies read identically.
    for (const auto& compressed :
         {WriteGzip("c.trace.gz", sample->second), WriteZstd("c.trace.zst", sample->second)}) {
      auto other = ReadAll(compressed);
      ASSERT_TRUE(other.status.ok()) << other.status;
      ASSERT_EQ(other.requests.size(), plain.requests.size());
      for (size_t i = 0; i < plain.requests.size(); ++i) {
        EXPECT_EQ(testing::ExpandPrompt(other.requests[i]),
                  testing::ExpandPrompt(plain.requests[i]));
        EXPECT_EQ(other.requests[i].arrival_ns, plain.requests[i].arrival_ns);
      }
    }
    // Forcing the format gives the same result as detecting it.
    auto forced = ReadAll(WriteTemp("c2.trace", sample->second), {.format = format});
    ASSERT_TRUE(forced.status.ok());
    EXPECT_EQ(forced.requests.size(), plain.requests.size());
  }
}

// Every prefix of every sample (records cut anywhere, as in a partly written file) either reads
// or fails with InvalidArgument: never a crash, never another error kind. Under the sanitizer
// build this also checks that in-place parsing stays inside the line buffer.
TEST(TraceReaderContractTest, CutRecordsFailCleanly) {
  for (const auto& [format, text] : SamplePerFormat()) {
    SCOPED_TRACE(format);
    std::string path = testing::TempPath("cut.trace");
    int failures = 0;
    for (size_t cut = 1; cut < text.size(); ++cut) {
      std::ofstream(path, std::ios::binary | std::ios::trunc) << text.substr(0, cut);
      auto result = ReadAll(path, {.format = format});
      if (!result.status.ok()) {
        ++failures;
        EXPECT_EQ(result.status.code(), absl::StatusCode::kInvalidArgument)
            << "cut at " << cut << ": " << result.status;
      }
    }
    EXPECT_GT(failures, 0);
  }
}

}  // namespace
}  // namespace prefixsim
