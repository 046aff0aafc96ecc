// KvCacheManager (docs/semantics.md §9.1, §10.1, §12): the public face of the KV memory model.
#include "prefixsim/kv_cache_manager.h"

#include <algorithm>
#include <array>
#include <climits>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "prefixsim/status.h"
#include "sim/kv/block_hasher.h"
#include "sim/kv/block_pool.h"
#include "sim/kv/coordinator.h"
#include "sim/kv/index_mirror.h"
#include "sim/kv/shadow_index.h"

namespace prefixsim {

using kv::BlockId;
using kv::kNullBlock;

uint64_t GeneratedOutputContentId(uint64_t request_id) {
  return kv::GeneratedContentId(request_id);
}

class KvCacheManager::Impl {
 public:
  // alignas(64), and what every decode step reads (SetNumTokens, the AllocateSlots fast path)
  // in the first two cache lines: a step visits every running request.
  struct alignas(64) RequestState {
    // Where the arguments of the last successful AllocateSlots may move without crossing a
    // breakpoint (see QuietRanges): [lo, hi) for total, main, need and n; empty: none.
    std::array<int64_t, 8> quiet_ranges{};
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
  };

  Impl(const KvPlan& plan, const KvCacheOptions& options)
      : plan_(plan),
        options_(options),
        pool_(plan.num_blocks),
        coord_(plan, &pool_, options.num_reprefillable_tokens),
        caching_(plan.enable_prefix_caching && coord_.unhashable_group() < 0) {
    fine_scratch_.resize(coord_.num_groups());
    // Breakpoints of AllocateSlots (see QuietRanges), per argument, by what reads it:
    //  * need: how many blocks each group must hold (ceil by its block size, or chunk);
    //  * total: the blocks each group no longer needs (a sliding window's oldest block, a
    //    mamba group's old state, chunk starts) and the mamba boundary that accepted drafts
    //    crossed (floor by the mamba block size);
    //  * main: the mamba state block (ceil by its block size) and the step's end, where a
    //    state is cached (a block, S or A boundary);
    //  * n: what may be cached (whole blocks, S, A; the shadow's unit is a block size or A).
    // Every group's block size (floor and ceil) for all four, to be safe; H only with partial
    // hits (a tail block registered at every H boundary, mamba states cached there), since
    // otherwise the hashes are only extended further when a call needs them.
    enum Arg { kTotal = 1, kMain = 2, kNeed = 4, kN = 8, kAll = 15 };
    auto add = [&](int args, int64_t m, int64_t offset) {
      if (m <= 0) return;
      const std::pair<int64_t, int64_t> p{m, ((offset % m) + m) % m};
      for (int i = 0; i < 4; ++i) {
        if ((args & (1 << i)) == 0) continue;
        std::vector<std::pair<int64_t, int64_t>>& breaks = quiet_breaks_[i];
        if (std::find(breaks.begin(), breaks.end(), p) == breaks.end()) breaks.push_back(p);
      }
    };
    for (const KvGroup& g : plan_.groups) {
      add(kAll, g.block_size, 0);
      add(kAll, g.block_size, 1);
      if (g.kind == LayerKind::kSlidingWindow) {
        const int64_t o = g.sliding_window - 1 + options_.num_reprefillable_tokens;
        add(kTotal, g.block_size, o);
        add(kTotal, g.block_size, o + 1);
      }
      if (g.kind == LayerKind::kChunkedLocal) {
        add(kTotal | kNeed, g.attention_chunk_size, 0);
        add(kTotal | kNeed, g.attention_chunk_size, 1);
      }
    }
    for (int64_t m : {coord_.scheduler_block_size(), coord_.hit_alignment(),
                      plan_.partial_hits ? coord_.hash_block_size() : int64_t{0}}) {
      add(kMain | kN, m, 0);
      add(kMain | kN, m, 1);
    }
    if (caching_) MakeShadow();
    for (const KvGroup& g : plan.groups) {
      if (g.kind == LayerKind::kMamba) mamba_block_size_ = g.block_size;
    }
    if (plan.enable_prefix_caching && !caching_) {
      // vLLM asserts this at startup (docs/semantics.md §7); a plan that breaks it gets no prefix
      // cache.
      const int g = coord_.unhashable_group();
      std::fprintf(stderr,
                   "KvCacheManager: prefix caching disabled: group %d block size %d is not a "
                   "multiple of the hash block size %lld\n",
                   g, plan.groups[g].block_size, static_cast<long long>(coord_.hash_block_size()));
    }
  }

  // The shadow index (shadow_index.h) runs only when A is coarser than the finest
  // prefix-cacheable group block: otherwise nothing is lost to the alignment.
  void MakeShadow() {
    int64_t unit = coord_.hit_alignment();
    bool eagle = false;
    for (int g = 0; g < coord_.num_groups(); ++g) {
      const kv::SingleTypeManager& m = coord_.manager(g);
      if (!m.spec().prefix_cacheable) continue;
      unit = std::min(unit, m.block_size());
      eagle = eagle || m.spec().is_eagle_group;
    }
    if (unit < coord_.hit_alignment()) {
      shadow_ = std::make_unique<kv::ShadowIndex>(&pool_, unit, coord_.hash_block_size(), eagle);
    }
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

  // AllocateSlots of a running request depends on its arguments only through which blocks they
  // fall in: floor((x - offset) / m) of total, main, need and the cached count n, for the
  // breakpoints (m, offset) above (every group's managers compute block counts, skipped blocks,
  // cache limits and mamba boundaries that way). So once a call has allocated, freed and cached
  // what it needed, a later call whose arguments fall in the same blocks has nothing to do: the
  // decode steps between two block boundaries. For each argument x, the range [lo, hi) around
  // it in which no floor((x - offset) / m) changes.
  std::array<int64_t, 8> QuietRanges(int64_t total, int64_t main, int64_t need, int64_t n) const {
    std::array<int64_t, 8> ranges;
    const int64_t args[4] = {total, main, need, n};
    for (int i = 0; i < 4; ++i) {
      int64_t lo = INT64_MIN, hi = INT64_MAX;
      for (const auto& [m, offset] : quiet_breaks_[i]) {
        const int64_t start = offset + m * ((args[i] - offset + m) / m - 1);  // <= x < start + m
        lo = std::max(lo, start);
        hi = std::min(hi, start + m);
      }
      ranges[2 * i] = lo;
      ranges[2 * i + 1] = hi;
    }
    return ranges;
  }
  static bool InRanges(const std::array<int64_t, 8>& r, int64_t total, int64_t main, int64_t need,
                       int64_t n) {
    return r[0] <= total && total < r[1] && r[2] <= main && main < r[3] && r[4] <= need &&
           need < r[5] && r[6] <= n && n < r[7];
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
                                                   st.pending.data(), &uncached_common_prefix);
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
      const int64_t shadow_hit = shadow_->Lookup(fine, nf, max_hit);
      result.lost_to_alignment_tokens = std::max<int64_t>(0, shadow_hit - result.hit_tokens);
    }
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

  // The token counts an AllocateSlots call works with (see AllocateSlotsFull).
  struct SlotArgs {
    int64_t total, main, need, n;
  };
  SlotArgs Args(const RequestState& st, int64_t num_computed, int64_t num_new,
                int64_t num_new_computed, int64_t num_lookahead) const {
    const int64_t cap = options_.max_model_len > 0 ? options_.max_model_len : INT64_MAX / 4;
    SlotArgs a;
    a.total = std::min(num_computed + num_new_computed, cap);
    a.main = a.total + num_new;
    a.need = std::min(a.main + num_lookahead, cap);
    // Tokens cached after this step: drafts and lookahead slots never are, only verified tokens
    // (docs/semantics.md §10.2).
    a.n = std::max<int64_t>(
        0, std::min(a.total + num_new, st.num_tokens) - options_.num_reprefillable_tokens);
    return a;
  }

  bool AllocateSlots(KvRequestHandle h, int64_t num_computed, int64_t num_new,
                     int64_t num_new_computed, int64_t num_lookahead) {
    RequestState& st = State(h);
    PREFIXSIM_CHECK(num_computed >= 0 && num_new >= 0 && num_new_computed >= 0 &&
                    num_lookahead >= 0);
    // The decode steps between block boundaries (see QuietRanges) return here, in a few
    // instructions; everything else, and every call under invariant checks, runs in full.
    if (num_new_computed == 0 && !st.has_pending && st.quiet_valid && options_.fast_path &&
        !options_.check_invariants) {
      const SlotArgs a = Args(st, num_computed, num_new, 0, num_lookahead);
      if (InRanges(st.quiet_ranges, a.total, a.main, a.need, a.n)) {
        st.prev_verified_end = std::min(a.total + num_new, st.num_tokens);
        st.prev_had_drafts = st.prev_verified_end < a.main;
        return true;
      }
    }
    return AllocateSlotsFull(st, num_computed, num_new, num_new_computed, num_lookahead);
  }

  [[gnu::noinline]] bool AllocateSlotsFull(RequestState& st, int64_t num_computed, int64_t num_new,
                                           int64_t num_new_computed, int64_t num_lookahead) {
    if (num_new_computed == 0 && st.has_pending) {
      st.has_pending = false;  // the caller does not use the hit
      for (auto& p : st.pending) p.clear();
    }
    const bool use_hit = num_new_computed > 0;
    if (use_hit) {
      if (!st.has_pending || st.pending_hit != num_new_computed) {
        std::fprintf(stderr,
                     "KvCacheManager: AllocateSlots(request %llu, num_new_computed=%lld) "
                     "without a matching GetComputedBlocks hit (%lld)\n",
                     static_cast<unsigned long long>(st.request->id),
                     static_cast<long long>(num_new_computed),
                     static_cast<long long>(st.has_pending ? st.pending_hit : 0));
      }
      PREFIXSIM_CHECK(st.has_pending && st.pending_hit == num_new_computed);
      PREFIXSIM_CHECK(num_computed == 0);
      ValidatePending(st);
    }
    const int64_t cap = options_.max_model_len > 0 ? options_.max_model_len : INT64_MAX / 4;
    const SlotArgs args = Args(st, num_computed, num_new, num_new_computed, num_lookahead);
    const int64_t total = args.total, main = args.main, need = args.need, n = args.n;
    const bool quiet = !use_hit && options_.fast_path && st.quiet_valid &&
                       InRanges(st.quiet_ranges, total, main, need, n);
    const int64_t prev_verified_end = st.prev_verified_end;
    const bool prev_had_drafts = st.prev_had_drafts;
    st.prev_verified_end = std::min(total + num_new, st.num_tokens);
    st.prev_had_drafts = st.prev_verified_end < main;
    if (quiet && !options_.check_invariants) return true;
    // With invariant checks, a quiet call still runs the full path below and checks that it
    // changes nothing (the pool's counts, what it allocates, evicts or publishes, the request's
    // block tables and shadow blocks): the fast path's claim is verified wherever the checker
    // runs.
    const int64_t quiet_free = pool_.num_free(), quiet_cached = pool_.num_cached_entries();
    const int64_t quiet_allocated = counters_.allocated_blocks;
    const int64_t quiet_published = counters_.cached_blocks, quiet_evicted = pool_.evictions();
    const int64_t quiet_shadow_held = st.shadow_held;
    std::vector<kv::GroupBlocks> quiet_tables;
    if (quiet) quiet_tables = st.groups;
    // A mamba boundary crossed by the drafts the last verify step accepted: its state is
    // cached now (a boundary moves `total` across a block, so such a call is never quiet).
    if (caching_ && mamba_block_size_ > 0 && plan_.cache_mamba_spec_boundary_states &&
        prev_had_drafts && !use_hit && total >= prev_verified_end) {
      CacheSpecBoundaryState(st, total, prev_verified_end);
    }
    // Free out-of-window blocks first (docs/semantics.md §10.1, §10.3).
    coord_.RemoveSkippedBlocks(st.groups.data(), total);
    const int64_t k = coord_.NumBlocksToAllocate(
        st.groups.data(), use_hit ? st.pending.data() : nullptr, need, main, total);
    if (k > pool_.num_free()) {
      PREFIXSIM_CHECK(!quiet);
      st.quiet_valid = false;
      // Nothing ran: the previous step is still the last one.
      st.prev_verified_end = prev_verified_end;
      st.prev_had_drafts = prev_had_drafts;
      if (options_.check_invariants) CheckInvariants();
      return false;
    }
    const int64_t free_before = pool_.num_free();
    if (use_hit) {
      // Touch every hit block first (all groups), so that allocation cannot evict them; a
      // block the request will write into is copied instead (partial hits, §8.2).
      cow_.assign(coord_.num_groups(), 0);
      for (int g = 0; g < coord_.num_groups(); ++g) {
        kv::GroupBlocks& gb = st.groups[g];
        PREFIXSIM_DCHECK(gb.blocks.empty());
        std::vector<BlockId>& hit = st.pending[g];
        cow_[g] = coord_.manager(g).NeedsCopyOnWrite(hit, total);
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
    if (num_computed == 0) {
      // A request's first allocation sizes its block tables for its whole life (prompt, outputs,
      // lookahead; at most max_model_len), so the tables grow without reallocating. Done here,
      // not at AddRequest: a long waiting queue holds no table memory.
      const int64_t life =
          std::min(st.request->prompt_tokens + st.request->output_tokens + num_lookahead, cap);
      for (int g = 0; g < coord_.num_groups(); ++g) {
        const size_t blocks =
            static_cast<size_t>(kv::CeilDiv(life, coord_.manager(g).block_size()) + 1);
        if (st.groups[g].blocks.capacity() < blocks) st.groups[g].blocks.reserve(blocks);
      }
    }
    counters_.allocated_blocks += coord_.AllocateNew(st.groups.data(), need, main, total);
    // All-or-nothing: the step took no more blocks than it reserved.
    PREFIXSIM_CHECK(free_before - pool_.num_free() <= k);
    if (caching_) {
      if (shadow_) {
        // The shadow sees every computed U-block, with no round-down to S.
        EnsureHashes(st, shadow_->FineChunksFor(n));
        shadow_->Hold(st.hashes.data(), static_cast<int64_t>(st.hashes.size()), n / shadow_->unit(),
                      &st.shadow_held);
      }
      const int64_t limit = coord_.MaxCacheLimit(n);
      if (limit > 0) {
        EnsureHashes(st, limit / coord_.hash_block_size());
        // Mamba caches the state where this step ends, if no draft tokens ride along.
        const int64_t step_end = (n == main) ? n : -1;
        // Each group reads hashes below its own limit only: all present after EnsureHashes.
        counters_.cached_blocks +=
            coord_.CacheBlocks(st.groups.data(), st.hashes.data(), n, step_end);
      }
    }
    if (quiet) {
      PREFIXSIM_CHECK(pool_.num_free() == quiet_free &&
                      pool_.num_cached_entries() == quiet_cached &&
                      counters_.allocated_blocks == quiet_allocated &&
                      counters_.cached_blocks == quiet_published &&
                      pool_.evictions() == quiet_evicted && st.shadow_held == quiet_shadow_held);
      for (int g = 0; g < coord_.num_groups(); ++g) {
        PREFIXSIM_CHECK(st.groups[g].blocks == quiet_tables[g].blocks &&
                        st.groups[g].num_cached == quiet_tables[g].num_cached);
      }
    }
    st.quiet_valid = !use_hit && options_.fast_path;
    if (st.quiet_valid) st.quiet_ranges = QuietRanges(total, main, need, n);
    if (options_.check_invariants) CheckInvariants();
    return true;
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
    counters_.cached_blocks += coord_.CacheBlocks(st.groups.data(), st.hashes.data(), b, b);
  }

  void Free(KvRequestHandle h) {
    RequestState& st = State(h);
    st.quiet_valid = false;
    st.prev_verified_end = 0;
    st.prev_had_drafts = false;
    coord_.FreeAll(st.groups.data());
    if (shadow_) shadow_->Release(st.hashes.data(), &st.shadow_held);
    st.has_pending = false;
    for (auto& p : st.pending) p.clear();
    if (options_.check_invariants) CheckInvariants();
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
    for (BlockId b = 1; b < n; ++b) PREFIXSIM_CHECK(pool_.ref(b) == refs[b]);
  }

  const KvPlan plan_;
  const KvCacheOptions options_;
  int64_t mamba_block_size_ = 0;  // 0 without a mamba group
  kv::BlockPool pool_;
  kv::KvCacheCoordinator coord_;
  const bool caching_;
  absl::flat_hash_map<uint64_t, uint32_t> index_;
  std::vector<RequestState> slots_;
  std::vector<uint32_t> free_slots_;
  std::vector<std::vector<BlockId>> fine_scratch_;
  std::unique_ptr<kv::ShadowIndex> shadow_;  // null when nothing can be lost to the alignment
  std::vector<char> cow_;
  // (modulus, offset) per argument of QuietRanges: total, main, need, n.
  std::array<std::vector<std::pair<int64_t, int64_t>>, 4> quiet_breaks_;
  mutable KvCacheCounters counters_;
};

KvCacheManager::KvCacheManager(const KvPlan& plan, const KvCacheOptions& options)
    : impl_(std::make_unique<Impl>(plan, options)) {}
KvCacheManager::~KvCacheManager() = default;

KvRequestHandle KvCacheManager::AddRequest(const Request* request) {
  return impl_->AddRequest(request);
}
void KvCacheManager::RemoveRequest(uint64_t request_id) { impl_->RemoveRequest(request_id); }
KvRequestHandle KvCacheManager::Handle(uint64_t request_id) const {
  return impl_->HandleOf(request_id);
}
void KvCacheManager::Prefetch(KvRequestHandle request) const {
  if (request.slot >= impl_->slots_.size()) return;  // not a tracked request: nothing to load
  __builtin_prefetch(&impl_->slots_[request.slot].num_tokens, 1);
}
void KvCacheManager::SetNumTokens(KvRequestHandle request, int64_t num_tokens) {
  impl_->SetNumTokens(request, num_tokens);
}
PrefixHit KvCacheManager::GetComputedBlocks(KvRequestHandle request) {
  return impl_->GetComputedBlocks(request);
}
bool KvCacheManager::AllocateSlots(KvRequestHandle request, int64_t num_computed_tokens,
                                   int64_t num_new_tokens, int64_t num_new_computed_tokens,
                                   int64_t num_lookahead_tokens) {
  return impl_->AllocateSlots(request, num_computed_tokens, num_new_tokens, num_new_computed_tokens,
                              num_lookahead_tokens);
}
void KvCacheManager::Free(KvRequestHandle request) { impl_->Free(request); }

void KvCacheManager::SetCacheEventListener(CacheEventListener* listener) {
  impl_->pool_.set_listener(listener);
}

void KvCacheManager::HashPrompt(const Request& request, std::vector<kv::HashPair>* hashes) const {
  hashes->clear();
  const int64_t h = impl_->coord_.hash_block_size();
  kv::HashCursor cursor;
  impl_->AdoptPromptHashes(request, hashes, &cursor);
  kv::ExtendBlockHashes(request, h, request.prompt_tokens / h, &cursor, hashes);
}

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

int64_t KvCacheManager::PeekPromptHit(const Request& request,
                                      const std::vector<kv::HashPair>& hashes,
                                      const kv::IndexMirror* mirror) {
  Impl& m = *impl_;
  if (!m.caching_) return 0;
  const int64_t max_hit = request.prompt_tokens - 1;  // docs/semantics.md §9.1
  if (max_hit <= 0) return 0;
  const int64_t nf =
      std::min<int64_t>(static_cast<int64_t>(hashes.size()), max_hit / m.coord_.hash_block_size());
  return m.coord_.FindLongestCacheHit(mirror ? mirror->hit_index() : m.pool_.hit_index(),
                                      hashes.data(), nf, max_hit, m.coord_.hit_alignment(),
                                      m.fine_scratch_.data());
}

int64_t KvCacheManager::PeekPrimaryOverlap(const Request& request,
                                           const std::vector<kv::HashPair>& hashes,
                                           const kv::IndexMirror* mirror) const {
  const Impl& m = *impl_;
  const int g = m.coord_.primary_group();
  if (!m.caching_ || g < 0) return 0;
  const kv::HitIndex index = mirror ? mirror->hit_index() : m.pool_.hit_index();
  const kv::SingleTypeManager& manager = m.coord_.manager(g);
  const int64_t ratio = manager.block_size() / m.coord_.hash_block_size();
  const int64_t nb = static_cast<int64_t>(hashes.size()) / ratio;
  int64_t j = 0;
  while (j < nb && index.Lookup(g, manager.BlockHash(hashes.data(), j)) != kv::kNoBlock) ++j;
  return std::min(j * manager.block_size(), request.prompt_tokens);
}
int64_t KvCacheManager::num_free_blocks() const { return impl_->pool_.num_free(); }
int64_t KvCacheManager::UnpublishedAlignmentTokens(int64_t computed_tokens) const {
  if (!impl_->caching_) return 0;
  return impl_->coord_.UnpublishedAlignmentTokens(computed_tokens);
}

int64_t KvCacheManager::num_usable_blocks() const { return impl_->pool_.num_blocks() - 1; }
double KvCacheManager::usage() const {
  return 1.0 - static_cast<double>(num_free_blocks()) / static_cast<double>(num_usable_blocks());
}
const KvCacheCounters& KvCacheManager::counters() const {
  impl_->counters_.evicted_blocks = impl_->pool_.evictions();
  impl_->counters_.hash_collisions = impl_->pool_.collisions();
  return impl_->counters_;
}
const KvPlan& KvCacheManager::plan() const { return impl_->plan_; }
std::vector<int32_t> KvCacheManager::BlockTable(uint64_t request_id, int group) const {
  const Impl::RequestState& st = impl_->State(request_id);
  PREFIXSIM_CHECK(group >= 0 && group < static_cast<int>(st.groups.size()));
  return st.groups[group].blocks;
}
int64_t KvCacheManager::NumHeldBlocks(uint64_t request_id) const {
  const Impl::RequestState& st = impl_->State(request_id);
  int64_t n = 0;
  for (const auto& g : st.groups) {
    for (BlockId b : g.blocks) n += b != kNullBlock;
  }
  return n;
}
void KvCacheManager::CheckInvariants() const { impl_->CheckInvariants(); }

}  // namespace prefixsim
