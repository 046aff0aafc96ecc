// The mamba-aligned prefill split, stop by stop (docs/semantics.md "Mamba-aligned prefill split";
// docs/semantics.md §11; vLLM Scheduler._mamba_block_aligned_split with the shared-prefix junction
// stop).
#include <gtest/gtest.h>

#include "sim/sched/scheduler.h"

namespace prefixsim {
namespace {

SchedulerConfig Config(int64_t mamba_block, int64_t budget = 8192) {
  SchedulerConfig c;
  c.max_num_batched_tokens = budget;
  c.mamba_align_block_size = mamba_block;
  return c;
}

SimRequest Prefilling(int64_t prompt, int64_t junction = 0) {
  SimRequest r;
  r.prompt_tokens = prompt;
  r.num_tokens = prompt;
  r.shared_prefix_boundary = junction;
  return r;
}

// The minimal case: block 32, a 104-token prompt whose first 64 tokens are cached by full
// attention but whose mamba state at 64 is not. vLLM prefills 64, 32, 8.
TEST(MambaSplitTest, StopsAtTheJunctionThenAtTheLastCacheablePosition) {
  const SchedulerConfig c = Config(32);
  const SimRequest r = Prefilling(104, /*junction=*/64);
  EXPECT_EQ(MambaAlignedSplit(c, r, 104, 0), 64);
  EXPECT_EQ(MambaAlignedSplit(c, r, 40, 64), 32);
  EXPECT_EQ(MambaAlignedSplit(c, r, 8, 96), 8);
}

TEST(MambaSplitTest, WithoutAJunctionTheChunkRunsToTheLastCacheablePosition) {
  const SchedulerConfig c = Config(32);
  EXPECT_EQ(MambaAlignedSplit(c, Prefilling(104), 104, 0), 96);
  EXPECT_EQ(MambaAlignedSplit(c, Prefilling(104), 8, 96), 8);
}

// The junction has no state of its own inside a block: the stop is floored to the block before it,
// and a junction inside the chunk's first block makes no stop at all.
TEST(MambaSplitTest, JunctionIsFlooredToABlock) {
  const SchedulerConfig c = Config(32);
  EXPECT_EQ(MambaAlignedSplit(c, Prefilling(104, 80), 104, 0), 64);
  EXPECT_EQ(MambaAlignedSplit(c, Prefilling(104, 16), 104, 0), 96);
  // Behind or at the chunk's start: nothing to stop at.
  EXPECT_EQ(MambaAlignedSplit(c, Prefilling(104, 64), 40, 64), 32);
  EXPECT_EQ(MambaAlignedSplit(c, Prefilling(104, 32), 40, 64), 32);
}

// A chunk that does not finish the prefill is cut to a block boundary first; the junction stops it
// only when it lies strictly inside what is left.
TEST(MambaSplitTest, BudgetSmallerThanTheJunction) {
  const SchedulerConfig c = Config(32, /*budget=*/48);
  const SimRequest r = Prefilling(136, /*junction=*/96);
  EXPECT_EQ(MambaAlignedSplit(c, r, 48, 0), 32);   // 48 -> 32
  EXPECT_EQ(MambaAlignedSplit(c, r, 48, 32), 32);  // 80 -> 64
  EXPECT_EQ(MambaAlignedSplit(c, r, 48, 64), 32);  // 112 -> 96, the junction not strictly inside
  // A budget of 64 from 64 reaches 128: the junction at 96 stops it.
  EXPECT_EQ(MambaAlignedSplit(Config(32, 64), r, 64, 64), 32);
  // Without the junction the same chunk runs to 128.
  EXPECT_EQ(MambaAlignedSplit(Config(32, 64), Prefilling(136), 64, 64), 64);
}

// What is left of a step's budget may not reach the next boundary: nothing this step (the full
// budget of a later step will). A block wider than the whole allowance is crossed in sub-block
// chunks instead, and the chunk after one re-aligns at the boundary.
TEST(MambaSplitTest, BlockWiderThanTheStepAllowance) {
  EXPECT_EQ(MambaAlignedSplit(Config(32), Prefilling(104), 20, 0), 0);
  const SchedulerConfig narrow = Config(32, /*budget=*/24);
  EXPECT_EQ(MambaAlignedSplit(narrow, Prefilling(104), 24, 0), 24);
  EXPECT_EQ(MambaAlignedSplit(narrow, Prefilling(104), 24, 24), 8);
  // The long-prefill threshold counts as the allowance too.
  SchedulerConfig threshold = Config(32);
  threshold.long_prefill_token_threshold = 24;
  EXPECT_EQ(MambaAlignedSplit(threshold, Prefilling(104), 24, 0), 24);
}

// A chunk starting inside a block (after a fine-grained partial hit) first stops at the next
// boundary, so that its state is written there.
TEST(MambaSplitTest, ChunkStartingInsideABlockStopsAtTheNextBoundary) {
  EXPECT_EQ(MambaAlignedSplit(Config(32), Prefilling(104), 88, 16), 16);
}

// Partial hits: the prompt's last hash boundary past the last cacheable position is a stop, where
// the prompt's partial state can be registered.
TEST(MambaSplitTest, PartialHitsStopAtThePromptsLastHashBoundary) {
  SchedulerConfig c = Config(32);
  c.mamba_partial_hit_unit = 16;
  EXPECT_EQ(MambaAlignedSplit(c, Prefilling(120), 120, 0), 96);
  EXPECT_EQ(MambaAlignedSplit(c, Prefilling(120), 24, 96), 16);
  EXPECT_EQ(MambaAlignedSplit(Config(32), Prefilling(120), 24, 96), 24);
}

// EAGLE drops the last matched block, so the last cacheable state is one block earlier.
TEST(MambaSplitTest, EagleMovesTheLastCacheablePositionBackOneBlock) {
  SchedulerConfig c = Config(32);
  c.use_eagle = true;
  EXPECT_EQ(MambaAlignedSplit(c, Prefilling(104), 104, 0), 64);
}

// Decoding (and a resumed request past its replayed outputs) is never split; neither is anything
// without an align-mode mamba group.
TEST(MambaSplitTest, DecodeAndNonMambaAreUntouched) {
  SimRequest decoding = Prefilling(104, 64);
  decoding.num_tokens = 110;
  EXPECT_EQ(MambaAlignedSplit(Config(32), decoding, 1, 109), 1);
  EXPECT_EQ(MambaAlignedSplit(Config(0), Prefilling(104, 64), 104, 0), 104);
  // A resumed request re-prefills its outputs too: num_tokens - 1 is still prefill.
  EXPECT_EQ(MambaAlignedSplit(Config(32), decoding, 110, 0), 64);
}

}  // namespace
}  // namespace prefixsim
