#include "sim/kv/block_pool.h"

#include <algorithm>

namespace prefixsim {
namespace kv {

BlockPool::BlockPool(int64_t num_blocks)
    : num_blocks_(num_blocks),
      sentinel_(static_cast<BlockId>(num_blocks)),
      prev_(num_blocks + 1, kNoBlock),
      next_(num_blocks + 1, kNoBlock),
      ref_(num_blocks, 0),
      hash_(num_blocks),
      group_(num_blocks, -1),
      dup_prev_(num_blocks, kNoBlock),
      dup_next_(num_blocks, kNoBlock),
      index_(num_blocks),
      free_stamp_(num_blocks, 0) {
  PREFIXSIM_CHECK(num_blocks >= 2);
  PREFIXSIM_CHECK(num_blocks < (int64_t{1} << 31) - 1);
  next_[sentinel_] = prev_[sentinel_] = sentinel_;
  // Block 0 is popped at start as the null block: never freed, never cached.
  ref_[kNullBlock] = 1;
  for (BlockId b = 1; b < sentinel_; ++b) PushBack(b);
}

void BlockPool::PushBack(BlockId b) {
  const BlockId last = prev_[sentinel_];
  next_[last] = b;
  prev_[b] = last;
  next_[b] = sentinel_;
  prev_[sentinel_] = b;
  ++num_free_;
}

void BlockPool::PushFront(BlockId b) {
  const BlockId first = next_[sentinel_];
  prev_[first] = b;
  next_[b] = first;
  prev_[b] = sentinel_;
  next_[sentinel_] = b;
  ++num_free_;
}

void BlockPool::Evict(BlockId b) {
  RemoveFromIndex(b);
  ++evictions_;
  eviction_horizon_ = std::max(eviction_horizon_, free_stamp_[b]);
}

void BlockPool::Uncache(BlockId b) {
  PREFIXSIM_CHECK(b != kNullBlock && ref_[b] > 0 && group_[b] >= 0);
  RemoveFromIndex(b);
}

void BlockPool::RemoveFromIndex(BlockId b) {
  const uint64_t key = hash_[b].hash ^ GroupSalt(group_[b]);
  const BlockId p = dup_prev_[b], n = dup_next_[b];
  if (p == kNoBlock) {
    PrefixIndex::Slot* slot = index_.Find(key);
    PREFIXSIM_CHECK(slot != nullptr && slot->block == b);
    if (n == kNoBlock) {
      index_.Erase(slot);
    } else {
      slot->block = n;
    }
  } else {
    dup_next_[p] = n;
  }
  if (n != kNoBlock) dup_prev_[n] = p;
  dup_prev_[b] = dup_next_[b] = kNoBlock;
  group_[b] = -1;
  hash_[b] = HashPair{};
  --num_cached_;
}

BlockId BlockPool::Allocate() {
  PREFIXSIM_CHECK(num_free_ > 0);
  const BlockId b = next_[sentinel_];
  Unlink(b);
  if (group_[b] >= 0) Evict(b);
  ref_[b] = 1;
  return b;
}

void BlockPool::Free(BlockId b) {
  if (b == kNullBlock) return;
  PREFIXSIM_CHECK(ref_[b] > 0);
  if (--ref_[b] > 0) return;
  if (group_[b] >= 0) {
    free_stamp_[b] = ++free_clock_;
    PushBack(b);
  } else {
    PushFront(b);
  }
}

bool BlockPool::Cache(BlockId b, int group, const HashPair& h) {
  PREFIXSIM_CHECK(b != kNullBlock && ref_[b] > 0 && group_[b] < 0);
  const uint64_t key = h.hash ^ GroupSalt(group);
  PrefixIndex::Slot* slot = index_.Find(key);
  if (slot == nullptr) {
    index_.Insert(key, b, Tag(group, h));
  } else {
    BlockId tail = slot->block;
    if (hash_[tail] != h || group_[tail] != group) {
      ++collisions_;
      return false;
    }
    while (dup_next_[tail] != kNoBlock) tail = dup_next_[tail];
    dup_next_[tail] = b;
    dup_prev_[b] = tail;
  }
  hash_[b] = h;
  group_[b] = group;
  ++num_cached_;
  return true;
}

std::vector<BlockId> BlockPool::FreeQueue() const {
  std::vector<BlockId> out;
  out.reserve(static_cast<size_t>(num_free_));
  for (BlockId b = next_[sentinel_]; b != sentinel_; b = next_[b]) out.push_back(b);
  return out;
}

void BlockPool::CheckInvariants() const {
  PREFIXSIM_CHECK(group_[kNullBlock] < 0);
  PREFIXSIM_CHECK(prev_[kNullBlock] == kNoBlock && next_[kNullBlock] == kNoBlock);
  // Walk the queue: links agree both ways, every member is free, count matches.
  int64_t n = 0;
  BlockId prev = sentinel_;
  for (BlockId b = next_[sentinel_]; b != sentinel_; b = next_[b]) {
    PREFIXSIM_CHECK(b > 0 && b < sentinel_);
    PREFIXSIM_CHECK(prev_[b] == prev);
    PREFIXSIM_CHECK(ref_[b] == 0);
    prev = b;
    ++n;
    PREFIXSIM_CHECK(n <= num_blocks_);
  }
  PREFIXSIM_CHECK(prev_[sentinel_] == prev);
  PREFIXSIM_CHECK(n == num_free_);
  // Every block is exactly one of: free (ref 0, in the queue) or in use (ref > 0, not in it).
  int64_t zero = 0, cached = 0;
  for (BlockId b = 1; b < sentinel_; ++b) {
    PREFIXSIM_CHECK(ref_[b] >= 0);
    const bool in_queue = prev_[b] != kNoBlock;
    PREFIXSIM_CHECK(in_queue == (ref_[b] == 0));
    PREFIXSIM_CHECK((next_[b] != kNoBlock) == in_queue);
    if (ref_[b] == 0) ++zero;
    if (group_[b] >= 0) {
      ++cached;
      // Reachable from the index through its duplicate list, with the same content.
      const PrefixIndex::Slot* slot = index_.Find(hash_[b].hash ^ GroupSalt(group_[b]));
      PREFIXSIM_CHECK(slot != nullptr);
      PREFIXSIM_CHECK(slot->tag == Tag(group_[b], hash_[b]));
      BlockId c = slot->block;
      PREFIXSIM_CHECK(dup_prev_[c] == kNoBlock);
      bool found = false;
      for (int64_t steps = 0; c != kNoBlock; c = dup_next_[c]) {
        PREFIXSIM_CHECK(hash_[c] == hash_[b] && group_[c] == group_[b]);
        if (c == b) found = true;
        PREFIXSIM_CHECK(++steps <= num_blocks_);
      }
      PREFIXSIM_CHECK(found);
    } else {
      PREFIXSIM_CHECK(dup_prev_[b] == kNoBlock && dup_next_[b] == kNoBlock);
    }
  }
  PREFIXSIM_CHECK(zero == num_free_);
  PREFIXSIM_CHECK(cached == num_cached_);
  PREFIXSIM_CHECK(static_cast<int64_t>(index_.size()) <= num_cached_);
}

}  // namespace kv
}  // namespace prefixsim
