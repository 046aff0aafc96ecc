// The JSON report of a run that preempts (issue 33, area 3): its prefix_cache.preempted_* figures
// against independent counts from the per-request CSV of the same run (docs/semantics.md §12:
// a re-admission of a preempted request is recorded in the preempted_* fields).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/cli_runner.h"

namespace prefixsim {
namespace {

using ::prefixsim::testing::ReadFile;
using ::prefixsim::testing::RunCli;

struct CsvRow {
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  int64_t preemptions = 0;
  int64_t readmission_hit_tokens = 0;
  std::string skipped;
};

// The per-request CSV, by column name (docs/design.md §4.5).
std::vector<CsvRow> ReadRequestsCsv(const std::string& text) {
  std::vector<CsvRow> rows;
  for (const auto& cells : ::prefixsim::testing::ReadCsvRows(text)) {
    CsvRow row;
    row.prompt_tokens = std::stoll(cells.at("prompt_tokens"));
    row.output_tokens = std::stoll(cells.at("output_tokens"));
    row.preemptions = std::stoll(cells.at("preemptions"));
    row.readmission_hit_tokens = std::stoll(cells.at("readmission_hit_tokens"));
    row.skipped = cells.at("skipped");
    rows.push_back(row);
  }
  return rows;
}

// The sample chat trace on a pool of 400 blocks preempts (the same run as the golden file
// replay_chat_llama_preempting.json, checked here without it).
TEST(PreemptedReportTest, JsonPreemptedFiguresMatchTheRequestsCsv) {
  const std::string src = PREFIXSIM_SOURCE_DIR;
  const std::string base = ::prefixsim::testing::TempOutputPath("preempting");
  const auto r = RunCli("replay --trace " + src +
                        "/traces/sample_chat.jsonl --model llama-3.1-8b-layout --engine "
                        "llama-3.1-8b --policy new --num-gpu-blocks 400 --seed 3 --no-progress "
                        "--json " +
                        base + ".json --csv " + base + ".csv");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json j = nlohmann::json::parse(ReadFile(base + ".json"));
  const std::vector<CsvRow> rows = ReadRequestsCsv(ReadFile(base + ".csv"));
  ASSERT_FALSE(rows.empty());

  int64_t preemptions = 0;       // every preemption, served or not
  int64_t readmissions = 0;      // preemptions of served requests: each one re-admitted once
  int64_t first_admissions = 0;  // served requests, and skipped ones that ran before a preemption
  int64_t min_queries = 0, max_queries = 0;
  int64_t readmission_hits = 0;
  for (const CsvRow& row : rows) {
    preemptions += row.preemptions;
    readmission_hits += row.readmission_hit_tokens;
    if (row.preemptions == 0) {
      EXPECT_EQ(row.readmission_hit_tokens, 0);
    }
    if (row.skipped.empty()) {
      readmissions += row.preemptions;
      first_admissions += 1;
      min_queries += row.preemptions * row.prompt_tokens;
      max_queries += row.preemptions * (row.prompt_tokens + row.output_tokens - 1);
    } else if (row.preemptions > 0) {
      // Admitted, preempted, then found unable to fit the whole cache: never re-admitted.
      first_admissions += 1;
    }
  }
  ASSERT_GT(readmissions, 0) << "the run must preempt for this test to mean anything";

  const nlohmann::json& pc = j.at("prefix_cache");
  EXPECT_EQ(j.at("preemptions").get<int64_t>(), preemptions);
  EXPECT_EQ(pc.at("requests").get<int64_t>(), first_admissions);
  EXPECT_EQ(pc.at("preempted_requests").get<int64_t>(), readmissions);
  const int64_t queries = pc.at("preempted_queries").get<int64_t>();
  const int64_t hits = pc.at("preempted_hits").get<int64_t>();
  EXPECT_GE(queries, min_queries);
  EXPECT_LE(queries, max_queries);
  EXPECT_GT(hits, 0);
  EXPECT_LE(hits, queries);
  // Per request, the CSV's re-admission hits add up to the JSON's.
  EXPECT_EQ(readmission_hits, hits);
  EXPECT_DOUBLE_EQ(pc.at("preempted_hit_rate").get<double>(),
                   static_cast<double>(hits) / static_cast<double>(queries));
  // The non-preempted rate does not mix the re-admissions in.
  EXPECT_DOUBLE_EQ(pc.at("hit_rate").get<double>(),
                   static_cast<double>(pc.at("hits").get<int64_t>()) /
                       static_cast<double>(pc.at("queries").get<int64_t>()));
}

// Thrashing runs (pools too small for the agentic sample: some requests are admitted, preempted,
// then dropped as does_not_fit): the CSV's rows that were looked up add up to the JSON's first
// admissions, hits and every miss cause, whatever became of the request afterwards.
TEST(PreemptedReportTest, CsvFirstAdmissionsAddUpToTheJsonOnThrashingRuns) {
  const std::string src = PREFIXSIM_SOURCE_DIR;
  struct Case {
    std::string model, engine;
    int blocks;
  };
  for (const Case& c :
       {Case{"llama-3.1-8b", "llama-3.1-8b", 1000}, Case{"kimi-k3-like", "kimi-k3-dspark", 250}}) {
    SCOPED_TRACE(c.model);
    const std::string base = ::prefixsim::testing::TempOutputPath("thrashing");
    const auto r = RunCli("replay --trace " + src + "/traces/sample_agentic.jsonl --model " +
                          c.model + " --engine " + c.engine + " --policy new --num-gpu-blocks " +
                          std::to_string(c.blocks) + " --no-progress --json " + base +
                          ".json --csv " + base + ".csv");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const nlohmann::json j = nlohmann::json::parse(ReadFile(base + ".json"));
    const auto rows = ::prefixsim::testing::ReadCsvRows(ReadFile(base + ".csv"));
    const nlohmann::json& first = j.at("miss_causes").at("first_admissions");
    int64_t admitted = 0, dropped_after_admission = 0, queries = 0, hits = 0;
    std::map<std::string, int64_t> by_cause;
    for (const auto& row : rows) {
      if (row.at("miss_cause").empty()) {
        // Never looked up: no cause, and no number that reads as one.
        EXPECT_EQ(row.at("evicted_tokens"), "") << row.at("id");
        continue;
      }
      admitted += 1;
      if (row.at("skipped") == "does_not_fit") dropped_after_admission += 1;
      queries += std::stoll(row.at("prompt_tokens"));
      hits += std::stoll(row.at("hit_tokens"));
      for (const auto& [cause, tokens] : first.at("tokens_by_cause").items()) {
        if (cause != "hit") by_cause[cause] += std::stoll(row.at(cause + "_tokens"));
      }
    }
    ASSERT_GT(dropped_after_admission, 0) << "the run must drop admitted requests";
    const nlohmann::json& pc = j.at("prefix_cache");
    EXPECT_EQ(pc.at("requests").get<int64_t>(), admitted);
    EXPECT_EQ(pc.at("queries").get<int64_t>(), queries);
    EXPECT_EQ(pc.at("hits").get<int64_t>(), hits);
    for (const auto& [cause, tokens] : first.at("tokens_by_cause").items()) {
      if (cause != "hit") {
        EXPECT_EQ(by_cause[cause], tokens.get<int64_t>()) << cause;
      }
    }
  }
}

// Without miss attribution the CSV's cause columns are empty, not zeros.
TEST(PreemptedReportTest, CauseColumnsAreEmptyWithoutMissAttribution) {
  const std::string src = PREFIXSIM_SOURCE_DIR;
  const std::string base = ::prefixsim::testing::TempOutputPath("no_causes");
  const auto r = RunCli("replay --trace " + src +
                        "/traces/sample_chat.jsonl --model llama-3.1-8b-layout --engine "
                        "llama-3.1-8b --policy new --no-miss-causes --no-progress --csv " +
                        base + ".csv");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto rows = ::prefixsim::testing::ReadCsvRows(ReadFile(base + ".csv"));
  ASSERT_FALSE(rows.empty());
  for (const auto& row : rows) {
    EXPECT_EQ(row.at("miss_cause"), "");
    EXPECT_EQ(row.at("evicted_tokens"), "");
    EXPECT_EQ(row.at("compulsory_tokens"), "");
    EXPECT_NE(row.at("hit_tokens"), "");
  }
}

}  // namespace
}  // namespace prefixsim
