// Miss causes with offload tiers (docs/design.md §7, docs/semantics.md §16), on hand-computed
// cases: a tier's tokens are hits; evicted tokens split into those a tier stored and dropped and
// those no tier stored. Block 16, full attention, every step 1 ms (SmallEngine); the CPU tier's
// slots are 1 KiB, one block of the one group.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "prefixsim/engine_config.h"
#include "prefixsim/report.h"
#include "sim/report/report.h"
#include "tests/engine/engine_test_util.h"

namespace prefixsim {
namespace {

using testing_engine::MustReplay;
using testing_engine::Req;
using testing_engine::SmallEngine;
using testing_engine::WithCpuTier;
using testing_kv::Concat;
using testing_kv::Iota;
using testing_kv::Unitary;

// With 4 usable GPU blocks and 4 CPU slots: r0 = A (64 tokens); r1 = 64 other tokens pushes A
// out of both; r2 = A's first 48 tokens + 16 new ones.
std::vector<Request> PrefixPushedOutOfBoth() {
  const std::vector<uint32_t> a = Iota(64);
  return {Req(0, 0, a, 1), Req(1, 5, Iota(64, 1000), 1),
          Req(2, 10, Concat(std::vector<uint32_t>(a.begin(), a.begin() + 48), Iota(16, 5000)), 1)};
}

// r0 = A (64 tokens); r1 = 128 other tokens takes all 8 GPU blocks; r2 = A + 16 new tokens. On the
// GPU alone r2's 64 cacheable tokens are evicted; with a CPU tier they come back and are hits, so
// the causes' hit is the request's hit.
TEST(OffloadMissCausesTest, ATiersTokensAreHits) {
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 16, 9);
  const std::vector<uint32_t> a = Iota(64);
  const std::vector<Request> reqs = {Req(0, 0, a, 1), Req(1, 5, Iota(128, 1000), 1),
                                     Req(2, 10, Concat(a, Iota(16, 5000)), 1)};
  const ReplayResult plain = MustReplay(plan, SmallEngine(8192), reqs);
  EXPECT_EQ(plain.per_request[2].miss.of(MissCause::kEvicted), 64);
  EXPECT_FALSE(plain.miss_causes.tiers);

  const ReplayResult r = MustReplay(plan, WithCpuTier(64), reqs);
  const MissAttribution& m = r.per_request[2].miss;
  EXPECT_EQ(r.per_request[2].hit_tokens, 64);
  EXPECT_EQ(m.of(MissCause::kHit), 64);
  EXPECT_EQ(m.of(MissCause::kEvicted), 0);
  EXPECT_EQ(m.of(MissCause::kTail), 16);
  EXPECT_EQ(m.tier_evicted, 0);
  EXPECT_EQ(m.tier_not_stored, 0);
  EXPECT_TRUE(r.miss_causes.tiers);
  EXPECT_EQ(r.miss_causes.first.tokens[static_cast<int>(MissCause::kHit)], r.prefix_cache.hits);
}

// 4 usable GPU blocks and a CPU tier of 4 slots: r1 (64 other tokens) pushes A out of both, so
// r2 = A's first 48 tokens + 16 new ones finds its 48 cacheable tokens evicted, all of them stored
// in the tier and evicted from it. A file-system tier behind it keeps them: then they are hits.
TEST(OffloadMissCausesTest, TokensATierDroppedAreEvictedFromTheTier) {
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 16, 5);
  const std::vector<Request> reqs = PrefixPushedOutOfBoth();
  const ReplayResult r = MustReplay(plan, WithCpuTier(4), reqs);
  const MissAttribution& m = r.per_request[2].miss;
  EXPECT_EQ(r.per_request[2].hit_tokens, 0);
  EXPECT_EQ(m.of(MissCause::kEvicted), 48);
  EXPECT_EQ(m.tier_evicted, 48);
  EXPECT_EQ(m.tier_not_stored, 0);
  EXPECT_EQ(r.miss_causes.first.tier_evicted_tokens, 48);
  EXPECT_EQ(r.miss_causes.forgotten_tier_keys, 0);

  EngineConfig e = WithCpuTier(4);
  SecondaryTierConfig fs;
  fs.type = "fs";
  fs.capacity_bytes = 1 << 20;
  e.kv_offload.secondary_tiers.push_back(fs);
  const ReplayResult with_fs = MustReplay(plan, e, reqs);
  const MissAttribution& f = with_fs.per_request[2].miss;
  EXPECT_EQ(f.of(MissCause::kHit), 48);
  EXPECT_EQ(f.of(MissCause::kEvicted), 0);
  EXPECT_EQ(f.tier_evicted, 0);
}

// store_threshold 2 (as OffloadReplayTest.StoreThresholdStoresBlocksLookedUpOften): r2 = A + X
// after a flush finds A's 64 tokens evicted from the GPU and never stored in the tier (A was looked
// up once before); r4 = A + Y hits A's first block from the tier (r2 stored it, looked up twice),
// and the other 48 tokens of A were never stored.
TEST(OffloadMissCausesTest, TokensBelowTheStoreThresholdWereNeverStored) {
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 16, 9);
  const std::vector<uint32_t> a = Iota(64);
  EngineConfig e = WithCpuTier(64);
  e.kv_offload.store_threshold = 2;
  const ReplayResult r = MustReplay(
      plan, e,
      {Req(0, 0, a, 1), Req(1, 5, Iota(128, 1000), 1), Req(2, 10, Concat(a, Iota(16, 5000)), 1),
       Req(3, 15, Iota(128, 2000), 1), Req(4, 20, Concat(a, Iota(16, 7000)), 1)});
  const MissAttribution& m2 = r.per_request[2].miss;
  EXPECT_EQ(m2.of(MissCause::kEvicted), 64);
  EXPECT_EQ(m2.tier_evicted, 0);
  EXPECT_EQ(m2.tier_not_stored, 64);
  const MissAttribution& m4 = r.per_request[4].miss;
  EXPECT_EQ(m4.of(MissCause::kHit), 16);
  EXPECT_EQ(m4.of(MissCause::kEvicted), 48);
  EXPECT_EQ(m4.tier_evicted, 0);
  EXPECT_EQ(m4.tier_not_stored, 48);
}

// A record of one evicted key forgets the others: tokens a tier dropped then count as never
// stored, and the report says how many keys were forgotten.
TEST(OffloadMissCausesTest, AFullRecordForgetsOlderEvictions) {
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 16, 5);
  testing_engine::VectorTrace trace(PrefixPushedOutOfBoth());
  ReplayOptions options;
  options.check_invariants = true;
  options.miss_record_bytes = 1;  // the smallest record: 2 keys
  const auto r = Replay(plan, ModelSpec{}, WithCpuTier(4), trace, options);
  ASSERT_TRUE(r.ok()) << r.status();
  const MissAttribution& m = r->per_request[2].miss;
  EXPECT_EQ(m.of(MissCause::kEvicted) + m.of(MissCause::kElsewhere) + m.of(MissCause::kCompulsory),
            48);
  EXPECT_LT(m.tier_evicted, 48);
  EXPECT_GT(r->miss_causes.forgotten_tier_keys, 0);
}

// The reports carry the split where tiers are on, and only there.
TEST(OffloadMissCausesTest, ReportsShowTheSplitOnlyWithTiers) {
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 16, 5);
  const std::vector<Request> reqs = PrefixPushedOutOfBoth();
  const ReplayResult tiers = MustReplay(plan, WithCpuTier(4), reqs);
  const ReplayResult plain = MustReplay(plan, SmallEngine(8192), reqs);

  std::ostringstream csv, plain_csv;
  WriteRequestsCsv(tiers, csv);
  WriteRequestsCsv(plain, plain_csv);
  EXPECT_NE(csv.str().find(",tier_evicted_tokens,tier_not_stored_tokens\n"), std::string::npos);
  // r2: 48 evicted, all of them from the tier.
  EXPECT_NE(csv.str().find(",0,0,48,0\n"), std::string::npos) << csv.str();
  EXPECT_EQ(plain_csv.str().find("tier_"), std::string::npos);

  const std::string json = ReplayResultToJson(tiers).dump();
  EXPECT_NE(json.find(R"("evicted_tokens_by_tier":{"evicted_from_tier":48,"not_stored":0})"),
            std::string::npos)
      << json;
  EXPECT_EQ(ReplayResultToJson(plain).dump().find("evicted_tokens_by_tier"), std::string::npos);
  EXPECT_NE(ReplayReportText(tiers).find("48 stored and evicted from a tier, 0 never stored"),
            std::string::npos);
  EXPECT_EQ(ReplayReportText(plain).find("offload tiers"), std::string::npos);
  EXPECT_NE(ComparisonReportText({tiers, tiers}).find("miss: evicted from a tier"),
            std::string::npos);
  EXPECT_EQ(ComparisonReportText({plain, plain}).find("from a tier"), std::string::npos);
}

}  // namespace
}  // namespace prefixsim
