// The public report writers (include/prefixsim/report.h) give what the CLI prints for the same
// replay: an embedder using only the public API gets the CLI's reports byte for byte; and the
// figures the JSON summary derives from a hand-made result.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "prefixsim/engine.h"
#include "prefixsim/engine_config.h"
#include "prefixsim/kv_plan.h"
#include "prefixsim/model.h"
#include "prefixsim/replay.h"
#include "prefixsim/report.h"
#include "prefixsim/trace.h"
#include "tests/cli_runner.h"

namespace prefixsim {
namespace {

using ::prefixsim::testing::ReadFile;
using ::prefixsim::testing::RunCli;
using ::testing::HasSubstr;

const std::string kTrace = std::string(PREFIXSIM_SOURCE_DIR) + "/traces/sample_chat.jsonl";
constexpr char kModel[] = "kimi-k3-like";
constexpr char kEngine[] = "kimi-k3-dspark";

std::string Temp(const std::string& name) {
  return ::prefixsim::testing::TempOutputPath("public_api_" + name);
}

// One replay through the public API only, as examples/embed/embed.cc does it.
ReplayResult PublicReplay(const std::string& policy) {
  absl::StatusOr<EngineConfig> engine = LoadEngine(kEngine);
  EXPECT_TRUE(engine.ok()) << engine.status();
  ModelLoadOptions load;
  load.tensor_parallel_size = engine->tensor_parallel_size;
  load.kv_dtype = engine->kv_cache_dtype;
  absl::StatusOr<ModelSpec> model = LoadModel(kModel, load);
  EXPECT_TRUE(model.ok()) << model.status();
  absl::StatusOr<KvPlan> plan = ResolveKvPlan(*model, *engine, policy);
  EXPECT_TRUE(plan.ok()) << plan.status();
  const TraceOpener open = [] { return OpenTrace(kTrace); };
  ReplayOptions options;
  options.record_requests = false;
  absl::StatusOr<ReplayResult> result =
      ReplayWithFleetSizing(*plan, *model, *engine, open, options);
  EXPECT_TRUE(result.ok()) << result.status();
  return *std::move(result);
}

// vLLM's startup memory check holds for an embedder too: Replay and ReplayWithFleetSizing refuse
// a plan whose kv_cache_bytes cannot hold one max_model_len request, with the check's message,
// and ResolvePlanForServing refuses it before any replay.
TEST(PublicReportTest, ReplayRefusesAPlanThatFailsTheStartupCheck) {
  absl::StatusOr<EngineConfig> engine = LoadEngine("llama-3.1-8b");
  ASSERT_TRUE(engine.ok()) << engine.status();
  engine->num_gpu_blocks.reset();
  engine->kv_cache_bytes = int64_t{20} << 20;  // 10 blocks of 2 MiB
  engine->max_model_len = 4096;
  absl::StatusOr<ModelSpec> model = LoadModel("llama-3.1-8b-layout", ModelLoadOptions{});
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<KvPlan> plan = ResolveKvPlan(*model, *engine, "new");
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_FALSE(plan->startup_check.ok);
  const absl::StatusOr<KvPlan> serving = ResolvePlanForServing(*model, *engine, "new");
  EXPECT_EQ(serving.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(serving.status().message()), HasSubstr("9 usable blocks"));
  const TraceOpener open = [] { return OpenTrace(kTrace); };
  absl::StatusOr<ReplayResult> sized = ReplayWithFleetSizing(*plan, *model, *engine, open);
  EXPECT_EQ(sized.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(sized.status().message(), plan->startup_check.message);
  absl::StatusOr<std::unique_ptr<TraceReader>> trace = OpenTrace(kTrace);
  ASSERT_TRUE(trace.ok()) << trace.status();
  absl::StatusOr<ReplayResult> replayed = Replay(*plan, *model, *engine, **trace);
  EXPECT_EQ(replayed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(replayed.status().message(), plan->startup_check.message);
}

TEST(PublicReportTest, ReplayJsonAndTextEqualTheCli) {
  const ReplayResult result = PublicReplay("new");
  ReportOptions report;
  report.include_wall_time = false;

  const std::string json = Temp("replay.json");
  const auto cli = RunCli("replay --trace " + kTrace + " --model " + kModel + " --engine " +
                          kEngine + " --policy new --no-wall-time --no-progress --json " + json);
  ASSERT_EQ(cli.exit_code, 0) << cli.output;
  EXPECT_EQ(ReplayReportJson(result, report), ReadFile(json));
  EXPECT_THAT(cli.output, HasSubstr(ReplayReportText(result, report)));
  std::filesystem::remove(json);
}

TEST(PublicReportTest, ComparisonJsonAndTextEqualTheCli) {
  const std::vector<ReplayResult> results = {PublicReplay("old"), PublicReplay("new")};
  ReportOptions report;
  report.include_wall_time = false;

  const std::string json = Temp("compare.json");
  const auto cli =
      RunCli("compare --trace " + kTrace + " --model " + kModel + " --engine " + kEngine +
             " --policies old,new --no-wall-time --no-progress --json " + json);
  ASSERT_EQ(cli.exit_code, 0) << cli.output;
  EXPECT_EQ(ComparisonReportJson(results, report), ReadFile(json));
  EXPECT_THAT(cli.output, HasSubstr(ComparisonReportText(results)));
  EXPECT_THAT(ComparisonReportHtml(results, "old vs new"), HasSubstr("<html"));
  std::filesystem::remove(json);
}

// lost_to_alignment_per_request: nearest-rank percentiles, the smallest value that at least q·n
// of the n requests do not exceed, i.e. the value at rank ceil(q·n) of the sorted losses.
TEST(PublicReportTest, LostToAlignmentPercentilesAreNearestRank) {
  auto per_request = [](const std::map<int64_t, int64_t>& losses) {
    ReplayResult r;
    r.policy = "p";
    r.lost_to_alignment_requests = losses;
    return nlohmann::json::parse(ReplayReportJson(r))["lost_to_alignment_per_request"];
  };
  // Sorted losses 0, 16, 64: p50 is rank ceil(1.5) = 2 (16), p90 and p99 rank 3 (64).
  nlohmann::json j = per_request({{0, 1}, {16, 1}, {64, 1}});
  EXPECT_EQ(j["requests"], 3);
  EXPECT_EQ(j["requests_with_loss"], 2);
  EXPECT_EQ(j["p50_tokens"], 16);
  EXPECT_EQ(j["p90_tokens"], 64);
  EXPECT_EQ(j["p99_tokens"], 64);
  EXPECT_EQ(j["max_tokens"], 64);
  // Nine requests without loss and one losing 128: p90 is rank 9 (0), p99 rank ceil(9.9) = 10.
  j = per_request({{0, 9}, {128, 1}});
  EXPECT_EQ(j["p50_tokens"], 0);
  EXPECT_EQ(j["p90_tokens"], 0);
  EXPECT_EQ(j["p99_tokens"], 128);
  // One request: every percentile is its loss (rank at least 1).
  j = per_request({{48, 1}});
  EXPECT_EQ(j["p50_tokens"], 48);
  EXPECT_EQ(j["p99_tokens"], 48);
}

}  // namespace
}  // namespace prefixsim
