// Chained block hashes (docs/semantics.md §8.1).
#include "sim/kv/block_hasher.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/kv/kv_test_util.h"

namespace prefixsim {
namespace kv {
namespace {

using testing_kv::Concat;
using testing_kv::Iota;
using testing_kv::Literal;

std::vector<HashPair> HashAll(const Request& r, int64_t chunk, int64_t num_chunks) {
  HashCursor cur;
  std::vector<HashPair> h;
  ExtendBlockHashes(r, chunk, num_chunks, &cur, &h);
  return h;
}

ContentSegment Virt(uint64_t id, uint32_t offset, uint32_t length) {
  ContentSegment s;
  s.content_id = id;
  s.offset = offset;
  s.length = length;
  return s;
}

Request Virtual(uint64_t id, std::vector<ContentSegment> segs) {
  Request r;
  r.id = id;
  for (const auto& s : segs) r.prompt_tokens += s.length;
  r.prompt = std::move(segs);
  return r;
}

// docs/semantics.md §8.1: one hash per full chunk; a chain, so a change in chunk i changes every
// hash from i on and none before.
TEST(BlockHasherTest, ChainPropagatesChangesForwardOnly) {
  const Request a = Literal(1, Iota(16));
  std::vector<uint32_t> t = Iota(16);
  t[5] = 999;  // chunk 1 of 4-token chunks
  const Request b = Literal(2, t);
  const auto ha = HashAll(a, 4, 4);
  const auto hb = HashAll(b, 4, 4);
  ASSERT_EQ(ha.size(), 4u);
  EXPECT_EQ(ha[0], hb[0]);
  EXPECT_NE(ha[1].hash, hb[1].hash);
  EXPECT_NE(ha[1].check, hb[1].check);
  EXPECT_NE(ha[2].hash, hb[2].hash);
  EXPECT_NE(ha[3].hash, hb[3].hash);
  // Same tokens in a different request id: same hashes (content, not identity).
  EXPECT_EQ(HashAll(Literal(7, Iota(16)), 4, 4), ha);
}

// A chunk's hash depends on its parent: equal chunk content after different prefixes differs.
TEST(BlockHasherTest, EqualChunkAfterDifferentPrefixDiffers) {
  const Request a = Literal(1, Concat({1, 2, 3, 4}, {9, 9, 9, 9}));
  const Request b = Literal(2, Concat({5, 6, 7, 8}, {9, 9, 9, 9}));
  EXPECT_NE(HashAll(a, 4, 2)[1].hash, HashAll(b, 4, 2)[1].hash);
}

// docs/semantics.md §8.1: cache_salt / LoRA go into the first block's extra keys; the chain carries
// the difference into every block.
TEST(BlockHasherTest, NamespaceSeparatesEveryBlock) {
  Request a = Literal(1, Iota(12));
  Request b = Literal(2, Iota(12));
  b.namespace_key = 42;
  const auto ha = HashAll(a, 4, 3), hb = HashAll(b, 4, 3);
  for (int i = 0; i < 3; ++i) EXPECT_NE(ha[i].hash, hb[i].hash) << i;
}

// Literal tokens hash by value, however they are split into segments.
TEST(BlockHasherTest, LiteralSegmentationDoesNotMatter) {
  Request a = Literal(1, Iota(12));
  Request b;
  b.id = 2;
  b.prompt_tokens = 12;
  b.literal_tokens = Concat({100, 100}, Iota(12));  // stored at offset 2, in 3 segments
  ContentSegment s1, s2, s3;
  s1.offset = 2;
  s1.length = 3;
  s2.offset = 5;
  s2.length = 6;
  s3.offset = 11;
  s3.length = 3;
  b.prompt = {s1, s2, s3};
  EXPECT_EQ(HashAll(a, 4, 3), HashAll(b, 4, 3));
  // 3-token chunks cross segment boundaries at other places: still equal.
  EXPECT_EQ(HashAll(a, 3, 4), HashAll(b, 3, 4));
}

// Virtual content is canonical: contiguous runs of one content id merge, so equal content has
// equal hashes; different offsets, ids or literal tokens differ.
TEST(BlockHasherTest, VirtualContentIsCanonical) {
  const Request whole = Virtual(1, {Virt(77, 0, 24)});
  const Request split = Virtual(2, {Virt(77, 0, 5), Virt(77, 5, 11), Virt(77, 16, 8)});
  EXPECT_EQ(HashAll(whole, 8, 3), HashAll(split, 8, 3));
  const Request shifted = Virtual(3, {Virt(77, 1, 24)});
  EXPECT_NE(HashAll(whole, 8, 1)[0].hash, HashAll(shifted, 8, 1)[0].hash);
  const Request other = Virtual(4, {Virt(78, 0, 24)});
  EXPECT_NE(HashAll(whole, 8, 1)[0].hash, HashAll(other, 8, 1)[0].hash);
  // Two pieces of one id that are not contiguous are not the same as one run.
  const Request gap = Virtual(5, {Virt(77, 0, 4), Virt(77, 100, 4)});
  EXPECT_NE(HashAll(whole, 8, 1)[0].hash, HashAll(gap, 8, 1)[0].hash);
  // A shared prefix of hash-id blocks gives shared hashes, then they diverge.
  const Request a = Virtual(6, {Virt(10, 0, 16), Virt(11, 0, 16)});
  const Request b = Virtual(7, {Virt(10, 0, 16), Virt(12, 0, 16)});
  const auto ha = HashAll(a, 8, 4), hb = HashAll(b, 8, 4);
  EXPECT_EQ(ha[0], hb[0]);
  EXPECT_EQ(ha[1], hb[1]);
  EXPECT_NE(ha[2].hash, hb[2].hash);
}

// Hashes extend lazily, chunk by chunk, with the same result as all at once; outputs beyond
// Request::output are unique generated content.
TEST(BlockHasherTest, LazyExtensionAndGeneratedOutputs) {
  Request r = Literal(3, Iota(10));
  r.output_tokens = 20;
  HashCursor cur;
  std::vector<HashPair> lazy;
  ExtendBlockHashes(r, 4, 1, &cur, &lazy);
  ExtendBlockHashes(r, 4, 2, &cur, &lazy);
  ExtendBlockHashes(r, 4, 5, &cur, &lazy);  // 20 tokens: 10 prompt + 10 generated
  EXPECT_EQ(lazy, HashAll(r, 4, 5));
  EXPECT_EQ(cur.tokens, 20);
  // Another request with the same prompt shares the prompt-only chunks, not the ones with
  // generated tokens (chunk 2 holds tokens 8..11: 2 prompt + 2 generated).
  Request q = Literal(4, Iota(10));
  const auto hq = HashAll(q, 4, 5);
  EXPECT_EQ(lazy[1], hq[1]);
  EXPECT_NE(lazy[2].hash, hq[2].hash);
  EXPECT_NE(GeneratedContentId(3), GeneratedContentId(4));
  EXPECT_NE(GeneratedContentId(0), ContentSegment::kLiteralContent);
}

}  // namespace
}  // namespace kv
}  // namespace prefixsim
