// Router views (sim/fleet/cache_view.h; docs/design.md §2 "Router views"): what each view
// believes the replicas hold, against the exact view, on caches driven through the public
// KvCacheManager calls; and routing regret in a fleet (0 for a router that always takes the
// longest hit, positive for one that ignores the caches).
#include "sim/fleet/cache_view.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "prefixsim/engine.h"
#include "prefixsim/kv_cache_manager.h"
#include "prefixsim/replay.h"
#include "sim/kv/routing.h"
#include "tests/engine/engine_test_util.h"
#include "tests/kv/kv_test_util.h"

namespace prefixsim {
namespace {

using testing_engine::Req;
using testing_engine::SmallEngine;
using testing_engine::VectorTrace;
using testing_kv::Concat;
using testing_kv::Iota;
using testing_kv::KimiPlan;
using testing_kv::Literal;
using testing_kv::Unitary;

std::unique_ptr<fleet::CacheView> View(const KvPlan& plan, int replicas,
                                       const RouterViewConfig& view) {
  fleet::CacheViewConfig config;
  config.view = view;
  config.num_replicas = replicas;
  config.plan = &plan;
  config.seed = 7;
  auto made = fleet::NewCacheView(config);
  EXPECT_TRUE(made.ok()) << made.status();
  return made.ok() ? *std::move(made) : nullptr;
}

RouterViewConfig Kind(const std::string& kind) {
  RouterViewConfig v;
  v.kind = kind;
  return v;
}

// Replicas' caches whose events go to a set of views, stamped with a clock the test sets.
class Fleetlet {
 public:
  Fleetlet(const KvPlan& plan, int replicas) {
    for (int r = 0; r < replicas; ++r) {
      caches_.push_back(std::make_unique<KvCacheManager>(plan, testing_kv::Checked()));
      feeds_.push_back(std::make_unique<Feed>(this, r));
      kv::AttachCacheListener(*caches_.back(), feeds_.back().get());
    }
  }
  ~Fleetlet() {
    for (auto& c : caches_) kv::AttachCacheListener(*c, nullptr);
  }
  void Watch(fleet::CacheView* view) { views_.push_back(view); }
  KvCacheManager& cache(int r) { return *caches_[r]; }
  int64_t now_ns = 0;

  // Computes `r` on replica `replica` in prefill steps ending at `ends` (the last one the
  // prompt's end), then frees it: its blocks stay cached. Each step is 1 us later (an event batch
  // of its own).
  void Serve(int replica, const Request& r, const std::vector<int64_t>& ends) {
    KvCacheManager& m = cache(replica);
    m.AddRequest(&r);
    const PrefixHit hit = m.GetComputedBlocks(r.id);
    int64_t computed = 0, new_computed = hit.hit_tokens;
    for (int64_t end : ends) {
      if (end <= computed + new_computed) continue;
      ASSERT_TRUE(m.AllocateSlots(r.id, computed, end - computed - new_computed, new_computed, 0));
      computed = end;
      new_computed = 0;
      now_ns += 1000;
    }
    m.Free(r.id);
    m.RemoveRequest(r.id);
  }
  // Evicts everything `replica` caches: a request of fresh tokens fills its pool, in steps of
  // 64 tokens.
  void Flush(int replica, int64_t pool_tokens, uint32_t salt) {
    const Request filler = Literal(900000 + salt, Iota(pool_tokens, 700000000 + salt * 100000));
    std::vector<int64_t> ends;
    for (int64_t e = 64; e < pool_tokens; e += 64) ends.push_back(e);
    ends.push_back(pool_tokens);
    Serve(replica, filler, ends);
  }

  std::vector<int64_t> Overlaps(fleet::CacheView& view, const Request& r) {
    std::vector<kv::HashPair> hashes;
    kv::HashPrompt(cache(0), r, &hashes);
    std::vector<int64_t> out;
    view.Overlaps(cache(0), r, hashes, now_ns, &out);
    return out;
  }
  void Routed(fleet::CacheView& view, const Request& r, int replica) {
    std::vector<kv::HashPair> hashes;
    kv::HashPrompt(cache(0), r, &hashes);
    view.Routed(r, hashes, replica, now_ns);
  }

 private:
  class Feed final : public CacheEventListener {
   public:
    Feed(Fleetlet* f, int replica) : f_(f), replica_(replica) {}
    void OnBlockStored(uint64_t key, uint32_t tag, int group) override {
      for (auto* v : f_->views_) v->OnStored(replica_, key, tag, group, f_->now_ns);
    }
    void OnBlockRemoved(uint64_t key, int group) override {
      for (auto* v : f_->views_) v->OnRemoved(replica_, key, group, f_->now_ns);
    }

   private:
    Fleetlet* f_;
    int replica_;
  };
  std::vector<std::unique_ptr<KvCacheManager>> caches_;
  std::vector<std::unique_ptr<Feed>> feeds_;
  std::vector<fleet::CacheView*> views_;
};

TEST(CacheViewTest, EveryRegisteredViewBuildsAndAnUnknownOneIsNamed) {
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 4, 64);
  for (const std::string& name : fleet::RegisteredCacheViews()) {
    auto view = View(plan, 2, Kind(name));
    ASSERT_NE(view, nullptr) << name;
    EXPECT_EQ(view->name(), name);
  }
  EXPECT_EQ(fleet::RegisteredCacheViews().size(), 5u);
  fleet::CacheViewConfig config;
  config.plan = &plan;
  config.view.kind = "exactly";
  auto bad = fleet::NewCacheView(config);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("exact"), std::string::npos) << bad.status();
  config.view.kind = "lossy";
  config.view.event_loss = 1.5;
  EXPECT_FALSE(fleet::NewCacheView(config).ok());
}

// Both replicas compute P at t = 0; replica 0 evicts it at t = 1 s. With events 500 ms late, at
// t = 1.2 s the router still believes replica 0 holds P (and would send P's next turn there, the
// less loaded one, to miss); the exact view knows better. At t = 1.6 s the remove has arrived.
TEST(CacheViewTest, DelayedViewRoutesOnACacheAsItWas) {
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 4, 64);
  Fleetlet f(plan, 2);
  auto exact = View(plan, 2, Kind("exact"));
  RouterViewConfig late = Kind("delayed");
  late.event_delay_ms = 500;
  auto delayed = View(plan, 2, late);
  f.Watch(exact.get());
  f.Watch(delayed.get());
  const Request turn1 = Literal(1, Iota(40, 1));
  f.Serve(0, turn1, {40});
  f.Serve(1, turn1, {40});
  const Request turn2 = Literal(2, Concat(Iota(40, 1), Iota(8, 5000)));
  f.now_ns = 100'000'000;
  EXPECT_EQ(f.Overlaps(*exact, turn2), (std::vector<int64_t>{40, 40}));
  EXPECT_EQ(f.Overlaps(*delayed, turn2), (std::vector<int64_t>{0, 0})) << "stores not in yet";
  f.now_ns = 1'000'000'000;
  f.Flush(0, 63 * 4, 1);
  f.now_ns = 1'200'000'000;
  EXPECT_EQ(f.Overlaps(*exact, turn2), (std::vector<int64_t>{0, 40}));
  EXPECT_EQ(f.Overlaps(*delayed, turn2), (std::vector<int64_t>{40, 40}))
      << "the stores are in, the removes of replica 0's eviction not yet";
  f.now_ns = 1'600'000'000;
  EXPECT_EQ(f.Overlaps(*delayed, turn2), (std::vector<int64_t>{0, 40}));
}

// Losing every event batch, the router sees no cache; losing none, it sees the exact one. Losing
// half, it misses stores (under-promises) and keeps blocks whose removes it lost
// (over-promises).
TEST(CacheViewTest, LossyViewLosesStoresAndRemoves) {
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 4, 256);
  Fleetlet f(plan, 1);
  RouterViewConfig none = Kind("lossy"), all = Kind("lossy"), half = Kind("lossy");
  all.event_loss = 1;
  half.event_loss = 0.5;
  auto exact = View(plan, 1, Kind("exact"));
  auto lose_none = View(plan, 1, none);
  auto lose_all = View(plan, 1, all);
  auto lose_half = View(plan, 1, half);
  for (auto* v : {exact.get(), lose_none.get(), lose_all.get(), lose_half.get()}) f.Watch(v);
  int over = 0, under = 0;
  for (uint32_t i = 0; i < 12; ++i) {
    const Request r = Literal(10 + i, Iota(200, 100000 * (i % 6)));
    const int64_t want = f.Overlaps(*exact, r)[0];
    EXPECT_EQ(f.Overlaps(*lose_none, r)[0], want);
    EXPECT_EQ(f.Overlaps(*lose_all, r)[0], 0);
    const int64_t got = f.Overlaps(*lose_half, r)[0];
    over += got > want;
    under += got < want;
    f.Serve(0, r, {64, 128, 200});
  }
  EXPECT_GT(under, 0) << "half the stores lost must hide some cached prefix";
  f.Flush(0, 255 * 4, 2);
  for (uint32_t i = 0; i < 6; ++i) {
    const Request r = Literal(30 + i, Iota(200, 100000 * i));
    EXPECT_EQ(f.Overlaps(*exact, r)[0], 0);
    over += f.Overlaps(*lose_half, r)[0] > 0;
  }
  EXPECT_GT(over, 0) << "half the removes lost must leave evicted prefixes believed cached";
}

// The PR #53007 plan under old (A = S = 13,824; docs/semantics.md §13.B). Turn 1's prefill steps
// end at 7,680 and 19,968, so the mamba group never caches a state at 13,824: the real hit of
// turn 2 is 0. A router indexing attention only sees the MLA blocks up to 13,824 (every group
// publishes up to the round-down to S) and promises 13,824 tokens. With a checkpoint at 13,824
// the two agree.
TEST(CacheViewTest, AttentionOnlyOverPromisesOnAHybridPlan) {
  const KvPlan plan = KimiPlan("old");
  Fleetlet f(plan, 2);
  auto exact = View(plan, 2, Kind("exact"));
  auto attention = View(plan, 2, Kind("attention_only"));
  f.Watch(exact.get());
  f.Watch(attention.get());
  const Request turn1 = Literal(1, Iota(20000));
  f.Serve(1, turn1, {7680, 19968, 20000});
  const Request turn2 = Literal(2, Concat(Iota(20000), Iota(1000, 50000)));
  EXPECT_EQ(f.Overlaps(*exact, turn2), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(f.Overlaps(*attention, turn2), (std::vector<int64_t>{0, 13824}));
  const Request turn1b = Literal(3, Concat(Iota(20000), Iota(7, 90000)));
  f.Serve(0, turn1b, {13824, 19968, 20007});
  EXPECT_EQ(f.Overlaps(*exact, turn2), (std::vector<int64_t>{13824, 0}));
  EXPECT_EQ(f.Overlaps(*attention, turn2), (std::vector<int64_t>{13824, 13824}));
}

// No events: the router believes what it routed, and forgets by its own bound and TTL.
TEST(CacheViewTest, ApproximateViewForgetsByItsOwnBound) {
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 4, 64);  // H = 4
  Fleetlet f(plan, 2);
  RouterViewConfig roomy = Kind("approximate"), tight = Kind("approximate"),
                   brief = Kind("approximate");
  roomy.max_blocks = 100;
  tight.max_blocks = 6;
  brief.ttl_s = 10;
  auto v_roomy = View(plan, 2, roomy), v_tight = View(plan, 2, tight),
       v_brief = View(plan, 2, brief);
  EXPECT_FALSE(v_roomy->reads_events());
  const Request first = Literal(1, Iota(40, 1));  // 10 blocks of 4
  const Request next = Literal(2, Concat(Iota(40, 1), Iota(8, 900)));
  for (auto* v : {v_roomy.get(), v_tight.get(), v_brief.get()}) f.Routed(*v, first, 1);
  // It never ran on a replica: the exact cache is empty, the views believe the routing.
  EXPECT_EQ(f.Overlaps(*v_roomy, next), (std::vector<int64_t>{0, 40}));
  // Six blocks remembered: the last six routed, so the prompt's first blocks are forgotten and
  // no run from the start remains.
  EXPECT_EQ(f.Overlaps(*v_tight, next), (std::vector<int64_t>{0, 0}));
  f.now_ns = 5'000'000'000;
  EXPECT_EQ(f.Overlaps(*v_brief, next), (std::vector<int64_t>{0, 40}));
  f.now_ns = 10'500'000'000;
  EXPECT_EQ(f.Overlaps(*v_brief, next), (std::vector<int64_t>{0, 0}));
}

ReplayResult MustReplayFleet(const KvPlan& plan, EngineConfig engine, std::vector<Request> reqs,
                             int replicas, const std::string& router) {
  engine.fleet.replicas = replicas;
  engine.fleet.router = router;
  VectorTrace trace(std::move(reqs));
  ReplayOptions options;
  options.check_invariants = true;  // the exact view verified against every replica's lookup
  auto result = Replay(plan, ModelSpec{}, engine, trace, options);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *std::move(result) : ReplayResult{};
}

// Three conversations of three turns over two replicas. A router that ignores the caches
// (round_robin) sends turns away from their prefix: regret. kv_aware with a large overlap weight
// always takes the longest hit: regret 0. With every event lost it routes by load alone, as
// least_loaded does.
TEST(CacheViewTest, RoutingRegretIsZeroForTheLongestHitAndPositiveWithoutTheCache) {
  std::vector<Request> reqs;
  for (int turn = 0; turn < 3; ++turn) {
    for (int c = 0; c < 3; ++c) {
      std::vector<uint32_t> tokens = Iota(32, 10000 * (c + 1));
      for (int t = 1; t <= turn; ++t) tokens = Concat(tokens, Iota(8, 10000 * (c + 1) + 100 * t));
      reqs.push_back(Req(turn * 3 + c, 1000.0 * turn + c, tokens, 2));
    }
  }
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 4, 256);
  EngineConfig engine = SmallEngine(64);
  const ReplayResult rr = MustReplayFleet(plan, engine, reqs, 2, "round_robin");
  ASSERT_TRUE(rr.fleet.has_value());
  EXPECT_GT(rr.fleet->routing_regret_tokens, 0);
  EXPECT_GT(rr.fleet->requests_with_regret, 0);
  EXPECT_TRUE(rr.fleet->router_view.empty());
  engine.fleet.overlap_weight = 1e6;
  const ReplayResult kv = MustReplayFleet(plan, engine, reqs, 2, "kv_aware");
  EXPECT_EQ(kv.fleet->router_view, "exact");
  EXPECT_EQ(kv.fleet->routing_regret_tokens, 0);
  EXPECT_GT(kv.fleet->best_replica_hit_tokens, 0);
  EXPECT_EQ(kv.fleet->best_replica_hit_tokens, kv.prefix_cache.hits);
  int64_t per_request = 0;
  for (const RequestRecord& r : rr.per_request) per_request += r.routing_regret_tokens;
  EXPECT_EQ(per_request, rr.fleet->routing_regret_tokens);
  engine.fleet.view.kind = "lossy";
  engine.fleet.view.event_loss = 1;
  const ReplayResult blind = MustReplayFleet(plan, engine, reqs, 2, "kv_aware");
  const ReplayResult load = MustReplayFleet(plan, SmallEngine(64), reqs, 2, "least_loaded");
  std::vector<int> blind_replicas, load_replicas;
  for (const RequestRecord& r : blind.per_request) blind_replicas.push_back(r.replica);
  for (const RequestRecord& r : load.per_request) load_replicas.push_back(r.replica);
  EXPECT_EQ(blind_replicas, load_replicas);
  EXPECT_EQ(blind.fleet->router_view, "lossy");
}

TEST(CacheViewTest, AViewNeedsARouterThatReadsTheCaches) {
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 4, 64);
  EngineConfig engine = SmallEngine(64);
  engine.fleet.replicas = 2;
  engine.fleet.router = "round_robin";
  engine.fleet.view.kind = "delayed";
  VectorTrace trace({Req(0, 0, Iota(8, 1), 1)});
  auto r = Replay(plan, ModelSpec{}, engine, trace, ReplayOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("does not read the caches"), std::string::npos);
  engine.fleet.router = "kv_aware_unaligned";
  VectorTrace trace2({Req(0, 0, Iota(8, 1), 1)});
  r = Replay(plan, ModelSpec{}, engine, trace2, ReplayOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("attention_only"), std::string::npos);
}

// A view's knob for a view the router does not read through would do nothing: the run stops
// with an error naming the engine JSON field (the CLI prints its flag), not a report that looks
// like the knob's effect (the exact view's, or an oblivious router's).
TEST(CacheViewTest, AKnobOfAnotherViewIsAnError) {
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 4, 64);
  struct Case {
    const char* router;
    const char* view;  // "" : the router's default
    void (*set)(RouterViewConfig&);
    const char* field;
  };
  const Case cases[] = {
      {"kv_aware", "", [](RouterViewConfig& v) { v.event_loss = 0.2; }, "`router.event_loss`"},
      {"kv_aware", "exact", [](RouterViewConfig& v) { v.event_delay_ms = 50; },
       "`router.event_delay_ms`"},
      {"kv_aware", "lossy",
       [](RouterViewConfig& v) {
         v.event_loss = 0.2;
         v.event_delay_ms = 50;
       },
       "`router.event_delay_ms`"},
      {"kv_aware", "delayed",
       [](RouterViewConfig& v) {
         v.event_delay_ms = 5;
         v.max_blocks = 10;
       },
       "`router.max_blocks`"},
      {"kv_aware_unaligned", "", [](RouterViewConfig& v) { v.ttl_s = 5; }, "`router.ttl_s`"},
      {"round_robin", "", [](RouterViewConfig& v) { v.ttl_s = 5; }, "`router.ttl_s`"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.router) + " / " + c.view + " / " + c.field);
    EngineConfig engine = SmallEngine(64);
    engine.fleet.replicas = 2;
    engine.fleet.router = c.router;
    engine.fleet.view.kind = c.view;
    c.set(engine.fleet.view);
    VectorTrace trace({Req(0, 0, Iota(8, 1), 1)});
    auto r = Replay(plan, ModelSpec{}, engine, trace, ReplayOptions{});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.field), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("does nothing"), std::string::npos);
  }
  // The delayed and lossy views without their delay or loss are the exact view by another name.
  for (const char* view : {"delayed", "lossy"}) {
    SCOPED_TRACE(view);
    EngineConfig engine = SmallEngine(64);
    engine.fleet.replicas = 2;
    engine.fleet.router = "kv_aware";
    engine.fleet.view.kind = view;
    VectorTrace trace({Req(0, 0, Iota(8, 1), 1)});
    auto r = Replay(plan, ModelSpec{}, engine, trace, ReplayOptions{});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("is the exact view"), std::string::npos)
        << r.status().message();
  }
  // Each knob on its own view runs, and the approximate view needs none.
  const std::pair<const char*, void (*)(RouterViewConfig&)> own[] = {
      {"delayed", [](RouterViewConfig& v) { v.event_delay_ms = 50; }},
      {"lossy", [](RouterViewConfig& v) { v.event_loss = 0.2; }},
      {"approximate",
       [](RouterViewConfig& v) {
         v.max_blocks = 10;
         v.ttl_s = 5;
       }},
      {"approximate", [](RouterViewConfig&) {}},
  };
  for (const auto& [view, set] : own) {
    SCOPED_TRACE(view);
    EngineConfig engine = SmallEngine(64);
    engine.fleet.replicas = 2;
    engine.fleet.router = "kv_aware";
    engine.fleet.view.kind = view;
    set(engine.fleet.view);
    VectorTrace trace({Req(0, 0, Iota(8, 1), 1)});
    EXPECT_TRUE(Replay(plan, ModelSpec{}, engine, trace, ReplayOptions{}).ok());
  }
}

}  // namespace
}  // namespace prefixsim
