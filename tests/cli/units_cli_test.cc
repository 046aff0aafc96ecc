// Units and names on the command line (issue 26): one size parser for every byte option and
// byte field, analyze's capacities in blocks, did-you-mean for commands, flags and presets, HF
// model directories, traces without prefix identity, and output paths checked before any work.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "nlohmann/json.hpp"
#include "prefixsim/engine_config.h"
#include "sim/grid/grid.h"
#include "sim/grid/point_config.h"
#include "tests/cli_runner.h"

namespace prefixsim {
namespace {

namespace fs = std::filesystem;
using ::prefixsim::testing::ReadFile;
using ::prefixsim::testing::RunCli;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr int64_t kGiB = int64_t{1} << 30;
const char kLlama[] = " --model llama-3.1-8b --engine llama-3.1-8b";
const std::string kChat = std::string(PREFIXSIM_SOURCE_DIR) + "/traces/sample_chat.jsonl";

// A fresh, empty directory for one test.
fs::path TempDir(const std::string& name) {
  const fs::path dir =
      fs::path(::testing::TempDir()) / (std::to_string(getpid()) + "_units_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string JsonPart(const std::string& output) {
  const size_t begin = output.find('{');
  const size_t end = output.rfind('}');
  if (begin == std::string::npos || end == std::string::npos) return "";
  return output.substr(begin, end - begin + 1);
}

// --- sizes ---------------------------------------------------------------------------------

TEST(UnitsCliTest, KvCacheBytesTakesASizeAndGivesTheSamePlanAsTheByteCount) {
  const auto bytes = RunCli("resolve" + std::string(kLlama) + " --json --kv-cache-bytes " +
                            std::to_string(64 * kGiB));
  const auto gib = RunCli("resolve" + std::string(kLlama) + " --json --kv-cache-bytes 64GiB");
  ASSERT_EQ(bytes.exit_code, 0) << bytes.output;
  ASSERT_EQ(gib.exit_code, 0) << gib.output;
  EXPECT_EQ(gib.output, bytes.output);
  const auto plan = nlohmann::json::parse(JsonPart(gib.output));
  EXPECT_EQ(plan["num_blocks"].get<int64_t>(), 64 * kGiB / plan["bytes_per_block"].get<int64_t>());
  // A size in another spelling of the same bytes, and a different size, for contrast.
  EXPECT_EQ(RunCli("resolve" + std::string(kLlama) + " --json --kv-cache-bytes 0.0625TiB").output,
            bytes.output);
  EXPECT_NE(RunCli("resolve" + std::string(kLlama) + " --json --kv-cache-bytes 64GB").output,
            bytes.output);
}

// Every numeric flag's bound reads as one short line (CLI11's own checks print DBL_MAX's 309
// digits).
TEST(UnitsCliTest, ANumberOutOfBoundsNamesTheFlagInOneShortLine) {
  const std::pair<const char*, const char*> cases[] = {
      {"--max-num-seqs 0", "--max-num-seqs: '0' is not positive"},
      {"--max-num-seqs x", "--max-num-seqs: 'x' is not a number"},
      {"--num-speculative-tokens -1", "--num-speculative-tokens: '-1' is not 0 or more"},
      {"--num-gpu-blocks 1", "--num-gpu-blocks: '1' is not a block count in [2, 2147483646]"},
      // More blocks than block ids: refused, not an abort when the pool is built.
      {"--num-gpu-blocks 2147483647", "is not a block count in [2, 2147483646]"},
      {"--kv-cache-bytes 4096TiB", "blocks a pool can have"},
  };
  for (const auto& [flag, message] : cases) {
    const auto r = RunCli("resolve" + std::string(kLlama) + " " + flag);
    EXPECT_EQ(r.exit_code, 2) << flag << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr(message)) << r.output;
    EXPECT_THAT(r.output, Not(HasSubstr("000000000000000000000000000000"))) << r.output;
  }
}

TEST(UnitsCliTest, BadKvCacheBytesNamesTheFlagAndTheFormsInOneShortLine) {
  for (const char* bad : {"64XB", "-1GiB", "0", "99999999999999999999"}) {
    const auto r = RunCli("resolve" + std::string(kLlama) + " --kv-cache-bytes " + bad);
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr("--kv-cache-bytes")) << bad;
    EXPECT_THAT(r.output, HasSubstr("is not a size")) << bad;
    EXPECT_THAT(r.output, HasSubstr("GiB")) << bad;
    // CLI11's PositiveNumber printed a range up to DBL_MAX (300 digits).
    EXPECT_THAT(r.output, Not(HasSubstr("000000000000000000000000000000"))) << r.output;
  }
}

TEST(UnitsCliTest, EngineJsonAndScenarioFilesTakeSizeStrings) {
  auto engine = ParseEngineJson(R"({"kv_cache_bytes": "1.5TiB"})", "e.json");
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_EQ(engine->kv_cache_bytes, 1536 * kGiB);
  auto plain = ParseEngineJson(R"({"kv_cache_bytes": 68719476736})", "e.json");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->kv_cache_bytes, 64 * kGiB);
  auto bad = ParseEngineJson("{\n\"kv_cache_bytes\": \"64 gigs\"}", "e.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("e.json:2: field 'kv_cache_bytes'"));
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("'64 gigs' is not a size"));

  const fs::path dir = TempDir("grid");
  const fs::path grid = dir / "grid.json";
  std::ofstream(grid) << R"({"name": "g", "base": {"model": "llama-3.1-8b",
      "engine": "llama-3.1-8b", "trace": "t.jsonl", "kv_cache_bytes": "64GiB"},
      "axes": {"policy": ["old", "new"]}})";
  auto scenario = grid::LoadScenario(grid.string());
  ASSERT_TRUE(scenario.ok()) << scenario.status();
  ASSERT_EQ(scenario->points.size(), 2u);
  auto config = grid::ConfigFor(*scenario, scenario->points[0]);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->replay.model_engine.overrides.kv_cache_bytes, 64 * kGiB);

  std::ofstream(grid) << R"({"name": "g", "base": {"model": "m", "engine": "e", "trace": "t"},
      "axes": {"kv_cache_bytes": ["16GiB", 34359738368, "64GiB"]}})";
  scenario = grid::LoadScenario(grid.string());
  ASSERT_TRUE(scenario.ok()) << scenario.status();
  ASSERT_EQ(scenario->points.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    auto c = grid::ConfigFor(*scenario, scenario->points[i]);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->replay.model_engine.overrides.kv_cache_bytes, int64_t{16} << (30 + i));
  }

  std::ofstream(grid) << R"({"name": "g", "base": {"model": "m", "engine": "e", "trace": "t"},
      "axes": {"kv_cache_bytes": ["16GiB", "4XB"]}})";
  scenario = grid::LoadScenario(grid.string());
  ASSERT_FALSE(scenario.ok());
  EXPECT_THAT(std::string(scenario.status().message()),
              HasSubstr("field axes.kv_cache_bytes[1]: '4XB' is not a size"));
}

// --- analyze: capacities in blocks ---------------------------------------------------------

TEST(UnitsCliTest, AnalyzeCapacitiesCountBlocksAndSaySo) {
  const fs::path dir = TempDir("analyze");
  const std::string json = (dir / "a.json").string();
  const auto r = RunCli("analyze --trace " + kChat + " --capacity-blocks 4,64 --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(ReadFile(json));
  ASSERT_EQ(j["capacity_curve"].size(), 2u) << j["capacity_curve"];
  EXPECT_EQ(j["capacity_curve"][0]["capacity_blocks"], 4);
  EXPECT_EQ(j["capacity_curve"][1]["capacity_blocks"], 64);
  // The old name still works, as an alias.
  const std::string alias_json = (dir / "b.json").string();
  ASSERT_EQ(
      RunCli("analyze --trace " + kChat + " --capacities 4,64 --json " + alias_json).exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(ReadFile(alias_json))["capacity_curve"], j["capacity_curve"]);
  // A byte size is refused with the reason, under either name.
  for (const char* flag : {"--capacities", "--capacity-blocks"}) {
    const auto bytes = RunCli("analyze --trace " + kChat + " " + flag + " 64GiB");
    EXPECT_EQ(bytes.exit_code, 2) << bytes.output;
    EXPECT_THAT(bytes.output, HasSubstr("count blocks")) << bytes.output;
    EXPECT_THAT(bytes.output, HasSubstr("--capacity-blocks")) << bytes.output;
  }
  const auto help = RunCli("analyze --help");
  EXPECT_THAT(help.output, HasSubstr("--capacity-blocks"));
}

// --- did you mean --------------------------------------------------------------------------

TEST(UnitsCliTest, TypoedSubcommandSuggestsTheClosest) {
  const auto r = RunCli("replya --trace x");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("unknown command 'replya'"));
  EXPECT_THAT(r.output, HasSubstr("did you mean 'replay'?"));
  EXPECT_THAT(r.output, HasSubstr("compare"));  // the list of commands
  const auto sweep = RunCli("sweep mrege a --out b");
  EXPECT_EQ(sweep.exit_code, 2) << sweep.output;
  EXPECT_THAT(sweep.output, HasSubstr("did you mean 'merge'?"));
}

TEST(UnitsCliTest, TypoedFlagSuggestsTheClosest) {
  const auto r = RunCli("resolve" + std::string(kLlama) + " --kv-cache-byte 64GiB");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("did you mean '--kv-cache-bytes'?"));
  const auto eq = RunCli("replay --trace " + kChat + kLlama + " --polcy=new");
  EXPECT_EQ(eq.exit_code, 2) << eq.output;
  EXPECT_THAT(eq.output, HasSubstr("did you mean '--policy'?"));
  const auto analyze = RunCli("analyze --trace " + kChat + " --alignment 16");
  EXPECT_EQ(analyze.exit_code, 2) << analyze.output;
  EXPECT_THAT(analyze.output, HasSubstr("did you mean '--alignments'?"));
}

TEST(UnitsCliTest, TypoedPresetsSuggestTheClosestAndListThePresets) {
  const auto model = RunCli("resolve --model llama-3.1-8 --engine llama-3.1-8b");
  EXPECT_EQ(model.exit_code, 2) << model.output;
  EXPECT_THAT(model.output, HasSubstr("did you mean 'llama-3.1-8b'"));
  EXPECT_THAT(model.output, HasSubstr("presets: "));
  EXPECT_THAT(model.output, HasSubstr("deepseek-v3"));  // a preset far from the typo, listed
  const auto engine = RunCli("resolve --model llama-3.1-8b --engine h20");
  EXPECT_EQ(engine.exit_code, 2) << engine.output;
  EXPECT_THAT(engine.output, HasSubstr("did you mean 'h200'"));
  EXPECT_THAT(engine.output, HasSubstr("kimi-k3-dspark"));
  const auto policy = RunCli("resolve" + std::string(kLlama) + " --policy nwe");
  EXPECT_EQ(policy.exit_code, 2) << policy.output;
  EXPECT_THAT(policy.output, HasSubstr("did you mean 'new'?"));
  EXPECT_THAT(policy.output, HasSubstr("(registered: old, new, new_divisor_of)"));
  const auto router =
      RunCli("replay --trace " + kChat + kLlama + " --no-progress --router round_robn");
  EXPECT_EQ(router.exit_code, 2) << router.output;
  EXPECT_THAT(router.output, HasSubstr("did you mean 'round_robin'?"));
  const auto format =
      RunCli("replay --trace " + kChat + kLlama + " --no-progress --trace-format mooncak");
  EXPECT_EQ(format.exit_code, 2) << format.output;
  EXPECT_THAT(format.output, HasSubstr("did you mean 'mooncake'?"));
  EXPECT_THAT(format.output, HasSubstr("bailian"));
}

// --- --model DIR -----------------------------------------------------------------------------

TEST(UnitsCliTest, ModelDirectoryReadsItsConfigJson) {
  const fs::path dir = TempDir("hf_model");
  const fs::path hf = fs::path(PREFIXSIM_SOURCE_DIR) / "tests/data/hf/llama-3.1-8b-instruct.json";
  fs::copy_file(hf, dir / "config.json");
  std::ofstream(dir / "tokenizer.json") << "{}";  // a real snapshot has more files
  const auto from_dir = RunCli("resolve --model " + dir.string() + " --engine llama-3.1-8b --json");
  const auto from_file = RunCli("resolve --model " + hf.string() + " --engine llama-3.1-8b --json");
  ASSERT_EQ(from_dir.exit_code, 0) << from_dir.output;
  ASSERT_EQ(from_file.exit_code, 0) << from_file.output;
  EXPECT_EQ(from_dir.output, from_file.output);

  const fs::path empty = TempDir("not_a_model");
  const auto r = RunCli("resolve --model " + empty.string() + " --engine llama-3.1-8b");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr(empty.string()));
  EXPECT_THAT(r.output, HasSubstr("without config.json"));
}

// --- traces without prefix identity ----------------------------------------------------------

TEST(UnitsCliTest, LengthsTraceWarnsThatHitRatesAreZeroByConstruction) {
  const fs::path dir = TempDir("lengths");
  const fs::path trace = dir / "azure.csv";
  {
    std::ofstream out(trace);
    out << "arrived_at,num_prefill_tokens,num_decode_tokens\n";
    for (int i = 0; i < 20; ++i) out << 0.5 * i << "," << 600 + 10 * i << ",8\n";
  }
  const std::string json = (dir / "r.json").string();
  const auto r =
      RunCli("replay --trace " + trace.string() + kLlama + " --no-progress --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("no prefix identity"));
  EXPECT_THAT(r.output, HasSubstr("0 by construction"));
  const auto j = nlohmann::json::parse(ReadFile(json));
  EXPECT_EQ(j["trace_has_prefix_identity"], false);
  EXPECT_EQ(j["prefix_cache"]["hits"], 0);
  const std::string cmp = (dir / "c.json").string();
  const auto c =
      RunCli("compare --trace " + trace.string() + kLlama + " --no-progress --json " + cmp);
  ASSERT_EQ(c.exit_code, 0) << c.output;
  EXPECT_THAT(c.output, HasSubstr("no prefix identity"));
  EXPECT_EQ(nlohmann::json::parse(ReadFile(cmp))["trace_has_prefix_identity"], false);

  // A trace with prefix identity: no warning, no field.
  const std::string chat_json = (dir / "chat.json").string();
  const auto chat = RunCli("replay --trace " + kChat + kLlama +
                           " --no-progress --max-requests 20 "
                           "--json " +
                           chat_json);
  ASSERT_EQ(chat.exit_code, 0) << chat.output;
  EXPECT_THAT(chat.output, Not(HasSubstr("no prefix identity")));
  EXPECT_FALSE(nlohmann::json::parse(ReadFile(chat_json)).contains("trace_has_prefix_identity"));
}

// --- output paths checked first --------------------------------------------------------------

// The summary table ("Prefix cache hit rate") is printed right after the replay; an output path
// that cannot be written must fail before it, i.e. before any replay ran.
TEST(UnitsCliTest, UnwritableOutputPathsFailBeforeTheReplay) {
  const fs::path dir = TempDir("outputs");
  const std::string missing = (dir / "no_such_dir" / "out.json").string();
  const auto replay =
      RunCli("replay --trace " + kChat + kLlama + " --no-progress --json " + missing);
  EXPECT_EQ(replay.exit_code, 2) << replay.output;
  EXPECT_THAT(replay.output, HasSubstr("--json " + missing));
  EXPECT_THAT(replay.output, HasSubstr("does not exist"));
  EXPECT_THAT(replay.output, Not(HasSubstr("Prefix cache hit rate")));
  EXPECT_THAT(replay.output, Not(HasSubstr("requests read")));

  const auto csv =
      RunCli("replay --trace " + kChat + kLlama + " --no-progress --csv " + dir.string());
  EXPECT_EQ(csv.exit_code, 2) << csv.output;
  EXPECT_THAT(csv.output, HasSubstr("is a directory"));
  EXPECT_THAT(csv.output, Not(HasSubstr("Prefix cache hit rate")));

  const auto html = RunCli("compare --trace " + kChat + kLlama + " --no-progress --html " +
                           (dir / "f.json" / "page.html").string());
  EXPECT_EQ(html.exit_code, 2) << html.output;
  EXPECT_THAT(html.output, HasSubstr("--html"));
  EXPECT_THAT(html.output, Not(HasSubstr("hit rate")));

  const auto analyze = RunCli("analyze --trace " + kChat + " --json " + missing);
  EXPECT_EQ(analyze.exit_code, 2) << analyze.output;
  EXPECT_THAT(analyze.output, HasSubstr("--json " + missing));
  EXPECT_THAT(analyze.output, Not(HasSubstr("reused")));  // no analysis printed

  // sweep --out under a regular file: refused before any point runs.
  std::ofstream(dir / "a_file") << "x";
  const fs::path grid = dir / "grid.json";
  std::ofstream(grid) << R"({"name": "g", "base": {"model": "llama-3.1-8b",
      "engine": "llama-3.1-8b", "trace": ")"
                      << kChat << R"("}})";
  const auto sweep =
      RunCli("sweep --grid " + grid.string() + " --out " + (dir / "a_file" / "out").string());
  EXPECT_EQ(sweep.exit_code, 2) << sweep.output;
  EXPECT_THAT(sweep.output, HasSubstr("--out"));
  EXPECT_THAT(sweep.output, Not(HasSubstr("points run")));

  // The check leaves nothing behind, and a writable path still gets its file.
  const std::string ok = (dir / "ok.json").string();
  const auto good =
      RunCli("replay --trace " + kChat + kLlama + " --no-progress --max-requests 5 --json " + ok);
  ASSERT_EQ(good.exit_code, 0) << good.output;
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(dir)) left.push_back(entry.path().filename());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"a_file", "grid.json", "ok.json"}));
}

}  // namespace
}  // namespace prefixsim
