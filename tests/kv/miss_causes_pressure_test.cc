// Miss causes that a user reads as advice (docs/design.md §7): what memory lost is `evicted` on a
// hybrid plan as on a single-group one, whatever the pool size, and `elsewhere` is only what a
// router could have recovered (another replica's own lookup, the regret's definition).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "prefixsim/replay.h"
#include "tests/cli_runner.h"

namespace prefixsim {
namespace {

using Json = nlohmann::json;
using ::prefixsim::testing::ReadCsvRows;
using ::prefixsim::testing::ReadFile;
using ::prefixsim::testing::RunCli;
using ::prefixsim::testing::TempOutputPath;

const std::string kSrc = PREFIXSIM_SOURCE_DIR;

Json Replay(const std::string& name, const std::string& args) {
  const std::string json = TempOutputPath(name + ".json");
  const auto r = RunCli("replay --no-progress --no-wall-time " + args + " --json " + json);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return Json::parse(ReadFile(json));
}

double Share(const Json& report, const char* cause) {
  const Json& first = report["miss_causes"]["first_admissions"];
  return static_cast<double>(first["tokens_by_cause"][cause].get<int64_t>()) /
         static_cast<double>(first["tokens"].get<int64_t>());
}

// Kimi-K3-like with its DSpark drafter on the agentic sample: with 2,000 blocks the prefixes
// hit; with 600 or 480 the pool evicts the mamba states and SWA windows that were cached. Those
// tokens are `evicted` (a bigger pool recovers them), not `not_checkpointed` (which no pool size
// changes: what the plan never caches).
TEST(MissAttributionTest, EvictedStatesAreEvictedAtEveryPoolSize) {
  const std::string args = "--trace " + kSrc +
                           "/traces/sample_agentic.jsonl --model kimi-k3-like --engine "
                           "kimi-k3-dspark --policy new --num-gpu-blocks ";
  const Json ample = Replay("pressure_2000", args + "2000");
  const double ample_not_checkpointed = Share(ample, "not_checkpointed");
  for (int blocks : {600, 480}) {
    SCOPED_TRACE(blocks);
    const Json tight = Replay("pressure_" + std::to_string(blocks), args + std::to_string(blocks));
    EXPECT_LT(Share(tight, "hit"), Share(ample, "hit") - 0.05) << "the pool must bind";
    // What the smaller pool lost is eviction...
    EXPECT_GT(Share(tight, "evicted"), Share(ample, "evicted") + 0.05);
    // ... and what the plan never caches stays about what it is with memory to spare.
    EXPECT_LT(Share(tight, "not_checkpointed"), ample_not_checkpointed + 0.02)
        << "ample: " << ample_not_checkpointed;
    // The groups the evictions broke are named.
    const Json& by = tight["miss_causes"]["first_admissions"]["evicted_tokens_by_breaker"];
    int64_t named = 0;
    for (const auto& [breaker, tokens] : by.items()) named += tokens.get<int64_t>();
    EXPECT_EQ(named, tight["miss_causes"]["first_admissions"]["tokens_by_cause"]["evicted"]);
  }
}

// With a pool that never evicts, a request's `elsewhere` is at most its routing regret: both are
// what another replica's own lookup would have hit, against what the chosen one did. Prefixes
// another replica held but could not serve either are the plan's loss (`alignment`), which a
// router cannot recover.
TEST(MissAttributionTest, ElsewhereIsWhatARouterCouldHaveRecovered) {
  for (const std::string model : {"llama-3.1-8b --engine llama-3.1-8b",
                                  "kimi-k3-like --engine kimi-k3-dspark --policy old"}) {
    SCOPED_TRACE(model);
    const std::string csv = TempOutputPath("elsewhere.csv");
    const Json report = Replay(
        "elsewhere", "--trace " + kSrc + "/traces/sample_shared_doc.jsonl --model " + model +
                         " --replicas 4 --router round_robin --num-gpu-blocks 100000 --csv " + csv);
    ASSERT_EQ(report["evicted_blocks"].get<int64_t>(), 0) << "the pool must not evict";
    int64_t elsewhere = 0, regret = 0;
    for (const auto& row : ReadCsvRows(ReadFile(csv))) {
      if (row.at("elsewhere_tokens").empty()) continue;
      const int64_t e = std::stoll(row.at("elsewhere_tokens"));
      const int64_t r = std::stoll(row.at("routing_regret_tokens"));
      EXPECT_LE(e, r) << "request " << row.at("id");
      if (e > 0) {
        EXPECT_NE(row.at("elsewhere_replica"), "") << "request " << row.at("id");
      }
      elsewhere += e;
      regret += r;
    }
    EXPECT_GT(elsewhere, 0) << "round robin must miss prefixes other replicas hold";
    EXPECT_LE(elsewhere, regret);
    EXPECT_LE(
        report["miss_causes"]["first_admissions"]["tokens_by_cause"]["elsewhere"].get<int64_t>(),
        report["fleet"]["routing_regret_tokens"].get<int64_t>());
  }
}

// gpt-oss-20b (full attention and a 128-token sliding window) on the sample chat, with memory to
// spare: under vLLM's default retention 0 the windows a follow-up turn needs were never
// published, and those tokens are `sparse_retention`: exactly what dense retention hits more.
TEST(MissAttributionTest, SparseRetentionIsWhatDenseRetentionWouldHaveHit) {
  const std::string args = "--trace " + kSrc +
                           "/traces/sample_chat.jsonl --model gpt-oss-20b --engine gpt-oss-20b "
                           "--prefix-cache-retention-interval ";
  const Json zero = Replay("retention_0", args + "0");
  const Json dense = Replay("retention_dense", args + "dense");
  auto tokens = [](const Json& r, const char* cause) {
    return r["miss_causes"]["first_admissions"]["tokens_by_cause"][cause].get<int64_t>();
  };
  EXPECT_GT(tokens(zero, "sparse_retention"), 0);
  EXPECT_EQ(tokens(dense, "sparse_retention"), 0);
  EXPECT_EQ(tokens(dense, "evicted"), 0) << "the pool is meant not to bind";
  EXPECT_EQ(tokens(zero, "hit") + tokens(zero, "sparse_retention"), tokens(dense, "hit"));
}

}  // namespace
}  // namespace prefixsim
