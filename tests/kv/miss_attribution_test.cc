// Miss attribution (docs/design.md §7, sim/kv/miss_attribution.h): each cause constructed on
// purpose and named, the causes adding up to the tokens looked up, and the fleet's causes
// (elsewhere, evicted on another replica) through whole replays.
#include "sim/kv/miss_attribution.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "prefixsim/engine.h"
#include "prefixsim/engine_config.h"
#include "prefixsim/kv_cache_manager.h"
#include "prefixsim/kv_plan.h"
#include "prefixsim/miss_causes.h"
#include "prefixsim/model.h"
#include "prefixsim/replay.h"
#include "prefixsim/trace.h"
#include "sim/kv/routing.h"
#include "sim/report/report.h"
#include "tests/engine/engine_test_util.h"
#include "tests/kv/kv_test_util.h"

namespace prefixsim {
namespace {

using testing_engine::MustReplay;
using testing_engine::Req;
using testing_engine::SmallEngine;
using testing_engine::VectorTrace;
using testing_kv::Checked;
using testing_kv::Concat;
using testing_kv::Group;
using testing_kv::Iota;
using testing_kv::KimiPlan;
using testing_kv::Literal;
using testing_kv::Plan;
using testing_kv::Unitary;

int64_t Of(const MissAttribution& m, MissCause c) { return m.of(c); }

// A manager with attribution on, as a single engine has it.
struct Attributed {
  explicit Attributed(const KvPlan& plan, KvCacheOptions options = Checked(),
                      int64_t max_record_blocks = 0, bool shadow_may_read_pool = true)
      : m(plan, options) {
    kv::EnableMissAttribution(m, max_record_blocks, shadow_may_read_pool);
  }
  // Admits `r`: lookup, attribution, then the first allocation up to `first_end` (the prompt end
  // when 0).
  MissAttribution Admit(const Request& r, int64_t first_end = 0,
                        const kv::ArrivalSighting& sighting = {}) {
    m.NewStep();  // a step of its own (a state cached in this step would make it wait)
    m.AddRequest(&r);
    const PrefixHit hit = m.GetComputedBlocks(r.id);
    const MissAttribution a = kv::AttributeMiss(m, m.Handle(r.id), hit, sighting);
    EXPECT_EQ(a.total(), r.prompt_tokens) << "causes must add up to the tokens looked up";
    const int64_t end = first_end > 0 ? first_end : r.prompt_tokens;
    EXPECT_TRUE(m.AllocateSlots(r.id, 0, end - hit.hit_tokens, hit.hit_tokens, 0));
    computed_end = end;
    return a;
  }
  // Runs the admitted request's prefill on through `ends`.
  void Continue(const Request& r, std::vector<int64_t> ends) {
    for (int64_t end : ends) {
      EXPECT_TRUE(m.AllocateSlots(r.id, computed_end, end - computed_end, 0, 0));
      computed_end = end;
    }
  }
  void Finish(const Request& r) {
    m.Free(r.id);
    m.RemoveRequest(r.id);
  }
  KvCacheManager m;
  int64_t computed_end = 0;
};

// Full attention B = 4 (U = A = 4). A first request's prompt is all compulsory but the tail: the
// last token is never a hit (docs/semantics.md §9.1), so 22 tokens give blocks up to 20 and a
// tail of 2.
TEST(MissAttributionTest, FirstOccurrenceIsCompulsoryAndTheLastPartialBlockIsTail) {
  Attributed a(Unitary(LayerKind::kFullAttention, 4, 64));
  const Request r = Literal(1, Iota(22));
  const MissAttribution m = a.Admit(r);
  EXPECT_EQ(Of(m, MissCause::kHit), 0);
  EXPECT_EQ(Of(m, MissCause::kCompulsory), 20);
  EXPECT_EQ(Of(m, MissCause::kTail), 2);
  EXPECT_EQ(m.main_cause(), MissCause::kCompulsory);
}

// vllm-ascend #7965's mechanism: a prompt of exactly n blocks, computed before, hits n - 1 of
// them, since the last token is recomputed (docs/semantics.md §9.1); the whole last block is tail.
TEST(MissAttributionTest, APromptOfWholeBlocksLosesItsLastBlockToTheTail) {
  Attributed a(Unitary(LayerKind::kFullAttention, 4, 64));
  const Request r1 = Literal(1, Iota(24));
  a.Admit(r1);
  a.Finish(r1);
  const Request r2 = Literal(2, Iota(24));
  const MissAttribution m = a.Admit(r2);
  EXPECT_EQ(Of(m, MissCause::kHit), 20);
  EXPECT_EQ(Of(m, MissCause::kTail), 4);
  EXPECT_EQ(m.main_cause(), MissCause::kHit);
}

// The second turn hits the first's 20 cached tokens; its new blocks [20, 28) were never computed
// (compulsory); 31 - 28 = 3 tail tokens.
TEST(MissAttributionTest, AHitAndTheNewPartIsCompulsory) {
  Attributed a(Unitary(LayerKind::kFullAttention, 4, 64));
  const Request r1 = Literal(1, Iota(22));
  a.Admit(r1);
  a.Finish(r1);
  const Request r2 = Literal(2, Concat(Iota(22), Iota(9, 100)));
  const MissAttribution m = a.Admit(r2);
  EXPECT_EQ(Of(m, MissCause::kHit), 20);
  EXPECT_EQ(Of(m, MissCause::kCompulsory), 8);
  EXPECT_EQ(Of(m, MissCause::kTail), 3);
  EXPECT_EQ(Of(m, MissCause::kEvicted), 0);
}

// 11 usable blocks: 44 unrelated tokens evict every block of the first request (§10.4); its 20
// computed tokens are then `evicted`, broken by the only group, full attention.
TEST(MissAttributionTest, EvictedByTheGroupThatLostItsBlocks) {
  Attributed a(Unitary(LayerKind::kFullAttention, 4, 12));
  const Request r1 = Literal(1, Iota(22));
  a.Admit(r1);
  a.Finish(r1);
  const Request filler = Literal(3, Iota(44, 1000));
  a.Admit(filler);
  EXPECT_EQ(a.m.num_free_blocks(), 0);
  a.Finish(filler);
  const Request r2 = Literal(2, Concat(Iota(22), {500, 501, 502}));
  const MissAttribution m = a.Admit(r2);
  EXPECT_EQ(Of(m, MissCause::kHit), 0);
  EXPECT_EQ(Of(m, MissCause::kEvicted), 20);
  EXPECT_EQ(m.evicted_on_other_replicas, 0);
  EXPECT_EQ(m.evicted_by, EvictionBreaker::kFullAttention);
  EXPECT_EQ(Of(m, MissCause::kCompulsory), 4);  // [20, 24): new tokens
  EXPECT_EQ(Of(m, MissCause::kTail), 1);
  EXPECT_EQ(m.main_cause(), MissCause::kEvicted);
}

// The first request has computed 8 of its 22 tokens when an identical one arrives: the second hits
// those 8, and the blocks [8, 20) are in flight (the first will compute them next step). Once the
// first has computed them they are no longer in flight but a hit.
TEST(MissAttributionTest, InFlightWhileAnotherRequestComputesTheSamePrefix) {
  Attributed a(Unitary(LayerKind::kFullAttention, 4, 64));
  const Request r1 = Literal(1, Iota(22));
  a.Admit(r1, /*first_end=*/8);
  const Request r2 = Literal(2, Iota(22));
  const MissAttribution m = a.Admit(r2, /*first_end=*/12);
  EXPECT_EQ(Of(m, MissCause::kHit), 8);
  EXPECT_EQ(Of(m, MissCause::kInFlight), 12);
  EXPECT_EQ(Of(m, MissCause::kCompulsory), 0);
  EXPECT_EQ(Of(m, MissCause::kTail), 2);
  EXPECT_EQ(m.main_cause(), MissCause::kInFlight);
  a.computed_end = 8;
  a.Continue(r1, {22});
  const Request r3 = Literal(3, Iota(22));
  const MissAttribution later = a.Admit(r3);
  EXPECT_EQ(Of(later, MissCause::kHit), 20);
  EXPECT_EQ(Of(later, MissCause::kInFlight), 0);
}

// A request freed (preempted) before computing its prompt takes its blocks out of flight.
TEST(MissAttributionTest, FreeingARequestTakesItsBlocksOutOfFlight) {
  Attributed a(Unitary(LayerKind::kFullAttention, 4, 64));
  const Request r1 = Literal(1, Iota(22));
  a.Admit(r1, /*first_end=*/4);
  a.m.Free(r1.id);
  const Request r2 = Literal(2, Iota(22));
  const MissAttribution m = a.Admit(r2);
  EXPECT_EQ(Of(m, MissCause::kInFlight), 0);
  EXPECT_EQ(Of(m, MissCause::kHit), 4);
  EXPECT_EQ(Of(m, MissCause::kCompulsory), 16);
}

// The PR #53007 plan (old: S = A = 13,824, U = 1536; docs/semantics.md §13.B). Turn 1 computes
// 20,000 tokens; turn 2 repeats them and adds 1,000 (cap: the last 1536 boundary before 21,000 is
// 19,968; tail 1,032).
// * Prefill steps ending at 13,824 and 19,968: the mamba state at 13,824 is cached (a step ends
//   there, §10.2), so the hit is 13,824; [13,824, 19,968) was computed but the round-down to S
//   kept it unpublished: `alignment`.
// * Steps ending at 7,680 and 19,968: no step ends at 13,824, so the mamba group never caches its
//   state there although full attention published its blocks: the hit is 0 and [0, 13,824) is
//   `not_checkpointed` (vLLM #42317's mechanism), the rest `alignment` as before.
// * Under new (S = 1536) the hit reaches 19,968 either way.
TEST(MissAttributionTest, Pr53007AlignmentAndNotCheckpointed) {
  const Request turn1 = Literal(1, Iota(20000));
  const Request turn2 = Literal(2, Concat(Iota(20000), Iota(1000, 50000)));
  {
    Attributed a(KimiPlan("old"), KvCacheOptions{});
    a.Admit(turn1, 13824);
    a.Continue(turn1, {19968, 20000});
    a.Finish(turn1);
    const MissAttribution m = a.Admit(turn2);
    EXPECT_EQ(Of(m, MissCause::kHit), 13824);
    EXPECT_EQ(Of(m, MissCause::kAlignment), 19968 - 13824);
    EXPECT_EQ(Of(m, MissCause::kNotCheckpointed), 0);
    EXPECT_EQ(Of(m, MissCause::kCompulsory), 0);
    EXPECT_EQ(Of(m, MissCause::kTail), 21000 - 19968);
  }
  {
    Attributed a(KimiPlan("old"), KvCacheOptions{});
    a.Admit(turn1, 7680);
    a.Continue(turn1, {19968, 20000});
    a.Finish(turn1);
    const MissAttribution m = a.Admit(turn2);
    EXPECT_EQ(Of(m, MissCause::kHit), 0);
    EXPECT_EQ(Of(m, MissCause::kNotCheckpointed), 13824);
    EXPECT_EQ(Of(m, MissCause::kAlignment), 19968 - 13824);
    EXPECT_EQ(m.main_cause(), MissCause::kNotCheckpointed);
  }
  {
    Attributed a(KimiPlan("new"), KvCacheOptions{});
    a.Admit(turn1, 7680);
    a.Continue(turn1, {19968, 20000});
    a.Finish(turn1);
    const MissAttribution m = a.Admit(turn2);
    EXPECT_EQ(Of(m, MissCause::kHit), 19968);
    EXPECT_EQ(Of(m, MissCause::kAlignment) + Of(m, MissCause::kNotCheckpointed), 0);
  }
}

// With an EAGLE group the hit needs one block past it (docs/semantics.md §9.4): a prompt computed
// whole before hits all but one U-block, and that block is tail, not compulsory.
TEST(MissAttributionTest, EagleDropIsTail) {
  Attributed a(Unitary(LayerKind::kFullAttention, 4, 64, 0, /*eagle=*/true));
  const Request r1 = Literal(1, Iota(22));
  a.Admit(r1);
  a.Finish(r1);
  const Request r2 = Literal(2, Iota(22));
  const MissAttribution m = a.Admit(r2);
  EXPECT_EQ(Of(m, MissCause::kHit), 16);
  EXPECT_EQ(Of(m, MissCause::kCompulsory), 0);
  EXPECT_EQ(Of(m, MissCause::kTail), 6);
}

// Whole replays: on random hybrid workloads with preemptions (a small pool), every admission's
// causes add up to its tokens: the first admissions' totals equal vLLM's queries, the
// re-admissions' the preempted queries, and each record's causes its prompt.
TEST(MissAttributionTest, CausesAddUpOnRandomHybridReplays) {
  std::mt19937_64 rng(7);
  int64_t readmissions = 0;
  for (int trial = 0; trial < 6; ++trial) {
    const KvPlan plan =
        trial % 2 == 0
            ? Plan({Group(LayerKind::kFullAttention, 4), Group(LayerKind::kSlidingWindow, 6, 13)},
                   40 + 10 * trial, 12, 2, 12)
            : Unitary(LayerKind::kFullAttention, 4, 30 + 10 * trial);
    std::vector<Request> reqs;
    for (int i = 0; i < 60; ++i) {
      const int shared = static_cast<int>(rng() % 40);
      const int own = 1 + static_cast<int>(rng() % 30);
      reqs.push_back(Req(i, i * 3.0, Concat(Iota(shared), Iota(own, 1000 * (i + 1))),
                         1 + static_cast<int64_t>(rng() % 20)));
    }
    const ReplayResult r = MustReplay(plan, SmallEngine(32), reqs);
    ASSERT_TRUE(r.miss_causes.enabled);
    EXPECT_EQ(r.miss_causes.first.total_tokens(), r.prefix_cache.queries) << trial;
    EXPECT_EQ(r.miss_causes.first.tokens[static_cast<int>(MissCause::kHit)], r.prefix_cache.hits);
    EXPECT_EQ(r.miss_causes.preempted.total_tokens(), r.prefix_cache.preempted_queries) << trial;
    readmissions += r.miss_causes.preempted.admissions;
    EXPECT_EQ(r.miss_causes.preempted.tokens[static_cast<int>(MissCause::kHit)],
              r.prefix_cache.preempted_hits);
    for (const RequestRecord& rec : r.per_request) {
      if (rec.skipped.empty()) {
        EXPECT_EQ(rec.miss.total(), rec.prompt_tokens) << rec.id;
        EXPECT_EQ(rec.miss.of(MissCause::kHit), rec.hit_tokens) << rec.id;
      }
    }
  }
  EXPECT_GT(readmissions, 0) << "the pools are meant to be small enough to preempt";
}

// Two replicas, round robin: the second copy of a prompt goes to replica 1 while replica 0 holds
// it: `elsewhere`, naming replica 0. Under kv_aware it goes to replica 0 and hits.
TEST(MissAttributionTest, ElsewhereIsARoutingMiss) {
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 4, 64);
  std::vector<Request> reqs = {Req(0, 0.0, Iota(22), 2), Req(1, 100.0, Iota(22), 2)};
  EngineConfig engine = SmallEngine(64);
  engine.fleet.replicas = 2;
  engine.fleet.router = "round_robin";
  const ReplayResult rr = MustReplay(plan, engine, reqs);
  ASSERT_EQ(rr.per_request.size(), 2u);
  const MissAttribution& m = rr.per_request[1].miss;
  EXPECT_EQ(rr.per_request[1].replica, 1);
  EXPECT_EQ(m.of(MissCause::kHit), 0);
  EXPECT_EQ(m.of(MissCause::kElsewhere), 20);
  EXPECT_EQ(m.elsewhere_replica, 0);
  EXPECT_EQ(m.main_cause(), MissCause::kElsewhere);
  EXPECT_EQ(rr.miss_causes.first.tokens[static_cast<int>(MissCause::kElsewhere)], 20);
  // The router's regret is the same 20 tokens: replica 0 would have hit them.
  EXPECT_EQ(rr.per_request[1].routing_regret_tokens, 20);
  EXPECT_EQ(rr.fleet->routing_regret_tokens, 20);
  // The per-request CSV names the replica that held it, before the one that served, then the
  // regret.
  std::ostringstream csv;
  WriteRequestsCsv(rr, csv);
  const std::string text = csv.str();
  EXPECT_NE(text.find(",elsewhere_replica,replica,routing_regret_tokens\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find(",elsewhere,0,0,0,0,0,20,0,2,0,1,20\n"), std::string::npos) << text;
  engine.fleet.router = "kv_aware";
  const ReplayResult kv = MustReplay(plan, engine, reqs);
  EXPECT_EQ(kv.per_request[1].miss.of(MissCause::kHit), 20);
  EXPECT_EQ(kv.per_request[1].miss.of(MissCause::kElsewhere), 0);
  EXPECT_EQ(kv.fleet->routing_regret_tokens, 0);
}

// A prefix computed only on replica 0 and evicted there (an unrelated prompt fills its cache)
// before a copy reaches replica 1: computed before, no copy left: `evicted`, by another replica.
TEST(MissAttributionTest, EvictedOnAnotherReplica) {
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 4, 12);
  std::vector<Request> reqs = {Req(0, 0.0, Iota(22), 2), Req(1, 50.0, Iota(8, 7000), 2),
                               Req(2, 100.0, Iota(44, 1000), 2), Req(3, 200.0, Iota(22), 2)};
  EngineConfig engine = SmallEngine(64);
  engine.fleet.replicas = 2;
  engine.fleet.router = "round_robin";  // 0, 1, 0, 1
  const ReplayResult r = MustReplay(plan, engine, reqs);
  ASSERT_EQ(r.per_request.size(), 4u);
  ASSERT_EQ(r.per_request[3].replica, 1);
  const MissAttribution& m = r.per_request[3].miss;
  EXPECT_EQ(m.of(MissCause::kHit), 0);
  EXPECT_EQ(m.of(MissCause::kEvicted), 20);
  EXPECT_EQ(m.evicted_on_other_replicas, 20);
  EXPECT_EQ(m.of(MissCause::kElsewhere), 0);
  EXPECT_EQ(r.miss_causes.first.evicted_tokens_by[static_cast<int>(EvictionBreaker::kOtherReplica)],
            20);
}

// gpt-oss (full attention next to sliding-window layers) on the token sample with a pool small
// enough to evict: evicted tokens are split by the group whose own lookup came back shortest,
// and both kinds break chains; the split adds up to the evicted tokens.
TEST(MissAttributionTest, EvictedTokensSplitByTheGroupThatBrokeTheChain) {
  auto model = LoadModel("gpt-oss-20b-layout");
  auto engine = LoadEngine("gpt-oss-20b");
  ASSERT_TRUE(model.ok() && engine.ok());
  engine->num_gpu_blocks = 700;
  engine->max_model_len = 4800;
  auto plan = ResolveKvPlan(*model, *engine, "new");
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto trace = OpenTrace(std::string(PREFIXSIM_SOURCE_DIR) + "/traces/sample_tokens.jsonl");
  ASSERT_TRUE(trace.ok()) << trace.status();
  auto r = Replay(*plan, *model, *engine, **trace, ReplayOptions{});
  ASSERT_TRUE(r.ok()) << r.status();
  const MissCauseStats::Totals& t = r->miss_causes.first;
  const auto by = [&](EvictionBreaker b) { return t.evicted_tokens_by[static_cast<int>(b)]; };
  EXPECT_GT(by(EvictionBreaker::kFullAttention), 0);
  EXPECT_GT(by(EvictionBreaker::kSlidingWindow), 0);
  EXPECT_EQ(std::accumulate(t.evicted_tokens_by.begin(), t.evicted_tokens_by.end(), int64_t{0}),
            t.tokens[static_cast<int>(MissCause::kEvicted)]);
}

// ReplayOptions::miss_record_bytes (design §7): bounded, the record of what a replica computed
// and lost forgets the oldest prefixes once newer ones fill it, and a forgotten prefix computed
// again is `compulsory` where the unbounded record says `evicted`. B = 4, 63 usable blocks: 400
// distinct 100-token prompts (25 U-blocks each) evict those before them.
TEST(MissAttributionTest, ABoundedRecordForgetsTheOldestPrefixes) {
  for (const int64_t bound : {int64_t{0}, int64_t{4000}}) {
    Attributed a(Unitary(LayerKind::kFullAttention, 4, 64), Checked(), bound);
    for (uint32_t i = 0; i < 400; ++i) {
      const Request r = Literal(i + 1, Iota(100, 1 + i * 1000));
      a.Admit(r);
      a.Finish(r);
    }
    const MissAttribution m = a.Admit(Literal(1000, Iota(100, 1)));
    EXPECT_EQ(Of(m, MissCause::kHit), 0);
    EXPECT_EQ(Of(m, MissCause::kTail), 4);
    if (bound == 0) {
      EXPECT_EQ(Of(m, MissCause::kEvicted), 96);
      EXPECT_EQ(kv::ForgottenComputedBlocks(a.m), 0);
    } else {
      EXPECT_EQ(Of(m, MissCause::kCompulsory), 96);
      // Forgotten whole generations: at least the first prompt's blocks, at most all but the
      // bound's worth.
      EXPECT_GE(kv::ForgottenComputedBlocks(a.m), 25);
      EXPECT_LE(kv::ForgottenComputedBlocks(a.m), 400 * 25 - bound / 2);
    }
  }
}

// The fleet's oracles behind `elsewhere` and `evicted` on another replica, asked of each
// replica's own record of what it computed (design §7), past 64 replicas. B = 4, 63 usable
// blocks each. Replica 3 computed the prompt's first 5 blocks, 66 and 68 its first 10 (alive),
// 5 its first 15 (then all evicted).
TEST(MissAttributionTest, ArrivalSightingAsksEveryReplicasRecord) {
  std::vector<std::unique_ptr<Attributed>> fleet;
  std::vector<KvCacheManager*> caches;
  for (int r = 0; r < 70; ++r) {
    fleet.push_back(std::make_unique<Attributed>(Unitary(LayerKind::kFullAttention, 4, 64)));
    caches.push_back(&fleet.back()->m);
  }
  auto compute = [&](int replica, uint64_t id, std::vector<uint32_t> tokens) {
    const Request r = Literal(id, std::move(tokens));
    fleet[replica]->Admit(r);
    fleet[replica]->Finish(r);
  };
  compute(3, 1, Iota(22));
  compute(66, 2, Iota(42));
  compute(68, 3, Iota(42));
  compute(5, 4, Iota(62));
  compute(5, 5, Iota(252, 1000));  // evicts all of replica 5's blocks
  const Request arrival = Literal(9, Iota(70));
  std::vector<kv::HashPair> scratch;
  // Replica 5 computed the most (15 blocks); of those that computed block 5, where the chosen
  // replica's record ends, 66 and 68 still hold 10 blocks.
  kv::ArrivalSighting s = kv::SightAtArrival(caches, 3, arrival, &scratch);
  EXPECT_EQ(s.fleet_known_tokens, 60);
  EXPECT_EQ(s.elsewhere_tokens, 40);
  // The replica named is the best other one by the fleet's own lookups (the router's exact
  // view), the lowest index on a tie; the chosen one is never named.
  std::vector<int64_t> hits(caches.size(), 0);
  hits[3] = 20;
  hits[66] = hits[68] = 40;
  kv::SetRoutableHits(hits, 3, &s);
  EXPECT_EQ(s.routable_tokens, 40);
  EXPECT_EQ(s.elsewhere_replica, 66);
  kv::SetRoutableHits(hits, 66, &s);
  EXPECT_EQ(s.routable_tokens, 40);
  EXPECT_EQ(s.elsewhere_replica, 68);
  // Chosen 66: only replica 5 computed more, and holds none of it.
  s = kv::SightAtArrival(caches, 66, arrival, &scratch);
  EXPECT_EQ(s.fleet_known_tokens, 60);
  EXPECT_EQ(s.elsewhere_tokens, 0);
  // Chosen 5: nobody computed more than it did.
  s = kv::SightAtArrival(caches, 5, arrival, &scratch);
  EXPECT_EQ(s.fleet_known_tokens, 60);
  EXPECT_EQ(s.elsewhere_tokens, 0);
  // A replica that computed nothing sees the others' record all the same.
  s = kv::SightAtArrival(caches, 0, arrival, &scratch);
  EXPECT_EQ(s.fleet_known_tokens, 60);
  EXPECT_EQ(s.elsewhere_tokens, 40);
}

// A sliding window of 9 tokens on 4-token blocks next to full attention (the plan of
// RetentionTest.SlidingWindowKeepsTheWindowBeforeEachCheckpoint): a 40-token document, then a
// prompt sharing its first 24 tokens. Dense retention hits 24; 16 keeps the window before 16 and
// hits 16; 0 keeps only the window before the document's replay boundary and hits nothing. What
// dense retention would have hit and the interval dropped is `sparse_retention`, not
// `not_checkpointed` (what no retention caches).
TEST(MissAttributionTest, WhatTheRetentionIntervalDroppedIsSparseRetention) {
  struct Case {
    std::optional<int64_t> retention;
    int64_t hit, sparse_retention;
  };
  for (const Case& c : {Case{std::nullopt, 24, 0}, Case{16, 16, 8}, Case{0, 0, 24}}) {
    SCOPED_TRACE(c.retention ? std::to_string(*c.retention) : "dense");
    KvPlan plan = Plan(
        {Group(LayerKind::kFullAttention, 4), Group(LayerKind::kSlidingWindow, 4, 9)}, 64, 4, 4, 4);
    plan.retention_interval = c.retention;
    Attributed a(plan);
    const Request doc = Literal(1, Iota(40));
    a.Admit(doc);
    a.Finish(doc);
    const std::vector<uint32_t> shared = Iota(24);
    const MissAttribution m = a.Admit(Literal(2, Concat(shared, Iota(10, 900))));
    EXPECT_EQ(Of(m, MissCause::kHit), c.hit);
    EXPECT_EQ(Of(m, MissCause::kSparseRetention), c.sparse_retention);
    EXPECT_EQ(Of(m, MissCause::kNotCheckpointed), 0);
  }
}

// Where the pool is the cache the shadow would keep (one full-attention or MLA group at U), the
// shadow reads the pool and records its evictions instead of copying it: every admission's causes
// and every arrival sighting must be those of the copying shadow. Random conversations over two
// replicas whose pools evict, each request admitted, then freed in random order.
TEST(MissAttributionTest, AShadowReadingThePoolAttributesAsACopyingOne) {
  for (const LayerKind kind : {LayerKind::kFullAttention, LayerKind::kMla}) {
    std::mt19937_64 rng(11);
    std::vector<std::unique_ptr<Attributed>> reading, copying;
    std::vector<KvCacheManager*> reading_caches, copying_caches;
    for (int r = 0; r < 2; ++r) {
      reading.push_back(std::make_unique<Attributed>(Unitary(kind, 4, 48), Checked(), 0, true));
      copying.push_back(std::make_unique<Attributed>(Unitary(kind, 4, 48), Checked(), 0, false));
      reading_caches.push_back(&reading.back()->m);
      copying_caches.push_back(&copying.back()->m);
    }
    std::deque<Request> requests;  // the managers keep pointers to them
    std::vector<std::pair<int, const Request*>> running;
    std::vector<kv::HashPair> scratch;
    int64_t evicted = 0, elsewhere = 0;
    for (uint32_t i = 0; i < 400; ++i) {
      // Up to three running requests of at most 17 blocks each fit the 47 usable blocks.
      while (running.size() >= 3 || (!running.empty() && rng() % 3 == 0)) {
        const size_t k = rng() % running.size();
        reading[running[k].first]->Finish(*running[k].second);
        copying[running[k].first]->Finish(*running[k].second);
        running.erase(running.begin() + static_cast<std::ptrdiff_t>(k));
      }
      const uint32_t topic = static_cast<uint32_t>(rng() % 6);
      const Request& r = requests.emplace_back(
          Literal(i + 1, Concat(Iota(4 + static_cast<int>(rng() % 40), topic * 5000),
                                Iota(1 + static_cast<int>(rng() % 24), 100000 + i * 100))));
      const int replica = static_cast<int>(rng() % 2);
      kv::ArrivalSighting s1 = kv::SightAtArrival(reading_caches, replica, r, &scratch);
      kv::ArrivalSighting s2 = kv::SightAtArrival(copying_caches, replica, r, &scratch);
      ASSERT_EQ(s1.fleet_known_tokens, s2.fleet_known_tokens) << i;
      ASSERT_EQ(s1.elsewhere_tokens, s2.elsewhere_tokens) << i;
      // The replicas' own lookups at arrival (the router's exact view).
      std::vector<int64_t> hits;
      kv::HashPrompt(*reading_caches[0], r, &scratch);
      for (KvCacheManager* m : reading_caches) hits.push_back(kv::PeekPromptHit(*m, r, scratch));
      kv::SetRoutableHits(hits, replica, &s1);
      kv::SetRoutableHits(hits, replica, &s2);
      const MissAttribution a1 = reading[replica]->Admit(r, 0, s1);
      const MissAttribution a2 = copying[replica]->Admit(r, 0, s2);
      for (int c = 0; c < kNumMissCauses; ++c) {
        ASSERT_EQ(a1.tokens[c], a2.tokens[c])
            << i << " " << MissCauseName(static_cast<MissCause>(c));
      }
      evicted += Of(a1, MissCause::kEvicted);
      elsewhere += Of(a1, MissCause::kElsewhere);
      running.emplace_back(replica, &r);
    }
    EXPECT_GT(evicted, 0) << "the pools are meant to evict";
    EXPECT_GT(elsewhere, 0) << "the replicas are meant to hold what the other lost";
  }
}

}  // namespace
}  // namespace prefixsim
