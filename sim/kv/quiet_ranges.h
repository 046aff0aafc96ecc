// The KV fast path: which AllocateSlots calls can be skipped.
//
// What it skips, and why the result is exact. AllocateSlots of a running request (no prefix hit
// to take) depends on its four token counts (SlotCounts) only through which blocks they fall in:
// floor((x - offset) / m) for the breakpoints (m, offset) that the constructor lists per count
// (every group's manager computes block counts, blocks out of a window or chunk, cache limits and
// mamba boundaries that way). Once a call has allocated, freed and cached what it needed, a later
// call whose counts all stay in the same blocks has nothing to allocate, free or publish: the
// decode steps between two block boundaries. The manager remembers, per request, the window
// around its last full call in which no floor changes (Around) and returns at once from a call
// inside it (Contains). A lookup hit, a failed allocation or a Free forgets the window. Under
// invariant checks a call inside the window still runs in full and checks that it changed
// nothing (kv_cache_state.cc), and tests replay every sample with the fast path off
// (sim/kv/fast_path.h) and compare the bytes.
#ifndef PREFIXSIM_SIM_KV_QUIET_RANGES_H_
#define PREFIXSIM_SIM_KV_QUIET_RANGES_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "prefixsim/kv_plan.h"

namespace prefixsim {
namespace kv {

// The token counts of one AllocateSlots call, by vLLM's names (allocate_slots,
// docs/semantics.md §10.1).
struct SlotCounts {
  int64_t total_computed_tokens;  // computed + new hit, capped at max_model_len
  int64_t num_tokens_main_model;  // total_computed_tokens + num_new_tokens
  int64_t num_tokens_need_slot;   // + lookahead, capped at max_model_len
  // Tokens cached after the step: verified tokens only, never drafts or lookahead slots, less
  // the tokens a multi-module MTP drafter re-prefills (docs/semantics.md §10.2).
  int64_t num_tokens_to_cache;
};

class QuietRanges {
 public:
  // [lo, hi) per count, in SlotCounts' order.
  using Window = std::array<int64_t, 8>;

  // The breakpoints of a manager of `plan` whose coordinator uses these sizes.
  // `partial_hit_granularity`: the hash block size H with partial hits, else 0.
  QuietRanges(const KvPlan& plan, int64_t scheduler_block_size, int64_t hit_alignment,
              int64_t partial_hit_granularity, int64_t num_reprefillable_tokens);

  // The window around `c`: per count x, the range [lo, hi) in which no floor((x - offset) / m)
  // changes.
  Window Around(const SlotCounts& c) const {
    Window w;
    const int64_t counts[4] = {c.total_computed_tokens, c.num_tokens_main_model,
                               c.num_tokens_need_slot, c.num_tokens_to_cache};
    for (int i = 0; i < 4; ++i) {
      int64_t lo = INT64_MIN, hi = INT64_MAX;
      for (const auto& [m, offset] : breaks_[i]) {
        const int64_t start = offset + m * ((counts[i] - offset + m) / m - 1);  // <= x < start + m
        lo = std::max(lo, start);
        hi = std::min(hi, start + m);
      }
      w[2 * i] = lo;
      w[2 * i + 1] = hi;
    }
    return w;
  }

  static bool Contains(const Window& w, const SlotCounts& c) {
    return w[0] <= c.total_computed_tokens && c.total_computed_tokens < w[1] &&
           w[2] <= c.num_tokens_main_model && c.num_tokens_main_model < w[3] &&
           w[4] <= c.num_tokens_need_slot && c.num_tokens_need_slot < w[5] &&
           w[6] <= c.num_tokens_to_cache && c.num_tokens_to_cache < w[7];
  }

 private:
  // (modulus, offset) per count, in SlotCounts' order.
  std::array<std::vector<std::pair<int64_t, int64_t>>, 4> breaks_;
};

}  // namespace kv
}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_KV_QUIET_RANGES_H_
