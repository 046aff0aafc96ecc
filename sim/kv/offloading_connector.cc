#include "sim/kv/offloading_connector.h"

#include <algorithm>
#include <string>

#include "absl/strings/ascii.h"
#include "sim/kv/kv_cache_state.h"
#include "sim/util/status_macros.h"

namespace prefixsim::kv {
namespace {

int64_t CeilDivide(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

OffloadingConnector::SharedTiers OffloadingConnector::MakeSharedTiers(const EngineConfig& engine) {
  SharedTiers shared;
  for (const SecondaryTierConfig& t : engine.kv_offload.secondary_tiers) {
    shared.push_back(t.shared ? std::make_shared<OffloadTier>(absl::AsciiStrToUpper(t.type),
                                                              t.capacity_bytes, t.read_bytes_per_s,
                                                              t.write_bytes_per_s)
                              : nullptr);
  }
  return shared;
}

OffloadingConnector::OffloadingConnector(const KvPlan& plan, const EngineConfig& engine,
                                         KvCacheManager* kv, const SharedTiers* shared,
                                         bool reports_shared)
    : config_(engine.kv_offload),
      state_(kv->impl()),
      hash_block_size_(plan.hash_block_size),
      reports_shared_(reports_shared) {
  PREFIXSIM_CHECK(config_.enabled() && hash_block_size_ > 0);
  const int64_t ranks = std::max(1, engine.tensor_parallel_size);
  int64_t row = 0, largest = 0;
  for (size_t g = 0; g < plan.groups.size(); ++g) {
    const KvGroup& group = plan.groups[g];
    const int64_t rank_bytes = (group.num_layers + group.num_padding_layers) * group.page_bytes;
    row += rank_bytes * ranks;
    largest = std::max(largest, rank_bytes * ranks);
    // Only groups the GPU can serve a prefix hit from are offloaded (vLLM's offloading groups).
    if (!group.prefix_cacheable || group.block_size % hash_block_size_ != 0) continue;
    GroupRule r;
    r.group = static_cast<int>(g);
    r.block = group.block_size;
    r.ratio = group.block_size / hash_block_size_;
    r.eagle = group.annotated_eagle_group();
    r.bytes = rank_bytes * ranks;
    r.rank_bytes = rank_bytes;
    // vLLM's get_sliding_window_size_in_chunks: a window in blocks; a mamba state is a window
    // of one block; full attention (and MLA) has none.
    if (group.kind == LayerKind::kSlidingWindow) {
      r.window = CeilDivide(group.sliding_window, group.block_size);
      has_window_group_ = true;
    } else if (group.kind == LayerKind::kMamba) {
      r.window = 1;
      has_window_group_ = true;
    }
    rules_.push_back(r);
  }
  // Full attention first, then the windows, largest first (vLLM's lookup order).
  std::stable_sort(rules_.begin(), rules_.end(), [](const GroupRule& a, const GroupRule& b) {
    const int64_t wa = a.window == 0 ? INT64_MAX : a.window;
    const int64_t wb = b.window == 0 ? INT64_MAX : b.window;
    return wa > wb;
  });
  slot_bytes_ = config_.slot_sizing == OffloadSlotSizing::kRowPerKey ? row : largest;
  const auto cpu_bytes = static_cast<int64_t>(config_.kv_offloading_size_gib * (1LL << 30));
  tiers_.push_back(std::make_shared<OffloadTier>("CPU", cpu_bytes, config_.cpu_load_bytes_per_s,
                                                 config_.cpu_store_bytes_per_s));
  tier_shared_.push_back(false);
  for (size_t i = 0; i < config_.secondary_tiers.size(); ++i) {
    const SecondaryTierConfig& t = config_.secondary_tiers[i];
    if (shared != nullptr && i < shared->size() && (*shared)[i] != nullptr) {
      tiers_.push_back((*shared)[i]);
      tier_shared_.push_back(true);
      shares_tiers_ = true;
      continue;
    }
    tiers_.push_back(std::make_shared<OffloadTier>(absl::AsciiStrToUpper(t.type), t.capacity_bytes,
                                                   t.read_bytes_per_s, t.write_bytes_per_s));
    tier_shared_.push_back(false);
  }
  if (config_.store_threshold >= 2) tracker_ = std::make_unique<LookupTracker>(64000);
  stats_.enabled = true;
  stats_.tiers.resize(tiers_.size());
  for (size_t t = 0; t < tiers_.size(); ++t) {
    OffloadTierStats& s = stats_.tiers[t];
    s.medium = tiers_[t]->medium();
    // A shared tier's capacity counts once in the fleet's sum.
    s.capacity_bytes = tier_shared_[t] && !reports_shared_ ? 0 : tiers_[t]->capacity_bytes();
    s.capacity_blocks = t == 0 ? (slot_bytes_ > 0 ? s.capacity_bytes / slot_bytes_ : 0)
                               : (largest > 0 ? s.capacity_bytes / largest : 0);
  }
}

OffloadingConnector::RequestOffload& OffloadingConnector::State(KvRequestHandle h) {
  if (requests_.size() <= h.slot) {
    requests_.resize(h.slot + 1);
    next_store_tokens_.resize(h.slot + 1, 0);
  }
  RequestOffload& st = requests_[h.slot];
  if (st.next_store.size() != rules_.size()) st.next_store.assign(rules_.size(), 0);
  return st;
}

int OffloadingConnector::TierOf(uint64_t key, int64_t now, bool* pending) const {
  for (size_t t = 0; t < tiers_.size(); ++t) {
    const OffloadTier::Presence p = tiers_[t]->Find(key, now);
    if (p == OffloadTier::Presence::kReady) return static_cast<int>(t);
    if (p == OffloadTier::Presence::kPending && pending != nullptr) *pending = true;
  }
  return -1;
}

// One group's hit, at most max_hit (vLLM's _maximal_prefix_lookup and _sliding_window_lookup):
// full attention takes the blocks from the GPU hit's block on up to the first miss; a window
// takes the end of the last run of `window` blocks, or a shorter run that reaches back to the
// GPU hit (the GPU holds the rest of that window). An EAGLE group asks for one block more and
// drops it.
int64_t OffloadingConnector::GroupHit(const GroupRule& r, const std::vector<HashPair>& hashes,
                                      int64_t gpu_hit, int64_t max_hit, int64_t now, bool* defer,
                                      bool ever_held) {
  // A peek (defer null) counts no lookup for store_threshold.
  LookupTracker* const tracker = defer != nullptr ? tracker_.get() : nullptr;
  const int64_t num_keys = static_cast<int64_t>(hashes.size()) / r.ratio;
  const int64_t start = gpu_hit / r.block;
  const int64_t end = max_hit / r.block;
  const int64_t top = r.eagle ? std::min(end + 1, num_keys) : std::min(end, num_keys);
  const int64_t drop = r.eagle ? 1 : 0;
  auto key_of = [&](int64_t c) { return OffloadKey(hashes[(c + 1) * r.ratio - 1].hash, r.group); };
  if (r.window == 0) {
    int64_t c = start;
    for (; c < top; ++c) {
      const uint64_t key = key_of(c);
      if (tracker != nullptr) tracker->Count(key);
      bool pending = false;
      if (ever_held ? !EverHeld(key) : TierOf(key, now, &pending) < 0) {
        // vLLM's HIT_PENDING: ask again when the write lands.
        if (pending && defer != nullptr) *defer = true;
        break;
      }
    }
    return std::min(std::max(start, c - drop), end) * r.block;
  }
  const int64_t need = r.window + drop;
  int64_t run = 0;
  for (int64_t c = top - 1; c >= start; --c) {
    const uint64_t key = key_of(c);
    if (tracker != nullptr) tracker->Count(key);
    if (ever_held ? !EverHeld(key) : TierOf(key, now, nullptr) < 0) {
      run = 0;
      continue;
    }
    if (++run == need) return std::min(c + need - drop, end) * r.block;
  }
  return std::min(std::max(start, start + run - drop), end) * r.block;
}

// The end of the tiers' hit for a request with `gpu_hit` GPU tokens (at most gpu_hit: none):
// each group lowers it in turn, until none does (the groups' blocks differ in size). The last
// prompt token is recomputed when any group keeps a window or a state; a pure full-attention hit
// may reach the end (the scheduler then recomputes one token). `defer` null: a peek.
int64_t OffloadingConnector::HitEnd(const std::vector<HashPair>& hashes, int64_t num_tokens,
                                    int64_t gpu_hit, int64_t now, bool* defer, bool ever_held) {
  int64_t max_hit = num_tokens - (has_window_group_ ? 1 : 0);
  for (const GroupRule& r : rules_) max_hit = std::min(max_hit, num_tokens / r.block * r.block);
  if (rules_.empty()) return gpu_hit;
  for (bool changed = true; changed && max_hit > gpu_hit;) {
    changed = false;
    for (const GroupRule& r : rules_) {
      const int64_t hit = GroupHit(r, hashes, gpu_hit, max_hit, now, defer, ever_held);
      if (defer != nullptr && *defer) return gpu_hit;
      if (hit < max_hit) {
        max_hit = hit;
        changed = true;
      }
      if (max_hit <= gpu_hit) break;
    }
  }
  return std::max(max_hit, gpu_hit);
}

// Calls f(rule, block, key) for every key a load of [gpu_hit, end) reads: a full-attention
// group's blocks from the GPU hit's on, a window group's last window.
template <typename F>
void OffloadingConnector::ForEachNeededKey(const std::vector<HashPair>& hashes, int64_t gpu_hit,
                                           int64_t end, F&& f) const {
  for (const GroupRule& r : rules_) {
    const int64_t last = end / r.block;
    const int64_t first =
        r.window == 0 ? gpu_hit / r.block : std::max(gpu_hit / r.block, last - r.window);
    for (int64_t c = first; c < last; ++c) {
      f(r, c, OffloadKey(hashes[(c + 1) * r.ratio - 1].hash, r.group));
    }
  }
}

OffloadingConnector::Match OffloadingConnector::Lookup(KvRequestHandle h, int64_t num_tokens,
                                                       int64_t gpu_hit, int64_t now) {
  State(h);
  const std::vector<HashPair>& hashes = state_->HashesOf(h, num_tokens);
  bool defer = false;
  const int64_t end = HitEnd(hashes, num_tokens, gpu_hit, now, &defer);
  if (defer) {
    stats_.deferred_lookups += 1;
    return Match{0, true};
  }
  // LRU: every full-attention key of the request, and a window group's keys around the hit's end
  // (vLLM's _touch), in every tier.
  keys_.clear();
  for (const GroupRule& r : rules_) {
    const int64_t num_keys = static_cast<int64_t>(hashes.size()) / r.ratio;
    const int64_t from = r.window == 0 ? 0 : std::max<int64_t>(0, end / r.block - r.window);
    for (int64_t c = from; c < num_keys; ++c) {
      keys_.push_back(OffloadKey(hashes[(c + 1) * r.ratio - 1].hash, r.group));
    }
  }
  for (auto& tier : tiers_) tier->Touch(keys_);
  if (end <= gpu_hit) return Match{};
  // A block another request is loading: wait for it (vLLM's _chunks_being_loaded).
  bool loading = false;
  ForEachNeededKey(hashes, gpu_hit, end, [&](const GroupRule&, int64_t, uint64_t key) {
    for (auto& tier : tiers_) loading = loading || tier->Pinned(key);
  });
  if (loading) {
    stats_.deferred_lookups += 1;
    return Match{0, true};
  }
  return Match{end - gpu_hit, false};
}

// Which tier serves each H-chunk of [gpu_hit, end): the deepest one any of its keys comes from (a
// chunk is restored only when every group's block covering it is); adds the tokens per tier to
// split[]. REQUIRES: every needed key is in some tier.
void OffloadingConnector::SplitByTier(const std::vector<HashPair>& hashes, int64_t gpu_hit,
                                      int64_t end, int64_t now, int64_t* split) const {
  const int64_t first_unit = gpu_hit / hash_block_size_;
  std::vector<int8_t> unit_tier(static_cast<size_t>(end / hash_block_size_ - first_unit), 0);
  ForEachNeededKey(hashes, gpu_hit, end, [&](const GroupRule& r, int64_t c, uint64_t key) {
    const int t = TierOf(key, now, nullptr);
    PREFIXSIM_CHECK_MSG(t >= 0, ("offload: a block of the hit is in no tier"));
    const int64_t u0 = std::max(c * r.block, gpu_hit) / hash_block_size_ - first_unit;
    const int64_t u1 = (c + 1) * r.block / hash_block_size_ - first_unit;
    for (int64_t u = u0; u < u1; ++u) unit_tier[u] = std::max<int8_t>(unit_tier[u], t);
  });
  for (int8_t t : unit_tier) split[t] += hash_block_size_;
}

void OffloadingConnector::PeekSplit(const std::vector<HashPair>& hashes, int64_t num_tokens,
                                    int64_t gpu_hit, int64_t now, int64_t* split) {
  const int64_t tokens =
      std::min(num_tokens, static_cast<int64_t>(hashes.size()) * hash_block_size_);
  const int64_t end = HitEnd(hashes, tokens, gpu_hit, now, nullptr);
  if (end > gpu_hit) SplitByTier(hashes, gpu_hit, end, now, split);
}

bool OffloadingConnector::EverHeld(uint64_t key) const {
  for (const auto& tier : tiers_) {
    if (tier->EverHeld(key)) return true;
  }
  return false;
}

void OffloadingConnector::EnableMissAttribution(int64_t max_record_keys) {
  for (auto& tier : tiers_) tier->RememberEvictions(max_record_keys);
}

int64_t OffloadingConnector::StoredEnd(KvRequestHandle h, int64_t num_tokens, int64_t gpu_hit) {
  const std::vector<HashPair>& hashes = state_->HashesOf(h, num_tokens);
  return HitEnd(hashes, num_tokens, gpu_hit, /*now=*/0, /*defer=*/nullptr, /*ever_held=*/true);
}

int64_t OffloadingConnector::ForgottenTierKeys() const {
  int64_t n = 0;
  for (size_t t = 0; t < tiers_.size(); ++t) {
    if (!tier_shared_[t] || reports_shared_) n += tiers_[t]->ForgottenEvictions();
  }
  return n;
}

bool OffloadingConnector::StartLoad(KvRequestHandle h, int64_t gpu_hit, const Match& match,
                                    int64_t num_lookahead_tokens, int64_t now, int64_t* done_ns,
                                    int64_t* split) {
  PREFIXSIM_CHECK(match.tokens > 0 && !match.defer);
  if (!state_->AllocateSlotsForLoad(h, gpu_hit, match.tokens, num_lookahead_tokens)) return false;
  RequestOffload& st = State(h);
  const int64_t end = gpu_hit + match.tokens;
  const std::vector<HashPair>& hashes = state_->HashesOf(h, end);
  std::fill(split, split + kMaxOffloadTiers, 0);
  SplitByTier(hashes, gpu_hit, end, now, split);
  std::vector<int64_t> rank_bytes(tiers_.size(), 0);
  std::vector<TierBlock> promote;
  int64_t promoted_rank_bytes = 0;
  ForEachNeededKey(hashes, gpu_hit, end, [&](const GroupRule& r, int64_t c, uint64_t key) {
    const int t = TierOf(key, now, nullptr);
    tiers_[t]->Pin(key);
    st.pinned.push_back({t, key});
    stats_.tiers[t].loaded_blocks += 1;
    stats_.tiers[t].loaded_bytes += r.bytes;
    rank_bytes[t] += r.rank_bytes;
    if (t > 0) {  // staged through the CPU tier, which keeps a copy
      promote.push_back({key, slot_bytes_, hashes[(c + 1) * r.ratio - 1].hash, r.group});
      promoted_rank_bytes += r.rank_bytes;
    }
  });
  // The secondary tiers read into CPU memory first; the GPU link then carries everything.
  int64_t staged = now;
  for (size_t t = 1; t < tiers_.size(); ++t) {
    if (rank_bytes[t] > 0)
      staged = std::max(staged, tiers_[t]->read_link().Transfer(rank_bytes[t], now));
  }
  int64_t done = tiers_[0]->read_link().Transfer(rank_bytes[0], now);
  if (promoted_rank_bytes > 0) {
    done = std::max(done, tiers_[0]->read_link().Transfer(promoted_rank_bytes, staged));
    // The staged copies are CPU stores that this load reads.
    const int64_t stored_before = tiers_[0]->counters().stored_blocks;
    if (tiers_[0]->Store(promote, staged, EventSink())) {
      stats_.tiers[0].stored_blocks += tiers_[0]->counters().stored_blocks - stored_before;
      for (const TierBlock& b : promote) tiers_[0]->MarkLoaded(b.key);
    }
  }
  // The request is admitted by a later step at the earliest (WAITING_FOR_REMOTE_KVS).
  done = std::max(done, now + 1);
  st.load_done_ns = done;
  loads_in_flight_ += 1;
  stats_.loads += 1;
  stats_.load_wait_ns += done - now;
  // Storing resumes past the loaded hit (vLLM's next_stored_chunk_idx after a load).
  std::fill(st.next_store.begin(), st.next_store.end(), 0);
  SetNextStore(h, end, /*round_up=*/true);
  *done_ns = done;
  return true;
}

void OffloadingConnector::FinishLoad(KvRequestHandle h, int64_t num_computed_tokens) {
  RequestOffload& st = State(h);
  PREFIXSIM_CHECK(st.load_done_ns >= 0);
  for (const auto& [t, key] : st.pinned) tiers_[t]->Unpin(key);
  st.pinned.clear();
  st.load_done_ns = -1;
  loads_in_flight_ -= 1;
  state_->CacheLoadedBlocks(h, num_computed_tokens);
}

void OffloadingConnector::ResetStores(KvRequestHandle h) {
  RequestOffload& st = State(h);
  std::fill(st.next_store.begin(), st.next_store.end(), 0);
  SetNextStore(h, 0, false);
}

// Moves every rule's next block to store up to the one at `tokens` (its first block past them
// with `round_up`, else the one containing them).
void OffloadingConnector::SetNextStore(KvRequestHandle h, int64_t tokens, bool round_up) {
  RequestOffload& st = requests_[h.slot];
  int64_t& next_store_tokens = next_store_tokens_[h.slot];
  next_store_tokens = INT64_MAX;
  for (size_t i = 0; i < rules_.size(); ++i) {
    const int64_t b = rules_[i].block;
    st.next_store[i] = std::max(st.next_store[i], round_up ? CeilDivide(tokens, b) : tokens / b);
    next_store_tokens = std::min(next_store_tokens, (st.next_store[i] + 1) * b);
  }
}

int64_t OffloadingConnector::LoadDoneNs(KvRequestHandle h) const {
  return h.slot < requests_.size() ? requests_[h.slot].load_done_ns : -1;
}

// vLLM stores only blocks the GPU still holds: a block that left a window, or a mamba state the
// request no longer keeps, is the null block in its table and is skipped.
// The replica's KV event sink, if it has one: tier events carry the tier's medium.
KvEventSink* OffloadingConnector::EventSink() const { return state_->pool().event_sink(); }

bool OffloadingConnector::HeldOnGpu(KvRequestHandle h, int group, int64_t block) const {
  const GroupBlocks& gb = state_->request_state(h).groups[group];
  const int64_t usable = static_cast<int64_t>(gb.blocks.size()) - gb.num_speculative;
  return block >= gb.num_released && block < usable && gb.blocks[block] != kNullBlock;
}

void OffloadingConnector::StoreAfterStep(KvRequestHandle h, int64_t computed_end,
                                         int64_t prompt_tokens, int64_t step_end_ns) {
  const int64_t offloadable =
      config_.offload_prompt_only ? std::min(computed_end, prompt_tokens) : computed_end;
  // Every running request comes here after every step, and most have nothing to store: answer
  // those before State, which may have to make the request's state first.
  if (h.slot < next_store_tokens_.size() && offloadable < next_store_tokens_[h.slot]) return;
  RequestOffload& st = State(h);
  const std::vector<HashPair>& hashes = state_->HashesOf(h, offloadable);
  // The CPU tier's blocks cost a slot each; each secondary tier's, the group's real bytes.
  blocks_.clear();
  real_blocks_.clear();
  rank_bytes_.clear();
  int64_t rank_bytes = 0;
  for (size_t i = 0; i < rules_.size(); ++i) {
    const GroupRule& r = rules_[i];
    const int64_t full_blocks = offloadable / r.block;
    for (int64_t c = st.next_store[i]; c < full_blocks; ++c) {
      if (!HeldOnGpu(h, r.group, c)) continue;
      const uint64_t hash = hashes[(c + 1) * r.ratio - 1].hash;
      const uint64_t key = OffloadKey(hash, r.group);
      if (tiers_[0]->Contains(key)) continue;
      if (tracker_ && tracker_->Lookups(key) < config_.store_threshold) {
        stats_.stores_skipped += 1;
        continue;
      }
      blocks_.push_back({key, slot_bytes_, hash, static_cast<int32_t>(r.group)});
      real_blocks_.push_back({key, r.bytes, hash, static_cast<int32_t>(r.group)});
      rank_bytes_.push_back(r.rank_bytes);
      rank_bytes += r.rank_bytes;
    }
  }
  if (!blocks_.empty()) {
    const int64_t ready = tiers_[0]->write_link().Transfer(rank_bytes, step_end_ns);
    // All or nothing; refused, the same blocks are offered again after the next step.
    if (!tiers_[0]->Store(blocks_, ready, EventSink())) return;
    OffloadTierStats& cpu = stats_.tiers[0];
    cpu.stored_blocks += static_cast<int64_t>(blocks_.size());
    for (const TierBlock& b : real_blocks_) cpu.stored_bytes += b.bytes;
    // The secondary tiers are written through from CPU memory, each at its own rate.
    for (size_t t = 1; t < tiers_.size(); ++t) {
      tier_blocks_.clear();
      int64_t tier_rank_bytes = 0, tier_bytes = 0;
      for (size_t k = 0; k < real_blocks_.size(); ++k) {
        if (tiers_[t]->Contains(real_blocks_[k].key)) continue;
        tier_blocks_.push_back(real_blocks_[k]);
        tier_bytes += real_blocks_[k].bytes;
        tier_rank_bytes += rank_bytes_[k];
      }
      if (tier_blocks_.empty()) continue;
      const int64_t landed = tiers_[t]->write_link().Transfer(tier_rank_bytes, ready);
      if (!tiers_[t]->Store(tier_blocks_, landed, EventSink())) continue;
      stats_.tiers[t].stored_blocks += static_cast<int64_t>(tier_blocks_.size());
      stats_.tiers[t].stored_bytes += tier_bytes;
    }
  }
  SetNextStore(h, offloadable, /*round_up=*/false);
}

OffloadStats OffloadingConnector::Stats() const {
  OffloadStats s = stats_;
  for (size_t t = 0; t < tiers_.size(); ++t) {
    if (tier_shared_[t] && !reports_shared_) continue;  // another replica reports its state
    const OffloadTier::Counters& c = tiers_[t]->counters();
    OffloadTierStats& ts = s.tiers[t];
    ts.evicted_blocks = c.evicted_blocks;
    ts.never_loaded_blocks = c.evicted_never_loaded + tiers_[t]->HeldNeverLoaded();
    ts.store_failures = c.store_failures;
    ts.peak_used_bytes = c.peak_used_bytes;
  }
  return s;
}

}  // namespace prefixsim::kv
