#include "sim/kv/block_pool.h"

#include <algorithm>

namespace prefixsim {
namespace kv {

namespace {
// A pool's index starts sized for this many entries (a 64 KiB table) and grows.
constexpr int64_t kInitialIndexEntries = 1024;
}  // namespace

BlockPool::BlockPool(int64_t num_blocks)
    : num_blocks_(num_blocks),
      meta_(static_cast<size_t>(num_blocks), BigArray<Meta>::Unwritten{}),
      index_(std::min<int64_t>(num_blocks, kInitialIndexEntries), /*headroom=*/4),
      index_full_capacity_(PrefixIndex::CapacityFor(num_blocks, /*headroom=*/4)) {
  PREFIXSIM_CHECK(num_blocks >= 2);
  PREFIXSIM_CHECK(num_blocks <= kMaxNumBlocks);
  // Room for twice the blocks: a squeeze happens after at least num_blocks holes. Only
  // [ring_front_, ring_back_) is ever read, and it is written first.
  uint64_t cap = 16;
  while (cap < static_cast<uint64_t>(num_blocks) * 2) cap <<= 1;
  ring_ = BigArray<BlockId>(cap, BigArray<BlockId>::Unwritten{});
  ring_mask_ = cap - 1;
  // Block 0 is popped at start as the null block: never freed, never cached. The others are
  // the fresh run, the whole queue.
  meta_[kNullBlock] = Meta{};
  meta_[kNullBlock].ref = 1;
  num_free_ = num_blocks - 1;
}

void BlockPool::SqueezeRing() {
  int64_t out = ring_front_;
  int64_t fresh_position = ring_front_;
  for (int64_t in = ring_front_; in < ring_back_; ++in) {
    if (in == fresh_position_) fresh_position = out;
    const BlockId b = ring_[static_cast<uint64_t>(in) & ring_mask_];
    if (b == kHole) continue;
    ring_[static_cast<uint64_t>(out) & ring_mask_] = b;
    meta_[b].queue_position = out++;
  }
  if (fresh_position_ >= ring_back_) fresh_position = out;
  for (int64_t p = out; p < ring_back_; ++p) ring_[static_cast<uint64_t>(p) & ring_mask_] = kHole;
  ring_back_ = out;
  fresh_position_ = fresh_position;
  PREFIXSIM_CHECK(ring_back_ - ring_front_ + (num_blocks_ - fresh_) == num_free_);
}

void BlockPool::PushBack(BlockId b) {
  if (static_cast<uint64_t>(ring_back_ - ring_front_) == ring_mask_ + 1) SqueezeRing();
  ring_[static_cast<uint64_t>(ring_back_) & ring_mask_] = b;
  meta_[b].queue_position = ring_back_++;
  ++num_free_;
}

void BlockPool::PushFront(BlockId b) {
  if (static_cast<uint64_t>(ring_back_ - ring_front_) == ring_mask_ + 1) SqueezeRing();
  ring_[static_cast<uint64_t>(--ring_front_) & ring_mask_] = b;
  meta_[b].queue_position = ring_front_;
  ++num_free_;
}

void BlockPool::Evict(BlockId b) {
  if (eviction_observer_ != nullptr) eviction_observer_->OnEvicted(meta_[b].group, meta_[b].hash);
  RemoveFromIndex(b);
  ++evictions_;
  eviction_horizon_ = std::max(eviction_horizon_, meta_[b].free_stamp);
}

void BlockPool::Uncache(BlockId b) {
  PREFIXSIM_CHECK(b != kNullBlock && meta_[b].ref > 0 && meta_[b].group >= 0);
  RemoveFromIndex(b);
}

void BlockPool::RemoveFromIndex(BlockId b) {
  Meta& m = meta_[b];
  if (listener_ != nullptr) listener_->OnBlockRemoved(m.hash.hash ^ GroupSalt(m.group), m.group);
  if (event_sink_ != nullptr) event_sink_->OnBlockRemoved(m.group, m.hash);
  const BlockId p = m.dup_prev, n = m.dup_next;
  if (p == kNoBlock) {
    // Stores only: the slot's cache line is not read, so a cold one does not stall us.
    PREFIXSIM_DCHECK(index_.at(m.index_position).block == b);
    if (n == kNoBlock) {
      index_.EraseAt(m.index_position);
    } else {
      index_.SetBlockAt(m.index_position, n);
      meta_[n].index_position = m.index_position;
    }
    m.index_position = -1;
  } else {
    meta_[p].dup_next = n;
  }
  if (n != kNoBlock) meta_[n].dup_prev = p;
  m.dup_prev = m.dup_next = kNoBlock;
  m.group = -1;
  m.hash = HashPair{};
  --num_cached_;
}

BlockId BlockPool::Allocate() {
  PREFIXSIM_CHECK(num_free_ > 0);
  BlockId b;
  if (fresh_ < num_blocks_) {
    // The queue's head is before the fresh run, or the fresh run itself.
    while (ring_front_ < fresh_position_ &&
           ring_[static_cast<uint64_t>(ring_front_) & ring_mask_] == kHole) {
      ++ring_front_;
    }
    if (ring_front_ == fresh_position_) {
      b = fresh_++;
      meta_[b] = Meta{};
      meta_[b].ref = 1;
      --num_free_;
      return b;
    }
  }
  while ((b = ring_[static_cast<uint64_t>(ring_front_) & ring_mask_]) == kHole) ++ring_front_;
  ++ring_front_;
  meta_[b].queue_position = kNotQueued;
  --num_free_;
  if (meta_[b].group >= 0) Evict(b);
  meta_[b].ref = 1;
  // Allocations come in bursts (every group of a request) and the head of the queue is its
  // coldest part (LRU): load the record a few allocations ahead.
  constexpr int64_t kAhead = 8;
  if (ring_front_ + kAhead < ring_back_) {
    const BlockId ahead = ring_[static_cast<uint64_t>(ring_front_ + kAhead) & ring_mask_];
    if (ahead != kHole) __builtin_prefetch(&meta_[ahead]);
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
  if (index_.NeedsRebuild()) {
    auto moved = [this](int32_t head, uint64_t position) { meta_[head].index_position = position; };
    if (index_.capacity() < index_full_capacity_ && index_.size() * 4 >= index_.capacity()) {
      index_.Grow(moved);
    } else {
      index_.Rebuild(moved);
    }
  }
  PrefixIndex::Slot* slot = index_.FindOrEmpty(key);
  if (slot->block <= 0) {
    index_.InsertAt(slot, key, b, Tag(group, h));
    meta_[b].index_position = static_cast<int64_t>(index_.position(slot));
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
  if (listener_ != nullptr) listener_->OnBlockStored(key, Tag(group, h), group);
  if (event_sink_ != nullptr) event_sink_->OnBlockStored(group, h);
  return true;
}

std::vector<BlockId> BlockPool::FreeQueue() const {
  std::vector<BlockId> out;
  out.reserve(static_cast<size_t>(num_free_));
  auto fresh_run = [&] {
    for (BlockId b = fresh_; b < num_blocks_; ++b) out.push_back(b);
  };
  for (int64_t p = ring_front_; p < ring_back_; ++p) {
    if (p == fresh_position_) fresh_run();
    const BlockId b = ring_[static_cast<uint64_t>(p) & ring_mask_];
    if (b != kHole) out.push_back(b);
  }
  if (fresh_position_ >= ring_back_) fresh_run();
  return out;
}

void BlockPool::CheckInvariants() const {
  PREFIXSIM_CHECK(meta_[kNullBlock].group < 0);
  PREFIXSIM_CHECK(meta_[kNullBlock].queue_position == kNotQueued);
  // Walk the queue: every entry is a hole or a free block that knows its position; the count
  // matches and the span fits the ring.
  PREFIXSIM_CHECK(ring_front_ <= ring_back_ &&
                  static_cast<uint64_t>(ring_back_ - ring_front_) <= ring_mask_ + 1);
  int64_t n = 0;
  for (int64_t p = ring_front_; p < ring_back_; ++p) {
    const BlockId b = ring_[static_cast<uint64_t>(p) & ring_mask_];
    if (b == kHole) continue;
    PREFIXSIM_CHECK(b > 0 && b < fresh_);
    PREFIXSIM_CHECK(meta_[b].queue_position == p);
    PREFIXSIM_CHECK(meta_[b].ref == 0);
    ++n;
  }
  PREFIXSIM_CHECK(fresh_ >= 1 && fresh_ <= num_blocks_);
  if (fresh_ < num_blocks_) {
    PREFIXSIM_CHECK(ring_front_ <= fresh_position_ && fresh_position_ <= ring_back_);
  }
  PREFIXSIM_CHECK(n + (num_blocks_ - fresh_) == num_free_);
  // Every block is exactly one of: free (ref 0, in the queue or fresh) or in use (ref > 0, not
  // in it).
  int64_t zero = num_blocks_ - fresh_, cached = 0;
  for (BlockId b = 1; b < fresh_; ++b) {
    PREFIXSIM_CHECK(meta_[b].ref >= 0);
    const bool in_queue = meta_[b].queue_position != kNotQueued;
    PREFIXSIM_CHECK(in_queue == (meta_[b].ref == 0));
    if (meta_[b].ref == 0) ++zero;
    if (meta_[b].group >= 0) {
      ++cached;
      // Reachable from the index through its duplicate list, with the same content.
      const PrefixIndex::Slot* slot = index_.Find(meta_[b].hash.hash ^ GroupSalt(meta_[b].group));
      PREFIXSIM_CHECK(slot != nullptr);
      PREFIXSIM_CHECK(slot->tag == Tag(meta_[b].group, meta_[b].hash));
      BlockId c = slot->block;
      PREFIXSIM_CHECK(meta_[c].dup_prev == kNoBlock);
      PREFIXSIM_CHECK(meta_[c].index_position == static_cast<int64_t>(index_.position(slot)));
      bool found = false;
      for (int64_t steps = 0; c != kNoBlock; c = meta_[c].dup_next) {
        PREFIXSIM_CHECK(meta_[c].hash == meta_[b].hash && meta_[c].group == meta_[b].group);
        if (c == b) found = true;
        PREFIXSIM_CHECK(++steps <= num_blocks_);
      }
      PREFIXSIM_CHECK(found);
      if (meta_[b].dup_prev != kNoBlock) PREFIXSIM_CHECK(meta_[b].index_position == -1);
    } else {
      PREFIXSIM_CHECK(meta_[b].dup_prev == kNoBlock && meta_[b].dup_next == kNoBlock);
      PREFIXSIM_CHECK(meta_[b].index_position == -1);
    }
  }
  PREFIXSIM_CHECK(zero == num_free_);
  PREFIXSIM_CHECK(cached == num_cached_);
  PREFIXSIM_CHECK(static_cast<int64_t>(index_.size()) <= num_cached_);
  PREFIXSIM_CHECK((index_.size() + index_.tombstones()) * 2 <= index_.capacity());
}

}  // namespace kv
}  // namespace prefixsim
