#include "sim/kv/offload_tier.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "sim/util/status_macros.h"

namespace prefixsim::kv {

int64_t TransferLink::Transfer(int64_t bytes, int64_t ready_ns) {
  const int64_t start = std::max(ready_ns, free_at_ns_);
  const int64_t duration =
      bytes <= 0 ? 0
                 : static_cast<int64_t>(std::ceil(static_cast<double>(bytes) * 1e9 / bytes_per_s_));
  free_at_ns_ = start + duration;
  return free_at_ns_;
}

OffloadTier::OffloadTier(std::string medium, int64_t capacity_bytes, double read_bytes_per_s,
                         double write_bytes_per_s)
    : medium_(std::move(medium)),
      capacity_bytes_(capacity_bytes),
      read_link_(read_bytes_per_s),
      write_link_(write_bytes_per_s) {
  PREFIXSIM_CHECK(capacity_bytes_ >= 0);
}

OffloadTier::Presence OffloadTier::Find(uint64_t key, int64_t now) const {
  auto it = index_.find(key);
  if (it == index_.end()) return Presence::kAbsent;
  return entries_[it->second].ready_ns <= now ? Presence::kReady : Presence::kPending;
}

bool OffloadTier::Pinned(uint64_t key) const {
  auto it = index_.find(key);
  return it != index_.end() && entries_[it->second].pins > 0;
}

void OffloadTier::Unlink(uint32_t e) {
  Entry& x = entries_[e];
  if (x.prev != kNil) entries_[x.prev].next = x.next;
  if (x.next != kNil) entries_[x.next].prev = x.prev;
  if (oldest_ == e) oldest_ = x.next;
  if (newest_ == e) newest_ = x.prev;
  x.prev = x.next = kNil;
}

void OffloadTier::LinkNewest(uint32_t e) {
  Entry& x = entries_[e];
  x.prev = newest_;
  x.next = kNil;
  if (newest_ != kNil) entries_[newest_].next = e;
  newest_ = e;
  if (oldest_ == kNil) oldest_ = e;
}

void OffloadTier::Touch(absl::Span<const uint64_t> keys) {
  for (size_t i = keys.size(); i-- > 0;) {
    auto it = index_.find(keys[i]);
    if (it == index_.end()) continue;
    Unlink(it->second);
    LinkNewest(it->second);
  }
}

void OffloadTier::Evict(uint32_t e, KvEventSink* sink) {
  Entry& x = entries_[e];
  if (sink != nullptr) sink->OnTierBlockRemoved(medium_.c_str(), x.group, x.block_hash);
  Unlink(e);
  used_bytes_ -= x.bytes;
  counters_.evicted_blocks += 1;
  if (!x.loaded) counters_.evicted_never_loaded += 1;
  if (evictions_ != nullptr) evictions_->Add(x.key);
  index_.erase(x.key);
  free_entries_.push_back(e);
}

bool OffloadTier::Store(absl::Span<const TierBlock> blocks, int64_t ready_ns, KvEventSink* sink) {
  // The store's keys already present are flagged: protected from eviction below (vLLM protects a
  // store's own keys) and skipped when inserting.
  int64_t needed = 0;
  flagged_.clear();
  for (const TierBlock& b : blocks) {
    if (auto it = index_.find(b.key); it != index_.end()) {
      entries_[it->second].protected_now = true;
      flagged_.push_back(it->second);
    } else {
      needed += b.bytes;
    }
  }
  bool stored = true;
  if (needed > 0 && used_bytes_ + needed > capacity_bytes_) {
    // The victims, least recent first, skipping pinned and protected keys; nothing is evicted
    // unless enough room can be made.
    victims_.clear();
    int64_t freed = 0;
    for (uint32_t e = oldest_; e != kNil && used_bytes_ - freed + needed > capacity_bytes_;
         e = entries_[e].next) {
      const Entry& x = entries_[e];
      if (x.pins > 0 || x.protected_now) continue;
      victims_.push_back(e);
      freed += x.bytes;
    }
    if (used_bytes_ - freed + needed > capacity_bytes_) {
      counters_.store_failures += 1;
      stored = false;
    } else {
      for (uint32_t e : victims_) Evict(e, sink);
    }
  }
  if (stored && needed > 0) {
    for (const TierBlock& b : blocks) {
      const uint32_t e =
          free_entries_.empty() ? static_cast<uint32_t>(entries_.size()) : free_entries_.back();
      const auto [it, inserted] = index_.try_emplace(b.key, e);
      if (!inserted) continue;
      if (free_entries_.empty()) {
        entries_.emplace_back();
      } else {
        free_entries_.pop_back();
      }
      entries_[e] =
          Entry{b.key, b.bytes, b.block_hash, b.group, ready_ns, 0, false, false, kNil, kNil};
      LinkNewest(e);
      used_bytes_ += b.bytes;
      counters_.stored_blocks += 1;
      if (sink != nullptr) sink->OnTierBlockStored(medium_.c_str(), b.group, b.block_hash);
    }
    counters_.peak_used_bytes = std::max(counters_.peak_used_bytes, used_bytes_);
  }
  for (const uint32_t e : flagged_) entries_[e].protected_now = false;
  return stored;
}

void OffloadTier::Pin(uint64_t key) {
  auto it = index_.find(key);
  PREFIXSIM_CHECK(it != index_.end());
  Entry& x = entries_[it->second];
  x.pins += 1;
  x.loaded = true;
  counters_.loaded_blocks += 1;
}

void OffloadTier::Unpin(uint64_t key) {
  auto it = index_.find(key);
  PREFIXSIM_CHECK(it != index_.end() && entries_[it->second].pins > 0);
  entries_[it->second].pins -= 1;
}

void OffloadTier::MarkLoaded(uint64_t key) {
  if (auto it = index_.find(key); it != index_.end()) entries_[it->second].loaded = true;
}

int64_t OffloadTier::HeldNeverLoaded() const {
  int64_t n = 0;
  for (const auto& [key, e] : index_) n += entries_[e].loaded ? 0 : 1;
  return n;
}

void OffloadTier::RememberEvictions(int64_t max_keys) {
  if (evictions_ == nullptr) evictions_ = std::make_unique<EvictionRecord>(max_keys);
}

void EvictionRecord::Add(uint64_t key) {
  times_[key] += 1;
  order_.push_back(key);
  if (max_keys_ <= 0 || static_cast<int64_t>(order_.size()) <= max_keys_) return;
  const uint64_t oldest = order_.front();
  order_.pop_front();
  auto it = times_.find(oldest);
  if (--it->second == 0) {
    times_.erase(it);
    forgotten_ += 1;
  }
}

void LookupTracker::Count(uint64_t key) {
  auto& [count, last] = counts_[key];
  count += 1;
  last = ++clock_;
  order_.push_back({key, last});
  // Forget the least recently counted keys beyond the bound; stale queue entries (a key counted
  // again since) are skipped, so each entry is popped once.
  while (static_cast<int64_t>(counts_.size()) > max_keys_) {
    const auto [old_key, stamp] = order_.front();
    order_.pop_front();
    auto it = counts_.find(old_key);
    if (it != counts_.end() && it->second.second == stamp) counts_.erase(it);
  }
  // Keys counted again leave stale entries behind: rebuild the queue when they outnumber the
  // live ones, so that it stays within twice the bound.
  if (static_cast<int64_t>(order_.size()) > 2 * max_keys_ + 1024) {
    std::vector<std::pair<int64_t, uint64_t>> live;
    live.reserve(counts_.size());
    for (const auto& [k, v] : counts_) live.push_back({v.second, k});
    std::sort(live.begin(), live.end());
    order_.clear();
    for (const auto& [stamp, k] : live) order_.push_back({k, stamp});
  }
}

int64_t LookupTracker::Lookups(uint64_t key) const {
  auto it = counts_.find(key);
  return it == counts_.end() ? 0 : it->second.first;
}

}  // namespace prefixsim::kv
