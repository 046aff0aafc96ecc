// `replay`/`compare` with --replicas and --router end to end (docs/design.md §4.1): a one-replica
// fleet is byte-identical to the plain engine, kv_aware beats round_robin on the shipped chat
// sample, the fleet JSON and CSV, and bad fleet input exits 2 naming the flag or field.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "tests/cli_runner.h"

namespace prefixsim {
namespace {

using ::prefixsim::testing::RunCli;

using ::prefixsim::testing::ReadFile;

std::string Temp(const std::string& name) {
  return ::testing::TempDir() + "/" + std::to_string(getpid()) + "_" + name;
}

const std::string kChat = std::string(PREFIXSIM_SOURCE_DIR) + "/traces/sample_chat.jsonl";
const char kKimi[] = " --model kimi-k3-like --engine kimi-k3-dspark --no-progress --no-wall-time";

TEST(FleetCliTest, OneReplicaIsByteIdenticalToThePlainReplay) {
  const std::string plain = Temp("plain.json"), one = Temp("one.json");
  const std::string plain_csv = Temp("plain.csv"), one_csv = Temp("one.csv");
  auto a = RunCli("replay --trace " + kChat + kKimi + " --policy old --json " + plain + " --csv " +
                  plain_csv);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  auto b =
      RunCli("replay --trace " + kChat + kKimi +
             " --policy old --replicas 1 --router kv_aware --json " + one + " --csv " + one_csv);
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_EQ(ReadFile(plain), ReadFile(one));
  EXPECT_EQ(ReadFile(plain_csv), ReadFile(one_csv));
  // The same summary, after a warning that the router routes nothing.
  ASSERT_GE(b.output.size(), a.output.size());
  EXPECT_EQ(b.output.substr(b.output.size() - a.output.size()), a.output);
  EXPECT_NE(b.output.substr(0, b.output.size() - a.output.size()).find("routes nothing"),
            std::string::npos)
      << b.output;
  EXPECT_EQ(nlohmann::json::parse(ReadFile(one)).count("fleet"), 0u);
}

// The chat sample has no session ids: the session router places none of its requests by session,
// and the text and JSON reports say so rather than passing least_loaded off as session affinity.
TEST(FleetCliTest, SessionOnATraceWithoutSessionsSaysWhereTheRequestsWent) {
  const std::string json = Temp("session.json");
  auto r = RunCli("replay --trace " + kChat + kKimi +
                  " --policy new --replicas 4 --router session --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(ReadFile(json));
  const int64_t requests = j["requests"].get<int64_t>();
  ASSERT_GT(requests, 0);
  EXPECT_EQ(j["fleet"]["router_fallback_requests"].get<int64_t>(), requests);
  EXPECT_NE(r.output.find(absl::StrCat("router session: ", requests,
                                       " requests without a session id went to the least "
                                       "loaded replica")),
            std::string::npos)
      << r.output;
}

double HitRate(const std::string& router, int replicas, const std::string& json) {
  auto r = RunCli("replay --trace " + kChat + kKimi + " --policy new --replicas " +
                  std::to_string(replicas) + " --router " + router + " --json " + json);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return nlohmann::json::parse(ReadFile(json))["prefix_cache"]["hit_rate"].get<double>();
}

TEST(FleetCliTest, KvAwareBeatsRoundRobinOnTheChatSample) {
  const double rr = HitRate("round_robin", 4, Temp("rr.json"));
  const double kv = HitRate("kv_aware", 4, Temp("kv.json"));
  EXPECT_GT(kv, rr + 0.05) << "kv_aware " << kv << " vs round_robin " << rr;
  const auto j = nlohmann::json::parse(ReadFile(Temp("kv.json")));
  ASSERT_TRUE(j.contains("fleet"));
  EXPECT_EQ(j["fleet"]["replicas"], 4);
  EXPECT_EQ(j["fleet"]["router"], "kv_aware");
  EXPECT_EQ(j["fleet"]["overlap_weight"], 1.0);
  EXPECT_EQ(j["fleet"]["per_replica"].size(), 4u);
  int64_t requests = 0;
  for (const auto& r : j["fleet"]["per_replica"]) requests += r["requests"].get<int64_t>();
  EXPECT_EQ(requests, j["requests"].get<int64_t>());
  EXPECT_GE(j["fleet"]["imbalance"].get<double>(), 1.0);
}

TEST(FleetCliTest, CsvNamesTheReplicaAndCheckInvariantsVerifiesTheRouter) {
  const std::string json = Temp("fleet_inv.json"), csv = Temp("fleet_inv.csv");
  auto r = RunCli("replay --trace " + kChat + kKimi +
                  " --policy old --replicas 3 --router kv_aware_unaligned --check-invariants "
                  "--json " +
                  json + " --csv " + csv);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Fleet: 3 replicas, router kv_aware_unaligned"), std::string::npos);
  const auto j = nlohmann::json::parse(ReadFile(json));
  EXPECT_EQ(j["fleet"]["router_index_checks"].get<int64_t>(), 3 * j["requests"].get<int64_t>());
  std::istringstream lines(ReadFile(csv));
  std::string header, row;
  std::getline(lines, header);
  EXPECT_TRUE(absl::EndsWith(header, ",replica,routing_regret_tokens")) << header;
  int rows = 0;
  int64_t regret = 0;
  while (std::getline(lines, row)) {
    const std::vector<std::string> cells = absl::StrSplit(row, ',');
    ASSERT_GE(cells.size(), 2u) << row;
    const int replica = std::stoi(cells[cells.size() - 2]);
    EXPECT_TRUE(replica >= 0 && replica < 3) << row;
    regret += std::stoll(cells.back());
    ++rows;
  }
  EXPECT_EQ(regret, j["fleet"]["routing_regret_tokens"].get<int64_t>());
  EXPECT_EQ(rows, j["requests"].get<int>());
}

TEST(FleetCliTest, CompareReportsReplicasPerPolicy) {
  const std::string json = Temp("fleet_compare.json");
  auto r = RunCli("compare --trace " + kChat + kKimi +
                  " --policies old,new --replicas 2 --router session --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("replicas"), std::string::npos) << r.output;
  const auto j = nlohmann::json::parse(ReadFile(json));
  for (const auto& p : j["policies"]) EXPECT_EQ(p["fleet"]["replicas"], 2);
  EXPECT_EQ(j["deltas"][0]["replicas"], 0);
}

TEST(FleetCliTest, EngineJsonCarriesReplicasAndRouter) {
  const std::string engine = Temp("fleet_engine.json");
  // TP 4: kimi-k3-like's shapes are per rank at TP 4.
  std::ofstream(engine)
      << R"({"kv_cache_bytes": 68719476736, "replicas": 2, "tensor_parallel_size": 4,
    "router": {"name": "kv_aware", "overlap_weight": 2.5},
    "speculative": {"method": "dspark", "num_speculative_tokens": 3,
                    "acceptance": {"model": "per_position", "rates": [0.8, 0.6, 0.4]}}})";
  const std::string json = Temp("fleet_engine_out.json");
  auto r = RunCli("replay --trace " + kChat + " --model kimi-k3-like --engine " + engine +
                  " --no-progress --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(ReadFile(json));
  EXPECT_EQ(j["fleet"]["replicas"], 2);
  EXPECT_EQ(j["fleet"]["overlap_weight"], 2.5);
  // Flags override the JSON.
  r = RunCli("replay --trace " + kChat + " --model kimi-k3-like --engine " + engine +
             " --no-progress --replicas 3 --router least_loaded --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  j = nlohmann::json::parse(ReadFile(json));
  EXPECT_EQ(j["fleet"]["replicas"], 3);
  EXPECT_EQ(j["fleet"]["router"], "least_loaded");
}

struct BadCase {
  const char* name;
  std::string args;
  std::string engine_json;  // non-empty: written to a file and passed as --engine
  const char* expect;
};

// --threads changes the wall time only: replay and compare give the same files on 1 and 3
// threads (compare's policies and their replicas share the pool).
TEST(FleetCliTest, ThreadsLeaveEveryReportByteIdentical) {
  for (const char* cmd : {"replay --policy new", "compare --policies old,new"}) {
    std::string json[2], csv[2];
    const int threads[2] = {1, 3};
    for (int i = 0; i < 2; ++i) {
      const std::string tag = std::string(cmd).substr(0, 6) + std::to_string(threads[i]);
      const std::string j = Temp(tag + ".json"), c = Temp(tag + ".csv");
      auto r = RunCli(std::string(cmd) + " --trace " + kChat + kKimi +
                      " --replicas 4 --router kv_aware --router-view lossy --kv-event-loss 0.2" +
                      " --threads " + std::to_string(threads[i]) + " --json " + j +
                      (std::string(cmd).rfind("replay", 0) == 0 ? " --csv " + c : ""));
      ASSERT_EQ(r.exit_code, 0) << r.output;
      json[i] = ReadFile(j);
      if (std::string(cmd).rfind("replay", 0) == 0) csv[i] = ReadFile(c);
    }
    EXPECT_FALSE(json[0].empty());
    EXPECT_EQ(json[0], json[1]) << cmd;
    EXPECT_EQ(csv[0], csv[1]) << cmd;
  }
}

TEST(FleetCliTest, BadFleetInputExitsTwoNamingTheFlagOrField) {
  const std::vector<BadCase> cases = {
      {"zero_replicas", "--replicas 0", "", "--replicas: "},
      {"word_replicas", "--replicas many", "", "--replicas: "},
      {"unknown_router", "--router nope", "", "--router: unknown router 'nope'"},
      {"negative_weight", "--router kv_aware --overlap-weight -1", "",
       "--overlap-weight: '-1' is not 0 or more"},
      {"zero_slo", "--replicas auto --ttft-slo-ms 0", "", "--ttft-slo-ms: '0' is not positive"},
      {"negative_threads", "--replicas 2 --threads -1", "",
       "--threads: '-1' is not a thread count"},
      {"json_replicas", "", R"({"kv_cache_bytes": 1073741824, "replicas": 0})", "field 'replicas'"},
      {"json_router", "", R"({"kv_cache_bytes": 1073741824, "router": "nope"})",
       "field 'router': unknown router 'nope'"},
      {"json_weight", "",
       R"({"kv_cache_bytes": 1073741824, "router": {"name": "kv_aware", "overlap_weight": -2}})",
       "router.overlap_weight"},
  };
  for (const BadCase& c : cases) {
    std::string engine = "kimi-k3-dspark";
    if (!c.engine_json.empty()) {
      engine = Temp(std::string(c.name) + ".json");
      std::ofstream(engine) << c.engine_json;
    }
    auto r = RunCli("replay --trace " + kChat + " --model kimi-k3-like --engine " + engine +
                    " --no-progress " + c.args);
    EXPECT_EQ(r.exit_code, 2) << c.name << ": " << r.output;
    EXPECT_NE(r.output.find(c.expect), std::string::npos) << c.name << ": " << r.output;
    if (!c.engine_json.empty()) {
      EXPECT_NE(r.output.find(engine), std::string::npos) << r.output;
    }
  }
}

// The approximate view's bounds: 0 would read as "unset" (as many blocks as the fleet holds,
// never forget), so it is refused, from the flags and from the engine JSON, saying what leaving
// it out means.
TEST(FleetCliTest, ZeroRouterBoundsAreRefusedNotReadAsUnbounded) {
  const std::string base = "replay --trace " + kChat + kKimi +
                           " --policy new --replicas 2 --router kv_aware --router-view approximate";
  auto blocks = RunCli(base + " --router-max-blocks 0");
  EXPECT_EQ(blocks.exit_code, 2) << blocks.output;
  EXPECT_NE(blocks.output.find("--router-max-blocks: 0 must be positive (leave it out for"),
            std::string::npos)
      << blocks.output;
  auto ttl = RunCli(base + " --router-ttl-s 0");
  EXPECT_EQ(ttl.exit_code, 2) << ttl.output;
  EXPECT_NE(ttl.output.find("--router-ttl-s: 0 must be positive (leave it out for a router that "
                            "never forgets)"),
            std::string::npos)
      << ttl.output;
  for (const char* field : {"max_blocks", "ttl_s"}) {
    const std::string engine = Temp(std::string("zero_") + field + ".json");
    auto doc = nlohmann::json::parse(
        ReadFile(std::string(PREFIXSIM_SOURCE_DIR) + "/configs/engines/kimi-k3-dspark.json"));
    doc["router"] = {{"view", "approximate"}, {field, 0}};
    std::ofstream(engine) << doc.dump();
    auto r = RunCli("replay --trace " + kChat +
                    " --model kimi-k3-like --no-progress --no-wall-time --policy new "
                    "--replicas 2 --router kv_aware --engine " +
                    engine);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find(std::string("field 'router.") + field + "': must be in ["),
              std::string::npos)
        << r.output;
  }
  EXPECT_EQ(RunCli(base + " --router-max-blocks 500 --router-ttl-s 30").exit_code, 0);
}

// "nan" is not a number, whichever fleet flag it is given to (not "negative").
TEST(FleetCliTest, NanIsNotANumber) {
  const std::string base = "replay --trace " + kChat + kKimi + " --policy new --replicas 2";
  for (const char* flag :
       {"--overlap-weight", "--ttft-slo-ms", "--kv-event-delay-ms", "--kv-event-loss"}) {
    auto r = RunCli(base + " " + flag + " nan");
    EXPECT_EQ(r.exit_code, 2) << flag << ": " << r.output;
    EXPECT_NE(r.output.find("'nan' is not a number"), std::string::npos)
        << flag << ": " << r.output;
    EXPECT_EQ(r.output.find("negative"), std::string::npos) << flag << ": " << r.output;
  }
}

}  // namespace
}  // namespace prefixsim
