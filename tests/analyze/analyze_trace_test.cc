// `analyze` over trace files: through OpenTrace, the CLI, and the real traces in
// traces/real/ (zstd copies of public traces).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "nlohmann/json.hpp"
#include "prefixsim/analyze.h"
#include "prefixsim/trace.h"
#include "tests/cli_runner.h"

namespace prefixsim {
namespace {

namespace fs = std::filesystem;

std::string RealTrace(const std::string& name) {
  return std::string(PREFIXSIM_REAL_TRACES_DIR) + "/" + name + ".zst";
}

fs::path TempDir() {
  fs::path dir =
      fs::temp_directory_path() /
      ("prefixsim_analyze_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
       "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
  fs::create_directories(dir);
  return dir;
}

void WriteFile(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

using ::prefixsim::testing::ReadFile;

// Runs the CLI; returns its exit code, stdout in *out.
int RunCli(const std::string& args, const fs::path& dir, std::string* out) {
  const fs::path stdout_path = dir / "stdout.txt";
  const std::string command = std::string(PREFIXSIM_BINARY) + " analyze " + args + " > " +
                              stdout_path.string() + " 2> " + (dir / "stderr.txt").string();
  const int status = std::system(command.c_str());
  *out = ReadFile(stdout_path);
  return WEXITSTATUS(status);
}

// Three Mooncake records at 512 tokens: [1 2 3] (176 tokens in 3), [1 2 4] (76 in 4), [5 6].
constexpr char kTinyMooncake[] =
    "{\"timestamp\": 0, \"input_length\": 1200, \"output_length\": 1, \"hash_ids\": [1, 2, 3]}\n"
    "{\"timestamp\": 1, \"input_length\": 1100, \"output_length\": 1, \"hash_ids\": [1, 2, 4]}\n"
    "{\"timestamp\": 2, \"input_length\": 600, \"output_length\": 1, \"hash_ids\": [5, 6]}\n";

TEST(AnalyzeTraceTest, TinyMooncakeFileThroughOpenTrace) {
  const fs::path dir = TempDir();
  WriteFile(dir / "tiny.jsonl", kTinyMooncake);
  AnalyzeOptions options;
  options.alignments = {16, 512, 1536};
  auto r = AnalyzeTraceFile((dir / "tiny.jsonl").string(), {}, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->block_tokens, 512);  // native: one hash id per block
  EXPECT_EQ(r->requests, 3);
  EXPECT_EQ(r->prompt_tokens, 2900);
  EXPECT_EQ(r->blocks, 8);
  EXPECT_EQ(r->reused_blocks, 2);
  EXPECT_EQ(r->unique_blocks, 6);
  EXPECT_EQ(r->unique_full_blocks, 3);  // 1, 2, 5
  EXPECT_EQ(r->forest.roots, 2);
  EXPECT_EQ(r->forest.branch_nodes, 1);  // block 2, followed by 3 and by 4
  EXPECT_EQ(r->forest.max_depth, 3);
  ASSERT_EQ(r->alignment_curve.size(), 3u);
  EXPECT_EQ(r->alignment_curve[0].hit_tokens, 1024);  // 16
  EXPECT_EQ(r->alignment_curve[1].hit_tokens, 1024);  // 512
  EXPECT_EQ(r->alignment_curve[2].hit_tokens, 0);     // 1536
  // Analysis at 256 tokens splits every hash id into two virtual blocks.
  options.block_tokens = 256;
  auto fine = AnalyzeTraceFile((dir / "tiny.jsonl").string(), {}, options);
  ASSERT_TRUE(fine.ok()) << fine.status();
  EXPECT_EQ(fine->blocks, 5 + 5 + 3);
  EXPECT_EQ(fine->reused_blocks, 4);
  EXPECT_EQ(fine->alignment_curve[1].hit_tokens, 1024);
  fs::remove_all(dir);
}

TEST(AnalyzeTraceTest, ReaderErrorsPassThrough) {
  const fs::path dir = TempDir();
  auto missing = AnalyzeTraceFile((dir / "missing.jsonl").string(), {});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  WriteFile(
      dir / "bad.jsonl",
      "{\"timestamp\": 0, \"input_length\": 1200, \"output_length\": 1, \"hash_ids\": [1]}\n");
  auto bad = AnalyzeTraceFile((dir / "bad.jsonl").string(), {});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("hash_ids"), std::string::npos) << bad.status();
  fs::remove_all(dir);
}

TEST(AnalyzeTraceTest, CliWritesJsonAndText) {
  const fs::path dir = TempDir();
  WriteFile(dir / "tiny.jsonl", kTinyMooncake);
  std::string out;
  ASSERT_EQ(RunCli("--trace " + (dir / "tiny.jsonl").string() +
                       " --alignments 1536,1728 --capacities 1,3 "
                       "--json " +
                       (dir / "out.json").string(),
                   dir, &out),
            0);
  EXPECT_NE(out.find("reused block fraction 0.2500"), std::string::npos) << out;
  const nlohmann::json j = nlohmann::json::parse(ReadFile(dir / "out.json"));
  EXPECT_EQ(j["requests"], 3);
  EXPECT_EQ(j["prompt_tokens"], 2900);
  EXPECT_EQ(j["unique_blocks"], 6);
  EXPECT_DOUBLE_EQ(j["reused_block_fraction"].get<double>(), 0.25);
  // 11 default powers of two plus 1536 and 1728.
  ASSERT_EQ(j["alignment_curve"].size(), 13u);
  for (const auto& p : j["alignment_curve"]) {
    const int64_t a = p["alignment"].get<int64_t>();
    const double expected = a <= 512 || a == 1024 ? 1024.0 / 2900 : 0.0;
    EXPECT_DOUBLE_EQ(p["hit_rate"].get<double>(), expected) << "alignment " << a;
  }
  ASSERT_EQ(j["capacity_curve"].size(), 2u);
  EXPECT_EQ(j["capacity_curve"][1]["capacity_blocks"], 3);
  EXPECT_DOUBLE_EQ(j["capacity_curve"][1]["lru_hit_rate"].get<double>(), 1024.0 / 2900);
  EXPECT_DOUBLE_EQ(j["capacity_curve"][1]["optimal_hit_rate"].get<double>(), 1024.0 / 2900);
  // Capacity 1: block 1 survives, block 2 does not.
  EXPECT_DOUBLE_EQ(j["capacity_curve"][0]["lru_hit_rate"].get<double>(), 512.0 / 2900);

  // The block-size cliff, one entry per alignment: a prompt of at most A tokens never hits
  // (docs/semantics.md §9.3). Prompts of 1200, 1100 and 600 tokens in the bins [512, 1023] and
  // [1024, 2047], whose requests add up to the trace's.
  ASSERT_EQ(j["cliff"].size(), j["alignment_curve"].size());
  for (size_t i = 0; i < j["cliff"].size(); ++i) {
    const auto& c = j["cliff"][i];
    const int64_t a = c["alignment"].get<int64_t>();
    EXPECT_EQ(a, j["alignment_curve"][i]["alignment"].get<int64_t>());
    const int64_t short_requests = (600 <= a) + (1100 <= a) + (1200 <= a);
    EXPECT_EQ(c["never_hit_short_requests"].get<int64_t>(), short_requests) << a;
    EXPECT_DOUBLE_EQ(c["never_hit_short_share"].get<double>(), short_requests / 3.0) << a;
    EXPECT_EQ(c["never_hit_short_prompt_tokens"].get<int64_t>(),
              (600 <= a ? 600 : 0) + (1100 <= a ? 1100 : 0) + (1200 <= a ? 1200 : 0))
        << a;
    ASSERT_EQ(c["bins"].size(), 2u) << a;
    EXPECT_EQ(c["bins"][0]["min_tokens"], 512);
    EXPECT_EQ(c["bins"][0]["max_tokens"], 1023);
    EXPECT_EQ(c["bins"][1]["min_tokens"], 1024);
    EXPECT_EQ(c["bins"][1]["max_tokens"], 2047);
    int64_t requests = 0;
    for (const auto& b : c["bins"]) {
      requests += b["requests"].get<int64_t>();
      const int64_t prompt = b["prompt_tokens"].get<int64_t>();
      EXPECT_DOUBLE_EQ(b["hit_fraction"].get<double>(),
                       static_cast<double>(b["hit_tokens"].get<int64_t>()) / prompt);
    }
    EXPECT_EQ(requests, 3);
    // Only the 1100-token prompt hits: its first 1024 tokens, at an alignment dividing 1024.
    EXPECT_EQ(c["bins"][1]["hit_tokens"].get<int64_t>(), a <= 512 || a == 1024 ? 1024 : 0) << a;
  }
  EXPECT_NE(out.find("never_hit_requests"), std::string::npos) << out;
  fs::remove_all(dir);
}

// With --json - stdout is the JSON document alone (docs/design.md §4.5), so it can be piped.
TEST(AnalyzeTraceTest, CliJsonToStdoutIsJsonOnly) {
  const fs::path dir = TempDir();
  WriteFile(dir / "tiny.jsonl", kTinyMooncake);
  std::string out;
  ASSERT_EQ(RunCli("--trace " + (dir / "tiny.jsonl").string() + " --json -", dir, &out), 0);
  const nlohmann::json j = nlohmann::json::parse(out);  // throws on any text around it
  EXPECT_EQ(j["requests"], 3);
  fs::remove_all(dir);
}

TEST(AnalyzeTraceTest, CliBadInputIsExit2) {
  const fs::path dir = TempDir();
  std::string out;
  EXPECT_EQ(RunCli("--trace " + (dir / "missing.jsonl").string(), dir, &out), 2);
  WriteFile(dir / "tiny.jsonl", kTinyMooncake);
  EXPECT_EQ(RunCli("--trace " + (dir / "tiny.jsonl").string() + " --alignments 0", dir, &out), 2);
  EXPECT_EQ(RunCli("--trace " + (dir / "tiny.jsonl").string() + " --capacities -3", dir, &out), 2);
  EXPECT_EQ(RunCli("", dir, &out), 2);  // --trace is required
  fs::remove_all(dir);
}

// The README of the real traces: "with an unlimited cache and no concurrency, the fraction of
// hash-id blocks seen before is 0.366 (conversation) and 0.640 (synthetic)", over all hash ids,
// the partial last one included.
void CheckRealMooncake(const std::string& name, int64_t requests, double reused_fraction) {
  const std::string path = RealTrace(name);
  if (!fs::exists(path)) GTEST_SKIP() << path << " not present";
  AnalyzeOptions options;
  options.alignments.insert(options.alignments.end(), {1, 1536, 1728, 13824});
  auto r = AnalyzeTraceFile(path, {}, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->requests, requests);
  EXPECT_EQ(r->block_tokens, 512);
  EXPECT_NEAR(r->reused_block_fraction, reused_fraction, 0.0005);

  // Blocks are the hash ids: ceil(input_length / 512) per request, counted independently here.
  auto reader = OpenTrace(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  int64_t hash_ids = 0, prompt_tokens = 0;
  Request req;
  while (true) {
    auto more = (*reader)->Next(&req);
    ASSERT_TRUE(more.ok()) << more.status();
    if (!*more) break;
    hash_ids += static_cast<int64_t>(req.prompt.size());
    prompt_tokens += req.prompt_tokens;
  }
  EXPECT_EQ(r->blocks, hash_ids);
  EXPECT_EQ(r->prompt_tokens, prompt_tokens);

  auto hit = [&](int64_t alignment) {
    for (const AlignmentPoint& p : r->alignment_curve) {
      if (p.alignment == alignment) return p.hit_tokens;
    }
    ADD_FAILURE() << "no alignment " << alignment;
    return int64_t{-1};
  };
  // Sharing happens at 512-token boundaries: alignments dividing 512 capture the same shared
  // blocks (finer ones only add the identical-prompt tail under the L-1 cap); 1536, 1728 and
  // 13,824 lose.
  for (int64_t a : {16, 32, 64, 128, 256}) EXPECT_GE(hit(a), hit(512));
  EXPECT_LE(hit(16) - hit(512), r->requests * 512);
  EXPECT_LT(hit(1536), hit(512));
  EXPECT_LT(hit(1728), hit(1536));
  EXPECT_LT(hit(13824), hit(1728));
  EXPECT_EQ(hit(1), r->max_hit_tokens);

  // Capacity: the unbounded end reaches the 512-alignment ceiling under both policies; the
  // optimum is never below LRU, and both grow with capacity.
  ASSERT_FALSE(r->capacity_curve.empty());
  const CapacityPoint& top = r->capacity_curve.back();
  EXPECT_EQ(top.capacity_blocks, r->unique_full_blocks);
  EXPECT_EQ(top.lru_hit_tokens, hit(512));
  EXPECT_EQ(top.optimal_hit_tokens, hit(512));
  for (size_t i = 0; i < r->capacity_curve.size(); ++i) {
    const CapacityPoint& p = r->capacity_curve[i];
    EXPECT_GE(p.optimal_hit_tokens, p.lru_hit_tokens) << p.capacity_blocks;
    if (i > 0) {
      EXPECT_GE(p.lru_hit_tokens, r->capacity_curve[i - 1].lru_hit_tokens);
      EXPECT_GE(p.optimal_hit_tokens, r->capacity_curve[i - 1].optimal_hit_tokens);
    }
  }
}

TEST(AnalyzeTraceTest, RealMooncakeConversation) {
  CheckRealMooncake("mooncake_conversation_trace.jsonl", 12031, 0.366);
}

TEST(AnalyzeTraceTest, RealMooncakeSynthetic) {
  CheckRealMooncake("mooncake_synthetic_trace.jsonl", 3993, 0.640);
}

TEST(AnalyzeTraceTest, RealShareGptHasLittleSharing) {
  const std::string path = RealTrace("sharegpt_llama31_300_tokens.jsonl");
  if (!fs::exists(path)) GTEST_SKIP() << path << " not present";
  auto r = AnalyzeTraceFile(path, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->requests, 300);
  EXPECT_EQ(r->block_tokens, 16);  // literal tokens
  // The README: about 8% of prompt tokens are a prefix of an earlier prompt or answer; prompts
  // alone can only share less or the same.
  EXPECT_GT(r->max_hit_rate, 0.02);
  EXPECT_LE(r->max_hit_rate, 0.09);
}

}  // namespace
}  // namespace prefixsim
