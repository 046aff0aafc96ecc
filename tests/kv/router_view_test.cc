// The router's view of the replicas against their own lookups (docs/semantics.md §9 and
// docs/design.md §2 "Fleet"): on generated plans of every kind, after random traffic over three
// replicas (and over 67) with evictions, what a kv_aware router reads on the fleet's event-fed
// index (kv::FleetIndex, one walk for all replicas) equals, for every replica, the hit that
// replica's own lookup gives the same prompt, and for the replica that serves it, the admission
// lookup (GetComputedBlocks). The replica side goes through public KvCacheManager calls only.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "prefixsim/kv_cache_manager.h"
#include "sim/kv/fleet_index.h"
#include "sim/kv/routing.h"
#include "tests/kv/kv_test_util.h"

namespace prefixsim {
namespace {

using testing_kv::Concat;
using testing_kv::Group;
using testing_kv::Iota;
using testing_kv::Literal;
using testing_kv::Plan;
using testing_kv::Unitary;

// A replica's cache events into the fleet's index, as the fleet's feed does.
class Feed final : public CacheEventListener {
 public:
  Feed(kv::FleetIndex* index, int replica) : index_(index), replica_(replica) {}
  void OnBlockStored(uint64_t key, uint32_t tag, int /*group*/) override {
    index_->Store(replica_, key, tag);
  }
  void OnBlockRemoved(uint64_t key, int /*group*/) override {
    EXPECT_TRUE(index_->Remove(replica_, key));
  }

 private:
  kv::FleetIndex* index_;
  int replica_;
};

struct PlanCase {
  std::string name;
  KvPlan plan;
};

KvPlan Eagle(KvPlan p) {
  for (KvGroup& g : p.groups) g.is_eagle_group = true;
  return p;
}

// Every plan kind: full only; SWA hybrid; mamba hybrid (A = S > H); mamba-free hybrids whose
// non-full group has a block smaller than S; a fine-grained (partial-hit) mamba plan; and EAGLE
// variants (docs/semantics.md §7, §9.2-§9.4).
std::vector<PlanCase> Plans(int64_t num_blocks) {
  std::vector<PlanCase> out;
  out.push_back({"full_only", Unitary(LayerKind::kFullAttention, 16, num_blocks)});
  out.push_back({"full_only_eagle", Unitary(LayerKind::kFullAttention, 16, num_blocks, 0, true)});
  out.push_back({"swa_hybrid", Plan({Group(LayerKind::kFullAttention, 16),
                                     Group(LayerKind::kSlidingWindow, 16, 33)},
                                    num_blocks, 16, 16, 16)});
  out.push_back(
      {"mamba_hybrid", Plan({Group(LayerKind::kFullAttention, 16), Group(LayerKind::kMamba, 32)},
                            num_blocks, 32, 16, 32)});
  out.push_back({"swa_smaller_than_s", Plan({Group(LayerKind::kFullAttention, 32),
                                             Group(LayerKind::kSlidingWindow, 16, 20)},
                                            num_blocks, 32, 16, 32)});
  out.push_back({"two_swa_smaller_than_s", Plan({Group(LayerKind::kFullAttention, 48),
                                                 Group(LayerKind::kSlidingWindow, 16, 20),
                                                 Group(LayerKind::kSlidingWindow, 8, 12)},
                                                num_blocks, 48, 8, 48)});
  out.push_back({"swa_smaller_than_s_eagle", Eagle(Plan({Group(LayerKind::kFullAttention, 32),
                                                         Group(LayerKind::kSlidingWindow, 16, 20)},
                                                        num_blocks, 32, 16, 32))});
  KvPlan partial = Plan({Group(LayerKind::kFullAttention, 16), Group(LayerKind::kMamba, 64)},
                        num_blocks, 64, 16, 16);
  partial.partial_hits = true;
  out.push_back({"mamba_partial_hits", partial});
  return out;
}

// A prompt: one of four shared prefixes (random length), then a unique tail; a third of them end
// on a 64-token boundary (a multiple of every plan's A), where max_hit = prompt - 1 matters.
std::vector<uint32_t> RandomPrompt(std::mt19937_64& rng, uint32_t unique) {
  const uint32_t prefix = static_cast<uint32_t>(rng() % 4);
  const int shared = static_cast<int>(rng() % 200);
  int tail = 1 + static_cast<int>(rng() % 60);
  if (rng() % 3 == 0) tail = 64 - shared % 64;
  return Concat(Iota(shared, 1000000 * (prefix + 1)), Iota(tail, 100000000 + 1000 * unique));
}

// Random traffic of `steps` prompts over `replicas` replicas of `num_blocks` blocks each, for
// every plan kind.
void ExpectFleetIndexGivesEveryReplicasOwnLookup(int replicas, int64_t num_blocks, int steps) {
  for (const PlanCase& c : Plans(num_blocks)) {
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      SCOPED_TRACE(c.name + " seed " + std::to_string(seed));
      std::vector<std::unique_ptr<KvCacheManager>> kvs;
      kv::FleetIndex index(replicas);
      std::vector<std::unique_ptr<Feed>> feeds;
      for (int r = 0; r < replicas; ++r) {
        kvs.push_back(std::make_unique<KvCacheManager>(c.plan, testing_kv::Checked()));
        feeds.push_back(std::make_unique<Feed>(&index, r));
        kv::AttachCacheListener(*kvs[r], feeds.back().get());
      }
      std::mt19937_64 rng(seed);
      std::deque<Request> requests;  // outlive their registration
      uint64_t next_id = 1;
      int64_t checks = 0, nonzero = 0, differing = 0;
      std::vector<kv::HashPair> hashes;
      std::vector<int64_t> hits, runs;
      for (int step = 0; step < steps; ++step) {
        // One probe in four repeats the previous prompt whole (docs/semantics.md §9.1: the hit
        // stops one token short of it).
        std::vector<uint32_t> tokens = step > 0 && rng() % 4 == 0
                                           ? requests.back().literal_tokens
                                           : RandomPrompt(rng, static_cast<uint32_t>(step));
        requests.push_back(Literal(next_id++, std::move(tokens)));
        Request& probe = requests.back();
        // The router's view first: every replica at once, on the fleet's index.
        kv::HashPrompt(*kvs[0], probe, &hashes);
        kv::PeekPromptHits(*kvs[0], probe, hashes, index, &hits);
        kv::PeekPrimaryOverlaps(*kvs[0], probe, hashes, index, &runs);
        ASSERT_EQ(hits.size(), static_cast<size_t>(replicas));
        for (int r = 0; r < replicas; ++r) {
          EXPECT_EQ(hits[r], kv::PeekPromptHit(*kvs[r], probe, hashes))
              << "replica " << r << " step " << step;
          EXPECT_EQ(runs[r], kv::PeekPrimaryOverlap(*kvs[r], probe, hashes))
              << "replica " << r << " step " << step;
        }
        differing += *std::max_element(hits.begin(), hits.end()) !=
                     *std::min_element(hits.begin(), hits.end());
        // Then the replica that serves it: its admission lookup.
        const int chosen = static_cast<int>(rng() % replicas);
        KvCacheManager& kv = *kvs[chosen];
        KvRequestHandle h = kv.AddRequest(&probe);
        const PrefixHit hit = kv.GetComputedBlocks(h);
        EXPECT_EQ(hits[chosen], hit.hit_tokens)
            << "step " << step << " prompt " << probe.prompt_tokens;
        ++checks;
        nonzero += hit.hit_tokens > 0;
        // Serve it (a prefill in chunks ending on 64-token boundaries, where mamba states are
        // kept, docs/semantics.md §11.1; then one decode step) and free it: its blocks stay
        // cached until evicted by later requests in this small pool.
        int64_t computed = 0, new_computed = hit.hit_tokens;
        bool ok = true;
        while (ok && computed + new_computed < probe.prompt_tokens) {
          const int64_t start = computed + new_computed;
          const int64_t end = std::min<int64_t>((start / 64 + 1) * 64, probe.prompt_tokens);
          ok = kv.AllocateSlots(h, computed, end - start, new_computed, 0);
          computed = end;
          new_computed = 0;
        }
        if (ok) {
          kv.SetNumTokens(h, probe.prompt_tokens + 1);
          kv.AllocateSlots(h, probe.prompt_tokens, 1, 0, 0);
        }
        kv.Free(h);
        kv.RemoveRequest(probe.id);
      }
      EXPECT_EQ(checks, steps);
      EXPECT_GT(nonzero, 0) << "the traffic must produce hits for the property to mean anything";
      EXPECT_GT(differing, 0) << "the replicas must differ for the index's sets to matter";
      int64_t evicted = 0;
      for (const auto& kv : kvs) evicted += kv->counters().evicted_blocks;
      EXPECT_GT(evicted, 0);
      for (auto& kv : kvs) kv::AttachCacheListener(*kv, nullptr);
    }
  }
}

TEST(RouterViewTest, FleetIndexGivesEveryReplicasOwnLookup) {
  ExpectFleetIndexGivesEveryReplicasOwnLookup(/*replicas=*/3, /*num_blocks=*/128, /*steps=*/300);
}

// Full attention's blocks are walked once for all the replicas, 64 to a word of the walk's set
// (KvCacheCoordinator::FindLongestCacheHits): a fleet of more than one word, with small pools so
// that every replica still evicts.
TEST(RouterViewTest, FleetIndexGivesEveryReplicasOwnLookupPastOneWordOfReplicas) {
  ExpectFleetIndexGivesEveryReplicasOwnLookup(/*replicas=*/67, /*num_blocks=*/40, /*steps=*/900);
}

// Two contents under one 64-bit key (a collision, sim/kv/block_hasher.h): the fleet's index keeps
// the first content it stored, ignores the other's store and answers its lookups with a miss (the
// one walk's and a replica's alike), and counts each of them.
TEST(RouterViewTest, FleetIndexIgnoresAndCountsAnotherContentUnderOneKey) {
  kv::FleetIndex index(2);
  const kv::HashPair stored{0x1234, 0x5678};
  const kv::HashPair other{0x1234, 0x9abc};
  const uint64_t key = stored.hash ^ kv::GroupSalt(0);
  index.Store(0, key, kv::GroupTag(0, stored));
  ASSERT_NE(index.Holders(0, stored), nullptr);
  EXPECT_NE(index.hit_index(0).Lookup(0, stored), kv::kNoBlock);
  EXPECT_EQ(index.collisions(), 0);
  index.Store(1, key, kv::GroupTag(0, other));
  EXPECT_FALSE(index.Holds(1, key));
  EXPECT_EQ(index.collisions(), 1);
  EXPECT_EQ(index.Holders(0, other), nullptr);
  EXPECT_EQ(index.collisions(), 2);
  EXPECT_EQ(index.hit_index(0).Lookup(0, other), kv::kNoBlock);
  EXPECT_EQ(index.collisions(), 3);
}

}  // namespace
}  // namespace prefixsim
