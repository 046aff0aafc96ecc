// The fleet (docs/design.md §2 "Fleet"): N engine replicas behind a router on one clock. Each
// router's choice on small hand-made cases, the fleet's index against the replicas' own
// lookups (docs/semantics.md §9), invariants per replica, and --replicas auto.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "prefixsim/engine.h"
#include "sim/fleet/replay.h"
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
using testing_kv::Group;
using testing_kv::Iota;
using testing_kv::Plan;
using testing_kv::Unitary;

ReplayResult MustReplayFleet(const KvPlan& plan, EngineConfig engine, std::vector<Request> reqs,
                             int replicas, const std::string& router, uint64_t seed = 0) {
  engine.fleet.replicas = replicas;
  engine.fleet.router = router;
  VectorTrace trace(std::move(reqs));
  ReplayOptions options;
  options.seed = seed;
  options.check_invariants = true;  // KV invariants per replica; the fleet index verified
  auto result = Replay(plan, ModelSpec{}, engine, trace, options);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *std::move(result) : ReplayResult{};
}

std::vector<int> Replicas(const ReplayResult& r) {
  std::vector<int> out;
  for (const RequestRecord& rec : r.per_request) out.push_back(rec.replica);
  return out;
}

TEST(FleetTest, EveryRegisteredRouterIsListedAndBuilds) {
  const std::vector<std::string> names = fleet::RegisteredRouters();
  for (const char* want :
       {"round_robin", "random", "least_loaded", "session", "kv_aware", "kv_aware_unaligned"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  }
  fleet::RouterConfig config;
  config.num_replicas = 3;
  for (const std::string& name : names) {
    auto router = fleet::NewRouter(name, config);
    ASSERT_TRUE(router.ok()) << name;
    EXPECT_EQ((*router)->name(), name);
  }
  auto bad = fleet::NewRouter("nope", config);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(bad.status().message().find("kv_aware"), std::string::npos);
}

TEST(FleetTest, RoundRobinCyclesInArrivalOrder) {
  std::vector<Request> reqs;
  for (int i = 0; i < 7; ++i) reqs.push_back(Req(i, i * 10.0, Iota(20, 100 * i + 1), 4));
  const ReplayResult r = MustReplayFleet(Unitary(LayerKind::kFullAttention, 4, 64), SmallEngine(64),
                                         reqs, 3, "round_robin");
  EXPECT_EQ(Replicas(r), (std::vector<int>{0, 1, 2, 0, 1, 2, 0}));
  ASSERT_TRUE(r.fleet.has_value());
  EXPECT_EQ(r.fleet->replicas, 3);
  EXPECT_EQ(r.fleet->per_replica[0].requests, 3);
  EXPECT_EQ(r.fleet->per_replica[2].requests, 2);
  EXPECT_DOUBLE_EQ(r.fleet->imbalance, 3.0 / (7.0 / 3.0));
  EXPECT_EQ(r.finished_requests, 7);
}

// ReplayTuning::skip_teardown (set by the replay and compare commands) leaves the simulated state
// to the process exit: the result is the same report, byte for byte, fleet or not.
TEST(FleetTest, SkipTeardownChangesNothingInTheResult) {
  std::vector<Request> reqs;
  for (int i = 0; i < 40; ++i) reqs.push_back(Req(i, i * 5.0, Iota(24, 7 * (i % 5) + 1), 6));
  for (int replicas : {1, 3}) {
    std::string reports[2];
    for (int skip = 0; skip < 2; ++skip) {
      EngineConfig engine = SmallEngine(64);
      engine.fleet.replicas = replicas;
      engine.fleet.router = "kv_aware";
      VectorTrace trace(reqs);
      ReplayTuning tuning;
      tuning.skip_teardown = skip == 1;
      auto result = Replay(Unitary(LayerKind::kFullAttention, 4, 64), ModelSpec{}, engine, trace,
                           ReplayOptions{}, tuning);
      ASSERT_TRUE(result.ok()) << result.status();
      ReportOptions report;
      report.include_wall_time = false;
      reports[skip] = ReplayResultToJson(*result, report).dump();
    }
    EXPECT_EQ(reports[0], reports[1]) << replicas << " replicas";
    EXPECT_NE(reports[0].find("\"finished_requests\":40"), std::string::npos) << reports[0];
  }
}

TEST(FleetTest, RandomIsSeededAndUsesEveryReplica) {
  std::vector<Request> reqs;
  for (int i = 0; i < 60; ++i) reqs.push_back(Req(i, i * 10.0, Iota(12, 100 * i + 1), 2));
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 4, 64);
  const auto a = Replicas(MustReplayFleet(plan, SmallEngine(64), reqs, 4, "random", 7));
  const auto b = Replicas(MustReplayFleet(plan, SmallEngine(64), reqs, 4, "random", 7));
  const auto c = Replicas(MustReplayFleet(plan, SmallEngine(64), reqs, 4, "random", 8));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(std::set<int>(a.begin(), a.end()).size(), 4u);
}

TEST(FleetTest, LeastLoadedCountsOutstandingTokens) {
  // t=0: a 40-token prompt goes to replica 0 (tie: lowest index); a 10-token one arriving at the
  // same instant goes to replica 1 (40 outstanding on replica 0). Both finish long before t=1 s;
  // then the replicas are empty again and replica 0 wins the tie.
  std::vector<Request> reqs = {Req(0, 0, Iota(40, 1), 2), Req(1, 0, Iota(10, 500), 2),
                               Req(2, 1000, Iota(10, 900), 2)};
  const ReplayResult r = MustReplayFleet(Unitary(LayerKind::kFullAttention, 4, 64), SmallEngine(64),
                                         reqs, 2, "least_loaded");
  EXPECT_EQ(Replicas(r), (std::vector<int>{0, 1, 0}));
}

TEST(FleetTest, LeastLoadedSendsArrivalsAwayFromABusyReplica) {
  // Three arrivals at one instant on three replicas: each goes to an empty replica.
  std::vector<Request> reqs = {Req(0, 0, Iota(30, 1), 8), Req(1, 0, Iota(30, 100), 8),
                               Req(2, 0, Iota(30, 200), 8), Req(3, 0, Iota(5, 300), 8)};
  const ReplayResult r = MustReplayFleet(Unitary(LayerKind::kFullAttention, 4, 64), SmallEngine(64),
                                         reqs, 3, "least_loaded");
  EXPECT_EQ(Replicas(r), (std::vector<int>{0, 1, 2, 0}));
}

TEST(FleetTest, SessionKeepsEverySessionOnOneReplica) {
  std::vector<Request> reqs;
  for (int i = 0; i < 48; ++i) {
    Request q = Req(i, i * 5.0, Iota(16 + i, 1000 * (i % 6) + 1), 3);
    if (i % 8 != 7) q.session_id = absl::StrCat("s", i % 6);  // every 8th has no session
    reqs.push_back(q);
  }
  const ReplayResult r = MustReplayFleet(Unitary(LayerKind::kFullAttention, 4, 200),
                                         SmallEngine(64), reqs, 4, "session");
  std::map<std::string, std::set<int>> where;
  for (size_t i = 0; i < reqs.size(); ++i) {
    if (!reqs[i].session_id.empty()) where[reqs[i].session_id].insert(r.per_request[i].replica);
  }
  EXPECT_EQ(where.size(), 6u);
  std::set<int> used;
  for (const auto& [session, replicas] : where) {
    EXPECT_EQ(replicas.size(), 1u) << session;
    used.insert(*replicas.begin());
  }
  EXPECT_GT(used.size(), 1u);  // 6 sessions do not all hash to one of 4 replicas
  // The requests without a session went to the least loaded replica, and the report says how many.
  ASSERT_TRUE(r.fleet.has_value());
  EXPECT_EQ(r.fleet->router_fallback_requests, 6);
  EXPECT_NE(r.fleet->router_fallback.find("without a session id"), std::string::npos);
  for (Request& q : reqs) q.session_id = "s";
  const ReplayResult all = MustReplayFleet(Unitary(LayerKind::kFullAttention, 4, 200),
                                           SmallEngine(64), reqs, 4, "session");
  EXPECT_EQ(all.fleet->router_fallback_requests, 0);
  EXPECT_TRUE(all.fleet->router_fallback.empty());
}

// The session router's consistent-hash ring (sim/fleet/routers/session.cc): 64 points per replica
// r at Mix(r << 32 | v), v < 64, and a session at Mix(FNV-1a(session id)), where Mix is the
// splitmix64 finalizer; a session goes to the first point at or after its hash, and a hash past
// the last point wraps around to the first point of the ring. The ring is rebuilt here from that
// description and every session id s0..s9999 must land where it says, the wrapped ones included.
// Eight replicas: with fewer, replica 0 holds both the first point (Mix(0) = 0) and the last.
TEST(FleetTest, SessionRingWrapsAroundToItsFirstPoint) {
  auto mix = [](uint64_t x) {
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  };
  auto session_hash = [&](const std::string& id) {
    uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a, 64 bits
    for (unsigned char c : id) h = (h ^ c) * 0x100000001b3ULL;
    return mix(h);
  };
  constexpr int kReplicas = 8;
  std::map<uint64_t, int> ring;  // point -> replica
  for (int r = 0; r < kReplicas; ++r) {
    for (uint64_t v = 0; v < 64; ++v) ring[mix((static_cast<uint64_t>(r) << 32) | v)] = r;
  }
  ASSERT_EQ(ring.size(), 64u * kReplicas);
  const int first = ring.begin()->second, last = ring.rbegin()->second;
  ASSERT_NE(first, last) << "the wrap-around would not show";
  fleet::RouterConfig config;
  config.num_replicas = kReplicas;
  auto router = fleet::NewRouter("session", config);
  ASSERT_TRUE(router.ok()) << router.status();
  std::vector<std::unique_ptr<Simulator>> replicas;  // unused: every request has a session
  fleet::FleetView view(&replicas, /*overlaps=*/nullptr);
  int wrapped = 0;
  for (int i = 0; i < 10000; ++i) {
    Request q;
    q.session_id = absl::StrCat("s", i);
    const auto it = ring.lower_bound(session_hash(q.session_id));
    const int want = it == ring.end() ? first : it->second;
    wrapped += it == ring.end() ? 1 : 0;
    ASSERT_EQ((*router)->Route(q, view), want) << q.session_id;
  }
  // Some of them hash past the last point (the arc from it to 2^64 is about 0.08% of the ring).
  EXPECT_GT(wrapped, 0);
}

TEST(FleetTest, KvAwareFollowsTheCachedPrefix) {
  // Two conversations with distinct 32-token prefixes. Turn 1 of each lands on an empty replica
  // (the second by load); turn 2 of each goes back to the replica that caches its prefix, although
  // round_robin would swap them.
  const auto p = Iota(32, 1), q = Iota(32, 5000);
  std::vector<Request> reqs = {
      Req(0, 0, Concat(p, Iota(5, 100)), 2), Req(1, 0, Concat(q, Iota(5, 200)), 2),
      Req(2, 1000, Concat(q, Iota(9, 300)), 2), Req(3, 1001, Concat(p, Iota(9, 400)), 2)};
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 4, 64);
  const ReplayResult kv = MustReplayFleet(plan, SmallEngine(64), reqs, 2, "kv_aware");
  EXPECT_EQ(Replicas(kv), (std::vector<int>{0, 1, 1, 0}));
  EXPECT_EQ(kv.per_request[2].hit_tokens, 32);
  EXPECT_EQ(kv.per_request[3].hit_tokens, 32);
  EXPECT_EQ(kv.fleet->router_index_checks, 4 * 2);
  const ReplayResult rr = MustReplayFleet(plan, SmallEngine(64), reqs, 2, "round_robin");
  EXPECT_EQ(Replicas(rr), (std::vector<int>{0, 1, 0, 1}));
  EXPECT_EQ(rr.prefix_cache.hits, 0);
  EXPECT_EQ(kv.prefix_cache.hits, 64);
}

TEST(FleetTest, KvAwareWeighsOverlapAgainstLoad) {
  // Replica 0 caches a 32-token prefix but is busy with a long prompt; with overlap weight 0 the
  // router looks at load only and picks the idle replica 1, with weight 1 the saved 32 tokens
  // are outweighed by replica 0's outstanding work as well.
  const auto p = Iota(32, 1);
  std::vector<Request> reqs = {Req(0, 0, Concat(p, Iota(4, 100)), 1),
                               Req(1, 1000, Iota(400, 9000), 50),
                               Req(2, 1000, Concat(p, Iota(4, 200)), 1)};
  EngineConfig e = SmallEngine(16);
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 4, 256);
  // Request 1 goes to replica 0 (tie on cost, tie on load: lowest index), so replica 0 holds the
  // prefix and ~400 outstanding tokens when request 2 arrives.
  e.fleet.overlap_weight = 1;
  EXPECT_EQ(Replicas(MustReplayFleet(plan, e, reqs, 2, "kv_aware"))[2], 1);
  // With a heavy overlap weight, the saved prefix wins over the load.
  e.fleet.overlap_weight = 100;
  EXPECT_EQ(Replicas(MustReplayFleet(plan, e, reqs, 2, "kv_aware"))[2], 0);
}

TEST(FleetTest, MirrorsEqualTheReplicasLookupsOnRandomHybridWorkloads) {
  for (const char* router : {"kv_aware", "kv_aware_unaligned"}) {
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      std::mt19937_64 rng(seed);
      std::vector<Request> reqs;
      for (int i = 0; i < 60; ++i) {
        const int prefix = static_cast<int>(rng() % 4);
        reqs.push_back(Req(i, i * 0.4,
                           Concat(Iota(8 * static_cast<int>(rng() % 12), 1000 * (prefix + 1)),
                                  Iota(1 + static_cast<int>(rng() % 30), 100000 + 100 * i)),
                           1 + static_cast<int>(rng() % 12)));
      }
      EngineConfig e = SmallEngine(48);
      e.max_num_seqs = 3;
      e.speculative.enabled = seed != 2;
      e.speculative.method = "eagle";
      e.speculative.num_speculative_tokens = 2;
      e.speculative.acceptance.model = "geometric";
      e.speculative.acceptance.rates = {0.6};
      // A small pool: evictions and preemptions exercise the remove events.
      const ReplayResult r = MustReplayFleet(HybridPlan(40), e, reqs, 3, router, seed);
      SCOPED_TRACE(std::string(router) + " seed " + std::to_string(seed));
      EXPECT_EQ(r.fleet->router_index_checks, 60 * 3);
      EXPECT_EQ(r.finished_requests + r.skipped_does_not_fit + r.skipped_prompt_too_long +
                    r.skipped_empty_prompt,
                60);
      EXPECT_GT(r.evicted_blocks, 0);
    }
  }
}

// Fleet::StartStep runs a replica's steps that end before the next arrival back to back. The
// reports and every request's record must equal those of a fleet that queues every step, with
// same-time step ends and arrivals (constant 1 ms steps, arrivals on a 0.5 ms grid), speculative
// decoding (each replica's own acceptance draws), a small pool (evictions, preemptions) and
// every router.
// Every step takes exactly 1 ms, whatever its size (a table that is flat on both axes).
std::string FlatOneMsStepTable() {
  const std::string path = ::testing::TempDir() + "/" + std::to_string(getpid()) + "_flat_1ms.csv";
  std::ofstream out(path);
  out << "num_tokens,context_tokens,time_us\n1,1,1000\n1,10000000,1000\n"
         "1000000,1,1000\n1000000,10000000,1000\n";
  return path;
}

// 80 requests sharing one of three prefixes, a few steps apart.
std::vector<Request> SharedPrefixRequests() {
  std::vector<Request> reqs;
  std::mt19937_64 rng(11);
  double arrival_ms = 0;
  for (int i = 0; i < 80; ++i) {
    const int prefix = static_cast<int>(rng() % 3);
    reqs.push_back(Req(i, arrival_ms,
                       Concat(Iota(8 * static_cast<int>(rng() % 10), 1000 * (prefix + 1)),
                              Iota(1 + static_cast<int>(rng() % 20), 100000 + 100 * i)),
                       1 + static_cast<int>(rng() % 40)));
    // Arrivals a few steps apart, on the steps' half-millisecond grid, so that a busy replica's
    // step often ends at an arrival (the arrival goes first); now and then a long gap.
    arrival_ms += rng() % 6 == 0 ? 40.0 : 0.5 * static_cast<double>(1 + rng() % 8);
  }
  return reqs;
}

// SharedPrefixRequests replayed on HybridPlan(40) under `tuning` (seed 5); *report gets the
// JSON summary without wall time.
ReplayResult ReplayUnderTuning(const std::vector<Request>& reqs, const EngineConfig& engine,
                               const ReplayTuning& tuning, std::string* report) {
  VectorTrace trace(reqs);
  ReplayOptions options;
  options.seed = 5;
  auto result = Replay(HybridPlan(40), ModelSpec{}, engine, trace, options, tuning);
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) return ReplayResult{};
  ReportOptions json;
  json.include_wall_time = false;
  *report = ReplayResultToJson(*result, json).dump();
  return *std::move(result);
}

TEST(FleetTest, RunningAReplicaAheadChangesNothing) {
  const std::vector<Request> reqs = SharedPrefixRequests();
  const std::string table = FlatOneMsStepTable();
  for (const char* router : {"round_robin", "least_loaded", "kv_aware", "random"}) {
    for (int replicas : {1, 3}) {
      std::string reports[2];
      std::vector<RequestRecord> records[2];
      for (int ahead = 0; ahead < 2; ++ahead) {
        EngineConfig e = SmallEngine(48);
        e.cost_model.table_path = table;
        e.max_num_seqs = 3;
        e.speculative.enabled = true;
        e.speculative.method = "eagle";
        e.speculative.num_speculative_tokens = 2;
        e.speculative.acceptance.model = "geometric";
        e.speculative.acceptance.rates = {0.6};
        e.fleet.replicas = replicas;
        e.fleet.router = router;
        ReplayTuning tuning;
        tuning.replica_run_ahead = ahead == 1;
        const ReplayResult result = ReplayUnderTuning(reqs, e, tuning, &reports[ahead]);
        records[ahead] = result.per_request;
        EXPECT_GT(result.evicted_blocks, 0);
      }
      SCOPED_TRACE(std::string(router) + ", " + std::to_string(replicas) + " replicas");
      EXPECT_EQ(reports[0], reports[1]);
      ASSERT_EQ(records[0].size(), records[1].size());
      for (size_t i = 0; i < records[0].size(); ++i) {
        EXPECT_EQ(records[0][i].replica, records[1][i].replica) << i;
        EXPECT_EQ(records[0][i].hit_tokens, records[1][i].hit_tokens) << i;
        EXPECT_EQ(records[0][i].first_token_ns, records[1][i].first_token_ns) << i;
        EXPECT_EQ(records[0][i].finish_ns, records[1][i].finish_ns) << i;
        EXPECT_EQ(records[0][i].preemptions, records[1][i].preemptions) << i;
      }
    }
  }
}

// SharedPrefixRequests on `replicas` replicas behind `router`, under each of two tunings that
// must change nothing: the same reports, routes and routing regret.
void ExpectTuningsAgree(const char* router, int replicas, const ReplayTuning (&tunings)[2]) {
  std::string reports[2];
  std::vector<int> routes[2];
  int64_t regret[2] = {0, 0};
  for (int t = 0; t < 2; ++t) {
    EngineConfig e = SmallEngine(48);
    e.max_num_seqs = 3;
    e.fleet.replicas = replicas;
    e.fleet.router = router;
    const ReplayResult result =
        ReplayUnderTuning(SharedPrefixRequests(), e, tunings[t], &reports[t]);
    routes[t] = Replicas(result);
    regret[t] = result.fleet->routing_regret_tokens;
    EXPECT_GT(result.prefix_cache.hits, 0);
    EXPECT_GT(result.fleet->best_replica_hit_tokens, 0);
  }
  SCOPED_TRACE(std::string(router) + ", " + std::to_string(replicas) + " replicas");
  EXPECT_EQ(reports[0], reports[1]);
  EXPECT_EQ(routes[0], routes[1]);
  EXPECT_EQ(regret[0], regret[1]);
}

// The fleet's lookups of every replica in one walk (sim/kv/fleet_lookup.cc) against one lookup
// per replica, for the hybrid-aware and the primary-only views (the exact one on the index), on
// fleets of one and of two bitset words.
TEST(FleetTest, TheOneWalkChangesNothing) {
  ReplayTuning tunings[2];
  for (int t = 0; t < 2; ++t) {
    tunings[t].fleet_one_walk = t == 1;
    tunings[t].fleet_exact_from_pools_max_replicas = 0;
  }
  for (const char* router : {"kv_aware", "kv_aware_unaligned"}) {
    for (int replicas : {3, 70}) ExpectTuningsAgree(router, replicas, tunings);
  }
}

// The exact view's hits read from the replicas' pools against the fleet's index kept by their
// events, for a router that reads it and one that only measures its regret.
TEST(FleetTest, ExactHitsFromThePoolsChangeNothing) {
  for (const char* router : {"kv_aware", "round_robin"}) {
    for (int replicas : {3, 70}) {
      ReplayTuning tunings[2];
      tunings[0].fleet_exact_from_pools_max_replicas = 0;
      tunings[1].fleet_exact_from_pools_max_replicas = replicas;
      ExpectTuningsAgree(router, replicas, tunings);
    }
  }
}

TEST(FleetTest, OneReplicaIsThePlainEngine) {
  std::vector<Request> reqs;
  for (int i = 0; i < 30; ++i) {
    reqs.push_back(Req(i, i * 0.5, Concat(Iota(16, 1), Iota(1 + i, 1000 + 50 * i)), 1 + i % 5));
  }
  const KvPlan plan = HybridPlan(60);
  EngineConfig e = SmallEngine(32);
  const ReplayResult plain = testing_engine::MustReplay(plan, e, reqs, 3);
  const ReplayResult one = MustReplayFleet(plan, e, reqs, 1, "kv_aware", 3);
  EXPECT_FALSE(one.fleet.has_value());
  EXPECT_EQ(one.prefix_cache.hits, plain.prefix_cache.hits);
  EXPECT_EQ(one.num_steps, plain.num_steps);
  EXPECT_EQ(one.sim_time_ns, plain.sim_time_ns);
}

TEST(FleetTest, FleetTotalsAreSumsOfReplicas) {
  std::vector<Request> reqs;
  for (int i = 0; i < 40; ++i) {
    reqs.push_back(
        Req(i, i * 0.2, Concat(Iota(16, 1 + 1000 * (i % 3)), Iota(5, 9000 + 10 * i)), 4));
  }
  const ReplayResult r = MustReplayFleet(HybridPlan(100), SmallEngine(32), reqs, 3, "kv_aware");
  int64_t requests = 0, hits = 0, queries = 0;
  for (const ReplicaSummary& s : r.fleet->per_replica) {
    requests += s.requests;
    hits += s.prefix_cache.hits;
    queries += s.prefix_cache.queries;
  }
  EXPECT_EQ(requests, 40);
  EXPECT_EQ(hits, r.prefix_cache.hits);
  EXPECT_EQ(queries, r.prefix_cache.queries);
  EXPECT_EQ(r.ttft.count, 40);
}

// --replicas auto over `reqs`.
absl::StatusOr<ReplayResult> AutoSize(const KvPlan& plan, const EngineConfig& engine,
                                      const std::vector<Request>& reqs) {
  const TraceOpener open = [&]() -> absl::StatusOr<std::unique_ptr<TraceReader>> {
    return std::make_unique<VectorTrace>(reqs);
  };
  return ReplayWithFleetSizing(plan, ModelSpec{}, engine, open, ReplayOptions{});
}

TEST(FleetTest, AutoSizingFindsTheSmallestFleetThatKeepsUp) {
  // 200 requests, one every 10 ms, each needing ~20 steps of 2 ms (max_num_seqs 1): one replica
  // falls far behind; enough replicas keep the 2 s span.
  std::vector<Request> reqs;
  for (int i = 0; i < 200; ++i) reqs.push_back(Req(i, i * 10.0, Iota(8, 1 + 100 * i), 20));
  EngineConfig e = SmallEngine(64, /*step_us=*/2000);
  e.max_num_seqs = 1;
  e.fleet.auto_replicas = true;
  e.fleet.router = "least_loaded";
  e.fleet.ttft_slo_ms = 100;
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 4, 200);
  auto result = AutoSize(plan, e, reqs);
  ASSERT_TRUE(result.ok()) << result.status();
  const FleetSummary& f = *result->fleet;
  ASSERT_TRUE(f.auto_sized);
  std::map<int, bool> keeps;
  for (const AutoSizeProbe& p : f.probes) keeps[p.replicas] = p.keeps_up;
  ASSERT_TRUE(keeps.count(f.replicas));
  EXPECT_TRUE(keeps[f.replicas]);
  EXPECT_GT(f.replicas, 1);
  ASSERT_TRUE(keeps.count(f.replicas - 1)) << "the size below the answer was tried";
  EXPECT_FALSE(keeps[f.replicas - 1]);
  for (const auto& [n, ok] : keeps) EXPECT_EQ(ok, n >= f.replicas) << n;
  EXPECT_LE(static_cast<double>(result->sim_time_ns), 1.1 * static_cast<double>(f.trace_span_ns));
  EXPECT_LE(result->ttft.p99_ms, 100);
}

// --replicas auto judges a fleet by "simulated span at most 1.1 x the trace's arrival span"
// (sim/fleet/auto_size.cc): a span of exactly 1.1 x keeps up. Two requests 1 s apart, each alone
// on an idle replica for 10 steps of 10 ms (a prefill that samples the first of its 10 output
// tokens, then 9 decode steps): the last finishes at 1.1 s, so the simulated span is 1.1 s for an
// arrival span of 1 s (1.1 x 1e9 rounds to exactly 1.1e9 in double), and one replica is enough.
TEST(FleetTest, AutoSizingAcceptsASpanExactlyAtTheSlack) {
  const std::vector<Request> reqs = {Req(0, 0, Iota(8, 1), 10), Req(1, 1000, Iota(8, 100), 10)};
  EngineConfig e = SmallEngine(64, /*step_us=*/10000);
  e.fleet.auto_replicas = true;
  e.fleet.router = "least_loaded";
  e.fleet.ttft_slo_ms = 1000;
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 4, 64);
  auto result = AutoSize(plan, e, reqs);
  ASSERT_TRUE(result.ok()) << result.status();
  const FleetSummary& f = *result->fleet;
  EXPECT_EQ(f.trace_span_ns, 1'000'000'000);
  EXPECT_EQ(result->sim_time_ns, 1'100'000'000);
  EXPECT_EQ(f.replicas, 1);
  ASSERT_EQ(f.probes.size(), 1u);
  EXPECT_TRUE(f.probes[0].keeps_up);
}

// A loose SLO does not let --replicas auto pick a fleet its own report calls overloaded: a long
// trace ending in a burst of 12 requests of 10 s each (one at a time per replica) keeps one
// replica's span within 1.1 x and its p99 TTFT within 200 s, but queues them two minutes.
TEST(FleetTest, AutoSizingNeverPicksAnOverloadedFleet) {
  std::vector<Request> reqs;
  for (int i = 0; i < 10; ++i) reqs.push_back(Req(i, i * 100'000.0, Iota(8, 100 * i + 1), 1));
  for (int i = 10; i < 22; ++i) reqs.push_back(Req(i, 2'000'000.0, Iota(8, 100 * i + 1), 1000));
  EngineConfig e = SmallEngine(64, /*step_us=*/10000);
  e.max_num_seqs = 1;
  e.fleet.auto_replicas = true;
  e.fleet.router = "least_loaded";
  e.fleet.ttft_slo_ms = 200'000;
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 16, 4096);
  auto result = AutoSize(plan, e, reqs);
  ASSERT_TRUE(result.ok()) << result.status();
  const FleetSummary& f = *result->fleet;
  ASSERT_FALSE(f.probes.empty());
  EXPECT_EQ(f.probes[0].replicas, 1);
  EXPECT_LE(static_cast<double>(f.probes[0].sim_time_ns),
            1.1 * static_cast<double>(f.trace_span_ns));
  EXPECT_LE(f.probes[0].ttft_p99_ms, 200'000);
  EXPECT_FALSE(f.probes[0].keeps_up);  // yet overloaded: two minutes of queue
  EXPECT_TRUE(f.probes[0].overloaded);
  EXPECT_GT(f.replicas, 1);
  EXPECT_FALSE(result->overloaded);
  // The reports say why the size that passes span and SLO was turned down.
  EXPECT_NE(ReplayReportText(*result).find("smallest fleet not overloaded"), std::string::npos);
  EXPECT_NE(ReplayReportText(*result).find("tried 1~"), std::string::npos)
      << ReplayReportText(*result);
  const nlohmann::ordered_json probes = ReplayResultToJson(*result)["fleet"]["auto"]["probes"];
  EXPECT_EQ(probes[0].value("overloaded", false), true) << probes.dump();
  for (const auto& probe : probes) {
    if (probe["replicas"] == f.replicas) {
      EXPECT_FALSE(probe.value("overloaded", false));
    }
  }
  HtmlReportOptions html;
  html.title = "auto";
  EXPECT_NE(HtmlReport({*result}, html).find(">overloaded</td>"), std::string::npos);
}

TEST(FleetTest, AutoSizingNamesAnUnreachableSlo) {
  // Every request alone needs 20 steps of 2 ms before its first token (160-token prompts, an
  // 8-token budget): p99 TTFT >= 40 ms on an idle replica, so a 10 ms SLO is out of reach and the
  // search says so instead of doubling to the cap.
  std::vector<Request> reqs;
  for (int i = 0; i < 100; ++i) reqs.push_back(Req(i, i * 50.0, Iota(160, 1 + 1000 * i), 2));
  EngineConfig e = SmallEngine(8, /*step_us=*/2000);
  e.fleet.auto_replicas = true;
  e.fleet.ttft_slo_ms = 10;
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 4, 400);
  auto result = AutoSize(plan, e, reqs);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(result.status().message().find("raise `ttft_slo_ms`"), std::string::npos)
      << result.status();
}

}  // namespace
}  // namespace prefixsim
