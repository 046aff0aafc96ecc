#include "sim/kv/quiet_ranges.h"

#include <algorithm>

namespace prefixsim {
namespace kv {

QuietRanges::QuietRanges(const KvPlan& plan, int64_t scheduler_block_size, int64_t hit_alignment,
                         int64_t partial_hit_granularity, int64_t num_reprefillable_tokens) {
  // Which count each breakpoint moves, by what reads it:
  //  * num_tokens_need_slot: how many blocks each group must hold (ceil by its block size, or
  //    chunk);
  //  * total_computed_tokens: the blocks each group no longer needs (a sliding window's oldest
  //    block, a mamba group's old state, chunk starts) and the mamba boundary that accepted
  //    drafts crossed (floor by the mamba block size);
  //  * num_tokens_main_model: the mamba state block (ceil by its block size) and the step's end,
  //    where a state is cached (a block, S or A boundary);
  //  * num_tokens_to_cache: what may be cached (whole blocks, S, A; the shadow index's unit is a
  //    block size or A).
  // Every group's block size (floor and ceil) for all four, to be safe; H only with partial hits
  // (a tail block registered at every H boundary, mamba states cached there), since otherwise the
  // hashes are only extended further when a call needs them.
  enum Count { kTotal = 1, kMain = 2, kNeed = 4, kToCache = 8, kAll = 15 };
  auto add = [&](int counts, int64_t m, int64_t offset) {
    if (m <= 0) return;
    const std::pair<int64_t, int64_t> p{m, ((offset % m) + m) % m};
    for (int i = 0; i < 4; ++i) {
      if ((counts & (1 << i)) == 0) continue;
      std::vector<std::pair<int64_t, int64_t>>& breaks = breaks_[i];
      if (std::find(breaks.begin(), breaks.end(), p) == breaks.end()) breaks.push_back(p);
    }
  };
  for (const KvGroup& g : plan.groups) {
    add(kAll, g.block_size, 0);
    add(kAll, g.block_size, 1);
    if (g.kind == LayerKind::kSlidingWindow) {
      const int64_t o = g.sliding_window - 1 + num_reprefillable_tokens;
      add(kTotal, g.block_size, o);
      add(kTotal, g.block_size, o + 1);
    }
    if (g.kind == LayerKind::kChunkedLocal) {
      add(kTotal | kNeed, g.attention_chunk_size, 0);
      add(kTotal | kNeed, g.attention_chunk_size, 1);
    }
  }
  for (int64_t m : {scheduler_block_size, hit_alignment, partial_hit_granularity}) {
    add(kMain | kToCache, m, 0);
    add(kMain | kToCache, m, 1);
  }
}

}  // namespace kv
}  // namespace prefixsim
