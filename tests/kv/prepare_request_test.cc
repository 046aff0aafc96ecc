// KvCacheManager::PrepareRequest (issue 15): the replay's read-ahead thread hashes each prompt at
// the plan's H before the request reaches the engine. That must change nothing: the chained
// hashes are a function of the request's content alone (docs/semantics.md §8.1), so every lookup,
// allocation, block table and router hash chain is what the manager computes by itself. Each
// test replays the same requests through two managers, one given the prepared requests, and
// compares everything the manager reports after every call.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "prefixsim/kv_cache_manager.h"
#include "sim/kv/block_hasher.h"
#include "sim/kv/routing.h"
#include "tests/kv/kv_test_util.h"

namespace prefixsim {
namespace {

using testing_kv::Group;
using testing_kv::Plan;

// Prompts that share prefixes (one of three virtual documents, cut anywhere), end in literal
// tokens, and sometimes carry a namespace (cache_salt).
std::vector<Request> Requests(uint64_t seed, int n) {
  std::mt19937_64 rng(seed);
  std::vector<Request> out;
  for (int i = 0; i < n; ++i) {
    Request r;
    r.id = static_cast<uint64_t>(i);
    r.output_tokens = 1 + static_cast<int64_t>(rng() % 24);
    r.namespace_key = rng() % 4 == 0 ? 7 : 0;
    const uint32_t shared = static_cast<uint32_t>(rng() % 90);
    if (shared > 0) r.prompt.push_back({100 + rng() % 3, 0, shared});
    const uint32_t literal = static_cast<uint32_t>(rng() % 40);
    for (uint32_t t = 0; t < literal; ++t) r.literal_tokens.push_back(rng() % 5);
    if (literal > 0) r.prompt.push_back({ContentSegment::kLiteralContent, 0, literal});
    r.prompt_tokens = shared + literal;
    out.push_back(std::move(r));
  }
  return out;
}

std::string Tables(const KvCacheManager& m, uint64_t id, int num_groups) {
  std::string s;
  for (int g = 0; g < num_groups; ++g) {
    absl::StrAppend(&s, "[", absl::StrJoin(m.BlockTable(id, g), " "), "]");
  }
  return s;
}

// Runs the requests one after another (their blocks stay cached for the next ones, and a small
// pool evicts), prefill then one decode step per output token, logging what the manager reports.
std::vector<std::string> Drive(const KvPlan& plan, const std::vector<Request>& requests) {
  KvCacheOptions options;
  options.check_invariants = true;
  KvCacheManager m(plan, options);
  const int groups = static_cast<int>(plan.groups.size());
  std::vector<std::string> log;
  std::vector<kv::HashPair> hashes;
  for (const Request& r : requests) {
    kv::HashPrompt(m, r, &hashes);
    std::string chain;
    for (const kv::HashPair& h : hashes) absl::StrAppend(&chain, h.hash, ":", h.check, " ");
    log.push_back(absl::StrCat("request ", r.id, " chain ", chain, "peek ",
                               kv::PeekPromptHit(m, r, hashes), " ",
                               kv::PeekPrimaryOverlap(m, r, hashes)));
    if (r.prompt_tokens <= 0) continue;
    const KvRequestHandle h = m.AddRequest(&r);
    const PrefixHit hit = m.GetComputedBlocks(h);
    log.push_back(absl::StrCat("hit ", hit.hit_tokens, " ", hit.alignment_loss_tokens, " ",
                               hit.lost_to_alignment_tokens));
    bool ok = m.AllocateSlots(h, 0, r.prompt_tokens - hit.hit_tokens, hit.hit_tokens, 0);
    int64_t tokens = r.prompt_tokens;
    for (int64_t out = 1; ok && out < r.output_tokens; ++out) {
      m.SetNumTokens(h, ++tokens);
      ok = m.AllocateSlots(h, tokens - 1, 1, 0, 0);
    }
    log.push_back(absl::StrCat("ok ", ok, " tables ", Tables(m, r.id, groups), " cached ",
                               m.counters().cached_blocks, " evicted ", m.counters().evicted_blocks,
                               " free ", m.num_free_blocks()));
    m.Free(h);
    m.RemoveRequest(r.id);
  }
  return log;
}

void ExpectPreparingChangesNothing(const KvPlan& plan, uint64_t seed) {
  const std::vector<Request> plain = Requests(seed, 60);
  std::vector<Request> prepared = plain;
  size_t with_hashes = 0;
  for (Request& r : prepared) {
    KvCacheManager::PrepareRequest(plan, &r);
    with_hashes += !r.prompt_hashes.hashes.empty();
    // The chunks the admission lookup reads (max_hit = prompt - 1), at the plan's H.
    const int64_t h = r.prompt_hashes.chunk_tokens;
    if (h > 0) {
      EXPECT_EQ(static_cast<int64_t>(r.prompt_hashes.hashes.size()), (r.prompt_tokens - 1) / h);
    }
  }
  EXPECT_GT(with_hashes, prepared.size() / 2) << "PrepareRequest prepared almost nothing";
  const std::vector<std::string> expected = Drive(plan, plain);
  const std::vector<std::string> actual = Drive(plan, prepared);
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_EQ(actual[i], expected[i])
        << "line " << i << " of plan " << plan.groups.size() << " groups, seed " << seed;
  }
}

TEST(PrepareRequestTest, UnitaryPlans) {
  ExpectPreparingChangesNothing(testing_kv::Unitary(LayerKind::kFullAttention, 4, 40), 1);
  ExpectPreparingChangesNothing(
      testing_kv::Unitary(LayerKind::kFullAttention, 4, 40, 0, /*eagle=*/true), 2);
}

TEST(PrepareRequestTest, HybridPlans) {
  // H finer than the blocks: the shadow index (A > U) and the alignment-loss lookup at H.
  ExpectPreparingChangesNothing(
      Plan({Group(LayerKind::kFullAttention, 8), Group(LayerKind::kSlidingWindow, 4, 13),
            Group(LayerKind::kMamba, 16)},
           120, 16, 4, 16),
      3);
  ExpectPreparingChangesNothing(Plan({Group(LayerKind::kFullAttention, 8, 0, true),
                                      Group(LayerKind::kSlidingWindow, 4, 6, true)},
                                     100, 8, 4, 8),
                                4);
  KvPlan partial = Plan({Group(LayerKind::kMla, 8), Group(LayerKind::kMamba, 8)}, 80, 8, 2, 2);
  partial.partial_hits = true;
  ExpectPreparingChangesNothing(partial, 5);
}

TEST(PrepareRequestTest, HashesOfAnotherGranularityAreIgnored) {
  // Prepared for a plan with H = 2, replayed on one with H = 4: the manager hashes for itself.
  const KvPlan fine = Plan({Group(LayerKind::kMla, 8), Group(LayerKind::kMamba, 8)}, 80, 8, 2, 8);
  const KvPlan coarse = Plan({Group(LayerKind::kMla, 8), Group(LayerKind::kMamba, 8)}, 80, 8, 4, 8);
  const std::vector<Request> plain = Requests(6, 40);
  std::vector<Request> prepared = plain;
  for (Request& r : prepared) {
    KvCacheManager::PrepareRequest(fine, &r);
    if (r.prompt_tokens > 2) {
      EXPECT_EQ(r.prompt_hashes.chunk_tokens, 2);
    }
  }
  EXPECT_EQ(Drive(coarse, prepared), Drive(coarse, plain));
}

TEST(PrepareRequestTest, PreparingAgainKeepsOnlyHashesOfTheSameUnit) {
  // A search replaying one parsed trace under many plans (tune) prepares each request again per
  // plan: hashes at the plan's H are kept, hashes at another H are replaced.
  const KvPlan fine = Plan({Group(LayerKind::kMla, 8), Group(LayerKind::kMamba, 8)}, 80, 8, 2, 8);
  const KvPlan coarse = Plan({Group(LayerKind::kMla, 8), Group(LayerKind::kMamba, 8)}, 80, 8, 4, 8);
  for (const Request& original : Requests(8, 30)) {
    if (original.prompt_tokens <= 4) continue;
    Request fresh = original;
    KvCacheManager::PrepareRequest(coarse, &fresh);
    Request again = original;
    KvCacheManager::PrepareRequest(fine, &again);
    KvCacheManager::PrepareRequest(coarse, &again);
    EXPECT_EQ(again.prompt_hashes.chunk_tokens, 4);
    EXPECT_EQ(again.prompt_hashes.hashes, fresh.prompt_hashes.hashes);
    KvCacheManager::PrepareRequest(coarse, &again);
    EXPECT_EQ(again.prompt_hashes.hashes, fresh.prompt_hashes.hashes);
  }
}

TEST(PrepareRequestTest, NothingWithoutPrefixCaching) {
  KvPlan plan = testing_kv::Unitary(LayerKind::kFullAttention, 4, 40);
  plan.enable_prefix_caching = false;
  for (Request r : Requests(7, 10)) {
    KvCacheManager::PrepareRequest(plan, &r);
    EXPECT_EQ(r.prompt_hashes.chunk_tokens, 0);
    EXPECT_TRUE(r.prompt_hashes.hashes.empty());
  }
}

}  // namespace
}  // namespace prefixsim
