// Runs that cannot make progress, or that fall behind their trace, are named instead of being
// reported as a policy result (issue 26): a thrashing engine stops with ResourceExhausted (exit 1)
// and the remedies; an overloaded one is flagged in the result, the text, the JSON and the page;
// --capacities sizes pass the startup memory check before any replay runs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "nlohmann/json.hpp"
#include "prefixsim/replay.h"
#include "sim/cli/exit_codes.h"
#include "sim/report/report.h"
#include "sim/util/status_macros.h"
#include "tests/cli_runner.h"
#include "tests/engine/engine_test_util.h"

namespace prefixsim {
namespace {

using ::prefixsim::testing::ReadFile;
using ::prefixsim::testing::RunCli;
using ::prefixsim::testing::TempOutputPath;
using ::testing::HasSubstr;
using testing_engine::Req;
using testing_engine::SmallEngine;
using testing_engine::VectorTrace;
using testing_kv::Iota;
using testing_kv::Unitary;

const std::string kChat = std::string(PREFIXSIM_SOURCE_DIR) + "/traces/sample_chat.jsonl";

TEST(ProgressGuardTest, StepLimitCatchesARunWithoutFinishes) {
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 4, 400);
  VectorTrace trace({Req(0, 0, Iota(8), 1000)});
  ReplayOptions options;
  options.max_steps_without_finish = 100;
  auto r = Replay(plan, ModelSpec{}, SmallEngine(64), trace, options);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("100 steps"));
}

// The case: the chat sample under `old` in 121 blocks ran for minutes (5.3 M steps,
// ~770 k preemptions) before the check existed.
const std::string kThrashingChat = "replay --trace " + kChat +
                                   " --model kimi-k3-like --engine kimi-k3-dspark --policy old "
                                   "--num-gpu-blocks 121 --no-progress";

TEST(ProgressGuardTest, ThrashingChatReplayExitsOne) {
  const auto r = RunCli(kThrashingChat);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("the engine is thrashing: 10000 preemptions"));
  EXPECT_THAT(r.output, HasSubstr("--max-preemptions-without-finish"));
  EXPECT_THAT(r.output, HasSubstr("--replicas auto"));
  // ... and the pool was too small for one max_model_len request: said before the run.
  EXPECT_THAT(r.output, HasSubstr("warning: policy old: num_gpu_blocks 121"));
}

// The flags set the limits: a higher preemption limit stops later, and with it off the step
// limit stops the run.
TEST(ProgressGuardTest, TheLimitsAreTheFlags) {
  const auto later = RunCli(kThrashingChat + " --max-preemptions-without-finish 20000");
  EXPECT_EQ(later.exit_code, 1) << later.output;
  EXPECT_THAT(later.output, HasSubstr("thrashing: 20000 preemptions"));
  const auto steps = RunCli(kThrashingChat +
                            " --max-preemptions-without-finish 0 --max-steps-without-finish 30000");
  EXPECT_EQ(steps.exit_code, 1) << steps.output;
  EXPECT_THAT(steps.output, HasSubstr(" and 30000 steps since a request last finished"));
}

// Library callers get ResourceExhausted (a runtime failure, exit 1), not bad input.
TEST(ProgressGuardTest, ThrashingIsResourceExhausted) {
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 4, 400);
  VectorTrace trace({Req(0, 0, Iota(8), 1000)});
  ReplayOptions options;
  options.max_steps_without_finish = 10;
  auto r = Replay(plan, ModelSpec{}, SmallEngine(64), trace, options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ExitCodeFor(r.status()), 1);
}

// Arrivals 1 s apart, each request taking 1,000 steps of 10 ms: 10 s of work per second of
// trace. The engine falls further behind with every request.
std::vector<Request> Flood(int n) {
  std::vector<Request> reqs;
  for (int i = 0; i < n; ++i) reqs.push_back(Req(i, i * 1000.0, Iota(8, 100 * i + 1), 1000));
  return reqs;
}

TEST(ProgressGuardTest, AnEngineThatFallsBehindIsOverloaded) {
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 16, 4096);
  EngineConfig engine = SmallEngine(64, /*step_us=*/10000);
  engine.max_num_seqs = 1;
  const ReplayResult r = testing_engine::MustReplay(plan, engine, Flood(30));
  EXPECT_EQ(r.trace_span_ns, 29'000'000'000);
  EXPECT_GT(r.sim_time_ns, 200'000'000'000);
  EXPECT_TRUE(r.overloaded);
  EXPECT_THAT(ReplayReportText(r), HasSubstr("OVERLOADED"));
  EXPECT_EQ(ReplayResultToJson(r)["overloaded"], true);
  // One that keeps up (the same requests, decoding in parallel) is not.
  engine.max_num_seqs = 256;
  const ReplayResult ok = testing_engine::MustReplay(plan, engine, Flood(30));
  EXPECT_FALSE(ok.overloaded);
  EXPECT_EQ(ReplayReportText(ok).find("OVERLOADED"), std::string::npos);
  EXPECT_EQ(ReplayResultToJson(ok)["overloaded"], false);
}

// A minute of queue is an overload however long the trace (fleet.cc, IsOverloaded): a burst at
// the end of a long trace that takes two minutes to drain, and a backlog in the middle of one
// that is gone by its last arrival but made most requests wait minutes for their first token.
TEST(ProgressGuardTest, AMinuteOfQueueIsAnOverloadWhateverTheSpan) {
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 16, 4096);
  EngineConfig engine = SmallEngine(64, /*step_us=*/10000);
  engine.max_num_seqs = 1;  // 10 s per request (1,000 steps of 10 ms), one at a time
  std::vector<Request> burst;
  for (int i = 0; i < 10; ++i) burst.push_back(Req(i, i * 100'000.0, Iota(8, 100 * i + 1), 1));
  for (int i = 10; i < 22; ++i) burst.push_back(Req(i, 2'000'000.0, Iota(8, 100 * i + 1), 1000));
  const ReplayResult late = testing_engine::MustReplay(plan, engine, burst);
  const int64_t drain = late.sim_time_ns - late.trace_span_ns;
  EXPECT_GT(drain, 60'000'000'000);
  EXPECT_LT(drain, late.trace_span_ns / 10);  // what the span's 10% used to let through
  EXPECT_TRUE(late.overloaded);
  std::vector<Request> backlog;
  for (int i = 0; i < 20; ++i) backlog.push_back(Req(i, i * 1000.0, Iota(8, 100 * i + 1), 1000));
  backlog.push_back(Req(20, 1'000'000.0, Iota(8, 5001), 1));
  const ReplayResult mid = testing_engine::MustReplay(plan, engine, backlog);
  EXPECT_LT(mid.sim_time_ns - mid.trace_span_ns, 60'000'000'000);
  EXPECT_GT(mid.ttft.p50_ms, 60'000);
  EXPECT_TRUE(mid.overloaded);
  EXPECT_THAT(ReplayReportText(mid), HasSubstr("OVERLOADED"));
}

// The tail of one long request after the last arrival is not an overload: under a minute of
// drain is allowed whatever the span.
TEST(ProgressGuardTest, ALongLastRequestIsNotAnOverload) {
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 16, 4096);
  const EngineConfig engine = SmallEngine(64, /*step_us=*/10000);
  const ReplayResult r = testing_engine::MustReplay(
      plan, engine, {Req(0, 0, Iota(8), 10), Req(1, 1000, Iota(8, 50), 5000)});
  EXPECT_GT(r.sim_time_ns, 10 * r.trace_span_ns);
  EXPECT_FALSE(r.overloaded);
}

TEST(ProgressGuardTest, MooncakeOnOneReplicaIsNamedOverloadedEverywhere) {
  const std::string trace =
      std::string(PREFIXSIM_REAL_TRACES_DIR) + "/mooncake_conversation_trace.jsonl.zst";
  if (access(trace.c_str(), R_OK) != 0) GTEST_SKIP() << "no " << trace;
  const std::string json = TempOutputPath("overloaded.json");
  const std::string html = TempOutputPath("overloaded.html");
  const auto r = RunCli("compare --trace " + trace +
                        " --model kimi-k3-like --engine kimi-k3-dspark --policies old,new "
                        "--no-progress --json " +
                        json + " --html " + html);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("OVERLOADED: policy old's engine fell behind the trace"));
  EXPECT_THAT(r.output, HasSubstr("--replicas auto"));
  EXPECT_THAT(r.output, HasSubstr("The deltas below compare engines of which one or more were"));
  const nlohmann::json j = nlohmann::json::parse(ReadFile(json));
  EXPECT_EQ(j["overloaded"], true);
  EXPECT_EQ(j["policies"][1]["overloaded"], true);
  EXPECT_GT(j["policies"][1]["sim_time_s"].get<double>(),
            2 * j["policies"][1]["trace_span_s"].get<double>());
  EXPECT_THAT(ReadFile(html), HasSubstr("OVERLOADED: policy new"));
}

// A capacity too small for one max_model_len request is refused up front, naming it, instead of
// running the main replays first and then thrashing at that size.
TEST(ProgressGuardTest, CapacitiesPassTheStartupCheckBeforeAnyReplay) {
  const auto r = RunCli("compare --trace " + kChat +
                        " --model kimi-k3-like --engine kimi-k3-dspark --policies old,new "
                        "--no-progress --html " +
                        TempOutputPath("caps.html") + " --capacities 1GiB");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--capacities 1073741824 bytes, policy old"));
  EXPECT_THAT(r.output, HasSubstr("max_model_len"));
  // Nothing was replayed: no summary table.
  EXPECT_EQ(r.output.find("hit rate (%)"), std::string::npos);
}

}  // namespace
}  // namespace prefixsim
