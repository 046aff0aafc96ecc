#include "sim/kv/coordinator.h"

#include <algorithm>

#include "absl/container/inlined_vector.h"
#include "absl/types/span.h"
#include "sim/util/status_macros.h"

namespace prefixsim {
namespace kv {
namespace {

bool SameSpec(const KvGroup& a, const KvGroup& b) {
  return a.kind == b.kind && a.block_size == b.block_size && a.sliding_window == b.sliding_window &&
         a.attention_chunk_size == b.attention_chunk_size &&
         a.prefix_cacheable == b.prefix_cacheable && a.is_eagle_group == b.is_eagle_group &&
         a.num_speculative_blocks == b.num_speculative_blocks;
}

bool IsFullAttentionKind(LayerKind k) {
  return k == LayerKind::kFullAttention || k == LayerKind::kMla;
}

}  // namespace

int64_t KvCacheCoordinator::HashBlockSize(const KvPlan& plan) {
  PREFIXSIM_CHECK(!plan.groups.empty());
  if (plan.groups.size() == 1) return plan.groups[0].block_size;  // unitary: S = H = A = B
  return plan.enable_prefix_caching ? plan.hash_block_size : plan.scheduler_block_size;
}

int KvCacheCoordinator::UnhashableGroup(const KvPlan& plan) {
  const int64_t h = HashBlockSize(plan);
  for (size_t g = 0; g < plan.groups.size(); ++g) {
    if (plan.groups[g].prefix_cacheable && plan.groups[g].block_size % h != 0) {
      return static_cast<int>(g);
    }
  }
  return -1;
}

KvCacheCoordinator::KvCacheCoordinator(const KvPlan& plan, BlockPool* pool,
                                       int64_t extra_retained_tokens, bool group_runs)
    : pool_(pool) {
  hash_block_size_ = HashBlockSize(plan);
  if (plan.groups.size() == 1) {
    // Unitary coordinator: S = H = A = B (docs/semantics.md §7).
    hit_alignment_ = scheduler_block_size_ = hash_block_size_;
    partial_hits_ = false;
  } else if (plan.enable_prefix_caching) {
    hit_alignment_ = plan.hit_alignment;
    scheduler_block_size_ = plan.scheduler_block_size;
    partial_hits_ = plan.partial_hits;
  } else {
    hit_alignment_ = scheduler_block_size_ = hash_block_size_;  // S for all three
    partial_hits_ = false;
  }
  PREFIXSIM_CHECK(hash_block_size_ > 0 && hit_alignment_ > 0 && scheduler_block_size_ > 0);
  PREFIXSIM_CHECK(scheduler_block_size_ % hash_block_size_ == 0);
  PREFIXSIM_CHECK(hit_alignment_ % hash_block_size_ == 0);
  ManagerParams params;
  params.hash_block_size = hash_block_size_;
  params.hit_alignment = hit_alignment_;
  params.extra_retained_tokens = extra_retained_tokens;
  params.partial_hits = partial_hits_;
  params.retention_interval = plan.retention_interval;
  // vLLM's hybrid coordinator moves mamba's replay boundary one S back when a group drops its
  // last matched block (_sparse_replay_boundary_shift), where an EAGLE hit lands.
  if (plan.groups.size() > 1 && std::any_of(plan.groups.begin(), plan.groups.end(),
                                            [](const KvGroup& g) { return g.is_eagle_group; })) {
    params.replay_boundary_shift = scheduler_block_size_;
  }
  for (size_t g = 0; g < plan.groups.size(); ++g) {
    PREFIXSIM_CHECK(scheduler_block_size_ % plan.groups[g].block_size == 0);
    managers_.push_back(MakeManager(plan.groups[g], static_cast<int>(g), pool, params));
  }
  unhashable_group_ = UnhashableGroup(plan);
  num_groups_ = static_cast<int>(managers_.size());
  for (int g = 0; g < num_groups_; ++g) {
    if (group_runs && !runs_.empty() && SameSpec(plan.groups[runs_.back().first], plan.groups[g])) {
      ++runs_.back().count;
    } else {
      runs_.push_back(Run{g, 1});
    }
  }
  // Hybrid plans cache only up to the last S boundary (no rounding with partial hits); an eagle
  // group also publishes the one block past it that its drop needs (docs/semantics.md §10.2).
  for (const auto& m : managers_) {
    const KvGroup& spec = m->spec();
    if (!spec.prefix_cacheable) {
      limit_rules_.push_back(LimitRule::kNothing);
    } else if (unitary()) {
      limit_rules_.push_back(LimitRule::kAll);
    } else if (spec.is_eagle_group) {
      limit_rules_.push_back(LimitRule::kEagle);
    } else {
      limit_rules_.push_back(partial_hits_ ? LimitRule::kAll : LimitRule::kRounded);
    }
  }
  // Spec-groups: identical specs are looked up as one batch, full attention first (§9.3).
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t g = 0; g < plan.groups.size(); ++g) {
      const KvGroup& spec = plan.groups[g];
      // Never hashed: takes no part in hit finding.
      if (!spec.prefix_cacheable || !managers_[g]->hashable()) continue;
      if (IsFullAttentionKind(spec.kind) != (pass == 0)) continue;
      SpecGroup* sg = nullptr;
      for (SpecGroup& s : spec_groups_) {
        if (SameSpec(plan.groups[s.gids[0]], spec)) sg = &s;
      }
      if (sg == nullptr) {
        spec_groups_.emplace_back();
        sg = &spec_groups_.back();
        sg->full_attention = IsFullAttentionKind(spec.kind);
        sg->eagle = spec.is_eagle_group;
        sg->mamba = spec.kind == LayerKind::kMamba;
        sg->block_size = spec.block_size;
        sg->manager = managers_[g].get();
      }
      sg->gids.push_back(static_cast<int>(g));
    }
  }
  scratch_.resize(spec_groups_.size());
  for (size_t s = 0; s < spec_groups_.size(); ++s) scratch_[s].resize(spec_groups_[s].gids.size());
  sg_hit_.resize(spec_groups_.size());
  sg_looked_up_.resize(spec_groups_.size());
  sg_eagle_ok_.resize(spec_groups_.size());
}

int64_t KvCacheCoordinator::FindLongestCacheHit(const HitIndex& index, const HashPair* fine,
                                                int64_t num_fine, int64_t max_hit,
                                                int64_t alignment, std::vector<BlockId>* out,
                                                int64_t* uncached_common_prefix,
                                                int* limiting_group) {
  if (uncached_common_prefix != nullptr) *uncached_common_prefix = 0;
  for (int g = 0; g < num_groups(); ++g) out[g].clear();
  if (max_hit <= 0 || spec_groups_.empty()) return 0;
  if (limiting_group != nullptr) *limiting_group = spec_groups_[0].gids[0];
  // Whole blocks only: a hit starts with full attention's first block (left to right, §9.2), so
  // without it there is none; most lookups of a router's replicas end here.
  if (!partial_hits_ && spec_groups_[0].full_attention) {
    const SpecGroup& fa = spec_groups_[0];
    const int64_t ratio = fa.block_size / hash_block_size_;
    if (max_hit < fa.block_size || num_fine < ratio ||
        index.Lookup(fa.gids[0], fa.manager->BlockHash(fine, 0)) == kNoBlock) {
      return 0;
    }
  }
  if (unitary()) {
    const SpecGroup& sg = spec_groups_[0];
    // Unitary: the EAGLE drop is one block (A = B), docs/semantics.md §9.4.
    const int64_t hit = sg.manager->FindLongestHit(index, fine, num_fine, max_hit, alignment,
                                                   sg.eagle, sg.gids, out);
    return hit;
  }
  return Reconcile(index, fine, num_fine, max_hit, alignment, /*first_hit=*/-1, out,
                   uncached_common_prefix, limiting_group);
}

int64_t KvCacheCoordinator::Reconcile(const HitIndex& index, const HashPair* fine, int64_t num_fine,
                                      int64_t max_hit, int64_t alignment, int64_t first_hit,
                                      std::vector<BlockId>* out, int64_t* uncached_common_prefix,
                                      int* limiting_group) {
  const size_t nsg = spec_groups_.size();
  // Hybrid fixed point (docs/semantics.md §9.3).
  std::fill(sg_looked_up_.begin(), sg_looked_up_.end(), 0);
  std::fill(sg_eagle_ok_.begin(), sg_eagle_ok_.end(), 0);
  int64_t hit = max_hit;
  // The longest hit a single spec-group's lookup returned (vLLM's longest_hit_length): full
  // attention's own answer before the other groups cut it, typically.
  int64_t longest = 0;
  bool first_pass = true;
  while (true) {
    int64_t cur = hit;
    for (size_t s = 0; s < nsg; ++s) {
      const SpecGroup& sg = spec_groups_[s];
      if (sg.full_attention && sg_looked_up_[s]) {
        // Full attention hits only shrink: its earlier answer stays valid, trimmed below.
        cur = std::min(cur, sg_hit_[s]);
        continue;
      }
      const bool drop = sg.eagle && !sg_eagle_ok_[s];
      int64_t limit = cur;
      if (drop && !sg.mamba) {
        // The eagle group searches one unit past the candidate and drops it (§9.4).
        const int64_t margin = partial_hits_ ? hash_block_size_ : sg.block_size;
        limit = std::min(cur + margin, max_hit);
      }
      int64_t h;
      if (s == 0 && first_pass && first_hit >= 0) {
        h = first_hit;  // found by FindLongestCacheHits with these arguments
      } else {
        h = sg.manager->FindLongestHit(index, fine, num_fine, limit, alignment, drop, sg.gids,
                                       scratch_[s].data());
      }
      if (first_pass && h < cur && limiting_group != nullptr) *limiting_group = sg.gids[0];
      if (drop) {
        sg_eagle_ok_[s] = 1;
      } else if (h < cur) {
        std::fill(sg_eagle_ok_.begin(), sg_eagle_ok_.end(), 0);
      }
      cur = h;
      sg_looked_up_[s] = 1;
      sg_hit_[s] = h;
      longest = std::max(longest, h);
    }
    first_pass = false;
    if (cur >= hit) break;
    hit = cur;
    if (nsg == 2 && spec_groups_[0].full_attention) break;  // "simple hybrid": one pass
  }
  PREFIXSIM_DCHECK(hit % alignment == 0);
  // FindLongestCacheHits reads the hit only: no block table to gather.
  if (first_hit >= 0) return hit;
  for (size_t s = 0; s < nsg; ++s) {
    const SpecGroup& sg = spec_groups_[s];
    for (size_t k = 0; k < sg.gids.size(); ++k) {
      std::vector<BlockId>& blocks = scratch_[s][k];
      if (sg.full_attention)
        blocks.resize(std::min<int64_t>(CeilDiv(hit, sg.block_size), blocks.size()));
      PREFIXSIM_DCHECK(static_cast<int64_t>(blocks.size()) == CeilDiv(hit, sg.block_size) ||
                       hit == 0);
      out[sg.gids[k]].swap(blocks);
    }
  }
  if (uncached_common_prefix != nullptr) *uncached_common_prefix = longest - hit;
  return hit;
}

void KvCacheCoordinator::RemoveSkippedBlocks(GroupBlocks* groups,
                                             int64_t total_computed_tokens) const {
  for (const Run& run : runs_) {
    managers_[run.first]->RemoveSkippedBlocks(absl::MakeSpan(groups + run.first, run.count),
                                              total_computed_tokens);
  }
}

int64_t KvCacheCoordinator::NumBlocksToAllocate(const GroupBlocks* groups,
                                                const std::vector<BlockId>* hit,
                                                int64_t num_tokens_need_slot,
                                                int64_t num_tokens_main_model,
                                                int64_t total_computed_tokens) const {
  int64_t n = 0;
  for (const Run& run : runs_) {
    n += managers_[run.first]->NumBlocksToAllocate(
        absl::MakeConstSpan(groups + run.first, run.count), hit ? hit + run.first : nullptr,
        num_tokens_need_slot, num_tokens_main_model, total_computed_tokens);
  }
  return n;
}

int64_t KvCacheCoordinator::NumBlocksForFullSequence(
    const GroupBlocks* groups, const std::vector<BlockId>* hit, int64_t full_tokens,
    int64_t total_computed_tokens, int64_t max_in_flight_tokens, int64_t max_model_len) const {
  int64_t n = 0;
  for (const Run& run : runs_) {
    const SingleTypeManager& m = *managers_[run.first];
    const int64_t need =
        std::min(full_tokens, m.MaxAdmissionTokens(max_in_flight_tokens, max_model_len));
    n += m.NumBlocksToAllocate(absl::MakeConstSpan(groups + run.first, run.count),
                               hit ? hit + run.first : nullptr, need, full_tokens,
                               total_computed_tokens);
  }
  return n;
}

void KvCacheCoordinator::NewStep() const {
  for (const Run& run : runs_) managers_[run.first]->NewStep();
}

int64_t KvCacheCoordinator::AllocateNew(GroupBlocks* groups, int64_t num_tokens_need_slot,
                                        int64_t num_tokens_main_model,
                                        int64_t total_computed_tokens) const {
  int64_t n = 0;
  for (const Run& run : runs_) {
    n += managers_[run.first]->AllocateNew(absl::MakeSpan(groups + run.first, run.count),
                                           num_tokens_need_slot, num_tokens_main_model,
                                           total_computed_tokens);
  }
  return n;
}

int64_t KvCacheCoordinator::MaxCacheLimit(int64_t n) const {
  const int64_t rounded = RoundedForCache(n);
  int64_t limit = 0;
  for (const Run& run : runs_) limit = std::max(limit, LimitFor(run.first, n, rounded));
  return limit;
}

int64_t KvCacheCoordinator::UnpublishedAlignmentTokens(int64_t n) const {
  int finest = -1;
  for (int g = 0; g < num_groups(); ++g) {
    const SingleTypeManager& m = *managers_[g];
    if (!m.spec().prefix_cacheable) continue;
    if (finest < 0 || m.block_size() < managers_[finest]->block_size()) finest = g;
  }
  if (finest < 0) return 0;
  const int64_t b = managers_[finest]->block_size();
  return RoundDown(n, b) - RoundDown(CacheLimit(finest, n), b);
}

int64_t KvCacheCoordinator::CacheBlocks(GroupBlocks* groups, const HashPair* fine, int64_t n,
                                        int64_t step_end, const CacheRequest& request) const {
  // Every run's publishes first as loads, then the publishes: their misses overlap. A run shares
  // its spec, so its limit too.
  absl::InlinedVector<int64_t, 8> limits(runs_.size());
  const int64_t rounded = RoundedForCache(n);
  for (size_t r = 0; r < runs_.size(); ++r) {
    const Run& run = runs_[r];
    limits[r] = LimitFor(run.first, n, rounded);
    if (limits[r] > 0) {
      managers_[run.first]->PrefetchPublishes(absl::MakeConstSpan(groups + run.first, run.count),
                                              fine, limits[r], step_end);
    }
  }
  int64_t cached = 0;
  for (size_t r = 0; r < runs_.size(); ++r) {
    if (limits[r] <= 0) continue;
    const Run& run = runs_[r];
    cached += managers_[run.first]->CacheBlocks(absl::MakeSpan(groups + run.first, run.count), fine,
                                                limits[r], step_end, request);
  }
  return cached;
}

void KvCacheCoordinator::FreeAll(GroupBlocks* groups) const {
  // Group by group, each tail first (vLLM frees manager by manager). The blocks were allocated
  // long ago, so their records are cold, and a group holds few of them: the loads run a fixed
  // distance ahead in that same order, across groups. Null entries (a mamba table is mostly
  // null: only its last states are real) are passed over, by the loads too.
  constexpr int kAhead = 16;
  int ahead_group = 0;
  size_t ahead_index = 0;  // counted from the group's tail
  auto prefetch_next = [&] {
    while (ahead_group < num_groups_) {
      const std::vector<BlockId>& blocks = groups[ahead_group].blocks;
      if (ahead_index >= blocks.size()) {
        ++ahead_group;
        ahead_index = 0;
        continue;
      }
      const BlockId b = blocks[blocks.size() - 1 - ahead_index++];
      if (b != kNullBlock) {
        pool_->PrefetchFree(b);
        return;
      }
    }
  };
  for (int i = 0; i < kAhead; ++i) prefetch_next();
  for (int g = 0; g < num_groups_; ++g) {
    std::vector<BlockId>& blocks = groups[g].blocks;
    for (size_t i = blocks.size(); i-- > 0;) {
      if (blocks[i] == kNullBlock) continue;
      prefetch_next();
      pool_->Free(blocks[i]);
    }
    groups[g].Clear();
  }
}

}  // namespace kv
}  // namespace prefixsim
