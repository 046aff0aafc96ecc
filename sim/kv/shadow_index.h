// The shadow index behind lost_to_alignment_tokens (sim/kv/README.md): a prefix index that sees
// the same computed blocks as the real cache, published at the finest group block size U and
// never rounded to the scheduler block size S, evicted with the real cache's LRU clock.
//
// Unit U = min(A, smallest block size of a prefix-cacheable group). When U == A (unitary plans,
// S equal to the finest block, partial hits) the alignment costs nothing and the shadow is off.
//
// Entries are keyed by the request's chained hash at every U boundary (the fine H-chunk hash
// there, docs/semantics.md §8.1), so a hit on entry j implies the whole prefix [0, (j+1)·U). An
// entry is held while a request that computed or hit it runs; when the last holder frees it, the
// entry takes the block pool's current free clock as its stamp, exactly the stamp a real cached
// block freed at that moment would get. It is alive while held or while its stamp is above the
// pool's eviction horizon (the newest stamp the real cache has evicted): it lives exactly as long
// as a real published block freed at the same time. Work is per U-block, never per token.
//
// Where the real cache is itself such a cache (ReadPool: one prefix-cacheable full-attention or
// MLA group whose block is U, publishing every block it computes), the shadow would copy it entry
// for entry, paying a hash-map probe per U-block of every request twice (hold and release) and
// the sweeps. It reads the pool's index instead, and keeps only the record of what the cache
// computed and lost, fed by the pool's evictions.
#ifndef PREFIXSIM_SIM_KV_SHADOW_INDEX_H_
#define PREFIXSIM_SIM_KV_SHADOW_INDEX_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "sim/kv/block_hasher.h"
#include "sim/kv/block_pool.h"
#include "sim/kv/computed_record.h"

namespace prefixsim {
namespace kv {

class ShadowIndex final : public EvictionObserver {
 public:
  // unit: U in tokens; hash_block_size: H (U % H == 0); drop_eagle: the plan has an EAGLE group,
  // so a hit also needs the U-block past it (the shadow analogue of docs/semantics.md §9.4).
  ShadowIndex(const BlockPool* pool, int64_t unit, int64_t hash_block_size, bool drop_eagle);

  // The real cache's group `group` is this shadow (see above): its index answers what is alive
  // and published, and the pool's evictions feed the record of what was computed. Call before
  // the first Hold, and register the shadow as the pool's eviction observer.
  void ReadPool(int group) {
    pool_group_ = group;
    pool_record_ = ComputedRecord(max_retired_);
  }
  bool reads_pool() const { return pool_group_ >= 0; }
  // ReadPool: the pool evicted block h of its group.
  void OnEvicted(int group, const HashPair& h) override;

  int64_t unit() const { return unit_; }
  // Fine (H-chunk) hashes needed to address `tokens` tokens' worth of U-blocks.
  int64_t FineChunksFor(int64_t tokens) const { return tokens / unit_ * ratio_; }
  // Whole U-blocks named by num_fine H-chunk hashes.
  int64_t BlocksOf(int64_t num_fine) const { return num_fine / ratio_; }

  // The number of leading U-blocks alive, at most max_blocks (no EAGLE drop). `fine` holds
  // num_fine H-chunk hashes of the request.
  int64_t AliveBlocks(const HashPair* fine, int64_t num_fine, int64_t max_blocks) const;
  // The hit, in tokens, that `alive_blocks` leading alive U-blocks give: less one U-block with
  // drop_eagle.
  int64_t HitTokens(int64_t alive_blocks) const {
    return (drop_eagle_ && alive_blocks > 0 ? alive_blocks - 1 : alive_blocks) * unit_;
  }
  bool drop_eagle() const { return drop_eagle_; }
  // The hash naming U-block j: the fine hash at its end.
  const HashPair& BlockHash(const HashPair* fine, int64_t j) const {
    return fine[(j + 1) * ratio_ - 1];
  }

  // The request now holds its U-blocks [0, num_blocks): takes a reference on blocks
  // [*held, num_blocks) (publishing new ones) and advances *held. Stops at a hash collision.
  // Of its held blocks, the first `publishable_blocks` are ones the real cache's caching rule let
  // it publish (below the round-down to S): they are marked so (miss attribution), blocks
  // [0, *marked) being marked already; advances *marked.
  void Hold(const HashPair* fine, int64_t num_fine, int64_t num_blocks, int64_t publishable_blocks,
            int64_t* held, int64_t* marked);
  // The first block in [from, to) that no holder was ever allowed to publish, or `to`.
  // REQUIRES: blocks [from, to) alive (AliveBlocks).
  int64_t FirstUnpublished(const HashPair* fine, int64_t from, int64_t to) const;

  // Drops the request's references on its blocks [0, *held) and sets *held = 0; entries whose
  // last holder leaves take the stamp of a real block freed now (see Release in shadow_index.cc).
  // `clock_before_free`: the pool's free clock before the request's real blocks were freed.
  void Release(const HashPair* fine, int64_t* held, int64_t clock_before_free);

  // Keeps what dead entries knew: the index then also records every U-block this cache ever
  // computed, which miss attribution asks (ComputedBlocks). A sweep moves dead entries to a
  // second map of what they keep (their check and whether they were ever published), so the
  // live map stays the size of the cache and its walks stay in the CPU's caches; memory grows
  // with the distinct U-blocks computed (16 bytes each, in a map at most 7/8 full).
  // `max_retired` > 0 bounds that record: once it holds max_retired / 2 blocks retired since the
  // last bound, the ones retired before then are forgotten (counted, forgotten()), so it keeps
  // between max_retired / 2 and max_retired of the most recently retired blocks, plus one
  // sweep's worth. A forgotten block reads as never computed here.
  void KeepComputed(int64_t max_retired = 0) {
    keep_computed_ = true;
    max_retired_ = max_retired;
  }
  int64_t forgotten() const { return reads_pool() ? pool_record_.forgotten() : forgotten_; }
  // With KeepComputed: whether this cache has computed U-block j, alive or not, and the end of
  // the run of blocks from `from` (at most max_blocks) that it has computed.
  bool HasComputed(const HashPair* fine, int64_t j) const;
  int64_t ComputedBlocks(const HashPair* fine, int64_t num_fine, int64_t from,
                         int64_t max_blocks) const;

  int64_t size() const { return static_cast<int64_t>(map_.size()); }
  int64_t collisions() const { return collisions_; }

 private:
  struct Entry {
    uint64_t check = 0;
    int32_t refs = 0;
    bool published = false;  // the real cache's caching rule ever let a holder publish it
    int64_t stamp = 0;       // free clock when the last holder released it
  };
  // What a swept entry keeps (KeepComputed), packed in one word as it is kept for every block
  // ever computed: its check but the lowest bit, which holds whether it was published. Dead
  // entries stay dead (the eviction horizon only grows) until held again, when Hold revives
  // them from here.
  static uint64_t Retire(const Entry& e) {
    return (e.check & ~uint64_t{1}) | (e.published ? 1 : 0);
  }
  static bool RetiredMatches(uint64_t retired, uint64_t check) {
    return ((retired ^ check) & ~uint64_t{1}) == 0;
  }
  bool Alive(const Entry& e) const { return e.refs > 0 || e.stamp > pool_->eviction_horizon(); }
  // ReadPool: a request's U-blocks are walked in order, each in a random slot of an index larger
  // than the CPU's caches; fetching a few ahead overlaps their misses.
  static constexpr int64_t kPrefetchAhead = 6;
  // Drops (KeepComputed: retires) dead entries once the map has doubled since the last sweep
  // (amortized O(1)).
  void MaybeSweep();
  // Whether the pool holds U-block j (ReadPool).
  bool InPool(const HashPair* fine, int64_t j) const {
    return pool_->Lookup(pool_group_, BlockHash(fine, j)) != kNoBlock;
  }

  const BlockPool* pool_;
  int64_t unit_;
  int64_t ratio_;  // U / H
  bool drop_eagle_;
  absl::flat_hash_map<uint64_t, Entry> map_;
  // The retired record's value for `hash`, or null.
  const uint64_t* FindRetired(uint64_t hash) const;

  // KeepComputed: swept entries (Retire), those retired since the record last reached its
  // bound, and (max_retired_ > 0) those retired before, until it next does.
  absl::flat_hash_map<uint64_t, uint64_t> retired_, retired_before_;
  int64_t max_retired_ = 0;
  int64_t forgotten_ = 0;
  size_t next_sweep_ = 4096;
  bool keep_computed_ = false;
  int64_t collisions_ = 0;
  int pool_group_ = -1;         // ReadPool's group, or -1
  ComputedRecord pool_record_;  // ReadPool: what the pool evicted
};

}  // namespace kv
}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_KV_SHADOW_INDEX_H_
