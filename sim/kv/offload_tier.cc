#include "sim/kv/offload_tier.h"

#include <algorithm>
#include <bit>
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
  ResizeIndex(64);
}

void OffloadTier::ResizeIndex(size_t num_slots) {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(num_slots, Slot{});
  slot_mask_ = num_slots - 1;
  slot_shift_ = 64 - std::countr_zero(num_slots);
  filter_shift_ = slot_shift_ - kFilterBitsPerSlotLog2;
  for (const Slot& s : old) {
    if (s.entry == kNil) continue;
    size_t i = HomeSlot(s.key);
    while (slots_[i].entry != kNil) i = (i + 1) & slot_mask_;
    slots_[i] = s;
  }
  RebuildFilter();
}

void OffloadTier::RebuildFilter() {
  filter_.assign((slots_.size() << kFilterBitsPerSlotLog2) / 64, 0);
  for (const Slot& s : slots_) {
    if (s.entry == kNil) continue;
    const uint64_t bit = FilterBit(s.key);
    filter_[bit >> 6] |= uint64_t{1} << (bit & 63);
  }
  filter_stale_ = 0;
}

bool OffloadTier::Index(uint64_t key, uint32_t e) {
  // At most half full, so that probes, and the shifts after an erase, stay short.
  if (2 * (static_cast<size_t>(num_keys_) + 1) > slots_.size()) ResizeIndex(2 * slots_.size());
  size_t i = HomeSlot(key);
  for (; slots_[i].entry != kNil; i = (i + 1) & slot_mask_) {
    if (slots_[i].key == key) return false;
  }
  slots_[i] = Slot{key, e};
  num_keys_ += 1;
  const uint64_t bit = FilterBit(key);
  filter_[bit >> 6] |= uint64_t{1} << (bit & 63);
  return true;
}

void OffloadTier::Unindex(uint32_t e) {
  size_t hole = HomeSlot(entries_[e].key);
  while (slots_[hole].entry != e) hole = (hole + 1) & slot_mask_;
  // Backward shift instead of a tombstone: each key after the hole, up to the next empty slot,
  // moves into it unless that would put it before its home slot; probes then stay as short as
  // if the key had never been there.
  for (size_t j = (hole + 1) & slot_mask_; slots_[j].entry != kNil; j = (j + 1) & slot_mask_) {
    const size_t home = HomeSlot(slots_[j].key);
    if (((j - home) & slot_mask_) >= ((j - hole) & slot_mask_)) {
      slots_[hole] = slots_[j];
      hole = j;
    }
  }
  slots_[hole].entry = kNil;
  num_keys_ -= 1;
  // A bit may be another key's too, so it stays; once the stale bits could rival the live ones
  // (the index is at most half full), the filter starts afresh.
  filter_stale_ += 1;
  if (2 * static_cast<size_t>(filter_stale_) >= slots_.size()) RebuildFilter();
}

OffloadTier::Presence OffloadTier::Find(uint64_t key, int64_t now) const {
  const uint32_t e = EntryOf(key);
  if (e == kNil) return Presence::kAbsent;
  return entries_[e].ready_ns <= now ? Presence::kReady : Presence::kPending;
}

bool OffloadTier::Pinned(uint64_t key) const {
  const uint32_t e = EntryOf(key);
  return e != kNil && entries_[e].pins > 0;
}

void OffloadTier::Unlink(uint32_t e) {
  Links& x = links_[e];
  if (x.prev != kNil) links_[x.prev].next = x.next;
  if (x.next != kNil) links_[x.next].prev = x.prev;
  if (oldest_ == e) oldest_ = x.next;
  if (newest_ == e) newest_ = x.prev;
  x.prev = x.next = kNil;
}

void OffloadTier::LinkNewest(uint32_t e) {
  Links& x = links_[e];
  x.prev = newest_;
  x.next = kNil;
  if (newest_ != kNil) links_[newest_].next = e;
  newest_ = e;
  if (oldest_ == kNil) oldest_ = e;
}

void OffloadTier::Touch(absl::Span<const uint64_t> keys) {
  for (size_t i = keys.size(); i-- > 0;) {
    const uint32_t e = EntryOf(keys[i]);
    if (e == kNil || e == newest_) continue;
    Unlink(e);
    LinkNewest(e);
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
  Unindex(e);
  free_entries_.push_back(e);
}

bool OffloadTier::Store(absl::Span<const TierBlock> blocks, int64_t ready_ns, KvEventSink* sink) {
  // The store's keys already present are flagged: protected from eviction below (vLLM protects a
  // store's own keys) and skipped when inserting.
  int64_t needed = 0;
  flagged_.clear();
  for (const TierBlock& b : blocks) Prefetch(b.key);
  for (const TierBlock& b : blocks) {
    if (const uint32_t e = EntryOf(b.key); e != kNil) {
      entries_[e].protected_now = true;
      flagged_.push_back(e);
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
    // The walk waits on each entry it reads; asking for the entries a few links ahead lets their
    // misses overlap.
    constexpr int kPrefetchAhead = 4;
    uint32_t ahead = oldest_;
    for (int k = 0; k < kPrefetchAhead && ahead != kNil; ++k) {
      __builtin_prefetch(&entries_[ahead]);
      ahead = links_[ahead].next;
    }
    for (uint32_t e = oldest_; e != kNil && used_bytes_ - freed + needed > capacity_bytes_;
         e = links_[e].next) {
      if (ahead != kNil) {
        __builtin_prefetch(&entries_[ahead]);
        ahead = links_[ahead].next;
      }
      const Entry& x = entries_[e];
      if (x.pins > 0 || x.protected_now) continue;
      Prefetch(x.key);  // for Evict
      victims_.push_back(e);
      freed += x.bytes;
    }
    if (used_bytes_ - freed + needed > capacity_bytes_) {
      counters_.store_failures += 1;
      stored = false;
    } else {
      if (evictions_ != nullptr) {
        for (uint32_t e : victims_) evictions_->Prefetch(entries_[e].key);
      }
      for (uint32_t e : victims_) Evict(e, sink);
    }
  }
  if (stored && needed > 0) {
    for (const TierBlock& b : blocks) {
      const uint32_t e =
          free_entries_.empty() ? static_cast<uint32_t>(entries_.size()) : free_entries_.back();
      if (!Index(b.key, e)) continue;
      if (free_entries_.empty()) {
        entries_.emplace_back();
        links_.emplace_back();
      } else {
        free_entries_.pop_back();
      }
      entries_[e] = Entry{b.key, b.bytes, b.block_hash, ready_ns, b.group, 0, false, false};
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
  const uint32_t e = EntryOf(key);
  PREFIXSIM_CHECK(e != kNil);
  Entry& x = entries_[e];
  x.pins += 1;
  x.loaded = true;
  counters_.loaded_blocks += 1;
}

void OffloadTier::Unpin(uint64_t key) {
  const uint32_t e = EntryOf(key);
  PREFIXSIM_CHECK(e != kNil && entries_[e].pins > 0);
  entries_[e].pins -= 1;
}

void OffloadTier::MarkLoaded(uint64_t key) {
  if (const uint32_t e = EntryOf(key); e != kNil) entries_[e].loaded = true;
}

int64_t OffloadTier::HeldNeverLoaded() const {
  int64_t n = 0;
  for (const Slot& s : slots_) n += s.entry != kNil && !entries_[s.entry].loaded ? 1 : 0;
  return n;
}

void OffloadTier::RememberEvictions(int64_t max_keys) {
  if (evictions_ == nullptr) evictions_ = std::make_unique<EvictionRecord>(max_keys);
}

void EvictionRecord::Add(uint64_t key) {
  if (static_cast<int64_t>(current_.size()) >= generation_keys_ && !current_.contains(key)) {
    forgotten_ += static_cast<int64_t>(previous_.size());
    previous_ = std::move(current_);
    current_.clear();
  }
  current_.insert(key);
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
