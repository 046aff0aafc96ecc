// `prefixsim tune` (issue 53): the search finds #53007's plan or better starting from the old
// policy, the cheap bound holds over every replay, refusals are counted, the result is
// deterministic and resumable, the plan it writes is one compare accepts, and bad input exits 2.
#include "sim/grid/tune.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "tests/cli_runner.h"

namespace prefixsim::grid {
namespace {

namespace fs = std::filesystem;
using ::prefixsim::testing::ReadFile;
using ::prefixsim::testing::RunCli;

const std::string kSource = PREFIXSIM_SOURCE_DIR;
const std::string kChat = kSource + "/traces/sample_chat.jsonl";
const std::string kKimi = kSource + "/configs/models/kimi-k3-like.json";

TuneOptions KimiOptions() {
  TuneOptions o;
  o.replay.model_engine.model = kKimi;
  o.replay.model_engine.engine = "kimi-k3-dspark";
  o.replay.trace = kChat;
  o.replay.threads = 2;
  o.budget = 12;
  return o;
}

const TuneCandidate* FindLabel(const TuneResult& r, const std::string& label) {
  for (const TuneCandidate& c : r.candidates) {
    if (c.label == label) return &c;
  }
  return nullptr;
}

int SlidingWindowBlock(const KvPlan& plan) {
  for (const KvGroup& g : plan.groups) {
    if (g.kind == LayerKind::kSlidingWindow) return g.block_size;
  }
  return 0;
}

class TuneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("prefixsim_tune_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

// Started from the old policy alone, the search reaches the SWA block #53007 picks (1536) or a
// plan that hits at least as much as new's, on the Kimi-K3-like + DSpark plan.
TEST_F(TuneTest, FindsNewsBlockOrBetterFromOld) {
  TuneOptions from_old = KimiOptions();
  from_old.space.policies = {"old"};
  absl::StatusOr<TuneResult> found = RunTune(from_old, nullptr);
  ASSERT_TRUE(found.ok()) << found.status();

  TuneOptions just_new = KimiOptions();
  just_new.space = {false, false, false, false, {"new"}};
  absl::StatusOr<TuneResult> reference = RunTune(just_new, nullptr);
  ASSERT_TRUE(reference.ok()) << reference.status();
  ASSERT_EQ(reference->candidates.size(), 1u);
  const TuneCandidate& new_plan = reference->candidates.front();
  EXPECT_EQ(SlidingWindowBlock(new_plan.plan), 1536);

  const TuneCandidate& best = found->candidates[found->best];
  EXPECT_EQ(best.replayed_requests, found->trace_requests);
  EXPECT_GE(best.hit_tokens, new_plan.hit_tokens) << best.label;
  const TuneCandidate* old_plan = FindLabel(*found, "old");
  ASSERT_NE(old_plan, nullptr);
  EXPECT_TRUE(old_plan->baseline);
  EXPECT_GT(best.hit_tokens, old_plan->hit_tokens);
  // The forced block 1536 is among the plans, and names the policy that picks it.
  const TuneCandidate* forced = FindLabel(*found, "swa=1536");
  ASSERT_NE(forced, nullptr);
  EXPECT_EQ(forced->plan.scheduler_block_size, 1536);
  EXPECT_NE(forced->vllm_note.find("policy new picks"), std::string::npos) << forced->vllm_note;
}

// The bound's guarantee (docs/tune.md): no replay hits more than the trace's hit at the plan's
// alignment with an infinite cache. Checked on every replay of two models' searches.
TEST_F(TuneTest, CheapBoundIsAnUpperBoundOfEveryReplay) {
  TuneOptions kimi = KimiOptions();
  kimi.budget = 30;
  kimi.rounds = 1;
  TuneOptions gpt = kimi;
  gpt.replay.model_engine.model = "gpt-oss-20b";
  gpt.replay.model_engine.engine = "gpt-oss-20b-eagle3";
  for (const TuneOptions& options : {kimi, gpt}) {
    absl::StatusOr<TuneResult> r = RunTune(options, nullptr);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->bound_exceeded, 0);
    int replayed = 0;
    for (const TuneCandidate& c : r->candidates) {
      if (c.replayed_requests == 0) continue;
      ++replayed;
      EXPECT_LE(c.hit_tokens, c.bound_hit_tokens) << c.label;
      EXPECT_GT(c.bound_hit_tokens, 0) << c.label;
    }
    EXPECT_GT(replayed, 10);
  }
}

// A plan the startup check refuses is counted under its reason, never dropped silently, and
// every combination is accounted for.
TEST_F(TuneTest, RefusedPlansAreCountedByReason) {
  TuneOptions small = KimiOptions();
  small.replay.model_engine.overrides.kv_cache_bytes = int64_t{6} << 30;
  small.budget = 2;
  small.rounds = 1;
  absl::StatusOr<TuneResult> r = RunTune(small, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  int64_t pruned = 0;
  for (const auto& [reason, count] : r->pruned) pruned += count;
  EXPECT_GT(r->pruned["memory: one max_model_len request does not fit"], 0);
  EXPECT_EQ(r->considered, pruned + r->duplicates + static_cast<int64_t>(r->candidates.size()));
  EXPECT_NE(TuneResultText(*r, 5).find("pruned: memory"), std::string::npos);

  // FlashInfer runs kernel blocks of 16, 32 and 64 only, and a padded SWA page cannot be split
  // into them: #53007's 1536-token SWA block is refused there, and counted.
  TuneOptions flashinfer = KimiOptions();
  flashinfer.replay.model_engine.engine = "kimi-k3-dspark-flashinfer";
  flashinfer.budget = 2;
  flashinfer.rounds = 1;
  absl::StatusOr<TuneResult> fi = RunTune(flashinfer, nullptr);
  ASSERT_TRUE(fi.ok()) << fi.status();
  EXPECT_GT(fi->pruned["a padded page the backend's kernel blocks cannot split"], 0);
  for (const TuneCandidate& c : fi->candidates) {
    EXPECT_NE(SlidingWindowBlock(c.plan), 1536) << c.label;
  }
}

// Same inputs, same ranking, on one thread or two; a resumed search reads its replays back.
TEST_F(TuneTest, DeterministicAndResumable) {
  TuneOptions one = KimiOptions();
  one.replay.threads = 1;
  one.state_path = (dir_ / "state.jsonl").string();
  absl::StatusOr<TuneResult> first = RunTune(one, nullptr);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_GT(first->replays, 0);
  EXPECT_EQ(first->resumed_replays, 0);

  TuneOptions two = KimiOptions();
  absl::StatusOr<TuneResult> parallel = RunTune(two, nullptr);
  ASSERT_TRUE(parallel.ok()) << parallel.status();
  EXPECT_EQ(TuneResultJson(*first, 1000).dump(), TuneResultJson(*parallel, 1000).dump());

  // Held in memory with or without the hashes, or parsed again for every replay: the same.
  for (int64_t memory : {int64_t{0}, int64_t{256} << 10}) {
    TuneOptions tight = KimiOptions();
    tight.trace_memory_bytes = memory;
    absl::StatusOr<TuneResult> streamed = RunTune(tight, nullptr);
    ASSERT_TRUE(streamed.ok()) << streamed.status();
    EXPECT_EQ(streamed->trace_in_memory, memory > 0);
    EXPECT_EQ(TuneResultJson(*streamed, 1000)["candidates"].dump(),
              TuneResultJson(*first, 1000)["candidates"].dump());
  }

  absl::StatusOr<TuneResult> resumed = RunTune(one, nullptr);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->replays, 0);
  EXPECT_EQ(resumed->resumed_replays, first->replays);
  EXPECT_EQ(TuneResultText(*resumed, 1000).substr(TuneResultText(*resumed, 1000).find('#')),
            TuneResultText(*first, 1000).substr(TuneResultText(*first, 1000).find('#')));

  std::ofstream(one.state_path, std::ios::app) << "not json\n";
  absl::StatusOr<TuneResult> broken = RunTune(one, nullptr);
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("state.jsonl:"), std::string::npos) << broken.status();
}

// With objective replicas the baselines' and the best plans' fleets are sized for the SLO, and
// the text says how many replicas the recommendation needs beside the baselines.
TEST_F(TuneTest, ReplicasObjectiveSizesFleets) {
  TuneOptions o = KimiOptions();
  o.objective = TuneObjective::kReplicas;
  o.ttft_slo_ms = 8000;
  o.budget = 4;
  o.finalists = 1;
  o.replay.model_engine.overrides.router = "kv_aware";
  absl::StatusOr<TuneResult> r = RunTune(o, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  const TuneCandidate& best = r->candidates[r->best];
  EXPECT_GE(best.replicas, 1);
  EXPECT_GT(best.gpu_hours_per_million, 0);
  for (const TuneCandidate& c : r->candidates) {
    if (c.baseline) {
      EXPECT_GE(c.replicas, best.replicas) << c.label;
    }
  }
  EXPECT_TRUE(TuneResultText(*r, 5).find("replicas instead of") != std::string::npos ||
              TuneResultText(*r, 5).find("the same ") != std::string::npos);
}

// The plan tune writes is an engine file and a policy file that compare accepts, and compare's
// replay of it hits what tune reported.
TEST_F(TuneTest, WrittenPlanReplaysInCompare) {
  const std::string engine = (dir_ / "tuned.json").string();
  const std::string policy = (dir_ / "tuned.policy.json").string();
  const std::string json = (dir_ / "tune.json").string();
  const testing::CliResult tuned =
      RunCli("tune --model " + kKimi + " --engine kimi-k3-dspark --trace " + kChat +
             " --budget 8 --no-progress --json " + json + " --write-engine " + engine +
             " --write-policy " + policy);
  ASSERT_EQ(tuned.exit_code, 0) << tuned.output;
  EXPECT_NE(tuned.output.find("recommended: "), std::string::npos);
  const nlohmann::json report = nlohmann::json::parse(ReadFile(json));
  const nlohmann::json& best = report["candidates"][0];
  ASSERT_TRUE(best.contains("sliding_window_block")) << best.dump();
  const testing::CliResult compared =
      RunCli("compare --model " + kKimi + " --engine " + engine + " --trace " + kChat +
             " --no-miss-causes --policies new," + policy + " --json -");
  ASSERT_EQ(compared.exit_code, 0) << compared.output;
  const nlohmann::json c = nlohmann::json::parse(compared.output);
  ASSERT_EQ(c["policies"].size(), 2u) << compared.output;
  const nlohmann::json& tuned_run = c["policies"][1];
  EXPECT_EQ(tuned_run["prefix_cache"]["hits"].get<int64_t>(), best["hit_tokens"].get<int64_t>());
}

// The scenario tune writes runs as a sweep (on Slurm where large), each point the replay of one
// shown plan, with the hit rates tune reported, in its order.
TEST_F(TuneTest, WrittenScenarioSweepsTheShownPlans) {
  const std::string scenario = (dir_ / "tune.json").string();
  const std::string json = (dir_ / "report.json").string();
  const testing::CliResult tuned =
      RunCli("tune --model " + kKimi + " --engine kimi-k3-dspark --trace " + kChat +
             " --budget 6 --top 3 --no-progress --json " + json + " --write-scenario " + scenario);
  ASSERT_EQ(tuned.exit_code, 0) << tuned.output;
  const testing::CliResult swept =
      RunCli("sweep --grid " + scenario + " --out " + (dir_ / "out").string() + " --jobs 2");
  ASSERT_EQ(swept.exit_code, 0) << swept.output;
  const nlohmann::json report = nlohmann::json::parse(ReadFile(json));
  const auto rows = testing::ReadCsvRows(ReadFile(dir_ / "out" / "results.csv"));
  ASSERT_EQ(rows.size(), report["candidates"].size());
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(std::stoll(rows[i].at("hits")), report["candidates"][i]["hit_tokens"].get<int64_t>())
        << report["candidates"][i]["label"];
  }
}

// With fleets sized for an SLO, compare's headline is the replicas each policy needs, in its
// text and JSON; without, there is none.
TEST_F(TuneTest, CompareHeadlineIsReplicasAtTheSlo) {
  const std::string base = "compare --model " + kKimi + " --engine kimi-k3-dspark --trace " +
                           kChat + " --no-miss-causes --router kv_aware --ttft-slo-ms 8000 ";
  const testing::CliResult sized = RunCli(base + "--replicas auto");
  ASSERT_EQ(sized.exit_code, 0) << sized.output;
  const size_t headline = sized.output.find(" the p99 TTFT SLO of 8000 ms with ");
  ASSERT_NE(headline, std::string::npos) << sized.output;
  EXPECT_LT(headline, sized.output.find("hit rate (%)")) << "the headline comes first";
  const testing::CliResult json = RunCli(base + "--replicas auto --json -");
  ASSERT_EQ(json.exit_code, 0) << json.output;
  const nlohmann::json j = nlohmann::json::parse(json.output);
  ASSERT_TRUE(j.contains("replicas_at_slo"));
  for (const auto& policy : j["policies"]) {
    const std::string name = policy["policy"].get<std::string>();
    const int replicas = policy["fleet"]["replicas"].get<int>();
    EXPECT_NE(j["replicas_at_slo"].get<std::string>().find(name), std::string::npos);
    EXPECT_NE(j["replicas_at_slo"].get<std::string>().find(std::to_string(replicas)),
              std::string::npos);
  }
  const testing::CliResult fixed = RunCli(base + "--replicas 2");
  ASSERT_EQ(fixed.exit_code, 0) << fixed.output;
  EXPECT_EQ(fixed.output.find("the p99 TTFT SLO"), std::string::npos);
}

TEST_F(TuneTest, BadInputExitsTwo) {
  const std::string base =
      "tune --model " + kKimi + " --engine kimi-k3-dspark --trace " + kChat + " --no-progress ";
  testing::CliResult r = RunCli(base + "--objective latency");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--objective 'latency': expected hit or replicas"), std::string::npos)
      << r.output;
  r = RunCli(base + "--objective replicas --slo ttft=5");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("expected ttft_p99_ms=MILLISECONDS"), std::string::npos) << r.output;
  r = RunCli(base + "--slo ttft_p99_ms=5000");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--slo applies to --objective replicas only"), std::string::npos);
  r = RunCli(base + "--policies old,newest");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("unknown policy 'newest'"), std::string::npos) << r.output;

  const std::string bad_policy = (dir_ / "bad.json").string();
  std::ofstream(bad_policy) << "{\n  \"name\": \"x\",\n  \"sliding_window_block_size\": 0\n}\n";
  r = RunCli("replay --model " + kKimi + " --engine kimi-k3-dspark --trace " + kChat +
             " --policy " + bad_policy);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("bad.json:3: field 'sliding_window_block_size'"), std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace prefixsim::grid
