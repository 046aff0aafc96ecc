// The KV cache's self-checks: a remembered hit still valid when taken, a fast-path call that
// changed nothing, and the invariants the checker runs after every operation (tests).

#include "sim/kv/kv_cache_state.h"
#include "sim/util/status_macros.h"

namespace prefixsim::kv {

// The remembered hit must still be what the lookup found (nothing evicted it since).
void KvCacheState::ValidatePending(const RequestState& st) const {
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
             f < static_cast<int64_t>(j + 1) * ratio && f < static_cast<int64_t>(st.hashes.size());
             ++f) {
          any = any || pool_.cached_hash(b) == st.hashes[f];
        }
        valid = any;
      }
      PREFIXSIM_CHECK_MSG(
          valid, ("KvCacheManager: stale prefix hit for request ", st.request->id, " (block ", b,
                  " evicted since GetComputedBlocks); look up "
                  "again before AllocateSlots"));
    }
  }
}

KvCacheState::QuietSnapshot KvCacheState::TakeSnapshot(const RequestState& st) const {
  return QuietSnapshot{pool_.num_free(),
                       pool_.num_cached_entries(),
                       counters_.allocated_blocks,
                       counters_.cached_blocks,
                       pool_.evictions(),
                       st.shadow_held,
                       st.groups};
}

void KvCacheState::CheckUnchanged(const RequestState& st, const QuietSnapshot& s) const {
  PREFIXSIM_CHECK(pool_.num_free() == s.free && pool_.num_cached_entries() == s.cached_entries &&
                  counters_.allocated_blocks == s.allocated &&
                  counters_.cached_blocks == s.published && pool_.evictions() == s.evicted &&
                  st.shadow_held == s.shadow_held);
  for (int g = 0; g < coord_.num_groups(); ++g) {
    PREFIXSIM_CHECK(st.groups[g].blocks == s.tables[g].blocks &&
                    st.groups[g].num_cached == s.tables[g].num_cached);
  }
}

void KvCacheState::CheckInvariants() const {
  pool_.CheckInvariants();
  const int64_t n = pool_.num_blocks();
  std::vector<int32_t> refs(n, 0);
  std::vector<int32_t> owner(n, -1);
  requests_.ForEach([&](uint64_t id, const RequestState& st) {
    PREFIXSIM_CHECK(st.request != nullptr && st.request->id == id);
    for (int g = 0; g < coord_.num_groups(); ++g) {
      const GroupBlocks& gb = st.groups[g];
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
  });
  // Blocks never allocated have no record in the pool and no reference.
  for (BlockId b = 1; b < n; ++b) {
    PREFIXSIM_CHECK((b < pool_.num_ever_allocated() ? pool_.ref(b) : 0) == refs[b]);
  }
}

}  // namespace prefixsim::kv
