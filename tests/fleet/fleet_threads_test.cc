// A fleet's replicas step in parallel between arrivals (sim/fleet/fleet.cc, RunReplicas): the
// reports must not depend on the number of threads. Every router and every router view, with
// miss attribution, the routing regret, evictions and speculative decoding on, under 1, 2, 3
// and 4 threads: the JSON summary and the per-request CSV byte for byte.
#include <gtest/gtest.h>

#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "prefixsim/engine.h"
#include "prefixsim/kv_event_sink.h"
#include "prefixsim/replay.h"
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
  RequestCsvLayout layout;
  layout.fleet = true;
  WriteRequestsCsvHeader(layout, csv);
  for (const RequestRecord& r : result->per_request) WriteRequestCsvRow(r, layout, csv);
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

// KV event sinks (include/prefixsim/kv_event_sink.h): one that writes as it is called keeps the
// replicas on one thread; one that delivers in run order gets Deliver on the caller's thread,
// and what it delivers is, in order, what one thread would have produced.
class StepLogSink final : public KvEventSink {
 public:
  struct Shared {
    std::mutex mu;
    std::set<std::thread::id> threads;               // of every call but Deliver
    std::vector<std::pair<int, int64_t>> delivered;  // (replica, step time), in Deliver order
    std::set<std::thread::id> deliver_threads;
  };
  StepLogSink(int replica, bool in_run_order, Shared* shared)
      : replica_(replica), in_run_order_(in_run_order), shared_(shared) {}
  void OnCachingRequest(const Request&, const ChunkHash*, int64_t) override { Seen(); }
  void OnBlockStored(int, const ChunkHash&) override { Seen(); }
  void OnBlockRemoved(int, const ChunkHash&) override { Seen(); }
  void OnStepScheduled(int64_t now_ns) override {
    Seen();
    held_.push_back(now_ns);
    if (!in_run_order_) Deliver();
  }
  bool DeliversInRunOrder() const override { return in_run_order_; }
  void Deliver() override {
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->deliver_threads.insert(std::this_thread::get_id());
    for (int64_t t : held_) shared_->delivered.emplace_back(replica_, t);
    held_.clear();
  }

 private:
  void Seen() {
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->threads.insert(std::this_thread::get_id());
  }
  int replica_;
  bool in_run_order_;
  Shared* shared_;
  std::vector<int64_t> held_;
};

void ReplayWithSinks(bool in_run_order, int threads, StepLogSink::Shared* shared) {
  std::vector<std::unique_ptr<StepLogSink>> sinks;
  VectorTrace trace(Conversations());
  ReplayOptions options;
  options.seed = 9;
  options.threads = threads;
  options.kv_event_sink = [&](int replica) -> KvEventSink* {
    sinks.push_back(std::make_unique<StepLogSink>(replica, in_run_order, shared));
    return sinks.back().get();
  };
  auto result = Replay(HybridPlan(90), ModelSpec{}, Fleet("round_robin", ""), trace, options);
  ASSERT_TRUE(result.ok()) << result.status();
  for (auto& sink : sinks) sink->Deliver();
}

TEST(FleetThreadsTest, KvEventSinksGetTheirCallsInTheOrderOfOneThread) {
  StepLogSink::Shared at_once;
  ReplayWithSinks(/*in_run_order=*/false, 4, &at_once);
  EXPECT_EQ(at_once.threads.size(), 1u) << "a sink that writes as called must stay on one thread";
  ASSERT_GT(at_once.delivered.size(), 100u);

  StepLogSink::Shared held;
  ReplayWithSinks(/*in_run_order=*/true, 4, &held);
  EXPECT_EQ(held.deliver_threads, std::set<std::thread::id>{std::this_thread::get_id()});
  EXPECT_EQ(held.delivered, at_once.delivered);
}

}  // namespace
}  // namespace prefixsim
