// What a cache computed and has since lost, for miss attribution (`evicted` against `compulsory`)
// where the shadow index reads the pool (shadow_index.h, ReadPool): a set of 64-bit fingerprints
// of each evicted block's (hash, check), one word a block in an open-addressing table with linear
// probing at most 7/8 full (9 to 18 bytes a block; eight slots share a cache line, so even a long
// probe run reads few lines): a third of the bytes of a hash map of (hash, check) pairs, for a
// record that grows with every distinct block a trace computes. Inserts are buffered and applied in
// batches, each slot fetched a few inserts ahead: evictions come in bursts, and each lands in a
// random slot of a table far larger than the CPU's caches, so their misses overlap instead of
// adding up.
//
// Bounded like the shadow's own record: with a bound, two generations of at most `bound / 2`
// fingerprints each; when the newer fills, the older is dropped whole and counted as forgotten.
#ifndef PREFIXSIM_SIM_KV_COMPUTED_RECORD_H_
#define PREFIXSIM_SIM_KV_COMPUTED_RECORD_H_

#include <cstdint>
#include <vector>

#include "sim/kv/block_hasher.h"
#include "sim/util/big_array.h"

namespace prefixsim::kv {

class ComputedRecord {
 public:
  // `bound`: the most fingerprints kept (0: no bound).
  explicit ComputedRecord(int64_t bound = 0) : bound_(bound) {}

  // The cache lost block `h` (buffered).
  void Add(const HashPair& h) {
    pending_.push_back(Fingerprint(h));
    if (pending_.size() >= kBatch) Flush();
  }
  // Whether block `h` was added and not forgotten since.
  bool Contains(const HashPair& h) const;
  // Fingerprints dropped with an older generation.
  int64_t forgotten() const { return forgotten_; }
  int64_t size() const;

 private:
  // An open-addressing set of nonzero words; 0 marks an empty slot.
  class Set {
   public:
    bool Contains(uint64_t f) const;
    void Prefetch(uint64_t f) const;
    // Inserts `f` (a no-op when present), growing at 7/8 full.
    void Insert(uint64_t f);
    // Removes `f` if present, shifting the rest of its probe run back.
    void Erase(uint64_t f);
    int64_t size() const { return size_; }

   private:
    void Grow();
    BigArray<uint64_t> slots_;
    uint64_t mask_ = 0;
    int64_t size_ = 0;
  };

  static constexpr size_t kBatch = 64;
  static uint64_t Fingerprint(const HashPair& h) {
    const uint64_t f = h.hash ^ (h.check * 0x9e3779b97f4a7c15ULL);
    return f != 0 ? f : 1;
  }
  // Applies the buffered inserts (const: a read applies them first; a cache is only ever read on
  // the thread that owns it or while it is idle).
  void Flush() const;

  int64_t bound_;
  mutable std::vector<uint64_t> pending_;
  mutable Set current_, previous_;
  mutable int64_t forgotten_ = 0;
};

}  // namespace prefixsim::kv

#endif  // PREFIXSIM_SIM_KV_COMPUTED_RECORD_H_
