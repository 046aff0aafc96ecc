#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "sim/trace/gen/workload_generator.h"
#include "tests/trace/trace_test_util.h"

namespace prefixsim {
namespace {

using ::prefixsim::testing::ReadAll;
using ::prefixsim::testing::ReadFileBytes;
using ::prefixsim::testing::TempPath;
using ::prefixsim::testing::WriteTemp;

std::vector<GeneratedRequest> Generate(WorkloadOptions options) {
  auto requests = GenerateWorkload(options);
  EXPECT_TRUE(requests.ok()) << requests.status();
  return requests.ok() ? *std::move(requests) : std::vector<GeneratedRequest>{};
}

int64_t Tokens(const std::vector<ContentSegment>& segments) {
  int64_t total = 0;
  for (const auto& s : segments) total += s.length;
  return total;
}

bool StartsWith(const std::vector<ContentSegment>& whole, const std::vector<ContentSegment>& part) {
  return part.size() <= whole.size() &&
         std::equal(part.begin(), part.end(), whole.begin(),
                    [](const ContentSegment& a, const ContentSegment& b) {
                      return a.content_id == b.content_id && a.offset == b.offset &&
                             a.length == b.length;
                    });
}

TEST(GenTraceTest, SameSeedSameFileOtherSeedOtherFile) {
  for (const std::string& kind : WorkloadKinds()) {
    SCOPED_TRACE(kind);
    WorkloadOptions options{.kind = kind, .seed = 11, .requests = 150, .rate_per_s = 3};
    std::string a = FormatMooncakeTrace(Generate(options), 512);
    std::string b = FormatMooncakeTrace(Generate(options), 512);
    options.seed = 12;
    std::string c = FormatMooncakeTrace(Generate(options), 512);
    EXPECT_EQ(a, b);
    EXPECT_NE(a, c);
  }
}

TEST(GenTraceTest, ChatTurnsCarryTheWholeHistoryIncludingEarlierAnswers) {
  auto requests = Generate({.kind = "chat", .seed = 5, .requests = 500, .rate_per_s = 2});
  ASSERT_EQ(requests.size(), 500u);
  std::map<std::string, const GeneratedRequest*> last_turn;
  int follow_ups = 0;
  int64_t longest = 0;
  for (const GeneratedRequest& r : requests) {
    longest = std::max(longest, Tokens(r.prompt));
    EXPECT_LE(Tokens(r.prompt), 65536);
    EXPECT_EQ(r.output_tokens, Tokens(r.answer));
    auto it = last_turn.find(r.session_id);
    if (it != last_turn.end()) {
      const GeneratedRequest& previous = *it->second;
      // Next prompt = previous prompt + previous answer + new question; arrives later.
      std::vector<ContentSegment> expected_prefix = previous.prompt;
      expected_prefix.insert(expected_prefix.end(), previous.answer.begin(), previous.answer.end());
      EXPECT_TRUE(StartsWith(r.prompt, expected_prefix));
      EXPECT_EQ(r.prompt.size(), expected_prefix.size() + 1);
      EXPECT_GT(r.arrival_ns, previous.arrival_ns + 2'000'000'000);  // think time >= 2 s
      ++follow_ups;
    }
    last_turn[r.session_id] = &r;
  }
  EXPECT_GT(follow_ups, 250);
  EXPECT_GT(longest, 20000);  // long enough for 13,824-token alignment effects
  EXPECT_GT(last_turn.size(), 20u);
}

TEST(GenTraceTest, AgenticSessionsShareLongPrefixesAndHaveManyShortTurns) {
  auto requests = Generate({.kind = "agentic", .seed = 5, .requests = 400, .rate_per_s = 2});
  std::map<std::string, int> turns;
  double output = 0;
  for (const GeneratedRequest& r : requests) {
    ++turns[r.session_id];
    output += static_cast<double>(r.output_tokens);
    EXPECT_GE(r.prompt[0].length, 9000u);  // the shared system + tools prefix
  }
  EXPECT_LT(output / requests.size(), 200);                           // tool calls are short
  EXPECT_GT(static_cast<double>(requests.size()) / turns.size(), 5);  // many turns per session
}

TEST(GenTraceTest, SharedDocRequestsReuseDocumentsAndFewShotBlocks) {
  auto requests = Generate({.kind = "shared_doc", .seed = 5, .requests = 300});
  std::map<uint64_t, int> document_uses;
  for (const GeneratedRequest& r : requests) {
    ASSERT_EQ(r.prompt.size(), 4u);
    ++document_uses[r.prompt[2].content_id];
    EXPECT_TRUE(r.session_id.empty());
  }
  EXPECT_LE(document_uses.size(), 24u);
  int most = 0;
  for (const auto& [doc, uses] : document_uses) most = std::max(most, uses);
  EXPECT_GT(most, 40);  // Zipf: the top document is popular
}

double InterArrivalCv(const std::vector<GeneratedRequest>& requests) {
  std::vector<double> gaps;
  for (size_t i = 1; i < requests.size(); ++i) {
    gaps.push_back(static_cast<double>(requests[i].arrival_ns - requests[i - 1].arrival_ns));
  }
  double mean = 0, var = 0;
  for (double g : gaps) mean += g;
  mean /= gaps.size();
  for (double g : gaps) var += (g - mean) * (g - mean);
  return std::sqrt(var / gaps.size()) / mean;
}

TEST(GenTraceTest, PoissonAndBurstyArrivalsAtTheRequestedRate) {
  auto poisson = Generate({.kind = "shared_doc", .seed = 9, .requests = 4000, .rate_per_s = 5});
  auto bursty = Generate(
      {.kind = "shared_doc", .seed = 9, .requests = 4000, .rate_per_s = 5, .arrival = "bursty"});
  EXPECT_NEAR(InterArrivalCv(poisson), 1.0, 0.1);
  EXPECT_GT(InterArrivalCv(bursty), 1.4);
  EXPECT_NEAR(4000 / (poisson.back().arrival_ns * 1e-9), 5.0, 0.5);
  EXPECT_NEAR(4000 / (bursty.back().arrival_ns * 1e-9), 5.0, 1.5);
  for (size_t i = 1; i < bursty.size(); ++i)
    EXPECT_GE(bursty[i].arrival_ns, bursty[i - 1].arrival_ns);
}

TEST(GenTraceTest, BadOptions) {
  EXPECT_EQ(GenerateWorkload({.kind = "nope"}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GenerateWorkload({.kind = "chat", .arrival = "uniform"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GenerateWorkload({.kind = "chat", .requests = 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GenerateWorkload({.kind = "chat", .rate_per_s = -1}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The mooncake output, read back, has the same sharing as the generated content at block
// granularity: a block id is shared exactly when the whole prefix up to that block is.
TEST(GenTraceTest, MooncakeOutputReadsBackWithTheGeneratedSharing) {
  auto requests = Generate({.kind = "chat", .seed = 21, .requests = 120, .rate_per_s = 4});
  for (int64_t block_tokens : {512, 64}) {
    SCOPED_TRACE(block_tokens);
    std::string path = WriteTemp("g.jsonl", FormatMooncakeTrace(requests, block_tokens));
    auto read = ReadAll(path, {.format = "", .trace_block_tokens = block_tokens});
    ASSERT_TRUE(read.status.ok()) << read.status;
    ASSERT_EQ(read.requests.size(), requests.size());
    for (size_t i = 0; i < requests.size(); i += 7) {
      for (size_t j = i + 1; j < requests.size(); j += 5) {
        // Generated content, expanded per token.
        Request a, b;
        a.prompt = requests[i].prompt;
        b.prompt = requests[j].prompt;
        size_t exact = testing::CommonPrefix(testing::ExpandPrompt(a), testing::ExpandPrompt(b));
        size_t blocks = testing::SharedFullBlocks(read.requests[i], read.requests[j], 1);
        // Shared full trace blocks == full blocks of the exact common prefix.
        EXPECT_EQ(blocks / block_tokens, exact / block_tokens);
        EXPECT_EQ(blocks % block_tokens, 0u);
      }
    }
    EXPECT_EQ(read.requests[5].arrival_ns / 1'000'000,
              (requests[5].arrival_ns / 1'000'000) - (requests[0].arrival_ns / 1'000'000));
  }
}

TEST(GenTraceTest, TokensOutputLetsFollowUpsHitOnEarlierAnswers) {
  auto requests = Generate({.kind = "chat", .seed = 4, .requests = 30, .max_prompt_tokens = 6000});
  auto read = ReadAll(WriteTemp("t.jsonl", FormatTokensTrace(requests)));
  ASSERT_TRUE(read.status.ok()) << read.status;
  EXPECT_EQ(read.format, "tokens");
  std::map<std::string, const Request*> previous;
  int checked = 0;
  for (const Request& r : read.requests) {
    auto it = previous.find(r.session_id);
    if (it != previous.end()) {
      auto expected = testing::ExpandSegments(*it->second, it->second->prompt);
      auto answer = testing::ExpandSegments(*it->second, it->second->output);
      ASSERT_FALSE(answer.empty());
      expected.insert(expected.end(), answer.begin(), answer.end());
      EXPECT_EQ(testing::CommonPrefix(expected, testing::ExpandPrompt(r)), expected.size());
      ++checked;
    }
    previous[r.session_id] = &r;
  }
  EXPECT_GT(checked, 5);
}

// traces/README.md documents the command that made each shipped sample; running it again must
// reproduce the file byte for byte.
TEST(GenTraceTest, ShippedSamplesRegenerateIdentically) {
  const std::string root = PREFIXSIM_SOURCE_DIR;
  std::ifstream readme(root + "/traces/README.md");
  ASSERT_TRUE(readme) << "traces/README.md missing";
  std::string line;
  const std::regex command(R"(^\s*prefixsim (gen-trace .* --out (traces/[A-Za-z0-9_.]+))\s*$)");
  int regenerated = 0;
  while (std::getline(readme, line)) {
    std::smatch match;
    if (!std::regex_match(line, match, command)) continue;
    SCOPED_TRACE(line);
    const std::string shipped = root + "/" + match[2].str();
    std::string out = TempPath("sample.jsonl");
    std::string args = match[1].str();
    args.replace(args.rfind(match[2].str()), match[2].str().size(), out);
    std::string shell = std::string(PREFIXSIM_BINARY) + " " + args + " > /dev/null";
    ASSERT_EQ(std::system(shell.c_str()), 0) << shell;
    std::string expected = ReadFileBytes(shipped);
    ASSERT_FALSE(expected.empty()) << shipped;
    EXPECT_LT(expected.size(), 2u << 20);  // samples stay under 2 MB
    EXPECT_TRUE(ReadFileBytes(out) == expected) << shipped << " differs from a fresh run";
    auto read = ReadAll(shipped);
    EXPECT_TRUE(read.status.ok()) << read.status;
    ++regenerated;
  }
  EXPECT_GE(regenerated, 4);
}

TEST(GenTraceTest, CliExitCodes) {
  const std::string binary = PREFIXSIM_BINARY;
  std::string out = TempPath("x.jsonl");
  auto run = [](const std::string& command) {
    int status = std::system((command + " > /dev/null 2>&1").c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  EXPECT_EQ(run(binary + " gen-trace --kind chat --requests 5 --out " + out), 0);
  EXPECT_EQ(run(binary + " gen-trace --kind unknown --out " + out), 2);
  EXPECT_EQ(run(binary + " gen-trace --kind chat --format xml --out " + out), 2);
  EXPECT_EQ(run(binary + " gen-trace --kind chat"), 2);  // --out is required
  EXPECT_EQ(run(binary + " gen-trace --kind chat --requests 5 --out /no/such/dir/x.jsonl"), 2);
}

}  // namespace
}  // namespace prefixsim
