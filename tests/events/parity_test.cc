// `prefixsim parity` (docs/kv-events.md "Parity"): the metrics reader and the comparison of event
// histories, with logs written by an independent encoder (tests/events/vllm_kv_events.py).
#include "sim/events/parity.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"
#include "sim/events/event_log.h"
#include "sim/events/event_recorder.h"
#include "tests/cli_runner.h"
#include "tests/events/kv_events_test_util.h"

namespace prefixsim {
namespace {

using ::prefixsim::testing::RunCli;
using ::prefixsim::testing::TempOutputPath;
using ::testing::HasSubstr;

TEST(ParityPromTest, SumsLabelSetsAndStripsTotal) {
  const std::string text =
      "# HELP vllm:prefix_cache_queries Prefix cache queries, in terms of number of queried "
      "tokens.\n"
      "# TYPE vllm:prefix_cache_queries counter\n"
      "vllm:prefix_cache_queries_total{engine=\"0\",model_name=\"m\"} 1000.0\n"
      "vllm:prefix_cache_queries_total{engine=\"1\",model_name=\"m, \\\"}x\"} 500\n"
      "vllm:prefix_cache_hits_total{engine=\"0\"} 250 1700000000000\n"
      "vllm:num_requests_running 3\n";
  auto m = events::ParsePromText(text, "a.prom");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_DOUBLE_EQ(*m->Sum("vllm:prefix_cache_queries"), 1500);
  EXPECT_DOUBLE_EQ(*m->Sum("vllm:prefix_cache_hits"), 250);
  EXPECT_DOUBLE_EQ(*m->Sum("vllm:num_requests_running"), 3);
  EXPECT_FALSE(m->Sum("vllm:absent").has_value());
  auto later = events::ParsePromText(
      "vllm:prefix_cache_queries_total{model_name=\"m\",engine=\"0\"} 1800\n"
      "vllm:prefix_cache_queries_total{engine=\"1\",model_name=\"m, \\\"}x\"} 700\n"
      "vllm:prefix_cache_hits_total{engine=\"0\"} 850\n",
      "b.prom");
  ASSERT_TRUE(later.ok()) << later.status();
  auto rate = events::MeasuredFromScrapes(*m, "a.prom", *later, "b.prom");
  ASSERT_TRUE(rate.ok()) << rate.status();
  EXPECT_EQ(rate->queries, 1000);
  EXPECT_EQ(rate->hits, 600);
  EXPECT_DOUBLE_EQ(rate->rate(), 0.6);
  auto swapped = events::MeasuredFromScrapes(*later, "b.prom", *m, "a.prom");
  ASSERT_FALSE(swapped.ok());
  EXPECT_THAT(std::string(swapped.status().message()), HasSubstr("a.prom: line 3: "));
}

// Counters no single vLLM run can produce are refused, naming the file and the line: the
// difference they would give means nothing.
TEST(ParityPromTest, ImpossibleCountersAreRefused) {
  const std::string before =
      "vllm:prefix_cache_queries_total{engine=\"0\"} 100\n"
      "vllm:prefix_cache_hits_total{engine=\"0\"} 40\n";
  auto measured = [&](const std::string& after) {
    auto a = events::ParsePromText(before, "before.prom");
    auto b = events::ParsePromText(after, "after.prom");
    if (!b.ok()) return absl::StatusOr<events::MeasuredHitRate>(b.status());
    return events::MeasuredFromScrapes(*a, "before.prom", *b, "after.prom");
  };
  const struct {
    std::string after;
    std::string message;
  } cases[] = {
      {"vllm:prefix_cache_queries_total{engine=\"0\"} NaN\n"
       "vllm:prefix_cache_hits_total{engine=\"0\"} 50\n",
       "after.prom: line 1: vllm:prefix_cache_queries{engine=\"0\"} is nan"},
      {"vllm:prefix_cache_queries_total{engine=\"0\"} +Inf\n"
       "vllm:prefix_cache_hits_total{engine=\"0\"} 50\n",
       "after.prom: line 1: vllm:prefix_cache_queries{engine=\"0\"} is inf"},
      {"vllm:prefix_cache_queries_total{engine=\"0\"} 200\n"
       "vllm:prefix_cache_hits_total{engine=\"0\"} -Inf\n",
       "after.prom: line 2: "},
      {"vllm:prefix_cache_queries_total{engine=\"0\"} 200.5\n"
       "vllm:prefix_cache_hits_total{engine=\"0\"} 50\n",
       "a whole number"},
      {"vllm:prefix_cache_queries_total{engine=\"0\"} 110\n"
       "vllm:prefix_cache_hits_total{engine=\"0\"} 60\n",
       "20 prefix-cache hits between the scrapes but only 10 queries"},
      {"vllm:prefix_cache_queries_total{engine=\"0\"} 100\n"
       "vllm:prefix_cache_hits_total{engine=\"0\"} 40\n",
       "did not move between the scrapes"},
      {"vllm:prefix_cache_queries_total{engine=\"1\"} 300\n"
       "vllm:prefix_cache_hits_total{engine=\"1\"} 40\n",
       "after.prom: no series vllm:prefix_cache_queries{engine=\"0\"}, which before.prom has at "
       "line 1"},
      {"vllm:prefix_cache_queries_total{engine=\"0\"} 300\n"
       "vllm:prefix_cache_hits_total{engine=\"0\"} 50\n"
       "vllm:prefix_cache_queries_total{engine=\"0\"} 300\n",
       "after.prom: line 3: series vllm:prefix_cache_queries{engine=\"0\"} is given twice (first "
       "at line 1)"},
  };
  for (const auto& c : cases) {
    auto m = measured(c.after);
    ASSERT_FALSE(m.ok()) << c.after;
    EXPECT_THAT(std::string(m.status().message()), HasSubstr(c.message)) << c.after;
  }
  // A series new in the second scrape counts from 0 (an engine that had not served yet).
  auto grown = measured(
      "vllm:prefix_cache_queries_total{engine=\"0\"} 150\n"
      "vllm:prefix_cache_hits_total{engine=\"0\"} 40\n"
      "vllm:prefix_cache_queries_total{engine=\"1\"} 30\n"
      "vllm:prefix_cache_hits_total{engine=\"1\"} 10\n");
  ASSERT_TRUE(grown.ok()) << grown.status();
  EXPECT_EQ(grown->queries, 80);
  EXPECT_EQ(grown->hits, 10);
}

TEST(ParityPromTest, MalformedLinesNameFileAndLine) {
  for (const char* bad : {"ok 1\n{x=\"1\"} 2\n", "ok 1\nvllm:x{a=\"1\" 2\n", "ok 1\nvllm:x\n",
                          "ok 1\nvllm:x{a=\"b\"} twelve\n"}) {
    auto m = events::ParsePromText(bad, "m.prom");
    ASSERT_FALSE(m.ok()) << bad;
    EXPECT_THAT(std::string(m.status().message()), HasSubstr("m.prom: line 2: ")) << bad;
  }
  auto missing = events::MeasuredFromScrapes({}, "a.prom", {}, "b.prom");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("a.prom: no vllm:prefix_cache_queries"));
}

// A simulated history: the batches of a small hybrid replay.
std::vector<events::EventBatch> SimulatedHistory(const KvPlan& plan) {
  std::vector<events::EventBatch> batches;
  events::EventRecorder recorder(plan, 0,
                                 [&](events::EventBatch&& b) { batches.push_back(std::move(b)); });
  EngineConfig engine = testing_engine::SmallEngine(32);
  engine.max_num_seqs = 5;
  testing_events::DriveReplay(plan, engine, testing_events::FamilyRequests(11, 40), &recorder,
                              [](Simulator&) {});
  return batches;
}

// The history as the python encoder's script: per step, its stores and removes.
nlohmann::json HistoryScript(const std::vector<events::EventBatch>& batches) {
  nlohmann::json steps = nlohmann::json::array();
  for (const events::EventBatch& b : batches) {
    nlohmann::json step = {{"ts", b.ts}, {"rank", *b.data_parallel_rank}};
    step["events"] = nlohmann::json::array();
    for (const events::KvEvent& e : b.events) {
      if (const auto* s = std::get_if<events::BlockStored>(&e)) {
        step["events"].push_back(
            {"store", *s->group_idx, s->block_hashes,
             s->parent_block_hash ? nlohmann::json(*s->parent_block_hash) : nlohmann::json(nullptr),
             s->block_size});
      } else if (const auto* r = std::get_if<events::BlockRemoved>(&e)) {
        step["events"].push_back({"remove", *r->group_idx, r->block_hashes});
      }
    }
    steps.push_back(std::move(step));
  }
  return steps;
}

class ParityHistoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    python_ = testing_events::DebianPython();
    if (python_.empty()) GTEST_SKIP() << "/usr/bin/python3 with python3-msgpack is not installed";
    plan_ = testing_kv::Plan({testing_kv::Group(LayerKind::kFullAttention, 8),
                              testing_kv::Group(LayerKind::kSlidingWindow, 8, 16),
                              testing_kv::Group(LayerKind::kMamba, 8)},
                             90, 8, 8, 8);
    simulated_ = SimulatedHistory(plan_);
    ASSERT_GT(simulated_.size(), 10u);
  }
  // Encodes `script` with the python encoder and reads the log back.
  std::vector<events::EventBatch> Encode(const nlohmann::json& script, const std::string& name) {
    const std::string script_path = TempOutputPath(name + ".json");
    const std::string log_path = TempOutputPath(name + ".msgpack");
    std::ofstream(script_path) << script.dump();
    const auto r = testing_events::RunShell(python_ + " " + testing_events::ScriptPath() +
                                            " encode " + script_path + " " + log_path);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    auto log = events::ReadEventLog(log_path);
    EXPECT_TRUE(log.ok()) << log.status();
    return log.ok() ? *log : std::vector<events::EventBatch>{};
  }
  std::string python_;
  KvPlan plan_;
  std::vector<events::EventBatch> simulated_;
};

TEST_F(ParityHistoryTest, TheSameHistoryAgreesEverywhere) {
  const auto measured = Encode(HistoryScript(simulated_), "parity_same");
  auto d = events::CompareEventHistories(simulated_, measured);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->steps, static_cast<int64_t>(simulated_.size()));
  EXPECT_EQ(d->agreement(), 1.0);
  EXPECT_FALSE(d->first_divergent_step.has_value());
  ASSERT_EQ(d->groups.size(), 3u);
  for (const events::GroupDivergence& g : d->groups) {
    EXPECT_GT(g.stored_sim, 0);
    EXPECT_EQ(g.stored_sim, g.stored_measured);
    EXPECT_EQ(g.removed_sim, g.removed_measured);
    EXPECT_EQ(g.stored_sim_only + g.stored_measured_only, 0);
  }
}

TEST_F(ParityHistoryTest, AnExtraStoreNamesTheFirstDivergentStepAndGroup) {
  nlohmann::json script = HistoryScript(simulated_);
  const size_t step = simulated_.size() / 2;
  script[step]["events"].push_back({"store", 1, {777}, nullptr, 8});
  const auto measured = Encode(script, "parity_perturbed");
  auto d = events::CompareEventHistories(simulated_, measured);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_TRUE(d->first_divergent_step.has_value());
  EXPECT_EQ(*d->first_divergent_step, static_cast<int64_t>(step));
  EXPECT_EQ(*d->first_divergent_group, 1);
  EXPECT_EQ(d->steps_agreeing, static_cast<int64_t>(step));  // never again: 777 stays cached
  EXPECT_EQ(d->groups[1].stored_measured_only, 1);
  EXPECT_EQ(d->groups[0].steps_agreeing, static_cast<int64_t>(simulated_.size()));
}

events::EventBatch Batch(int64_t rank, std::vector<events::KvEvent> events) {
  events::EventBatch b;
  b.events = std::move(events);
  b.data_parallel_rank = rank;
  return b;
}
events::BlockStored Store(int64_t group, events::ExternalBlockHash h) {
  events::BlockStored s;
  s.block_hashes = {h};
  s.block_size = 16;
  s.group_idx = group;
  return s;
}
events::BlockRemoved Remove(int64_t group, events::ExternalBlockHash h) {
  events::BlockRemoved r;
  r.block_hashes = {h};
  r.group_idx = group;
  return r;
}

// Replica 0 diverges at its step 2, replica 1 at its step 1: the first divergence is replica 1's
// (the earliest step, not the lowest replica's). A block stored on one side and removed again
// agrees once more; an AllBlocksCleared on both sides agrees.
TEST(ParityEventsTest, TheFirstDivergenceIsTheEarliestStepOverReplicas) {
  const std::vector<events::EventBatch> sim = {Batch(0, {Store(0, 1)}),
                                               Batch(0, {Store(0, 2)}),
                                               Batch(0, {Store(1, 3)}),
                                               Batch(1, {Store(0, 4)}),
                                               Batch(1, {Store(0, 5)}),
                                               Batch(1, {Remove(0, 5)}),
                                               Batch(1, {events::AllBlocksCleared{}})};
  const std::vector<events::EventBatch> measured = {Batch(0, {Store(0, 1)}),
                                                    Batch(0, {Store(0, 2)}),
                                                    Batch(0, {Store(1, 30)}),
                                                    Batch(1, {Store(0, 4)}),
                                                    Batch(1, {Store(0, 50)}),
                                                    Batch(1, {Remove(0, 50)}),
                                                    Batch(1, {events::AllBlocksCleared{}})};
  auto d = events::CompareEventHistories(sim, measured);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_TRUE(d->first_divergent_step.has_value());
  EXPECT_EQ(*d->first_divergent_step, 1);
  EXPECT_EQ(*d->first_divergent_rank, 1);
  EXPECT_EQ(*d->first_divergent_group, 0);
  EXPECT_EQ(d->steps, 7);
  // Replica 0 agrees at steps 0 and 1; replica 1 at steps 0, 2 and 3.
  EXPECT_EQ(d->steps_agreeing, 5);
}

// Each way a comparison can be meaningless is said, and a comparable pair says nothing.
TEST(ParityTest, ComparabilityWarningsSayWhatCannotBeCompared) {
  const std::vector<int64_t> sizes = {16, 16};
  const std::vector<events::EventBatch> sim = {Batch(0, {Store(0, 1), Store(1, 2)}),
                                               Batch(1, {Store(0, 3)})};
  auto says = [](const std::vector<std::string>& warnings, const std::string& what) {
    for (const std::string& w : warnings) {
      if (w.find(what) != std::string::npos) return true;
    }
    return false;
  };
  EXPECT_TRUE(events::ComparabilityWarnings(sim, sim, sizes).empty());
  const auto empty = events::ComparabilityWarnings(sim, {}, sizes);
  ASSERT_EQ(empty.size(), 1u);
  EXPECT_TRUE(says(empty, "holds no batch"));
  // A replica the simulation does not have, and so a replica count that differs.
  const auto ranks = events::ComparabilityWarnings(
      sim, {Batch(0, {Store(0, 1)}), Batch(1, {Store(0, 3)}), Batch(2, {Store(0, 9)})}, sizes);
  EXPECT_TRUE(says(ranks, "replicas (data_parallel_rank) 2 that the simulation does not"));
  EXPECT_TRUE(says(ranks, "the vLLM log has 3 replicas and the simulation 2"));
  // Events without group_idx, and blocks of another size (an old-policy log against new).
  events::BlockStored bare = Store(0, 1);
  bare.group_idx.reset();
  events::BlockStored big = Store(1, 2);
  big.block_size = 64;
  const auto shape =
      events::ComparabilityWarnings(sim, {Batch(0, {bare, big}), Batch(1, {Store(0, 3)})}, sizes);
  EXPECT_TRUE(says(shape, "1 events of the vLLM log carry no group_idx"));
  EXPECT_TRUE(says(shape, "group 1's blocks are 64 tokens in the vLLM log (1 stores) and 16"));
  EXPECT_FALSE(says(shape, "no block hash"));
  // Hashes from another hash function: equal counts, nothing shared.
  const auto foreign = events::ComparabilityWarnings(
      sim, {Batch(0, {Store(0, 101), Store(1, 102)}), Batch(1, {Store(0, 103)})}, sizes);
  ASSERT_EQ(foreign.size(), 1u);
  EXPECT_TRUE(says(foreign, "no block hash of the vLLM log (3 stored)"));
  EXPECT_TRUE(says(foreign, "compare the per-group stored and removed counts"));
}

const std::string kTokens = std::string(PREFIXSIM_SOURCE_DIR) + "/traces/sample_tokens.jsonl";
const std::string kSetup =
    " --trace " + kTokens + " --model qwen3-next-80b-a3b --engine h200 --no-progress";

// The whole command: a log the engine "recorded" (prefixsim's own, re-encoded by the python
// encoder in vLLM's older positional layout) agrees fully; one with a block added does not, and
// parity says where.
TEST(ParityCliTest, ReencodedLogAgreesAndAPerturbedOneIsLocated) {
  const std::string python = testing_events::DebianPython();
  if (python.empty()) GTEST_SKIP() << "/usr/bin/python3 with python3-msgpack is not installed";
  const std::string ours = TempOutputPath("parity_cli.msgpack");
  ASSERT_EQ(RunCli("replay" + kSetup + " --kv-events " + ours).exit_code, 0);
  const std::string same = TempOutputPath("parity_cli_same.msgpack");
  const std::string bent = TempOutputPath("parity_cli_bent.msgpack");
  const std::string script = python + " " + testing_events::ScriptPath() + " reencode " + ours;
  ASSERT_EQ(testing_events::RunShell(script + " " + same + " array -1").exit_code, 0);
  const auto perturbed = testing_events::RunShell(script + " " + bent + " map 5");
  ASSERT_EQ(perturbed.exit_code, 0) << perturbed.output;

  const std::string before = TempOutputPath("before.prom"), after = TempOutputPath("after.prom");
  std::ofstream(before) << "vllm:prefix_cache_queries_total{engine=\"0\"} 100\n"
                           "vllm:prefix_cache_hits_total{engine=\"0\"} 10\n";
  std::ofstream(after) << "vllm:prefix_cache_queries_total{engine=\"0\"} 1100\n"
                          "vllm:prefix_cache_hits_total{engine=\"0\"} 410\n";
  const auto agree = RunCli("parity" + kSetup + " --json --vllm-metrics " + before + " " + after +
                            " --vllm-kv-events " + same);
  ASSERT_EQ(agree.exit_code, 0) << agree.output;
  const auto j = nlohmann::json::parse(agree.output);
  EXPECT_DOUBLE_EQ(j["measured"]["hit_rate"].get<double>(), 0.4);
  EXPECT_EQ(j["kv_events"]["agreement"].get<double>(), 1.0);
  EXPECT_TRUE(j["kv_events"]["first_divergent_step"].is_null());
  EXPECT_TRUE(j["kv_events"]["warnings"].empty()) << agree.output;
  EXPECT_GT(j["simulated"]["prefix_cache_queries"].get<int64_t>(), 0);

  const std::string page = TempOutputPath("parity.html");
  const std::string big = TempOutputPath("after_big.prom");
  std::ofstream(big) << "vllm:prefix_cache_queries_total{engine=\"0\"} 2721380\n"
                        "vllm:prefix_cache_hits_total{engine=\"0\"} 1930760\n";
  const auto bent_run = RunCli("parity" + kSetup + " --vllm-kv-events " + bent +
                               " --vllm-metrics " + before + " " + big + " --html " + page);
  ASSERT_EQ(bent_run.exit_code, 0) << bent_run.output;
  EXPECT_THAT(bent_run.output, HasSubstr("(1930750 of 2721280)"));  // exact counts, not 1.9e+06
  const std::string group = std::string(absl::StripAsciiWhitespace(perturbed.output));
  EXPECT_THAT(bent_run.output,
              HasSubstr("first divergence: step 5, replica 0, group " + group + "\n"));
  // The report page has the parity section: both hit rates, the first divergence, the
  // agreement over time and the perturbed group's row, on the simulated replay's page.
  const std::string html = testing::ReadFile(page);
  EXPECT_THAT(html, HasSubstr(". Parity with the measured run</h2>"));
  EXPECT_THAT(
      html, HasSubstr("<tr data-side=\"measured\"><td>measured (vLLM's counters)</td><td>70.95%"));
  EXPECT_THAT(html, HasSubstr("First divergence: step 5, replica 0, group " + group + "."));
  EXPECT_THAT(html, HasSubstr("data-chart=\"parity-agreement\""));
  EXPECT_THAT(html, HasSubstr("data-replica=\"0\" data-group=\"" + group + "\""));
  EXPECT_THAT(html, HasSubstr("1. KV cache plan"));

  // Malformed inputs: exit 2, naming the file and where.
  std::ofstream(TempOutputPath("bad.prom")) << "vllm:prefix_cache_hits_total 1\nbroken{\n";
  const auto bad_prom =
      RunCli("parity" + kSetup + " --vllm-metrics " + TempOutputPath("bad.prom") + " " + after);
  EXPECT_EQ(bad_prom.exit_code, 2);
  EXPECT_THAT(bad_prom.output, HasSubstr("bad.prom: line 2: "));
  const std::string whole = testing::ReadFile(same);
  std::ofstream(TempOutputPath("cut.msgpack"), std::ios::binary)
      << whole.substr(0, whole.size() - 3);
  const auto cut = RunCli("parity" + kSetup + " --vllm-kv-events " + TempOutputPath("cut.msgpack"));
  EXPECT_EQ(cut.exit_code, 2);
  EXPECT_THAT(cut.output, HasSubstr("cut.msgpack: "));
  EXPECT_THAT(cut.output, HasSubstr("byte "));

  // Nothing measured to compare with: refused, not the simulated hit rate passed off as a parity.
  const auto alone = RunCli("parity" + kSetup);
  EXPECT_EQ(alone.exit_code, 2) << alone.output;
  EXPECT_THAT(alone.output, HasSubstr("give --vllm-metrics BEFORE.prom AFTER.prom, "
                                      "--vllm-kv-events FILE or both"));

  // An empty log and a log of another replica count are compared, and said to mean little.
  const std::string empty = TempOutputPath("empty.msgpack");
  std::ofstream(empty, std::ios::binary).flush();
  const auto nothing = RunCli("parity" + kSetup + " --vllm-kv-events " + empty);
  EXPECT_EQ(nothing.exit_code, 0) << nothing.output;
  EXPECT_THAT(nothing.output, HasSubstr("CANNOT COMPARE: the vLLM log holds no batch"));
  const std::string two_page = TempOutputPath("parity_two.html");
  const auto two =
      RunCli("parity" + kSetup + " --vllm-kv-events " + same + " --replicas 2 --html " + two_page);
  EXPECT_EQ(two.exit_code, 0) << two.output;
  EXPECT_THAT(two.output, HasSubstr("CANNOT COMPARE: the vLLM log has 1 replicas and the "
                                    "simulation 2"));
  // The page says it too, under the agreement.
  EXPECT_THAT(testing::ReadFile(two_page),
              HasSubstr("<b>Cannot compare:</b> the vLLM log has 1 replicas and the simulation 2"));
}

}  // namespace
}  // namespace prefixsim
