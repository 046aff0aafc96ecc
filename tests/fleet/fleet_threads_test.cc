// A fleet's replicas step in parallel between arrivals (sim/fleet/fleet.cc, RunReplicas): the
// reports must not depend on the number of threads. Every router and every router view, with
// miss attribution, the routing regret, evictions and speculative decoding on, under 1, 2, 3
// and 4 threads: the JSON summary and the per-request CSV byte for byte.
#include <gtest/gtest.h>

#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "prefixsim/engine.h"
#include "sim/fleet/router.h"
#include "sim/report/report.h"
#include "tests/engine/engine_test_util.h"
#include "tests/fleet/fleet_test_util.h"

namespace prefixsim {
namespace {

using testing_engine::Req;
using testing_engine::SmallEngine;
using testing_engine::VectorTrace;
using testing_fleet::HybridPlan;
using testing_kv::Concat;
using testing_kv::Iota;

std::vector<Request> Conversations() {
  std::vector<Request> reqs;
  std::mt19937_64 rng(23);
  double arrival_ms = 0;
  for (int i = 0; i < 240; ++i) {
    const int prefix = static_cast<int>(rng() % 6);
    reqs.push_back(Req(i, arrival_ms,
                       Concat(Iota(16 * static_cast<int>(1 + rng() % 8), 1000 * (prefix + 1)),
                              Iota(1 + static_cast<int>(rng() % 40), 100000 + 100 * i)),
                       1 + static_cast<int>(rng() % 30)));
    // Bursts (several arrivals at one instant), runs a step apart and long gaps.
    const uint64_t gap = rng() % 10;
    arrival_ms += gap < 2 ? 0.0 : gap < 8 ? 0.5 * static_cast<double>(gap) : 30.0;
  }
  return reqs;
}

struct Report {
  std::string json, csv;
};

Report ReplayOn(const EngineConfig& engine, int threads) {
  VectorTrace trace(Conversations());
  ReplayOptions options;
  options.seed = 9;
  options.threads = threads;
  auto result = Replay(HybridPlan(90), ModelSpec{}, engine, trace, options);
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) return {};
  EXPECT_GT(result->evicted_blocks, 0);
  ReportOptions report;
  report.include_wall_time = false;
  std::ostringstream csv;
  WriteRequestsCsvHeader(/*fleet=*/true, csv);
  for (const RequestRecord& r : result->per_request) WriteRequestCsvRow(r, /*fleet=*/true, csv);
  return Report{ReplayResultToJson(*result, report).dump(1), csv.str()};
}

EngineConfig Fleet(const std::string& router, const std::string& view) {
  EngineConfig e = SmallEngine(64);
  e.max_num_seqs = 4;
  e.speculative.enabled = true;
  e.speculative.method = "eagle";
  e.speculative.num_speculative_tokens = 2;
  e.speculative.acceptance.model = "geometric";
  e.speculative.acceptance.rates = {0.6};
  e.fleet.replicas = 5;
  e.fleet.router = router;
  e.fleet.view.kind = view;
  if (view == "delayed") e.fleet.view.event_delay_ms = 2;
  if (view == "lossy") e.fleet.view.event_loss = 0.3;
  if (view == "approximate") {
    e.fleet.view.max_blocks = 40;
    e.fleet.view.ttl_s = 0.05;
  }
  return e;
}

TEST(FleetThreadsTest, ReportsAreTheSameForEveryThreadCount) {
  std::vector<std::pair<std::string, std::string>> cases;
  for (const std::string& router : fleet::RegisteredRouters()) cases.emplace_back(router, "");
  for (const char* view : {"delayed", "lossy", "attention_only", "approximate"}) {
    cases.emplace_back("kv_aware", view);
  }
  for (const auto& [router, view] : cases) {
    SCOPED_TRACE(router + (view.empty() ? "" : " on " + view));
    const EngineConfig engine = Fleet(router, view);
    const Report one = ReplayOn(engine, 1);
    ASSERT_FALSE(one.json.empty());
    // The case is a fleet that works: every replica served, some requests hit.
    EXPECT_NE(one.json.find("\"routing_regret_tokens\""), std::string::npos);
    for (int threads : {2, 3, 4}) {
      const Report many = ReplayOn(engine, threads);
      EXPECT_EQ(one.json, many.json) << threads << " threads";
      EXPECT_EQ(one.csv, many.csv) << threads << " threads";
    }
  }
}

}  // namespace
}  // namespace prefixsim
