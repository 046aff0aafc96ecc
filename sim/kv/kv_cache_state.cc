// The KV cache's state and its operations (docs/semantics.md §9.1, §10.1, §12): lookup at
// admission, slot allocation with the fast path, caching while running, freeing.
#include "sim/kv/kv_cache_state.h"

#include <algorithm>
#include <climits>

#include "sim/util/status_macros.h"

namespace prefixsim::kv {
namespace {

// Where the step's verified tokens end: drafts and lookahead slots are never verified.
int64_t VerifiedEnd(const RequestState& st, const SlotCounts& c) {
  return std::min(c.num_tokens_main_model, st.num_tokens);
}
// What the retention masks read of the request (docs/semantics.md §10.2).
CacheRequest CachingRequest(const RequestState& st) {
  return CacheRequest{st.request->prompt_tokens, st.shared_prefix_boundary};
}
// Remembers the step for the mamba states under speculation (CacheSpecBoundaryState).
void RecordStep(RequestState& st, const SlotCounts& c) {
  st.prev_verified_end = VerifiedEnd(st, c);
  st.prev_had_drafts = st.prev_verified_end < c.num_tokens_main_model;
}

}  // namespace

KvCacheState::KvCacheState(const KvPlan& plan, const KvCacheOptions& options)
    : plan_(plan),
      options_(options),
      pool_(plan.num_blocks),
      coord_(plan, &pool_, options.num_reprefillable_tokens),
      caching_(plan.enable_prefix_caching && coord_.unhashable_group() < 0),
      quiet_(plan, coord_.scheduler_block_size(), coord_.hit_alignment(),
             plan.partial_hits ? coord_.hash_block_size() : int64_t{0},
             options.num_reprefillable_tokens) {
  lookup_scratch_.resize(coord_.num_groups());
  if (caching_) MakeShadow(/*always=*/false);
  for (const KvGroup& g : plan.groups) {
    if (g.kind == LayerKind::kMamba) mamba_block_size_ = g.block_size;
  }
}

// The shadow index (shadow_index.h) runs when A is coarser than the finest prefix-cacheable group
// block (otherwise nothing is lost to the alignment), or `always` for miss attribution.
void KvCacheState::MakeShadow(bool always) {
  int64_t unit = coord_.hit_alignment();
  bool eagle = false;
  for (int g = 0; g < coord_.num_groups(); ++g) {
    const SingleTypeManager& m = coord_.manager(g);
    if (!m.spec().prefix_cacheable) continue;
    unit = std::min(unit, m.block_size());
    eagle = eagle || m.spec().is_eagle_group;
  }
  shadow_counts_loss_ = unit < coord_.hit_alignment();
  if (shadow_counts_loss_ || always) {
    shadow_ = std::make_unique<ShadowIndex>(&pool_, unit, coord_.hash_block_size(), eagle);
  }
}

void KvCacheState::EnableMissAttribution(int64_t max_record_blocks, bool shadow_may_read_pool) {
  PREFIXSIM_CHECK(requests_.empty());
  if (!caching_) return;
  if (!shadow_) MakeShadow(/*always=*/true);
  // What this replica computed is the shadow's own entries, kept; a fleet asks each replica's.
  shadow_->KeepComputed(max_record_blocks);
  attributor_ = std::make_unique<MissAttributor>(&plan_, shadow_.get());
  // One full-attention or MLA group at U, publishing every block it computes, is the cache the
  // shadow would be: the shadow reads it (ShadowIndex::ReadPool).
  const SingleTypeManager& first = coord_.manager(0);
  if (shadow_may_read_pool && coord_.num_groups() == 1 && first.spec().prefix_cacheable &&
      !first.spec().is_eagle_group &&
      (first.spec().kind == LayerKind::kFullAttention || first.spec().kind == LayerKind::kMla) &&
      !shadow_counts_loss_ && shadow_->unit() == first.block_size() &&
      shadow_->unit() == coord_.hash_block_size() && !plan_.partial_hits &&
      options_.num_reprefillable_tokens == 0) {
    shadow_->ReadPool(0);
    pool_.set_eviction_observer(shadow_.get());
  }
  // A plan whose groups are all full attention or MLA at one block size caches, in every group,
  // every block it lets a request publish: what it ever cached covers the published prefix, so
  // the checkpointed lookup needs no record of evictions (CheckpointedHit).
  bool publishes_in_every_group = true;
  for (const KvGroup& g : plan_.groups) {
    publishes_in_every_group = publishes_in_every_group &&
                               (g.kind == LayerKind::kFullAttention || g.kind == LayerKind::kMla) &&
                               g.block_size == plan_.groups.front().block_size;
  }
  if (publishes_in_every_group) return;
  // A generation of a pool's worth of new keys: the shadow keeps a U-block alive about one
  // turnover of the pool, and the record keeps the last two generations.
  ever_cached_ = std::make_unique<EverCachedIndex>(&pool_, pool_.num_blocks());
  pool_.set_eviction_observer(ever_cached_.get());
}

void KvCacheState::AdoptPromptHashes(const Request& r, std::vector<HashPair>* hashes,
                                     HashCursor* cursor) const {
  const PromptHashes& pre = r.prompt_hashes;
  if (!caching_ || pre.chunk_tokens != coord_.hash_block_size() || pre.hashes.empty()) return;
  hashes->assign(pre.hashes.begin(), pre.hashes.end());
  cursor->segment = pre.next_segment;
  cursor->offset_in_seg = pre.next_offset_in_segment;
  cursor->tokens = static_cast<int64_t>(pre.hashes.size()) * pre.chunk_tokens;
}

void KvCacheState::EnsureHashes(RequestState& st, int64_t num_chunks) {
  num_chunks = std::min(num_chunks, st.num_tokens / coord_.hash_block_size());
  if (static_cast<int64_t>(st.hashes.size()) >= num_chunks) return;
  ExtendBlockHashes(*st.request, coord_.hash_block_size(), num_chunks, &st.cursor, &st.hashes);
}

KvRequestHandle KvCacheState::AddRequest(const Request* r) {
  PREFIXSIM_CHECK(r != nullptr);
  const KvRequestHandle h = requests_.Add(r, coord_.num_groups());
  RequestState& st = requests_[h];
  AdoptPromptHashes(*r, &st.hashes, &st.cursor);
  if (attributor_) attributor_->OnAdded(h.slot);
  return h;
}

void KvCacheState::SetNumTokens(KvRequestHandle h, int64_t n) {
  RequestState& st = requests_[h];
  PREFIXSIM_CHECK(n >= 0);
  // Hashes of full chunks never change; a shrinking count would orphan them.
  PREFIXSIM_CHECK(n >= static_cast<int64_t>(st.hashes.size()) * coord_.hash_block_size());
  st.num_tokens = n;
}

PrefixHit KvCacheState::GetComputedBlocks(KvRequestHandle h) {
  RequestState& st = requests_[h];
  for (const auto& g : st.groups) PREFIXSIM_CHECK(g.blocks.empty());
  st.has_pending = false;
  st.pending_hit = 0;
  st.shared_prefix_boundary = 0;
  PrefixHit result;
  if (!caching_) return result;
  // The last token is always recomputed to produce logits (docs/semantics.md §9.1).
  const int64_t max_hit = st.num_tokens - 1;
  if (max_hit <= 0) return result;
  EnsureHashes(st, max_hit / coord_.hash_block_size());
  const HashPair* fine = st.hashes.data();
  const int64_t nf = static_cast<int64_t>(st.hashes.size());
  const int64_t a = coord_.hit_alignment();
  int64_t uncached_common_prefix = 0;
  result.hit_tokens = coord_.FindLongestCacheHit(
      pool_.hit_index(), fine, nf, max_hit, a, st.pending.data(), &uncached_common_prefix,
      attributor_ ? attributor_->limiting_group(h.slot) : nullptr);
  if (uncached_common_prefix > 0) {
    result.shared_prefix_boundary = result.hit_tokens + uncached_common_prefix;
  }
  st.shared_prefix_boundary = result.shared_prefix_boundary;
  if (a != coord_.hash_block_size()) {
    // Alignment loss: the same lookup at the hash granularity H instead of A.
    const int64_t fine_hit = coord_.FindLongestCacheHit(pool_.hit_index(), fine, nf, max_hit,
                                                        coord_.hash_block_size(), lookup_scratch());
    result.alignment_loss_tokens = std::max<int64_t>(0, fine_hit - result.hit_tokens);
  }
  int64_t shadow_alive = 0;
  if (shadow_) {
    // What the same cache would give if it published every U-block and never rounded to S.
    shadow_alive = shadow_->AliveBlocks(fine, nf, max_hit / shadow_->unit());
    const int64_t shadow_hit = shadow_->HitTokens(shadow_alive);
    if (shadow_counts_loss_) {
      result.lost_to_alignment_tokens = std::max<int64_t>(0, shadow_hit - result.hit_tokens);
    }
  }
  if (attributor_) {
    attributor_->OnLookup(h.slot, result.hit_tokens + result.alignment_loss_tokens, shadow_alive);
  }
  st.has_pending = result.hit_tokens > 0;
  st.pending_hit = result.hit_tokens;
  if (!st.has_pending) {
    for (auto& p : st.pending) p.clear();
  }
  if (options_.check_invariants) CheckInvariants();
  return result;
}

// The same lookup on what every group ever cached: the prefix the plan checkpointed, which a
// cache that never evicted would serve (what lies beyond it was never cached).
int64_t KvCacheState::CheckpointedHit(const RequestState& st, bool dense) {
  PREFIXSIM_CHECK(attributor_ != nullptr);
  // Without a record every group caches what it publishes (EnableMissAttribution): the published
  // prefix, to which the attributor clamps this, was checkpointed.
  if (ever_cached_ == nullptr) return st.num_tokens;
  const int64_t max_hit = st.num_tokens - 1;
  if (max_hit <= 0) return 0;
  return coord_.FindLongestCacheHit(
      dense ? ever_cached_->dense_hit_index() : ever_cached_->hit_index(), st.hashes.data(),
      static_cast<int64_t>(st.hashes.size()), max_hit, coord_.hash_block_size(), lookup_scratch());
}

// The token counts of an AllocateSlots call (docs/semantics.md §10.1).
SlotCounts KvCacheState::Counts(const RequestState& st, int64_t num_computed_tokens,
                                int64_t num_new_tokens, int64_t num_new_computed_tokens,
                                int64_t num_lookahead_tokens, int64_t num_external_tokens) const {
  const int64_t cap = MaxModelLen();
  SlotCounts c;
  c.total_computed_tokens =
      std::min(num_computed_tokens + num_new_computed_tokens + num_external_tokens, cap);
  c.num_tokens_main_model = c.total_computed_tokens + num_new_tokens;
  c.num_tokens_need_slot = std::min(c.num_tokens_main_model + num_lookahead_tokens, cap);
  c.num_tokens_to_cache =
      std::max<int64_t>(0, VerifiedEnd(st, c) - options_.num_reprefillable_tokens);
  return c;
}

int64_t KvCacheState::MaxModelLen() const {
  return options_.max_model_len > 0 ? options_.max_model_len : INT64_MAX / 4;
}

bool KvCacheState::AllocateSlots(KvRequestHandle h, int64_t num_computed_tokens,
                                 int64_t num_new_tokens, int64_t num_new_computed_tokens,
                                 int64_t num_lookahead_tokens) {
  RequestState& st = requests_[h];
  PREFIXSIM_CHECK(num_computed_tokens >= 0 && num_new_tokens >= 0 && num_new_computed_tokens >= 0 &&
                  num_lookahead_tokens >= 0);
  // The fast path (QuietRanges): the decode steps between block boundaries return here, in a few
  // instructions; everything else, and every call under invariant checks, runs in full.
  if (num_new_computed_tokens == 0 && !st.has_pending && st.quiet_valid && fast_path_ &&
      !options_.check_invariants) {
    const SlotCounts c = Counts(st, num_computed_tokens, num_new_tokens, 0, num_lookahead_tokens);
    if (QuietRanges::Contains(st.quiet_ranges, c)) {
      RecordStep(st, c);
      return true;
    }
  }
  return AllocateSlotsFull(h, num_computed_tokens, num_new_tokens, num_new_computed_tokens,
                           num_lookahead_tokens);
}

// AllocateSlots in full, as named steps: take or drop the remembered hit, free what fell out of a
// window, reserve, take the hit's blocks (copy-on-write), size the block tables, allocate, cache;
// then the fast path's window for the next call.
bool KvCacheState::AllocateSlotsFull(KvRequestHandle h, int64_t num_computed_tokens,
                                     int64_t num_new_tokens, int64_t num_new_computed_tokens,
                                     int64_t num_lookahead_tokens, int64_t num_external_tokens,
                                     bool delay_cache) {
  RequestState& st = requests_[h];
  const bool use_hit = TakePendingHit(st, num_computed_tokens, num_new_computed_tokens);
  const SlotCounts c = Counts(st, num_computed_tokens, num_new_tokens, num_new_computed_tokens,
                              num_lookahead_tokens, num_external_tokens);
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
  // A mamba boundary crossed by the drafts the last verify step accepted: its state is cached now
  // (a boundary moves total_computed_tokens across a block, so such a call is never quiet).
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
  if (caching_ && !delay_cache) CacheComputedBlocks(st, c, h.slot);
  if (attributor_ && num_computed_tokens == 0) {
    EnsureHashes(st, shadow_->FineChunksFor(st.num_tokens));
    attributor_->OnAdmitted(h.slot, st.hashes.data(), static_cast<int64_t>(st.hashes.size()),
                            st.num_tokens, st.shadow_held);
  }
  if (snapshot) CheckUnchanged(st, *snapshot);
  st.quiet_valid = !use_hit && fast_path_;
  if (st.quiet_valid) st.quiet_ranges = quiet_.Around(c);
  if (options_.check_invariants) CheckInvariants();
  return true;
}

// Whether this call takes the hit GetComputedBlocks remembered (num_new_computed_tokens > 0, which
// must be that hit, on a request with no computed tokens, and still valid); a call with
// num_new_computed_tokens == 0 drops it.
bool KvCacheState::TakePendingHit(RequestState& st, int64_t num_computed_tokens,
                                  int64_t num_new_computed_tokens) {
  if (num_new_computed_tokens == 0) {
    if (st.has_pending) {
      st.has_pending = false;  // the caller does not use the hit
      for (auto& p : st.pending) p.clear();
    }
    return false;
  }
  PREFIXSIM_CHECK_MSG(
      st.has_pending && st.pending_hit == num_new_computed_tokens,
      ("KvCacheManager: AllocateSlots(request ", st.request->id,
       ", num_new_computed_tokens=", num_new_computed_tokens,
       ") without a matching GetComputedBlocks hit (", st.has_pending ? st.pending_hit : 0, ")"));
  PREFIXSIM_CHECK(num_computed_tokens == 0);
  ValidatePending(st);
  return true;
}

// Takes the remembered hit's blocks into the request's tables. Every hit block is touched first
// (all groups), so that allocation cannot evict them; a block the request will write into is
// copied instead (partial hits, docs/semantics.md §8.2).
void KvCacheState::TakeHitBlocks(RequestState& st, int64_t total_computed_tokens) {
  cow_.assign(coord_.num_groups(), 0);
  for (int g = 0; g < coord_.num_groups(); ++g) {
    GroupBlocks& gb = st.groups[g];
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
    GroupBlocks& gb = st.groups[g];
    gb.blocks.back() = pool_.Allocate();
    --gb.num_cached;
    ++counters_.allocated_blocks;
  }
  st.has_pending = false;
}

// A request's first allocation sizes its block tables for its whole life (prompt, outputs,
// lookahead; at most max_model_len), so the tables grow without reallocating. Done here, not at
// AddRequest: a long waiting queue holds no table memory.
void KvCacheState::ReserveBlockTables(RequestState& st, int64_t num_lookahead_tokens) {
  const int64_t life = std::min(
      st.request->prompt_tokens + st.request->output_tokens + num_lookahead_tokens, MaxModelLen());
  for (int g = 0; g < coord_.num_groups(); ++g) {
    const size_t blocks = static_cast<size_t>(CeilDiv(life, coord_.manager(g).block_size()) + 1);
    if (st.groups[g].blocks.capacity() < blocks) st.groups[g].blocks.reserve(blocks);
  }
}

// An event sink (vLLM's KV events) needs to know whose chunks the next stores name.
void KvCacheState::NoteCachingRequest(const RequestState& st) {
  if (KvEventSink* sink = pool_.event_sink(); sink != nullptr) {
    sink->OnCachingRequest(*st.request, st.hashes.data(), static_cast<int64_t>(st.hashes.size()));
  }
}

// Publishes the full blocks of the first num_tokens_to_cache tokens (under the hybrid round-down
// to S), and holds them in the shadow index, which sees every computed U-block with no
// round-down.
void KvCacheState::CacheComputedBlocks(RequestState& st, const SlotCounts& c, uint32_t slot) {
  const int64_t n = c.num_tokens_to_cache;
  if (shadow_) {
    EnsureHashes(st, shadow_->FineChunksFor(n));
    const int64_t held_before = st.shadow_held;
    shadow_->Hold(st.hashes.data(), static_cast<int64_t>(st.hashes.size()), n / shadow_->unit(),
                  attributor_ ? coord_.CommonCacheLimit(n) / shadow_->unit() : 0, &st.shadow_held,
                  &st.shadow_published);
    if (attributor_) attributor_->OnComputed(slot, st.hashes.data(), held_before, st.shadow_held);
  }
  const int64_t limit = coord_.MaxCacheLimit(n);
  if (limit <= 0) return;
  EnsureHashes(st, limit / coord_.hash_block_size());
  // Mamba caches the state where this step ends, if no draft tokens ride along.
  const int64_t step_end = (n == c.num_tokens_main_model) ? n : -1;
  NoteCachingRequest(st);
  // Each group reads hashes below its own limit only: all present after EnsureHashes.
  counters_.cached_blocks +=
      coord_.CacheBlocks(st.groups.data(), st.hashes.data(), n, step_end, CachingRequest(st));
}

// Mamba align mode under speculative decoding (docs/reference-notes.md §2): when accepted drafts
// of the previous verify step crossed a mamba block boundary b, vLLM's worker copies the state at
// b (kept per draft position in the speculative state blocks) into the block of b
// (postprocess_mamba), and the next allocate_slots publishes it. `total` counts the accepted
// drafts now. Done before RemoveSkippedBlocks frees that block (it stays hittable).
// Simplification: if the verify step spanned a whole block (1 + k > B), the block of b was never
// allocated here and the state is not cached.
void KvCacheState::CacheSpecBoundaryState(RequestState& st, int64_t total,
                                          int64_t prev_verified_end) {
  const int64_t b = RoundDown(total, mamba_block_size_);
  if (b <= 0 || b < prev_verified_end) return;
  const int64_t limit = coord_.MaxCacheLimit(b);
  if (limit <= 0) return;
  EnsureHashes(st, limit / coord_.hash_block_size());
  NoteCachingRequest(st);
  counters_.cached_blocks +=
      coord_.CacheBlocks(st.groups.data(), st.hashes.data(), b, b, CachingRequest(st));
}

void KvCacheState::CacheLoadedBlocks(KvRequestHandle h, int64_t num_computed_tokens) {
  RequestState& st = requests_[h];
  const SlotCounts c = Counts(st, num_computed_tokens, 0, 0, 0);
  RecordStep(st, c);
  st.quiet_valid = false;
  if (caching_) CacheComputedBlocks(st, c, h.slot);
  if (options_.check_invariants) CheckInvariants();
}

bool KvCacheState::FullSequenceFits(KvRequestHandle h) const {
  const RequestState& st = requests_[h];
  const int64_t cap =
      options_.max_num_batched_tokens > 0 ? options_.max_num_batched_tokens : INT64_MAX / 4;
  const int64_t blocks = coord_.NumBlocksForFullSequence(
      st.groups.data(), st.has_pending ? st.pending.data() : nullptr,
      std::min(st.num_tokens, MaxModelLen()), st.has_pending ? st.pending_hit : 0, cap,
      MaxModelLen());
  return blocks <= pool_.num_free();
}

void KvCacheState::Free(KvRequestHandle h) {
  RequestState& st = requests_[h];
  st.quiet_valid = false;
  st.prev_verified_end = 0;
  st.prev_had_drafts = false;
  const int64_t clock_before_free = pool_.free_clock();
  coord_.FreeAll(st.groups.data());
  if (attributor_) attributor_->OnFreed(h.slot, st.hashes.data());
  if (shadow_) shadow_->Release(st.hashes.data(), &st.shadow_held, clock_before_free);
  st.shadow_published = 0;
  st.has_pending = false;
  for (auto& p : st.pending) p.clear();
  if (options_.check_invariants) CheckInvariants();
}

}  // namespace prefixsim::kv
