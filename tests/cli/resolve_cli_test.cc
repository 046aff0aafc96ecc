// `prefixsim resolve` end to end: presets, JSON output, exit codes (docs/design.md §4.1).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "nlohmann/json.hpp"
#include "tests/cli_runner.h"

namespace prefixsim {
namespace {

using ::prefixsim::testing::RunCli;
using ::testing::HasSubstr;

std::string WriteTemp(const std::string& name, const std::string& text) {
  auto dir = std::filesystem::temp_directory_path() / "prefixsim_resolve_test";
  std::filesystem::create_directories(dir);
  auto path = dir / name;
  std::ofstream(path) << text;
  return path.string();
}

TEST(ResolveCliTest, JsonPlanForThePr53007Case) {
  auto old_run = RunCli("resolve -m kimi-k3-like -e kimi-k3-dspark -p old --json");
  ASSERT_EQ(old_run.exit_code, 0) << old_run.output;
  auto old_plan = nlohmann::json::parse(old_run.output);
  EXPECT_EQ(old_plan["scheduler_block_size"], 13824);
  EXPECT_EQ(old_plan["hash_block_size"], 192);
  auto new_run = RunCli("resolve -m kimi-k3-like -e kimi-k3-dspark -p new --json");
  ASSERT_EQ(new_run.exit_code, 0) << new_run.output;
  auto new_plan = nlohmann::json::parse(new_run.output);
  EXPECT_EQ(new_plan["scheduler_block_size"], 1536);
  bool found_swa = false;
  for (const auto& g : new_plan["groups"]) {
    for (const char* key :
         {"kind", "num_layers", "block_size", "page_bytes", "padding_bytes", "drafter"}) {
      EXPECT_TRUE(g.contains(key)) << key;
    }
    if (g["kind"] == "sliding_window") {
      found_swa = true;
      EXPECT_EQ(g["padding_bytes"], 196608);
      EXPECT_EQ(g["drafter"], true);
    }
  }
  EXPECT_TRUE(found_swa);
  for (const char* key : {"num_blocks", "bytes_per_block", "hit_alignment", "warnings"}) {
    EXPECT_TRUE(new_plan.contains(key)) << key;
  }
}

TEST(ResolveCliTest, NoSpecFlagDropsTheDrafter) {
  auto run = RunCli("resolve -m kimi-k3-like -e kimi-k3-dspark -p old --no-spec --json");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(nlohmann::json::parse(run.output)["scheduler_block_size"], 1536);
}

TEST(ResolveCliTest, TableIsReadable) {
  auto run = RunCli("resolve -m kimi-k3-like -e kimi-k3-dspark -p new");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("scheduler block size S = 1536"));
  EXPECT_THAT(run.output, HasSubstr("sliding_window"));
}

TEST(ResolveCliTest, HelpListsPolicies) {
  auto run = RunCli("resolve --help");
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_THAT(run.output, HasSubstr("old, new"));
}

TEST(ResolveCliTest, BadInputExitsTwoNamingFileAndField) {
  const std::string model =
      WriteTemp("bad_model.json", "{\"layers\": [\n  {\"kind\": \"attention\", \"count\": 2}]}");
  auto run = RunCli("resolve -m " + model + " -e kimi-k3");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_THAT(run.output, HasSubstr("bad_model.json:2: field 'layers[0].kind'"));

  const std::string truncated = WriteTemp("truncated.json", "{\"layers\": [{\"kind\": \"mla\"");
  run = RunCli("resolve -m " + truncated + " -e kimi-k3");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_THAT(run.output, HasSubstr("truncated.json:1: invalid JSON"));

  const std::string engine = WriteTemp("bad_engine.json", "{\"kv_cache_bytes\": -1}");
  run = RunCli("resolve -m kimi-k3-like -e " + engine);
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_THAT(run.output, HasSubstr("field 'kv_cache_bytes'"));

  run = RunCli("resolve -m kimi-k3-like -e kimi-k3-dspark -p old --prefix-match-unit 128");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_THAT(run.output, HasSubstr("prefix_match_unit"));

  run = RunCli("resolve -m kimi-k3-like -e kimi-k3-dspark --block-size 0");
  EXPECT_EQ(run.exit_code, 2) << run.output;

  run = RunCli("resolve -m no-such-preset -e kimi-k3");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_THAT(run.output, HasSubstr("no-such-preset"));

  run = RunCli("resolve -m kimi-k3-like -e kimi-k3 -p bogus");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_THAT(run.output, HasSubstr("unknown policy 'bogus'"));
}

TEST(ResolveCliTest, MlaThatCanBeNeitherScaledNorPaddedExitsTwo) {
  const std::string model =
      WriteTemp("mla_fp8.json", R"({"name": "kimi-fp8", "tensor_parallel_size": 4, "layers": [
    {"kind": "mla", "count": 24, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "kv_dtype": "fp8"},
    {"kind": "mamba", "count": 69, "state_bytes": 1740800},
    {"kind": "sliding_window", "count": 5, "num_kv_heads": 4, "head_size": 128,
     "kv_dtype": "fp8", "sliding_window": 4096, "drafter": true}]})");
  auto run = RunCli("resolve -m " + model + " -e kimi-k3-dspark -p new");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_THAT(run.output, HasSubstr("MLA"));
}

}  // namespace
}  // namespace prefixsim

namespace prefixsim {
namespace {

TEST(ResolveCliTest, KvCacheDtypeFlagReachesHuggingFaceImport) {
  const std::string config =
      std::string(PREFIXSIM_SOURCE_DIR) + "/tests/data/hf/llama-3.1-8b-instruct.json";
  auto bf16 = prefixsim::testing::RunCli("resolve -m " + config + " -e llama-3.1-8b --json");
  ASSERT_EQ(bf16.exit_code, 0) << bf16.output;
  auto fp8 = prefixsim::testing::RunCli("resolve -m " + config +
                                        " -e llama-3.1-8b --kv-cache-dtype fp8 --json");
  ASSERT_EQ(fp8.exit_code, 0) << fp8.output;
  const auto bf16_page =
      nlohmann::json::parse(bf16.output)["groups"][0]["page_bytes"].get<int64_t>();
  const auto fp8_page = nlohmann::json::parse(fp8.output)["groups"][0]["page_bytes"].get<int64_t>();
  EXPECT_EQ(bf16_page, 2 * fp8_page);
  auto bad =
      prefixsim::testing::RunCli("resolve -m " + config + " -e llama-3.1-8b --kv-cache-dtype int2");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_THAT(bad.output, ::testing::HasSubstr("--kv-cache-dtype"));
  // A pool too small for one block besides the null block is an error, not a plan of 0 blocks.
  auto tiny = prefixsim::testing::RunCli("resolve -m " + config +
                                         " -e llama-3.1-8b --kv-cache-bytes 64KiB");
  EXPECT_EQ(tiny.exit_code, 2) << tiny.output;
  EXPECT_THAT(tiny.output, ::testing::HasSubstr("kv_cache_bytes 65536 holds 0 blocks of"));
  EXPECT_THAT(tiny.output, ::testing::Not(::testing::HasSubstr("num_blocks = 0")));
  // The error lists every accepted spelling, vLLM's long ones included, and each is accepted.
  EXPECT_THAT(bad.output, ::testing::HasSubstr("fp8_e4m3"));
  EXPECT_THAT(bad.output, ::testing::HasSubstr("bfloat16"));
  for (const char* spelling : {"fp8_e4m3", "fp8_e5m2", "bfloat16", "half", "float32"}) {
    auto ok = prefixsim::testing::RunCli("resolve -m " + config +
                                         " -e llama-3.1-8b --kv-cache-dtype " + spelling);
    EXPECT_EQ(ok.exit_code, 0) << spelling << ": " << ok.output;
  }
}

}  // namespace
}  // namespace prefixsim
