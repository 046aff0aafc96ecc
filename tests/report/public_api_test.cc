// The public report writers (include/prefixsim/report.h) give what the CLI prints for the same
// replay: an embedder using only the public API gets the CLI's reports byte for byte.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "prefixsim/engine.h"
#include "prefixsim/engine_config.h"
#include "prefixsim/kv_plan.h"
#include "prefixsim/model.h"
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

}  // namespace
}  // namespace prefixsim
