// KvCacheManager (docs/semantics.md §9.1, §10.1, §12): the public face of the KV memory model.
#include "prefixsim/kv_cache_manager.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "prefixsim/status.h"
#include "sim/kv/block_hasher.h"
#include "sim/kv/block_pool.h"
#include "sim/kv/cache_contents.h"
#include "sim/kv/coordinator.h"
#include "sim/kv/fast_path.h"
#include "sim/kv/kv_cache_manager_access.h"
#include "sim/kv/miss_attribution.h"
#include "sim/kv/quiet_ranges.h"
#include "sim/kv/routing.h"
#include "sim/kv/shadow_index.h"
#include "sim/util/prefix_run.h"

namespace prefixsim {

using kv::BlockId;
using kv::kNullBlock;
using kv::QuietRanges;
using kv::SlotCounts;

uint64_t GeneratedOutputContentId(uint64_t request_id) {
  return kv::GeneratedContentId(request_id);
}

std::string PrefixCachingDisabledWarning(const KvPlan& plan) {
  if (!plan.enable_prefix_caching || plan.groups.empty()) return "";
  const int g = kv::KvCacheCoordinator::UnhashableGroup(plan);
  if (g < 0) return "";
  return absl::StrFormat(
      "KvCacheManager: prefix caching disabled: group %d block size %d is not a multiple of the "
      "hash block size %lld",
      g, plan.groups[g].block_size,
      static_cast<long long>(kv::KvCacheCoordinator::HashBlockSize(plan)));
}

struct KvCacheManager::Rep {
  // alignas(64), and what every decode step reads (SetNumTokens, the AllocateSlots fast path)
  // in the first two cache lines: a step visits every running request.
  struct alignas(64) RequestState {
    // The counts of the last successful AllocateSlots may move inside this window without
    // crossing a breakpoint (kv::QuietRanges), if quiet_valid.
    QuietRanges::Window quiet_ranges{};
    int64_t num_tokens = 0;
    std::vector<kv::HashPair> hashes;  // one per full H-chunk, extended lazily
    // The previous step of this request: where its verified (non-draft) tokens ended, and
    // whether drafts rode along (a verify step). For mamba states under speculation.
    int64_t prev_verified_end = 0;
    bool prev_had_drafts = false;
    bool quiet_valid = false;
    bool has_pending = false;
    const Request* request = nullptr;
    kv::HashCursor cursor;
    std::vector<kv::GroupBlocks> groups;
    int64_t pending_hit = 0;
    std::vector<std::vector<BlockId>> pending;  // per group: hit blocks from GetComputedBlocks
    int64_t shadow_held = 0;  // U-blocks [0, shadow_held) held in the shadow index
    // Miss attribution: the U-blocks [in_flight_from, in_flight_to) this request still has to
    // compute, counted in in_flight_; and what the last lookup saw.
    int64_t in_flight_from = 0;
    int64_t in_flight_to = 0;
    int64_t shadow_published = 0;  // held U-blocks [0, shadow_published) marked published
    int64_t fine_hit = 0;          // the lookup at H (hit + alignment loss)
    int64_t shadow_alive = 0;      // leading U-blocks alive in the shadow
    int limiting_group = 0;        // FindLongestCacheHit's limiting_group
  };

  Rep(const KvPlan& plan, const KvCacheOptions& options)
      : plan_(plan),
        options_(options),
        pool_(plan.num_blocks),
        coord_(plan, &pool_, options.num_reprefillable_tokens),
        caching_(plan.enable_prefix_caching && coord_.unhashable_group() < 0),
        quiet_(plan, coord_.scheduler_block_size(), coord_.hit_alignment(),
               plan.partial_hits ? coord_.hash_block_size() : int64_t{0},
               options.num_reprefillable_tokens) {
    fine_scratch_.resize(coord_.num_groups());
    if (caching_) MakeShadow(/*always=*/false);
    for (const KvGroup& g : plan.groups) {
      if (g.kind == LayerKind::kMamba) mamba_block_size_ = g.block_size;
    }
  }

  // The shadow index (shadow_index.h) runs when A is coarser than the finest prefix-cacheable
  // group block (otherwise nothing is lost to the alignment), or `always` for miss attribution.
  void MakeShadow(bool always) {
    int64_t unit = coord_.hit_alignment();
    bool eagle = false;
    for (int g = 0; g < coord_.num_groups(); ++g) {
      const kv::SingleTypeManager& m = coord_.manager(g);
      if (!m.spec().prefix_cacheable) continue;
      unit = std::min(unit, m.block_size());
      eagle = eagle || m.spec().is_eagle_group;
    }
    shadow_counts_loss_ = unit < coord_.hit_alignment();
    if (shadow_counts_loss_ || always) {
      shadow_ = std::make_unique<kv::ShadowIndex>(&pool_, unit, coord_.hash_block_size(), eagle);
    }
  }

  void EnableMissAttribution(int64_t max_record_blocks) {
    PREFIXSIM_CHECK(index_.empty());
    if (!caching_) return;
    attribution_ = true;
    if (!shadow_) MakeShadow(/*always=*/true);
    // What this replica computed is the shadow's own entries, kept; a fleet asks each replica's.
    shadow_->KeepComputed(max_record_blocks);
  }

  KvRequestHandle HandleOf(uint64_t id) const {
    auto it = index_.find(id);
    PREFIXSIM_CHECK(it != index_.end());
    return KvRequestHandle{it->second};
  }
  RequestState& State(KvRequestHandle h) {
    PREFIXSIM_DCHECK(h.slot < slots_.size() && slots_[h.slot].request != nullptr);
    return slots_[h.slot];
  }
  const RequestState& State(KvRequestHandle h) const {
    PREFIXSIM_DCHECK(h.slot < slots_.size() && slots_[h.slot].request != nullptr);
    return slots_[h.slot];
  }
  const RequestState& State(uint64_t id) const { return State(HandleOf(id)); }

  // Takes the hashes PrepareRequest computed, if at this manager's H. REQUIRES: `hashes` empty
  // and `cursor` at the start.
  void AdoptPromptHashes(const Request& r, std::vector<kv::HashPair>* hashes,
                         kv::HashCursor* cursor) const {
    const PromptHashes& pre = r.prompt_hashes;
    if (!caching_ || pre.chunk_tokens != coord_.hash_block_size() || pre.hashes.empty()) return;
    hashes->assign(pre.hashes.begin(), pre.hashes.end());
    cursor->segment = pre.next_segment;
    cursor->offset_in_seg = pre.next_offset_in_segment;
    cursor->tokens = static_cast<int64_t>(pre.hashes.size()) * pre.chunk_tokens;
  }

  void EnsureHashes(RequestState& st, int64_t num_chunks) {
    num_chunks = std::min(num_chunks, st.num_tokens / coord_.hash_block_size());
    if (static_cast<int64_t>(st.hashes.size()) >= num_chunks) return;
    kv::ExtendBlockHashes(*st.request, coord_.hash_block_size(), num_chunks, &st.cursor,
                          &st.hashes);
  }

  KvRequestHandle AddRequest(const Request* r) {
    PREFIXSIM_CHECK(r != nullptr);
    uint32_t slot;
    if (!free_slots_.empty()) {
      slot = free_slots_.back();
      free_slots_.pop_back();
    } else {
      slot = static_cast<uint32_t>(slots_.size());
      slots_.emplace_back();
    }
    PREFIXSIM_CHECK(index_.emplace(r->id, slot).second);  // ids are unique
    RequestState& st = slots_[slot];
    st.request = r;
    st.num_tokens = r->prompt_tokens;
    st.hashes.clear();
    st.cursor = kv::HashCursor{};
    AdoptPromptHashes(*r, &st.hashes, &st.cursor);
    st.groups.resize(coord_.num_groups());
    for (auto& g : st.groups) {
      g.blocks.clear();
      g.num_cached = 0;
    }
    st.pending.resize(coord_.num_groups());
    for (auto& p : st.pending) p.clear();
    st.has_pending = false;
    st.pending_hit = 0;
    st.quiet_valid = false;
    st.shadow_held = 0;
    st.in_flight_from = st.in_flight_to = 0;
    st.shadow_published = 0;
    st.prev_verified_end = 0;
    st.prev_had_drafts = false;
    return KvRequestHandle{slot};
  }

  void RemoveRequest(uint64_t id) {
    auto it = index_.find(id);
    PREFIXSIM_CHECK(it != index_.end());
    RequestState& st = slots_[it->second];
    for (const auto& g : st.groups) PREFIXSIM_CHECK(g.blocks.empty());  // Free() first
    PREFIXSIM_CHECK(st.shadow_held == 0);
    st.request = nullptr;
    st.has_pending = false;
    free_slots_.push_back(it->second);
    index_.erase(it);
  }

  void SetNumTokens(KvRequestHandle h, int64_t n) {
    RequestState& st = State(h);
    PREFIXSIM_CHECK(n >= 0);
    // Hashes of full chunks never change; a shrinking count would orphan them.
    PREFIXSIM_CHECK(n >= static_cast<int64_t>(st.hashes.size()) * coord_.hash_block_size());
    st.num_tokens = n;
  }

  PrefixHit GetComputedBlocks(KvRequestHandle h) {
    RequestState& st = State(h);
    for (const auto& g : st.groups) PREFIXSIM_CHECK(g.blocks.empty());
    st.has_pending = false;
    st.pending_hit = 0;
    PrefixHit result;
    if (!caching_) return result;
    // The last token is always recomputed to produce logits (docs/semantics.md §9.1).
    const int64_t max_hit = st.num_tokens - 1;
    if (max_hit <= 0) return result;
    EnsureHashes(st, max_hit / coord_.hash_block_size());
    const kv::HashPair* fine = st.hashes.data();
    const int64_t nf = static_cast<int64_t>(st.hashes.size());
    const int64_t a = coord_.hit_alignment();
    int64_t uncached_common_prefix = 0;
    result.hit_tokens = coord_.FindLongestCacheHit(pool_.hit_index(), fine, nf, max_hit, a,
                                                   st.pending.data(), &uncached_common_prefix,
                                                   attribution_ ? &st.limiting_group : nullptr);
    if (uncached_common_prefix > 0) {
      result.shared_prefix_boundary = result.hit_tokens + uncached_common_prefix;
    }
    if (a != coord_.hash_block_size()) {
      // Alignment loss: the same lookup at the hash granularity H instead of A.
      const int64_t fine_hit = coord_.FindLongestCacheHit(
          pool_.hit_index(), fine, nf, max_hit, coord_.hash_block_size(), fine_scratch_.data());
      result.alignment_loss_tokens = std::max<int64_t>(0, fine_hit - result.hit_tokens);
    }
    if (shadow_) {
      // What the same cache would give if it published every U-block and never rounded to S.
      st.shadow_alive = shadow_->AliveBlocks(fine, nf, max_hit / shadow_->unit());
      const int64_t shadow_hit = shadow_->HitTokens(st.shadow_alive);
      if (shadow_counts_loss_) {
        result.lost_to_alignment_tokens = std::max<int64_t>(0, shadow_hit - result.hit_tokens);
      }
    }
    st.fine_hit = result.hit_tokens + result.alignment_loss_tokens;
    st.has_pending = result.hit_tokens > 0;
    st.pending_hit = result.hit_tokens;
    if (!st.has_pending) {
      for (auto& p : st.pending) p.clear();
    }
    if (options_.check_invariants) CheckInvariants();
    return result;
  }

  // The remembered hit must still be what the lookup found (nothing evicted it since).
  void ValidatePending(const RequestState& st) const {
    for (int g = 0; g < coord_.num_groups(); ++g) {
      const std::vector<BlockId>& hit = st.pending[g];
      for (size_t j = 0; j < hit.size(); ++j) {
        const BlockId b = hit[j];
        if (b == kNullBlock) continue;
        bool valid = pool_.is_cached(b) && pool_.cached_group(b) == g;
        if (valid && j + 1 < hit.size()) {
          valid = pool_.cached_hash(b) == coord_.manager(g).BlockHash(st.hashes.data(), j);
        } else if (valid) {
          // The last block may be a partial entry (partial hits): any H boundary inside it.
          const int64_t ratio = coord_.manager(g).block_size() / coord_.hash_block_size();
          bool any = false;
          for (int64_t f = static_cast<int64_t>(j) * ratio;
               f < static_cast<int64_t>(j + 1) * ratio &&
               f < static_cast<int64_t>(st.hashes.size());
               ++f) {
            any = any || pool_.cached_hash(b) == st.hashes[f];
          }
          valid = any;
        }
        if (!valid) {
          std::fprintf(stderr,
                       "KvCacheManager: stale prefix hit for request %llu (block %d evicted "
                       "since GetComputedBlocks); look up again before AllocateSlots\n",
                       static_cast<unsigned long long>(st.request->id), b);
        }
        PREFIXSIM_CHECK(valid);
      }
    }
  }

  // The token counts of an AllocateSlots call (docs/semantics.md §10.1).
  SlotCounts Counts(const RequestState& st, int64_t num_computed_tokens, int64_t num_new_tokens,
                    int64_t num_new_computed_tokens, int64_t num_lookahead_tokens) const {
    const int64_t cap = MaxModelLen();
    SlotCounts c;
    c.total_computed_tokens = std::min(num_computed_tokens + num_new_computed_tokens, cap);
    c.num_tokens_main_model = c.total_computed_tokens + num_new_tokens;
    c.num_tokens_need_slot = std::min(c.num_tokens_main_model + num_lookahead_tokens, cap);
    c.num_tokens_to_cache =
        std::max<int64_t>(0, VerifiedEnd(st, c) - options_.num_reprefillable_tokens);
    return c;
  }
  int64_t MaxModelLen() const {
    return options_.max_model_len > 0 ? options_.max_model_len : INT64_MAX / 4;
  }
  // Where the step's verified tokens end: drafts and lookahead slots are never verified.
  static int64_t VerifiedEnd(const RequestState& st, const SlotCounts& c) {
    return std::min(c.num_tokens_main_model, st.num_tokens);
  }
  // Remembers the step for the mamba states under speculation (CacheSpecBoundaryState).
  static void RecordStep(RequestState& st, const SlotCounts& c) {
    st.prev_verified_end = VerifiedEnd(st, c);
    st.prev_had_drafts = st.prev_verified_end < c.num_tokens_main_model;
  }

  bool AllocateSlots(KvRequestHandle h, int64_t num_computed_tokens, int64_t num_new_tokens,
                     int64_t num_new_computed_tokens, int64_t num_lookahead_tokens) {
    RequestState& st = State(h);
    PREFIXSIM_CHECK(num_computed_tokens >= 0 && num_new_tokens >= 0 &&
                    num_new_computed_tokens >= 0 && num_lookahead_tokens >= 0);
    // The fast path (kv::QuietRanges): the decode steps between block boundaries return here, in
    // a few instructions; everything else, and every call under invariant checks, runs in full.
    if (num_new_computed_tokens == 0 && !st.has_pending && st.quiet_valid && fast_path_ &&
        !options_.check_invariants) {
      const SlotCounts c = Counts(st, num_computed_tokens, num_new_tokens, 0, num_lookahead_tokens);
      if (QuietRanges::Contains(st.quiet_ranges, c)) {
        RecordStep(st, c);
        return true;
      }
    }
    return AllocateSlotsFull(st, num_computed_tokens, num_new_tokens, num_new_computed_tokens,
                             num_lookahead_tokens);
  }

  // AllocateSlots in full, as named steps: take or drop the remembered hit, free what fell out of
  // a window, reserve, take the hit's blocks (copy-on-write), size the block tables, allocate,
  // cache; then the fast path's window for the next call.
  [[gnu::noinline]] bool AllocateSlotsFull(RequestState& st, int64_t num_computed_tokens,
                                           int64_t num_new_tokens, int64_t num_new_computed_tokens,
                                           int64_t num_lookahead_tokens) {
    const bool use_hit = TakePendingHit(st, num_computed_tokens, num_new_computed_tokens);
    const SlotCounts c = Counts(st, num_computed_tokens, num_new_tokens, num_new_computed_tokens,
                                num_lookahead_tokens);
    const bool quiet =
        !use_hit && fast_path_ && st.quiet_valid && QuietRanges::Contains(st.quiet_ranges, c);
    const int64_t prev_verified_end = st.prev_verified_end;
    const bool prev_had_drafts = st.prev_had_drafts;
    RecordStep(st, c);
    if (quiet && !options_.check_invariants) return true;
    // With invariant checks, a quiet call still runs in full and checks that it changed nothing:
    // the fast path's claim is verified wherever the checker runs.
    std::optional<QuietSnapshot> snapshot;
    if (quiet) snapshot = TakeSnapshot(st);
    // A mamba boundary crossed by the drafts the last verify step accepted: its state is cached
    // now (a boundary moves total_computed_tokens across a block, so such a call is never quiet).
    if (caching_ && mamba_block_size_ > 0 && plan_.cache_mamba_spec_boundary_states &&
        prev_had_drafts && !use_hit && c.total_computed_tokens >= prev_verified_end) {
      CacheSpecBoundaryState(st, c.total_computed_tokens, prev_verified_end);
    }
    // Free out-of-window blocks first (docs/semantics.md §10.1, §10.3).
    coord_.RemoveSkippedBlocks(st.groups.data(), c.total_computed_tokens);
    const int64_t num_blocks_to_allocate = coord_.NumBlocksToAllocate(
        st.groups.data(), use_hit ? st.pending.data() : nullptr, c.num_tokens_need_slot,
        c.num_tokens_main_model, c.total_computed_tokens);
    if (num_blocks_to_allocate > pool_.num_free()) {
      PREFIXSIM_CHECK(!quiet);
      st.quiet_valid = false;
      // Nothing ran: the previous step is still the last one.
      st.prev_verified_end = prev_verified_end;
      st.prev_had_drafts = prev_had_drafts;
      if (options_.check_invariants) CheckInvariants();
      return false;
    }
    const int64_t free_before = pool_.num_free();
    if (use_hit) TakeHitBlocks(st, c.total_computed_tokens);
    if (num_computed_tokens == 0) ReserveBlockTables(st, num_lookahead_tokens);
    counters_.allocated_blocks += coord_.AllocateNew(
        st.groups.data(), c.num_tokens_need_slot, c.num_tokens_main_model, c.total_computed_tokens);
    // All-or-nothing: the step took no more blocks than it reserved.
    PREFIXSIM_CHECK(free_before - pool_.num_free() <= num_blocks_to_allocate);
    if (caching_) CacheComputedBlocks(st, c);
    if (attribution_ && num_computed_tokens == 0) RegisterInFlight(st);
    if (snapshot) CheckUnchanged(st, *snapshot);
    st.quiet_valid = !use_hit && fast_path_;
    if (st.quiet_valid) st.quiet_ranges = quiet_.Around(c);
    if (options_.check_invariants) CheckInvariants();
    return true;
  }

  // Whether this call takes the hit GetComputedBlocks remembered (num_new_computed_tokens > 0,
  // which must be that hit, on a request with no computed tokens, and still valid); a call with
  // num_new_computed_tokens == 0 drops it.
  bool TakePendingHit(RequestState& st, int64_t num_computed_tokens,
                      int64_t num_new_computed_tokens) {
    if (num_new_computed_tokens == 0) {
      if (st.has_pending) {
        st.has_pending = false;  // the caller does not use the hit
        for (auto& p : st.pending) p.clear();
      }
      return false;
    }
    if (!st.has_pending || st.pending_hit != num_new_computed_tokens) {
      std::fprintf(stderr,
                   "KvCacheManager: AllocateSlots(request %llu, num_new_computed_tokens=%lld) "
                   "without a matching GetComputedBlocks hit (%lld)\n",
                   static_cast<unsigned long long>(st.request->id),
                   static_cast<long long>(num_new_computed_tokens),
                   static_cast<long long>(st.has_pending ? st.pending_hit : 0));
    }
    PREFIXSIM_CHECK(st.has_pending && st.pending_hit == num_new_computed_tokens);
    PREFIXSIM_CHECK(num_computed_tokens == 0);
    ValidatePending(st);
    return true;
  }

  // Takes the remembered hit's blocks into the request's tables. Every hit block is touched first
  // (all groups), so that allocation cannot evict them; a block the request will write into is
  // copied instead (partial hits, docs/semantics.md §8.2).
  void TakeHitBlocks(RequestState& st, int64_t total_computed_tokens) {
    cow_.assign(coord_.num_groups(), 0);
    for (int g = 0; g < coord_.num_groups(); ++g) {
      kv::GroupBlocks& gb = st.groups[g];
      PREFIXSIM_DCHECK(gb.blocks.empty());
      std::vector<BlockId>& hit = st.pending[g];
      cow_[g] = coord_.manager(g).NeedsCopyOnWrite(hit, total_computed_tokens);
      for (size_t i = 0; i < hit.size(); ++i) {
        if (hit[i] != kNullBlock && !(cow_[g] && i + 1 == hit.size())) pool_.Touch(hit[i]);
      }
      gb.blocks.swap(hit);
      gb.num_cached = static_cast<int64_t>(gb.blocks.size());
      hit.clear();
    }
    for (int g = 0; g < coord_.num_groups(); ++g) {
      if (!cow_[g]) continue;
      kv::GroupBlocks& gb = st.groups[g];
      gb.blocks.back() = pool_.Allocate();
      --gb.num_cached;
      ++counters_.allocated_blocks;
    }
    st.has_pending = false;
  }

  // A request's first allocation sizes its block tables for its whole life (prompt, outputs,
  // lookahead; at most max_model_len), so the tables grow without reallocating. Done here, not at
  // AddRequest: a long waiting queue holds no table memory.
  void ReserveBlockTables(RequestState& st, int64_t num_lookahead_tokens) {
    const int64_t life =
        std::min(st.request->prompt_tokens + st.request->output_tokens + num_lookahead_tokens,
                 MaxModelLen());
    for (int g = 0; g < coord_.num_groups(); ++g) {
      const size_t blocks =
          static_cast<size_t>(kv::CeilDiv(life, coord_.manager(g).block_size()) + 1);
      if (st.groups[g].blocks.capacity() < blocks) st.groups[g].blocks.reserve(blocks);
    }
  }

  // An event sink (vLLM's KV events) needs to know whose chunks the next stores name.
  void NoteCachingRequest(const RequestState& st) {
    if (KvEventSink* sink = pool_.event_sink(); sink != nullptr) {
      sink->OnCachingRequest(*st.request, st.hashes.data(), static_cast<int64_t>(st.hashes.size()));
    }
  }

  // Publishes the full blocks of the first num_tokens_to_cache tokens (under the hybrid
  // round-down to S), and holds them in the shadow index, which sees every computed U-block with
  // no round-down.
  void CacheComputedBlocks(RequestState& st, const SlotCounts& c) {
    const int64_t n = c.num_tokens_to_cache;
    if (shadow_) {
      EnsureHashes(st, shadow_->FineChunksFor(n));
      const int64_t held_before = st.shadow_held;
      shadow_->Hold(st.hashes.data(), static_cast<int64_t>(st.hashes.size()), n / shadow_->unit(),
                    attribution_ ? coord_.CommonCacheLimit(n) / shadow_->unit() : 0,
                    &st.shadow_held, &st.shadow_published);
      if (attribution_) NoteComputed(st, held_before, st.shadow_held);
    }
    const int64_t limit = coord_.MaxCacheLimit(n);
    if (limit <= 0) return;
    EnsureHashes(st, limit / coord_.hash_block_size());
    // Mamba caches the state where this step ends, if no draft tokens ride along.
    const int64_t step_end = (n == c.num_tokens_main_model) ? n : -1;
    NoteCachingRequest(st);
    // Each group reads hashes below its own limit only: all present after EnsureHashes.
    counters_.cached_blocks += coord_.CacheBlocks(st.groups.data(), st.hashes.data(), n, step_end);
  }

  // What a quiet call must leave as it found it: the pool's counts, what it allocates, evicts or
  // publishes, the request's block tables and shadow blocks.
  struct QuietSnapshot {
    int64_t free, cached_entries, allocated, published, evicted, shadow_held;
    std::vector<kv::GroupBlocks> tables;
  };
  QuietSnapshot TakeSnapshot(const RequestState& st) const {
    return QuietSnapshot{pool_.num_free(),
                         pool_.num_cached_entries(),
                         counters_.allocated_blocks,
                         counters_.cached_blocks,
                         pool_.evictions(),
                         st.shadow_held,
                         st.groups};
  }
  void CheckUnchanged(const RequestState& st, const QuietSnapshot& s) const {
    PREFIXSIM_CHECK(pool_.num_free() == s.free && pool_.num_cached_entries() == s.cached_entries &&
                    counters_.allocated_blocks == s.allocated &&
                    counters_.cached_blocks == s.published && pool_.evictions() == s.evicted &&
                    st.shadow_held == s.shadow_held);
    for (int g = 0; g < coord_.num_groups(); ++g) {
      PREFIXSIM_CHECK(st.groups[g].blocks == s.tables[g].blocks &&
                      st.groups[g].num_cached == s.tables[g].num_cached);
    }
  }

  // Mamba align mode under speculative decoding (docs/reference-notes.md §2): when accepted
  // drafts of the previous verify step crossed a mamba block boundary b, vLLM's worker copies the
  // state at b (kept per draft position in the speculative state blocks) into the block of b
  // (postprocess_mamba), and the next allocate_slots publishes it. `total` counts the accepted
  // drafts now. Done before RemoveSkippedBlocks frees that block (it stays hittable).
  // Simplification: if the verify step spanned a whole block (1 + k > B), the block of b was
  // never allocated here and the state is not cached.
  void CacheSpecBoundaryState(RequestState& st, int64_t total, int64_t prev_verified_end) {
    const int64_t b = kv::RoundDown(total, mamba_block_size_);
    if (b <= 0 || b < prev_verified_end) return;
    const int64_t limit = coord_.MaxCacheLimit(b);
    if (limit <= 0) return;
    EnsureHashes(st, limit / coord_.hash_block_size());
    NoteCachingRequest(st);
    counters_.cached_blocks += coord_.CacheBlocks(st.groups.data(), st.hashes.data(), b, b);
  }

  void Free(KvRequestHandle h) {
    RequestState& st = State(h);
    st.quiet_valid = false;
    st.prev_verified_end = 0;
    st.prev_had_drafts = false;
    const int64_t clock_before_free = pool_.free_clock();
    coord_.FreeAll(st.groups.data());
    if (attribution_) DropInFlight(st);
    if (shadow_) shadow_->Release(st.hashes.data(), &st.shadow_held, clock_before_free);
    st.shadow_published = 0;
    st.has_pending = false;
    for (auto& p : st.pending) p.clear();
    if (options_.check_invariants) CheckInvariants();
  }

  // The request computed (or took as a hit) its U-blocks [from, to): this replica has computed
  // them, and they are no longer in flight.
  void NoteComputed(RequestState& st, int64_t from, int64_t to) {
    const int64_t end = std::min(to, st.in_flight_to);
    for (int64_t j = std::max(from, st.in_flight_from); j < end; ++j) {
      LeaveInFlight(shadow_->BlockHash(st.hashes.data(), j).hash);
    }
    st.in_flight_from = std::max(st.in_flight_from, std::min(to, st.in_flight_to));
  }
  // At admission: the prompt's full U-blocks the request has not computed yet are in flight
  // until it computes them or frees its blocks.
  void RegisterInFlight(RequestState& st) {
    DropInFlight(st);
    const int64_t end = st.num_tokens / shadow_->unit();
    EnsureHashes(st, shadow_->FineChunksFor(st.num_tokens));
    st.in_flight_from = st.shadow_held;
    st.in_flight_to =
        std::max(st.in_flight_from,
                 std::min(end, shadow_->BlocksOf(static_cast<int64_t>(st.hashes.size()))));
    for (int64_t j = st.in_flight_from; j < st.in_flight_to; ++j) {
      ++in_flight_[shadow_->BlockHash(st.hashes.data(), j).hash];
    }
  }
  void DropInFlight(RequestState& st) {
    for (int64_t j = st.in_flight_from; j < st.in_flight_to; ++j) {
      LeaveInFlight(shadow_->BlockHash(st.hashes.data(), j).hash);
    }
    st.in_flight_from = st.in_flight_to = 0;
  }
  void LeaveInFlight(uint64_t hash) {
    auto it = in_flight_.find(hash);
    PREFIXSIM_CHECK(it != in_flight_.end() && it->second > 0);
    if (--it->second == 0) in_flight_.erase(it);
  }

  // miss_attribution.h: the thresholds below are prefix lengths in tokens, each at least the
  // previous one and at most `cap`; each cause takes the tokens between its threshold and the
  // previous one, so the causes add up to num_tokens by construction.
  MissAttribution AttributeMiss(KvRequestHandle h, const PrefixHit& hit,
                                const kv::ArrivalSighting& sighting) {
    PREFIXSIM_CHECK(attribution_);
    RequestState& st = State(h);
    const int64_t num_tokens = st.num_tokens;
    const int64_t unit = shadow_->unit();
    const int64_t drop = shadow_->drop_eagle() ? unit : 0;
    const int64_t max_blocks = num_tokens > 0 ? (num_tokens - 1) / unit : 0;
    const int64_t h_tokens = hit.hit_tokens;
    const int64_t cap = std::max(h_tokens, max_blocks * unit - drop);
    // A prefix of b U-blocks known to some oracle could at best hit b blocks less the drop.
    auto usable = [&](int64_t tokens) {
      return std::clamp<int64_t>(tokens > 0 ? tokens - drop : 0, 0, cap);
    };
    const kv::HashPair* fine = st.hashes.data();
    const int64_t num_fine = static_cast<int64_t>(st.hashes.size());
    const int64_t walk_limit = std::min(max_blocks, shadow_->BlocksOf(num_fine));
    const int64_t alive = std::min(st.shadow_alive, walk_limit);
    int64_t pending = alive;  // alive, then in flight
    while (pending < walk_limit && in_flight_.contains(shadow_->BlockHash(fine, pending).hash)) {
      ++pending;
    }
    // Alive implies computed here.
    const int64_t computed_here = shadow_->ComputedBlocks(fine, num_fine, alive, walk_limit);
    // Of the shadow's prefix, the part some holder was allowed to publish: past it, only the
    // round-down to S kept the blocks out of the cache (alignment); before it, a group failed to
    // keep what was published (not_checkpointed).
    const int64_t fine_blocks = std::min(st.fine_hit / unit, alive);
    const int64_t published = shadow_->FirstUnpublished(fine, fine_blocks, alive);
    int64_t t[8];
    t[0] = h_tokens;
    t[1] = std::max(t[0], std::min(st.fine_hit, cap));
    t[2] = std::max(t[1], usable(published * unit));
    t[3] = std::max(t[2], std::min(shadow_->HitTokens(alive), cap));
    t[4] = std::max(t[3], usable(pending * unit));
    t[5] = std::max(t[4], usable(computed_here * unit));
    t[6] = std::max(t[5], usable(sighting.elsewhere_tokens));
    t[7] = std::max(t[6], usable(sighting.fleet_known_tokens));
    MissAttribution m;
    m.tokens[static_cast<int>(MissCause::kHit)] = t[0];
    m.tokens[static_cast<int>(MissCause::kAlignment)] = (t[1] - t[0]) + (t[3] - t[2]);
    m.tokens[static_cast<int>(MissCause::kNotCheckpointed)] = t[2] - t[1];
    m.tokens[static_cast<int>(MissCause::kInFlight)] = t[4] - t[3];
    m.tokens[static_cast<int>(MissCause::kEvicted)] = (t[5] - t[4]) + (t[7] - t[6]);
    m.tokens[static_cast<int>(MissCause::kElsewhere)] = t[6] - t[5];
    m.tokens[static_cast<int>(MissCause::kCompulsory)] = cap - t[7];
    m.tokens[static_cast<int>(MissCause::kTail)] = num_tokens - cap;
    m.evicted_on_other_replicas = t[7] - t[6];
    m.evicted_by = BreakerOfKind(plan_.groups[st.limiting_group].kind);
    if (t[6] > t[5]) m.elsewhere_replica = sighting.elsewhere_replica;
    PREFIXSIM_CHECK(m.total() == num_tokens);
    return m;
  }
  // Invariants: the pool's own (queue links, every block exactly one of free / cached-free /
  // in use, the index), plus reference counts == occurrences in block tables, and a block id is
  // used by one group only.
  void CheckInvariants() const {
    pool_.CheckInvariants();
    const int64_t n = pool_.num_blocks();
    std::vector<int32_t> refs(n, 0);
    std::vector<int32_t> owner(n, -1);
    for (const auto& [id, slot] : index_) {
      const RequestState& st = slots_[slot];
      PREFIXSIM_CHECK(st.request != nullptr && st.request->id == id);
      for (int g = 0; g < coord_.num_groups(); ++g) {
        const kv::GroupBlocks& gb = st.groups[g];
        PREFIXSIM_CHECK(gb.num_cached >= 0);
        for (BlockId b : gb.blocks) {
          PREFIXSIM_CHECK(b >= 0 && b < n);
          if (b == kNullBlock) continue;
          ++refs[b];
          PREFIXSIM_CHECK(owner[b] == -1 || owner[b] == g);
          owner[b] = g;
          if (pool_.is_cached(b)) PREFIXSIM_CHECK(pool_.cached_group(b) == g);
        }
      }
    }
    // Blocks never allocated have no record in the pool and no reference.
    for (BlockId b = 1; b < n; ++b) {
      PREFIXSIM_CHECK((b < pool_.num_ever_allocated() ? pool_.ref(b) : 0) == refs[b]);
    }
  }

  const KvPlan plan_;
  const KvCacheOptions options_;
  int64_t mamba_block_size_ = 0;  // 0 without a mamba group
  kv::BlockPool pool_;
  kv::KvCacheCoordinator coord_;
  // Prefix caching on and every prefix-cacheable group's blocks named by the hashes. vLLM refuses
  // the other plans at startup (docs/semantics.md §7); here they get no prefix cache, and
  // PrefixCachingDisabledWarning tells the caller.
  const bool caching_;
  const QuietRanges quiet_;
  bool fast_path_ = true;  // kv::SetFastPath
  absl::flat_hash_map<uint64_t, uint32_t> index_;
  std::vector<RequestState> slots_;
  std::vector<uint32_t> free_slots_;
  std::vector<std::vector<BlockId>> fine_scratch_;
  std::unique_ptr<kv::ShadowIndex> shadow_;  // null when nothing can be lost to the alignment
  bool shadow_counts_loss_ = false;          // U < A: lost_to_alignment_tokens is reported
  // Miss attribution (miss_attribution.h): on or off, and the running requests' uncomputed
  // U-blocks (hash -> requests).
  bool attribution_ = false;
  absl::flat_hash_map<uint64_t, int32_t> in_flight_;
  std::vector<char> cow_;
  mutable KvCacheCounters counters_;
};

KvCacheManager::KvCacheManager(const KvPlan& plan, const KvCacheOptions& options)
    : rep_(std::make_unique<Rep>(plan, options)) {}
KvCacheManager::~KvCacheManager() = default;

KvRequestHandle KvCacheManager::AddRequest(const Request* request) {
  return rep_->AddRequest(request);
}
void KvCacheManager::RemoveRequest(uint64_t request_id) { rep_->RemoveRequest(request_id); }
KvRequestHandle KvCacheManager::Handle(uint64_t request_id) const {
  return rep_->HandleOf(request_id);
}
void KvCacheManager::SetNumTokens(KvRequestHandle request, int64_t num_tokens) {
  rep_->SetNumTokens(request, num_tokens);
}
PrefixHit KvCacheManager::GetComputedBlocks(KvRequestHandle request) {
  return rep_->GetComputedBlocks(request);
}
bool KvCacheManager::AllocateSlots(KvRequestHandle request, int64_t num_computed_tokens,
                                   int64_t num_new_tokens, int64_t num_new_computed_tokens,
                                   int64_t num_lookahead_tokens) {
  return rep_->AllocateSlots(request, num_computed_tokens, num_new_tokens, num_new_computed_tokens,
                             num_lookahead_tokens);
}
void KvCacheManager::Free(KvRequestHandle request) { rep_->Free(request); }

void KvCacheManager::SetCacheEventListener(CacheEventListener* listener) {
  rep_->pool_.set_listener(listener);
}

void KvCacheManager::SetKvEventSink(KvEventSink* sink) { rep_->pool_.set_event_sink(sink); }

void KvCacheManager::PrepareRequest(const KvPlan& plan, Request* request) {
  PREFIXSIM_CHECK(request != nullptr);
  PromptHashes& pre = request->prompt_hashes;
  pre = PromptHashes{};
  if (!plan.enable_prefix_caching || plan.groups.empty()) return;
  // The chunks the admission lookup reads first (max_hit = prompt - 1, docs/semantics.md §9.1); a
  // router that wants one more (HashPrompt) extends from the cursor.
  const int64_t h = kv::KvCacheCoordinator::HashBlockSize(plan);
  if (h <= 0 || request->prompt_tokens <= 1) return;
  kv::HashCursor cursor;
  kv::ExtendBlockHashes(*request, h, (request->prompt_tokens - 1) / h, &cursor, &pre.hashes);
  pre.chunk_tokens = h;
  pre.next_segment = cursor.segment;
  pre.next_offset_in_segment = cursor.offset_in_seg;
}

int64_t KvCacheManager::num_free_blocks() const { return rep_->pool_.num_free(); }
int64_t KvCacheManager::UnpublishedAlignmentTokens(int64_t computed_tokens) const {
  if (!rep_->caching_) return 0;
  return rep_->coord_.UnpublishedAlignmentTokens(computed_tokens);
}

int64_t KvCacheManager::num_usable_blocks() const { return rep_->pool_.num_blocks() - 1; }
double KvCacheManager::usage() const {
  return 1.0 - static_cast<double>(num_free_blocks()) / static_cast<double>(num_usable_blocks());
}
const KvCacheCounters& KvCacheManager::counters() const {
  rep_->counters_.evicted_blocks = rep_->pool_.evictions();
  rep_->counters_.hash_collisions = rep_->pool_.collisions();
  return rep_->counters_;
}
const KvPlan& KvCacheManager::plan() const { return rep_->plan_; }
std::vector<int32_t> KvCacheManager::BlockTable(uint64_t request_id, int group) const {
  const Rep::RequestState& st = rep_->State(request_id);
  PREFIXSIM_CHECK(group >= 0 && group < static_cast<int>(st.groups.size()));
  return st.groups[group].blocks;
}
int64_t KvCacheManager::NumHeldBlocks(uint64_t request_id) const {
  const Rep::RequestState& st = rep_->State(request_id);
  int64_t n = 0;
  for (const auto& g : st.groups) {
    for (BlockId b : g.blocks) n += b != kNullBlock;
  }
  return n;
}
void KvCacheManager::CheckInvariants() const { rep_->CheckInvariants(); }

namespace kv {

void SetFastPath(KvCacheManager& manager, bool on) {
  KvCacheManagerAccess::Get(manager).fast_path_ = on;
}

void HashPrompt(const KvCacheManager& manager, const Request& request,
                std::vector<HashPair>* hashes) {
  const KvCacheManagerAccess::Rep& m = KvCacheManagerAccess::Get(manager);
  hashes->clear();
  const int64_t h = m.coord_.hash_block_size();
  HashCursor cursor;
  m.AdoptPromptHashes(request, hashes, &cursor);
  ExtendBlockHashes(request, h, request.prompt_tokens / h, &cursor, hashes);
}

int64_t PeekPromptHit(KvCacheManager& manager, const Request& request,
                      const std::vector<HashPair>& hashes, const HitIndex* index) {
  KvCacheManagerAccess::Rep& m = KvCacheManagerAccess::Get(manager);
  if (!m.caching_) return 0;
  const int64_t max_hit = request.prompt_tokens - 1;  // docs/semantics.md §9.1
  if (max_hit <= 0) return 0;
  const int64_t nf =
      std::min<int64_t>(static_cast<int64_t>(hashes.size()), max_hit / m.coord_.hash_block_size());
  return m.coord_.FindLongestCacheHit(index != nullptr ? *index : m.pool_.hit_index(),
                                      hashes.data(), nf, max_hit, m.coord_.hit_alignment(),
                                      m.fine_scratch_.data());
}

int64_t PeekPrimaryOverlap(const KvCacheManager& manager, const Request& request,
                           const std::vector<HashPair>& hashes, const HitIndex* index_or_null) {
  const KvCacheManagerAccess::Rep& m = KvCacheManagerAccess::Get(manager);
  const int g = m.coord_.primary_group();
  if (!m.caching_ || g < 0) return 0;
  const HitIndex index = index_or_null != nullptr ? *index_or_null : m.pool_.hit_index();
  const SingleTypeManager& group = m.coord_.manager(g);
  const int64_t ratio = group.block_size() / m.coord_.hash_block_size();
  const int64_t nb = static_cast<int64_t>(hashes.size()) / ratio;
  int64_t j = 0;
  while (j < nb && index.Lookup(g, group.BlockHash(hashes.data(), j)) != kNoBlock) ++j;
  return std::min(j * group.block_size(), request.prompt_tokens);
}

void PeekPromptHits(KvCacheManager& any_replica, const Request& request,
                    const std::vector<HashPair>& hashes, const FleetIndex& index,
                    std::vector<int64_t>* hits) {
  const int n = index.num_replicas();
  hits->assign(n, 0);
  KvCacheManagerAccess::Rep& m = KvCacheManagerAccess::Get(any_replica);
  const int64_t max_hit = request.prompt_tokens - 1;  // as the admission lookup (§9.1)
  if (!m.caching_ || max_hit <= 0) return;
  const int64_t nf =
      std::min<int64_t>(static_cast<int64_t>(hashes.size()), max_hit / m.coord_.hash_block_size());
  m.coord_.FindLongestCacheHits(index, hashes.data(), nf, max_hit, m.coord_.hit_alignment(),
                                m.fine_scratch_.data(), hits->data());
}

void PeekPrimaryOverlaps(const KvCacheManager& any_replica, const Request& request,
                         const std::vector<HashPair>& hashes, const FleetIndex& index,
                         std::vector<int64_t>* overlaps) {
  overlaps->assign(index.num_replicas(), 0);
  const KvCacheManagerAccess::Rep& m = KvCacheManagerAccess::Get(any_replica);
  const int g = m.coord_.primary_group();
  if (!m.caching_ || g < 0) return;
  const SingleTypeManager& group = m.coord_.manager(g);
  const int64_t ratio = group.block_size() / m.coord_.hash_block_size();
  const int64_t nb = static_cast<int64_t>(hashes.size()) / ratio;
  // `alive`: the replicas holding every block so far; a replica leaving at block j holds j.
  std::vector<uint64_t> alive(index.words(), ~uint64_t{0});
  bool any = true;
  for (int64_t j = 0; j < nb && any; ++j) {
    const uint64_t* holders = index.Holders(g, group.BlockHash(hashes.data(), j));
    const int64_t run = std::min(j * group.block_size(), request.prompt_tokens);
    any = false;
    for (int w = 0; w < index.words(); ++w) {
      const uint64_t kept = holders != nullptr ? alive[w] & holders[w] : 0;
      for (uint64_t left = alive[w] & ~kept; left != 0; left &= left - 1) {
        const int r = w * 64 + __builtin_ctzll(left);
        if (r < index.num_replicas()) (*overlaps)[r] = run;
      }
      alive[w] = kept;
      any |= kept != 0;
    }
  }
  if (!any) return;
  const int64_t run = std::min(nb * group.block_size(), request.prompt_tokens);
  for (int w = 0; w < index.words(); ++w) {
    for (uint64_t left = alive[w]; left != 0; left &= left - 1) {
      const int r = w * 64 + __builtin_ctzll(left);
      if (r < index.num_replicas()) (*overlaps)[r] = run;
    }
  }
}

void AttachCacheListener(KvCacheManager& manager, CacheEventListener* listener,
                         const PrefixIndex* prefetch) {
  KvCacheManagerAccess::Get(manager).pool_.set_listener(listener, prefetch);
}

void EnableMissAttribution(KvCacheManager& manager, int64_t max_record_blocks) {
  KvCacheManagerAccess::Get(manager).EnableMissAttribution(max_record_blocks);
}

int64_t ForgottenComputedBlocks(const KvCacheManager& manager) {
  const KvCacheManagerAccess::Rep& m = KvCacheManagerAccess::Get(manager);
  return m.attribution_ ? m.shadow_->forgotten() : 0;
}

bool MissAttributionEnabled(const KvCacheManager& manager) {
  return KvCacheManagerAccess::Get(manager).attribution_;
}

ArrivalSighting SightAtArrival(const std::vector<KvCacheManager*>& replicas, int chosen,
                               const Request& request, std::vector<HashPair>* hashes) {
  ArrivalSighting sight;
  const KvCacheManagerAccess::Rep& m = KvCacheManagerAccess::Get(*replicas[chosen]);
  if (!m.attribution_ || replicas.size() < 2 || request.prompt_tokens <= 1) return sight;
  HashPrompt(*replicas[chosen], request, hashes);
  const HashPair* fine = hashes->data();
  const int64_t num_fine = static_cast<int64_t>(hashes->size());
  const int64_t unit = m.shadow_->unit();
  const int64_t limit = std::min((request.prompt_tokens - 1) / unit, m.shadow_->BlocksOf(num_fine));
  auto shadow_of = [&](size_t r) -> const ShadowIndex& {
    return *KvCacheManagerAccess::Get(*replicas[r]).shadow_;
  };
  // What each replica computed is a prefix of the prompt (it computed the blocks before any it
  // computed), so the longest is found by asking each replica for one block past the longest so
  // far, and searching on where it has it.
  const int64_t here = m.shadow_->ComputedBlocks(fine, num_fine, 0, limit);
  int64_t known = here;
  for (size_t r = 0; r < replicas.size() && known < limit; ++r) {
    if (static_cast<int>(r) == chosen) continue;
    const ShadowIndex& other = shadow_of(r);
    if (other.HasComputed(fine, known)) {
      known = other.ComputedBlocks(fine, num_fine, known + 1, limit);
    }
  }
  sight.fleet_known_tokens = known * unit;
  if (here >= known) return sight;
  // Only a replica that computed the block where the chosen one's history ends can hold more.
  int64_t best = 0;
  for (size_t r = 0; r < replicas.size(); ++r) {
    if (static_cast<int>(r) == chosen) continue;
    const ShadowIndex& other = shadow_of(r);
    if (!other.HasComputed(fine, here)) continue;
    const int64_t alive = other.AliveBlocks(fine, num_fine, limit);
    if (alive > best) {
      best = alive;
      sight.elsewhere_replica = static_cast<int>(r);
    }
  }
  sight.elsewhere_tokens = best * unit;
  return sight;
}

MissAttribution AttributeMiss(KvCacheManager& manager, KvRequestHandle request,
                              const PrefixHit& hit, const ArrivalSighting& sighting) {
  return KvCacheManagerAccess::Get(manager).AttributeMiss(request, hit, sighting);
}

}  // namespace kv

}  // namespace prefixsim

namespace prefixsim::kv {

std::vector<std::pair<int, ChunkHash>> CachedBlockList(const KvCacheManager& manager) {
  const BlockPool& pool = KvCacheManagerAccess::Get(manager).pool_;
  std::vector<std::pair<int, ChunkHash>> out;
  for (BlockId b = 1; b < pool.num_ever_allocated(); ++b) {
    if (pool.is_cached(b)) out.emplace_back(pool.cached_group(b), pool.cached_hash(b));
  }
  return out;
}

}  // namespace prefixsim::kv
