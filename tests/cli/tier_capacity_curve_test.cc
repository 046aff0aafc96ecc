// Sizing a CPU tier from `analyze` (docs/offload.md): for a plan with one attention group, a tier
// larger than the GPU pool that stores every prompt block and is touched with every key of each
// lookup holds what the pool holds and more (LRU's inclusion property), so the GPU-and-tier hit
// follows analyze's LRU capacity curve read at the tier's size in blocks.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "nlohmann/json.hpp"
#include "tests/cli_runner.h"

namespace prefixsim {
namespace {

namespace fs = std::filesystem;
using ::prefixsim::testing::ReadFile;
using ::prefixsim::testing::RunCli;

// Llama-3.1-8B at block 16: 2 MiB a block, so 16 GiB of CPU tier is 8192 blocks; the GPU pool
// keeps 1000. The chat sample at a quarter of its rate, so that the engine keeps up.
TEST(TierCapacityCurveTest, AReplayedTierFollowsAnalyzesLruCurve) {
  const fs::path dir = fs::temp_directory_path() / ("tier_curve_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string chat = std::string(PREFIXSIM_SOURCE_DIR) + "/traces/sample_chat.jsonl";
  const std::string replay =
      "replay --model llama-3.1-8b --engine llama-3.1-8b --policy new "
      "--num-gpu-blocks 1000 --time-scale 4 --no-progress --trace " +
      chat;
  ASSERT_EQ(
      RunCli(replay + " --kv-offloading-size 16 --json " + (dir / "tier.json").string()).exit_code,
      0);
  ASSERT_EQ(RunCli(replay + " --json " + (dir / "gpu.json").string()).exit_code, 0);
  ASSERT_EQ(RunCli("analyze --trace " + chat + " --block-tokens 16 --capacity-blocks 1000,8192 " +
                   "--json " + (dir / "analyze.json").string())
                .exit_code,
            0);
  const auto tier = nlohmann::json::parse(ReadFile(dir / "tier.json"));
  const auto gpu = nlohmann::json::parse(ReadFile(dir / "gpu.json"));
  const auto curve = nlohmann::json::parse(ReadFile(dir / "analyze.json"))["capacity_curve"];
  fs::remove_all(dir);

  // First admissions' hits over their tokens, as the curve counts them (every prompt once).
  auto first_hit_rate = [](const nlohmann::json& j) {
    const auto& pc = j["prefix_cache"];
    const double queries = pc["queries"].get<double>() - pc["preempted_queries"].get<double>();
    return (pc["hits"].get<double>() - pc["preempted_hits"].get<double>()) / queries;
  };
  ASSERT_EQ(curve.size(), 2u);
  EXPECT_EQ(tier["offload"]["tiers"][0]["capacity_blocks"], 8192);
  const double lru_pool = curve[0]["lru_hit_rate"], lru_tier = curve[1]["lru_hit_rate"];
  EXPECT_NEAR(first_hit_rate(gpu), lru_pool, 0.03);
  EXPECT_NEAR(first_hit_rate(tier), lru_tier, 0.03);
  // The tier is what the second point measures: it lifts the hit rate far above the pool's.
  EXPECT_GT(first_hit_rate(tier) - first_hit_rate(gpu), 0.4);
}

}  // namespace
}  // namespace prefixsim
