#include "sim/analyze/cache_sim.h"

#include <algorithm>
#include <limits>
#include <set>
#include <tuple>

#include "sim/util/status_macros.h"

namespace prefixsim::analyze_internal {
namespace {

constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();

// Number of leading blocks of request r that are cached, at most its L-1 cap.
template <typename InCache>
int64_t LeadingRun(const BlockSequence& seq, size_t r, InCache in_cache) {
  const uint64_t begin = seq.request_begin[r];
  const uint64_t end = seq.request_begin[r + 1];
  const uint64_t cap = std::min<uint64_t>(end - begin, seq.max_hit_blocks[r]);
  uint64_t run = 0;
  while (run < cap && in_cache(seq.blocks[begin + run])) ++run;
  return static_cast<int64_t>(run);
}

}  // namespace

void BlockSequence::AddRequest(const std::vector<uint32_t>& full_blocks, uint32_t max_hit) {
  if (request_begin.empty()) request_begin.push_back(0);
  for (uint32_t b : full_blocks) {
    blocks.push_back(b);
    num_ids = std::max(num_ids, b + 1);
  }
  request_begin.push_back(blocks.size());
  max_hit_blocks.push_back(max_hit);
}

int64_t SimulateLru(const BlockSequence& seq, int64_t capacity_blocks) {
  PREFIXSIM_CHECK(capacity_blocks > 0);
  // Doubly linked list over block ids; head = most recently used, tail = next victim.
  std::vector<uint32_t> prev(seq.num_ids, kNone), next(seq.num_ids, kNone);
  std::vector<bool> cached(seq.num_ids, false);
  uint32_t head = kNone, tail = kNone;
  int64_t size = 0;
  auto unlink = [&](uint32_t b) {
    if (prev[b] != kNone)
      next[prev[b]] = next[b];
    else
      head = next[b];
    if (next[b] != kNone)
      prev[next[b]] = prev[b];
    else
      tail = prev[b];
    prev[b] = next[b] = kNone;
  };
  auto push_front = [&](uint32_t b) {
    prev[b] = kNone;
    next[b] = head;
    if (head != kNone) prev[head] = b;
    head = b;
    if (tail == kNone) tail = b;
  };
  int64_t hits = 0;
  for (size_t r = 0; r < seq.requests(); ++r) {
    hits += LeadingRun(seq, r, [&](uint32_t b) { return static_cast<bool>(cached[b]); });
    // Touch tail first, so that the request's first block ends up most recently used and its
    // deepest block is the first of them to go.
    for (uint64_t i = seq.request_begin[r + 1]; i-- > seq.request_begin[r];) {
      const uint32_t b = seq.blocks[i];
      if (cached[b]) {
        unlink(b);
      } else {
        if (size == capacity_blocks) {
          const uint32_t victim = tail;
          unlink(victim);
          cached[victim] = false;
          --size;
        }
        cached[b] = true;
        ++size;
      }
      push_front(b);
    }
  }
  return hits;
}

std::vector<uint32_t> ComputeNextUse(const BlockSequence& seq) {
  std::vector<uint32_t> next_use(seq.blocks.size(), kNone);
  std::vector<uint32_t> seen_in(seq.num_ids, kNone);  // later request holding the block
  for (size_t r = seq.requests(); r-- > 0;) {
    const uint64_t begin = seq.request_begin[r];
    for (uint64_t i = begin; i < seq.request_begin[r + 1]; ++i) {
      const uint32_t b = seq.blocks[i];
      next_use[i] = seen_in[b];
      // Only a use that can hit counts: a block past the request's L-1 cap is touched, not hit.
      if (i - begin < seq.max_hit_blocks[r]) seen_in[b] = static_cast<uint32_t>(r);
    }
  }
  return next_use;
}

int64_t SimulateBelady(const BlockSequence& seq, const std::vector<uint32_t>& next_use,
                       int64_t capacity_blocks) {
  PREFIXSIM_CHECK(capacity_blocks > 0);
  PREFIXSIM_CHECK(next_use.size() == seq.blocks.size());
  // Eviction order: the largest (next use, depth) goes first.
  using Key = std::tuple<uint32_t, uint32_t, uint32_t>;  // next use, depth, block
  std::set<Key> cache;
  std::vector<Key> key_of(seq.num_ids);
  std::vector<bool> cached(seq.num_ids, false);
  int64_t hits = 0;
  for (size_t r = 0; r < seq.requests(); ++r) {
    hits += LeadingRun(seq, r, [&](uint32_t b) { return static_cast<bool>(cached[b]); });
    const uint64_t begin = seq.request_begin[r];
    for (uint64_t i = begin; i < seq.request_begin[r + 1]; ++i) {
      const uint32_t b = seq.blocks[i];
      const Key key{next_use[i], static_cast<uint32_t>(i - begin), b};
      if (cached[b]) {
        cache.erase(key_of[b]);
      } else if (static_cast<int64_t>(cache.size()) == capacity_blocks) {
        auto victim = std::prev(cache.end());
        if (key >= *victim) continue;  // bypass: the new block is the furthest
        cached[std::get<2>(*victim)] = false;
        cache.erase(victim);
      }
      cached[b] = true;
      key_of[b] = key;
      cache.insert(key);
    }
  }
  return hits;
}

}  // namespace prefixsim::analyze_internal
