#include "prefixsim/analyze.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

namespace prefixsim {
namespace {

ContentSegment Virtual(uint64_t content_id, uint32_t offset, uint32_t length) {
  return ContentSegment{content_id, offset, length};
}

Request Prompt(std::vector<ContentSegment> segments, uint64_t namespace_key = 0) {
  Request r;
  for (const ContentSegment& s : segments) r.prompt_tokens += s.length;
  r.prompt = std::move(segments);
  r.namespace_key = namespace_key;
  return r;
}

Request Tokens(std::vector<uint32_t> tokens) {
  Request r;
  r.prompt_tokens = static_cast<int64_t>(tokens.size());
  r.prompt.push_back(
      ContentSegment{ContentSegment::kLiteralContent, 0, static_cast<uint32_t>(tokens.size())});
  r.literal_tokens = std::move(tokens);
  return r;
}

AnalyzeOptions Options(int64_t block_tokens, std::vector<int64_t> alignments,
                       std::vector<int64_t> capacities = {}) {
  AnalyzeOptions o;
  o.block_tokens = block_tokens;
  o.alignments = std::move(alignments);
  o.capacities = std::move(capacities);
  return o;
}

int64_t HitTokensAt(const AnalyzeResult& r, int64_t alignment) {
  for (const AlignmentPoint& p : r.alignment_curve) {
    if (p.alignment == alignment) return p.hit_tokens;
  }
  ADD_FAILURE() << "no alignment " << alignment;
  return -1;
}

constexpr uint64_t kA = 101, kB = 102, kC = 103, kD = 104;

// Four prompts with 4-token blocks:
//   R0 = A[0,12)           blocks a0 a1 a2
//   R1 = A[0,8)  B[0,4)    a0 a1 b0          (branches after a1)
//   R2 = A[0,12) C[0,2)    a0 a1 a2 c        (c is a partial block)
//   R3 = D[0,4)            d0                (a second tree)
std::vector<Request> KnownForest() {
  return {Prompt({Virtual(kA, 0, 12)}), Prompt({Virtual(kA, 0, 8), Virtual(kB, 0, 4)}),
          Prompt({Virtual(kA, 0, 12), Virtual(kC, 0, 2)}), Prompt({Virtual(kD, 0, 4)})};
}

TEST(AnalyzeTest, KnownForestCounts) {
  auto result = AnalyzeRequests(KnownForest(), Options(4, {1, 3, 4, 8, 16}));
  ASSERT_TRUE(result.ok()) << result.status();
  const AnalyzeResult& r = *result;
  EXPECT_EQ(r.block_tokens, 4);
  EXPECT_EQ(r.requests, 4);
  EXPECT_EQ(r.prompt_tokens, 42);
  EXPECT_EQ(r.blocks, 11);
  EXPECT_EQ(r.reused_blocks, 5);  // a0 a1 in R1, a0 a1 a2 in R2
  EXPECT_EQ(r.unique_blocks, 6);
  EXPECT_EQ(r.unique_full_blocks, 5);  // all but c
  EXPECT_DOUBLE_EQ(r.reused_block_fraction, 5.0 / 11.0);

  const ForestStats& f = r.forest;
  EXPECT_EQ(f.nodes, 6);
  EXPECT_EQ(f.edges, 4);   // a0->a1, a1->a2, a1->b0, a2->c
  EXPECT_EQ(f.roots, 2);   // a0, d0
  EXPECT_EQ(f.leaves, 3);  // b0, c, d0
  EXPECT_EQ(f.internal_nodes, 3);
  EXPECT_EQ(f.branch_nodes, 1);  // a1
  EXPECT_EQ(f.max_out_degree, 2);
  EXPECT_EQ(f.max_depth, 4);  // a0 a1 a2 c
  EXPECT_DOUBLE_EQ(f.mean_internal_out_degree, 4.0 / 3.0);
  ASSERT_EQ(f.out_degree_histogram.size(), 2u);
  EXPECT_EQ(f.out_degree_histogram[0].min_degree, 1);
  EXPECT_EQ(f.out_degree_histogram[0].nodes, 2);  // a0, a2
  EXPECT_EQ(f.out_degree_histogram[1].min_degree, 2);
  EXPECT_EQ(f.out_degree_histogram[1].max_degree, 3);
  EXPECT_EQ(f.out_degree_histogram[1].nodes, 1);  // a1

  // Shared prefixes: R0 0, R1 8, R2 12, R3 0.
  const SharedPrefixStats& s = r.shared_prefix;
  EXPECT_EQ(s.requests_with_shared_prefix, 2);
  EXPECT_EQ(s.shared_tokens, 20);
  EXPECT_EQ(s.max_tokens, 12);
  EXPECT_EQ(s.p50_tokens, 0);
  EXPECT_EQ(s.p90_tokens, 12);
  // Buckets: {0}: 2 requests, [8,15]: 2 requests.
  ASSERT_EQ(s.histogram.size(), 5u);
  EXPECT_EQ(s.histogram[0].requests, 2);
  EXPECT_EQ(s.histogram[4].min_tokens, 8);
  EXPECT_EQ(s.histogram[4].max_tokens, 15);
  EXPECT_EQ(s.histogram[4].requests, 2);
}

TEST(AnalyzeTest, KnownForestAlignmentCurve) {
  auto r = AnalyzeRequests(KnownForest(), Options(4, {16, 8, 4, 3, 1, 4}));
  ASSERT_TRUE(r.ok()) << r.status();
  // Sorted, de-duplicated.
  std::vector<int64_t> alignments;
  for (const AlignmentPoint& p : r->alignment_curve) alignments.push_back(p.alignment);
  EXPECT_THAT(alignments, testing::ElementsAre(1, 3, 4, 8, 16));
  // R1 shares 8 of 12 (cap 11), R2 shares 12 of 14 (cap 13).
  EXPECT_EQ(HitTokensAt(*r, 1), 20);
  EXPECT_EQ(HitTokensAt(*r, 3), 6 + 12);
  EXPECT_EQ(HitTokensAt(*r, 4), 8 + 12);
  EXPECT_EQ(HitTokensAt(*r, 8), 8 + 8);
  EXPECT_EQ(HitTokensAt(*r, 16), 0);
  EXPECT_EQ(r->max_hit_tokens, 20);
  EXPECT_DOUBLE_EQ(r->alignment_curve[3].hit_rate, 16.0 / 42.0);
}

TEST(AnalyzeTest, KnownForestCapacityCurve) {
  auto r = AnalyzeRequests(KnownForest(), Options(4, {4}, {1, 2, 3, 100}));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->capacity_curve.size(), 4u);
  // Capacity 1: only a0 can survive between requests: LRU keeps a0 after R0 (the first block is
  // most recent), so R1 hits 4; R1 leaves a0 again, R2 hits 4.
  EXPECT_EQ(r->capacity_curve[0].lru_hit_tokens, 8);
  EXPECT_EQ(r->capacity_curve[0].optimal_hit_tokens, 8);
  // Capacity 2: a0 a1 survive: R1 hits 8, R2 hits 8 (a2 was evicted for a0 a1 after R1).
  EXPECT_EQ(r->capacity_curve[1].lru_hit_tokens, 16);
  // The optimum keeps a0 a1 after R0 and never inserts b0 (not used again), so also 16; at
  // capacity 3 it keeps a2 as well: R2 hits 12.
  EXPECT_EQ(r->capacity_curve[1].optimal_hit_tokens, 16);
  EXPECT_EQ(r->capacity_curve[2].optimal_hit_tokens, 20);
  // LRU at 3: after R1 the cache is a0 a1 b0 (a2 evicted), so R2 hits 8.
  EXPECT_EQ(r->capacity_curve[2].lru_hit_tokens, 16);
  // Unbounded: both equal the alignment curve at the block size.
  EXPECT_EQ(r->capacity_curve[3].lru_hit_tokens, 20);
  EXPECT_EQ(r->capacity_curve[3].optimal_hit_tokens, 20);
  EXPECT_DOUBLE_EQ(r->capacity_curve[3].lru_hit_rate, 20.0 / 42.0);
}

TEST(AnalyzeTest, DefaultCapacitiesArePowersOfTwoAndUniqueFullBlocks) {
  auto r = AnalyzeRequests(KnownForest(), Options(4, {4}));
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<int64_t> capacities;
  for (const CapacityPoint& p : r->capacity_curve) capacities.push_back(p.capacity_blocks);
  EXPECT_THAT(capacities, testing::ElementsAre(1, 2, 4, 5));
}

TEST(AnalyzeTest, LastTokenIsNeverAHit) {
  // The same 8 tokens twice: the second request shares all 8 but can hit at most 7.
  std::vector<Request> reqs = {Prompt({Virtual(kA, 0, 8)}), Prompt({Virtual(kA, 0, 8)})};
  auto r = AnalyzeRequests(reqs, Options(4, {1, 4, 8}, {100}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->shared_prefix.max_tokens, 8);
  EXPECT_EQ(HitTokensAt(*r, 1), 7);
  EXPECT_EQ(HitTokensAt(*r, 4), 4);
  EXPECT_EQ(HitTokensAt(*r, 8), 0);
  EXPECT_EQ(r->capacity_curve[0].lru_hit_tokens, 4);
  EXPECT_DOUBLE_EQ(r->reused_block_fraction, 0.5);
}

TEST(AnalyzeTest, TokenExactPartialMatchesInsideABlock) {
  std::vector<Request> reqs = {
      Tokens({1, 2, 3, 4, 5, 6}),           // blocks [1 2 3 4] [5 6]
      Tokens({1, 2, 3, 4, 5, 6, 7, 8, 9}),  // [5 6 7 8] starts with the cached [5 6]: 6 shared
      Tokens({1, 2, 3, 4, 5, 9}),           // [5 9]: 1 more token than the full block
      Tokens({1, 2, 3, 4, 5, 6, 7}),        // [5 6 7] is a prefix of [5 6 7 8]: all 7 shared
      Tokens({9, 2, 3, 4}),                 // nothing
  };
  auto r = AnalyzeRequests(reqs, Options(4, {1, 2, 4}));
  ASSERT_TRUE(r.ok()) << r.status();
  // Shared: 0, 6, 5, 7, 0; capped at L-1: 0, 6, 5, 6, 0.
  EXPECT_EQ(r->shared_prefix.shared_tokens, 18);
  EXPECT_EQ(r->shared_prefix.max_tokens, 7);
  EXPECT_EQ(HitTokensAt(*r, 1), 17);
  EXPECT_EQ(HitTokensAt(*r, 2), 6 + 4 + 6);
  EXPECT_EQ(HitTokensAt(*r, 4), 4 + 4 + 4);
  // Blocks: 2 + 3 + 2 + 2 + 1 = 10; seen before: [1 2 3 4] three times.
  EXPECT_EQ(r->blocks, 10);
  EXPECT_EQ(r->reused_blocks, 3);
}

TEST(AnalyzeTest, VirtualPartialMatchesUseContentOffsets) {
  std::vector<Request> reqs = {
      Prompt({Virtual(kA, 0, 6)}),                     // A[0,4) A[4,6)
      Prompt({Virtual(kA, 0, 10)}),                    // A[4,8) extends A[4,6): 6 shared
      Prompt({Virtual(kA, 0, 5), Virtual(kB, 0, 3)}),  // A[4,5) B[0,3): 5 shared
      Prompt({Virtual(kA, 0, 4), Virtual(kA, 5, 4)}),  // A[5,9) after A[0,4): 4 shared
  };
  auto r = AnalyzeRequests(reqs, Options(4, {1}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->shared_prefix.shared_tokens, 0 + 6 + 5 + 4);
  EXPECT_EQ(HitTokensAt(*r, 1), 0 + 6 + 5 + 4);
}

TEST(AnalyzeTest, LiteralAndVirtualContentNeverMatch) {
  std::vector<Request> reqs = {Prompt({Virtual(kA, 1, 8)}), Tokens({1, 2, 3, 4, 5, 6, 7, 8})};
  auto r = AnalyzeRequests(reqs, Options(4, {1}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->reused_blocks, 0);
  EXPECT_EQ(r->max_hit_tokens, 0);
}

TEST(AnalyzeTest, IdentityDoesNotDependOnHowSegmentsAreSplit) {
  Request split_literal;
  split_literal.literal_tokens = {7, 8, 9, 1, 2, 3, 4};
  // Tokens 1 2 3 4 7 8 9 as two literal segments in a different storage order.
  split_literal.prompt = {{ContentSegment::kLiteralContent, 3, 4},
                          {ContentSegment::kLiteralContent, 0, 3}};
  split_literal.prompt_tokens = 7;
  std::vector<Request> reqs = {
      Prompt({Virtual(kA, 0, 8)}),
      Prompt({Virtual(kA, 0, 2), Virtual(kA, 2, 3), Virtual(kA, 5, 3), Virtual(kB, 0, 1)}),
      Tokens({1, 2, 3, 4, 7, 8, 9, 10}),
      split_literal,
  };
  auto r = AnalyzeRequests(reqs, Options(4, {1}));
  ASSERT_TRUE(r.ok()) << r.status();
  // Request 1 reuses both blocks of request 0; request 3 reuses [1 2 3 4] and matches 7 8 9.
  EXPECT_EQ(r->reused_blocks, 2 + 1);
  EXPECT_EQ(HitTokensAt(*r, 1), 8 + 6);
}

TEST(AnalyzeTest, NamespacesNeverShare) {
  std::vector<Request> reqs = {Prompt({Virtual(kA, 0, 8)}, 1), Prompt({Virtual(kA, 0, 8)}, 2),
                               Prompt({Virtual(kA, 0, 8)}, 1)};
  auto r = AnalyzeRequests(reqs, Options(4, {1}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->reused_blocks, 2);  // only the third request, from the first
  EXPECT_EQ(r->forest.roots, 2);
  EXPECT_EQ(HitTokensAt(*r, 1), 7);
}

TEST(AnalyzeTest, AutoBlockTokens) {
  auto virt = AnalyzeRequests({Prompt({Virtual(kA, 0, 1000)})}, Options(0, {16}));
  ASSERT_TRUE(virt.ok()) << virt.status();
  EXPECT_EQ(virt->block_tokens, 512);
  EXPECT_EQ(virt->blocks, 2);
  auto lit = AnalyzeRequests({Tokens(std::vector<uint32_t>(40, 3))}, Options(0, {16}));
  ASSERT_TRUE(lit.ok()) << lit.status();
  EXPECT_EQ(lit->block_tokens, 16);
  EXPECT_EQ(lit->blocks, 3);
}

TEST(AnalyzeTest, DefaultAlignmentsArePowersOfTwo) {
  EXPECT_THAT(DefaultAnalyzeAlignments(),
              testing::ElementsAre(16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384));
}

TEST(AnalyzeTest, EmptyTrace) {
  auto r = AnalyzeRequests({}, Options(4, {4}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->requests, 0);
  EXPECT_EQ(r->reused_block_fraction, 0);
  EXPECT_TRUE(r->capacity_curve.empty());
  ASSERT_EQ(r->alignment_curve.size(), 1u);
  EXPECT_EQ(r->alignment_curve[0].hit_rate, 0);
}

TEST(AnalyzeTest, BadRequestsAreInvalidArgument) {
  Request short_cover = Prompt({Virtual(kA, 0, 8)});
  short_cover.prompt_tokens = 9;
  EXPECT_EQ(AnalyzeRequests({short_cover}, Options(4, {4})).status().code(),
            absl::StatusCode::kInvalidArgument);
  Request outside = Tokens({1, 2, 3});
  outside.prompt[0].offset = 1;
  EXPECT_EQ(AnalyzeRequests({outside}, Options(4, {4})).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(AnalyzeTest, BadOptionsAreInvalidArgument) {
  EXPECT_EQ(AnalyzeRequests({}, Options(-1, {4})).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AnalyzeRequests({}, Options(4, {0})).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AnalyzeRequests({}, Options(4, {4}, {0})).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(AnalyzeTest, SourceErrorsPassThrough) {
  int calls = 0;
  auto r = AnalyzeRequestStream([&](Request* out) -> absl::StatusOr<bool> {
    if (calls++ == 0) {
      *out = Prompt({Virtual(kA, 0, 8)});
      return true;
    }
    return absl::NotFoundError("trace.jsonl:2: gone");
  });
  EXPECT_EQ(r.status(), absl::NotFoundError("trace.jsonl:2: gone"));
}

TEST(AnalyzeTest, StreamAndSpanAgree) {
  const std::vector<Request> reqs = KnownForest();
  size_t i = 0;
  auto streamed = AnalyzeRequestStream(
      [&](Request* out) -> absl::StatusOr<bool> {
        if (i == reqs.size()) return false;
        *out = reqs[i++];
        return true;
      },
      Options(4, {1, 4}));
  auto spanned = AnalyzeRequests(reqs, Options(4, {1, 4}));
  ASSERT_TRUE(streamed.ok() && spanned.ok());
  EXPECT_EQ(AnalyzeResultToJson(*streamed), AnalyzeResultToJson(*spanned));
}

TEST(AnalyzeTest, JsonHasTheContractFields) {
  auto r = AnalyzeRequests(KnownForest(), Options(4, {4, 8}, {2}));
  ASSERT_TRUE(r.ok()) << r.status();
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(AnalyzeResultToJson(*r));
  EXPECT_EQ(j["requests"], 4);
  EXPECT_EQ(j["prompt_tokens"], 42);
  EXPECT_EQ(j["unique_blocks"], 6);
  EXPECT_DOUBLE_EQ(j["reused_block_fraction"].get<double>(), 5.0 / 11.0);
  ASSERT_EQ(j["alignment_curve"].size(), 2u);
  EXPECT_EQ(j["alignment_curve"][1]["alignment"], 8);
  EXPECT_DOUBLE_EQ(j["alignment_curve"][1]["hit_rate"].get<double>(), 16.0 / 42.0);
  ASSERT_EQ(j["capacity_curve"].size(), 1u);
  EXPECT_EQ(j["capacity_curve"][0]["capacity_blocks"], 2);
  EXPECT_DOUBLE_EQ(j["capacity_curve"][0]["lru_hit_rate"].get<double>(), 16.0 / 42.0);
  EXPECT_DOUBLE_EQ(j["capacity_curve"][0]["optimal_hit_rate"].get<double>(), 16.0 / 42.0);
  EXPECT_NE(FormatAnalyzeResult(*r).find("reused block fraction 0.4545"), std::string::npos);
}

// The block-size cliff at the hit alignment of a hybrid plan: full attention with 16-token blocks
// next to sliding window with 24-token blocks (the #53007 shape) gives S = lcm(16, 24) = 48 and,
// with no fine-grained hits, A = S = 48 (docs/semantics.md §7). A hit is at most
// floor((L-1) / A) * A, the last token being recomputed (§9.1, §9.3): a prompt of L <= 48 tokens
// never hits, however much it shares; at L = 49 it can hit 48.
std::vector<Request> CliffTrace() {
  return {
      Prompt({Virtual(kA, 0, 100)}),  // R0: L 100, nothing earlier
      Prompt({Virtual(kA, 0, 40)}),   // R1: L 40, shares 40 (cap 39): short at A = 48
      Prompt({Virtual(kA, 0, 48)}),   // R2: L 48 = A, shares 48 (cap 47): short
      Prompt({Virtual(kA, 0, 49)}),   // R3: L 49 = A + 1, shares 49 (cap 48): hits 48
      Prompt({Virtual(kA, 0, 100)}),  // R4: L 100, shares 100 (cap 99): hits 96
      Prompt({Virtual(kB, 0, 3)}),    // R5: L 3, nothing shared: short at both alignments
      Prompt({Virtual(kA, 0, 300)}),  // R6: L 300, shares the 100 seen so far: hits 96
  };
}

TEST(AnalyzeTest, CliffAtAHybridPlansAlignment) {
  auto r = AnalyzeRequests(CliffTrace(), Options(16, {48, 16}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->requests, 7);
  EXPECT_EQ(r->prompt_tokens, 640);
  ASSERT_EQ(r->cliff.size(), 2u);  // in the alignment curve's order: 16, 48
  const CliffPoint& fine = r->cliff[0];
  const CliffPoint& hybrid = r->cliff[1];
  EXPECT_EQ(fine.alignment, 16);
  EXPECT_EQ(hybrid.alignment, 48);
  // Shorter than A + 1 = 49: R1 (40), R2 (48), R5 (3); R3 (49) is not.
  EXPECT_EQ(hybrid.never_hit_short_requests, 3);
  EXPECT_EQ(hybrid.never_hit_short_prompt_tokens, 40 + 48 + 3);
  EXPECT_DOUBLE_EQ(hybrid.never_hit_short_share, 3.0 / 7.0);
  EXPECT_DOUBLE_EQ(hybrid.never_hit_short_token_share, 91.0 / 640.0);
  // At A = 16 only R5.
  EXPECT_EQ(fine.never_hit_short_requests, 1);
  EXPECT_EQ(fine.never_hit_short_prompt_tokens, 3);
  EXPECT_EQ(HitTokensAt(*r, 48), 48 + 96 + 96);
  EXPECT_EQ(HitTokensAt(*r, 16), 32 + 32 + 48 + 96 + 96);

  // Bins [2,3] (R5), [32,63] (R1 R2 R3), [64,127] (R0 R4), [256,511] (R6), and the empty ones
  // between: [4,7], [8,15], [16,31], [128,255].
  ASSERT_EQ(hybrid.bins.size(), 8u);
  const std::vector<std::pair<int64_t, int64_t>> edges = {
      {2, 3}, {4, 7}, {8, 15}, {16, 31}, {32, 63}, {64, 127}, {128, 255}, {256, 511}};
  const std::vector<int64_t> requests = {1, 0, 0, 0, 3, 2, 0, 1};
  for (size_t k = 0; k < edges.size(); ++k) {
    for (const CliffPoint* c : {&fine, &hybrid}) {
      EXPECT_EQ(c->bins[k].min_tokens, edges[k].first) << k;
      EXPECT_EQ(c->bins[k].max_tokens, edges[k].second) << k;
      EXPECT_EQ(c->bins[k].requests, requests[k]) << k;
    }
  }
  // An empty bin: no tokens, fraction 0.
  EXPECT_EQ(hybrid.bins[6].prompt_tokens, 0);
  EXPECT_EQ(hybrid.bins[6].hit_tokens, 0);
  EXPECT_EQ(hybrid.bins[6].hit_fraction, 0.0);
  // Token-weighted: [32,63] holds 40 + 48 + 49 = 137 prompt tokens; at A = 48 only R3 hits (48),
  // at A = 16 R1 and R2 hit 32 each and R3 48.
  EXPECT_EQ(hybrid.bins[4].prompt_tokens, 137);
  EXPECT_EQ(hybrid.bins[4].hit_tokens, 48);
  EXPECT_DOUBLE_EQ(hybrid.bins[4].hit_fraction, 48.0 / 137.0);
  EXPECT_EQ(fine.bins[4].hit_tokens, 112);
  EXPECT_DOUBLE_EQ(fine.bins[4].hit_fraction, 112.0 / 137.0);
  EXPECT_EQ(hybrid.bins[0].hit_tokens, 0);  // R5 shares nothing
  EXPECT_DOUBLE_EQ(hybrid.bins[5].hit_fraction, 96.0 / 200.0);
  EXPECT_DOUBLE_EQ(hybrid.bins[7].hit_fraction, 96.0 / 300.0);

  // The text shows the never-hit shares next to the hit rate.
  EXPECT_NE(
      FormatAnalyzeResult(*r).find(
          "         48  0.3750                     3           0.4286                 0.1422"),
      std::string::npos)
      << FormatAnalyzeResult(*r);
}

TEST(AnalyzeTest, CliffOfAnEmptyTraceHasNoBins) {
  auto r = AnalyzeRequests({}, Options(16, {48}));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->cliff.size(), 1u);
  EXPECT_TRUE(r->cliff[0].bins.empty());
  EXPECT_EQ(r->cliff[0].never_hit_short_requests, 0);
  EXPECT_EQ(r->cliff[0].never_hit_short_share, 0.0);
}

TEST(AnalyzeTest, JsonHasTheCliffFields) {
  auto r = AnalyzeRequests(CliffTrace(), Options(16, {48, 16}));
  ASSERT_TRUE(r.ok()) << r.status();
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(AnalyzeResultToJson(*r));
  ASSERT_EQ(j["cliff"].size(), j["alignment_curve"].size());
  for (size_t i = 0; i < j["cliff"].size(); ++i) {
    const auto& c = j["cliff"][i];
    EXPECT_EQ(c["alignment"], j["alignment_curve"][i]["alignment"]);
    for (const char* key : {"never_hit_short_requests", "never_hit_short_prompt_tokens",
                            "never_hit_short_share", "never_hit_short_token_share", "bins"}) {
      EXPECT_TRUE(c.contains(key)) << key;
    }
    int64_t requests = 0, prompt_tokens = 0, hit_tokens = 0;
    for (const auto& b : c["bins"]) {
      for (const char* key : {"min_tokens", "max_tokens", "requests", "prompt_tokens", "hit_tokens",
                              "hit_fraction"}) {
        EXPECT_TRUE(b.contains(key)) << key;
      }
      requests += b["requests"].get<int64_t>();
      prompt_tokens += b["prompt_tokens"].get<int64_t>();
      hit_tokens += b["hit_tokens"].get<int64_t>();
    }
    EXPECT_EQ(requests, j["requests"].get<int64_t>());
    EXPECT_EQ(prompt_tokens, j["prompt_tokens"].get<int64_t>());
    EXPECT_EQ(hit_tokens, j["alignment_curve"][i]["hit_tokens"].get<int64_t>());
  }
  EXPECT_EQ(j["cliff"][1]["alignment"], 48);
  EXPECT_EQ(j["cliff"][1]["never_hit_short_requests"], 3);
  EXPECT_DOUBLE_EQ(j["cliff"][1]["never_hit_short_share"].get<double>(), 3.0 / 7.0);
  EXPECT_EQ(j["cliff"][1]["bins"][4]["min_tokens"], 32);
  EXPECT_EQ(j["cliff"][1]["bins"][4]["max_tokens"], 63);
  EXPECT_DOUBLE_EQ(j["cliff"][1]["bins"][4]["hit_fraction"].get<double>(), 48.0 / 137.0);
}

// Random literal-token conversations: invariants that must hold on any trace.
TEST(AnalyzeTest, RandomTracesInvariants) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<std::vector<uint32_t>> history;
    std::vector<Request> reqs;
    for (int i = 0; i < 60; ++i) {
      std::vector<uint32_t> tokens;
      if (!history.empty() && rng() % 3 != 0) {
        // Extend or truncate an earlier prompt (multi-turn and shared system prompts).
        tokens = history[rng() % history.size()];
        tokens.resize(rng() % (tokens.size() + 1));
      }
      const int extra = 1 + static_cast<int>(rng() % 40);
      for (int k = 0; k < extra; ++k) tokens.push_back(static_cast<uint32_t>(rng() % 3));
      history.push_back(tokens);
      reqs.push_back(Tokens(tokens));
    }
    const int64_t block = 1 + static_cast<int64_t>(rng() % 8);
    AnalyzeOptions o = Options(block, {1, 2, 3, 4, 6, 8, 12, 16, block}, {1, 2, 4, 8, 1 << 20});
    auto r = AnalyzeRequests(reqs, o);
    ASSERT_TRUE(r.ok()) << r.status();
    // A coarser alignment that is a multiple of a finer one never hits more.
    for (const AlignmentPoint& fine : r->alignment_curve) {
      for (const AlignmentPoint& coarse : r->alignment_curve) {
        if (coarse.alignment % fine.alignment == 0) {
          EXPECT_LE(coarse.hit_tokens, fine.hit_tokens);
        }
      }
    }
    EXPECT_EQ(HitTokensAt(*r, 1), r->max_hit_tokens);
    // The cliff: its bins hold every request and the alignment curve's hits; a short prompt
    // (L <= A) sits in a bin that starts at or below A.
    ASSERT_EQ(r->cliff.size(), r->alignment_curve.size());
    for (size_t i = 0; i < r->cliff.size(); ++i) {
      const CliffPoint& c = r->cliff[i];
      int64_t requests = 0, prompt_tokens = 0, hit_tokens = 0, short_max = 0;
      for (const PromptLengthBin& b : c.bins) {
        requests += b.requests;
        prompt_tokens += b.prompt_tokens;
        hit_tokens += b.hit_tokens;
        EXPECT_LE(b.hit_tokens, b.prompt_tokens);
        if (b.max_tokens <= c.alignment) short_max += b.requests;
      }
      EXPECT_EQ(requests, r->requests);
      EXPECT_EQ(prompt_tokens, r->prompt_tokens);
      EXPECT_EQ(hit_tokens, r->alignment_curve[i].hit_tokens);
      EXPECT_GE(c.never_hit_short_requests, short_max);  // whole bins at or below A are short
    }
    EXPECT_LE(r->max_hit_tokens, r->shared_prefix.shared_tokens);
    EXPECT_EQ(r->unique_blocks, r->blocks - r->reused_blocks);
    EXPECT_EQ(r->forest.nodes, r->unique_blocks);
    EXPECT_EQ(r->forest.edges, r->forest.nodes - r->forest.roots);
    // Unbounded capacity: LRU == optimum == the alignment curve at the block size.
    const CapacityPoint& unbounded = r->capacity_curve.back();
    EXPECT_EQ(unbounded.lru_hit_tokens, HitTokensAt(*r, block));
    EXPECT_EQ(unbounded.optimal_hit_tokens, HitTokensAt(*r, block));
    for (const CapacityPoint& p : r->capacity_curve) {
      EXPECT_GE(p.optimal_hit_tokens, p.lru_hit_tokens);
      EXPECT_LE(p.optimal_hit_tokens, unbounded.optimal_hit_tokens);
    }
  }
}

}  // namespace
}  // namespace prefixsim
