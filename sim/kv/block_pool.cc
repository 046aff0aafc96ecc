#include "sim/kv/block_pool.h"

#include <algorithm>

namespace prefixsim {
namespace kv {

BlockPool::BlockPool(int64_t num_blocks)
    : num_blocks_(num_blocks),
      sentinel_(static_cast<BlockId>(num_blocks)),
      meta_(static_cast<size_t>(num_blocks) + 1, Meta{}),
      index_(num_blocks) {
  PREFIXSIM_CHECK(num_blocks >= 2);
  PREFIXSIM_CHECK(num_blocks < (int64_t{1} << 31) - 1);
  meta_[sentinel_].next = meta_[sentinel_].prev = sentinel_;
  // Block 0 is popped at start as the null block: never freed, never cached.
  meta_[kNullBlock].ref = 1;
  for (BlockId b = 1; b < sentinel_; ++b) PushBack(b);
}

void BlockPool::PushBack(BlockId b) {
  const BlockId last = meta_[sentinel_].prev;
  meta_[last].next = b;
  meta_[b].prev = last;
  meta_[b].next = sentinel_;
  meta_[sentinel_].prev = b;
  ++num_free_;
}

void BlockPool::PushFront(BlockId b) {
  const BlockId first = meta_[sentinel_].next;
  meta_[first].prev = b;
  meta_[b].next = first;
  meta_[b].prev = sentinel_;
  meta_[sentinel_].next = b;
  ++num_free_;
}

void BlockPool::Evict(BlockId b) {
  RemoveFromIndex(b);
  ++evictions_;
  eviction_horizon_ = std::max(eviction_horizon_, meta_[b].free_stamp);
}

void BlockPool::Uncache(BlockId b) {
  PREFIXSIM_CHECK(b != kNullBlock && meta_[b].ref > 0 && meta_[b].group >= 0);
  RemoveFromIndex(b);
}

void BlockPool::RemoveFromIndex(BlockId b) {
  const uint64_t key = meta_[b].hash.hash ^ GroupSalt(meta_[b].group);
  if (listener_ != nullptr) listener_->OnBlockRemoved(key);
  const BlockId p = meta_[b].dup_prev, n = meta_[b].dup_next;
  if (p == kNoBlock) {
    PrefixIndex::Slot* slot = index_.Find(key);
    PREFIXSIM_CHECK(slot != nullptr && slot->block == b);
    if (n == kNoBlock) {
      index_.Erase(slot);
    } else {
      slot->block = n;
    }
  } else {
    meta_[p].dup_next = n;
  }
  if (n != kNoBlock) meta_[n].dup_prev = p;
  meta_[b].dup_prev = meta_[b].dup_next = kNoBlock;
  meta_[b].group = -1;
  meta_[b].hash = HashPair{};
  --num_cached_;
}

BlockId BlockPool::Allocate() {
  PREFIXSIM_CHECK(num_free_ > 0);
  const BlockId b = meta_[sentinel_].next;
  Unlink(b);
  if (meta_[b].group >= 0) Evict(b);
  meta_[b].ref = 1;
  // Allocations come in bursts (every group of a request): start the cache misses of the next
  // one now, the new head's index slot (it is usually cached, so it will be evicted) and the
  // record after it.
  const BlockId head = meta_[sentinel_].next;
  if (head != sentinel_) {
    const Meta& m = meta_[head];
    __builtin_prefetch(&meta_[m.next]);
    if (m.group >= 0) {
      const uint64_t key = m.hash.hash ^ GroupSalt(m.group);
      index_.Prefetch(key);
      if (listener_ != nullptr) listener_->Prefetch(key);
    }
  }
  return b;
}

void BlockPool::Free(BlockId b) {
  if (b == kNullBlock) return;
  PREFIXSIM_CHECK(meta_[b].ref > 0);
  if (--meta_[b].ref > 0) return;
  if (meta_[b].group >= 0) {
    meta_[b].free_stamp = ++free_clock_;
    PushBack(b);
  } else {
    PushFront(b);
  }
}

bool BlockPool::Cache(BlockId b, int group, const HashPair& h) {
  PREFIXSIM_CHECK(b != kNullBlock && meta_[b].ref > 0 && meta_[b].group < 0);
  const uint64_t key = h.hash ^ GroupSalt(group);
  PrefixIndex::Slot* slot = index_.FindOrEmpty(key);
  if (slot->block < 0) {
    index_.InsertAt(slot, key, b, Tag(group, h));
  } else {
    BlockId tail = slot->block;
    if (meta_[tail].hash != h || meta_[tail].group != group) {
      ++collisions_;
      return false;
    }
    while (meta_[tail].dup_next != kNoBlock) tail = meta_[tail].dup_next;
    meta_[tail].dup_next = b;
    meta_[b].dup_prev = tail;
  }
  meta_[b].hash = h;
  meta_[b].group = group;
  ++num_cached_;
  if (listener_ != nullptr) listener_->OnBlockStored(key, Tag(group, h));
  return true;
}

std::vector<BlockId> BlockPool::FreeQueue() const {
  std::vector<BlockId> out;
  out.reserve(static_cast<size_t>(num_free_));
  for (BlockId b = meta_[sentinel_].next; b != sentinel_; b = meta_[b].next) out.push_back(b);
  return out;
}

void BlockPool::CheckInvariants() const {
  PREFIXSIM_CHECK(meta_[kNullBlock].group < 0);
  PREFIXSIM_CHECK(meta_[kNullBlock].prev == kNoBlock && meta_[kNullBlock].next == kNoBlock);
  // Walk the queue: links agree both ways, every member is free, count matches.
  int64_t n = 0;
  BlockId prev = sentinel_;
  for (BlockId b = meta_[sentinel_].next; b != sentinel_; b = meta_[b].next) {
    PREFIXSIM_CHECK(b > 0 && b < sentinel_);
    PREFIXSIM_CHECK(meta_[b].prev == prev);
    PREFIXSIM_CHECK(meta_[b].ref == 0);
    prev = b;
    ++n;
    PREFIXSIM_CHECK(n <= num_blocks_);
  }
  PREFIXSIM_CHECK(meta_[sentinel_].prev == prev);
  PREFIXSIM_CHECK(n == num_free_);
  // Every block is exactly one of: free (ref 0, in the queue) or in use (ref > 0, not in it).
  int64_t zero = 0, cached = 0;
  for (BlockId b = 1; b < sentinel_; ++b) {
    PREFIXSIM_CHECK(meta_[b].ref >= 0);
    const bool in_queue = meta_[b].prev != kNoBlock;
    PREFIXSIM_CHECK(in_queue == (meta_[b].ref == 0));
    PREFIXSIM_CHECK((meta_[b].next != kNoBlock) == in_queue);
    if (meta_[b].ref == 0) ++zero;
    if (meta_[b].group >= 0) {
      ++cached;
      // Reachable from the index through its duplicate list, with the same content.
      const PrefixIndex::Slot* slot = index_.Find(meta_[b].hash.hash ^ GroupSalt(meta_[b].group));
      PREFIXSIM_CHECK(slot != nullptr);
      PREFIXSIM_CHECK(slot->tag == Tag(meta_[b].group, meta_[b].hash));
      BlockId c = slot->block;
      PREFIXSIM_CHECK(meta_[c].dup_prev == kNoBlock);
      bool found = false;
      for (int64_t steps = 0; c != kNoBlock; c = meta_[c].dup_next) {
        PREFIXSIM_CHECK(meta_[c].hash == meta_[b].hash && meta_[c].group == meta_[b].group);
        if (c == b) found = true;
        PREFIXSIM_CHECK(++steps <= num_blocks_);
      }
      PREFIXSIM_CHECK(found);
    } else {
      PREFIXSIM_CHECK(meta_[b].dup_prev == kNoBlock && meta_[b].dup_next == kNoBlock);
    }
  }
  PREFIXSIM_CHECK(zero == num_free_);
  PREFIXSIM_CHECK(cached == num_cached_);
  PREFIXSIM_CHECK(static_cast<int64_t>(index_.size()) <= num_cached_);
}

}  // namespace kv
}  // namespace prefixsim
