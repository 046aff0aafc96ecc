// KV events of the offload tiers (docs/semantics.md §16): a tier's stores and evictions are
// BlockStored / BlockRemoved with the tier's medium and the group, and the hash alone, as vLLM's
// offloading manager emits them; a consumer keeping the GPU pool's blocks leaves them out.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/events/cached_blocks.h"
#include "sim/events/event_recorder.h"
#include "tests/events/kv_events_test_util.h"

namespace prefixsim::events {
namespace {

using testing_engine::Req;
using testing_kv::Iota;

// A CPU tier of 4 one-block slots: A's 4 blocks are stored, then B's 4 evict them.
TEST(OffloadEventsTest, TierStoresAndEvictionsCarryTheirMedium) {
  const KvPlan plan = testing_kv::Unitary(LayerKind::kFullAttention, 16, 9);
  EngineConfig e = testing_engine::SmallEngine(8192);
  e.kv_offload.kv_offloading_size_gib = 4 * 1024.0 / (1LL << 30);
  std::vector<EventBatch> batches;
  EventRecorder recorder(plan, 0, [&](EventBatch&& b) { batches.push_back(std::move(b)); });
  testing_events::DriveReplay(plan, e, {Req(0, 0, Iota(64), 1), Req(1, 5, Iota(64, 1000), 1)},
                              &recorder, [](Simulator&) {});
  recorder.Flush(1'000'000'000);
  int cpu_stored = 0, cpu_removed = 0, gpu_stored = 0;
  CachedBlocks gpu;
  for (const EventBatch& batch : batches) {
    ASSERT_TRUE(gpu.Apply(batch).ok());
    for (const KvEvent& event : batch.events) {
      if (const auto* s = std::get_if<BlockStored>(&event)) {
        ASSERT_TRUE(s->medium.has_value());
        if (*s->medium == "CPU") {
          ++cpu_stored;
          EXPECT_EQ(s->group_idx, 0);
          EXPECT_TRUE(s->token_ids.empty());
          EXPECT_EQ(s->block_hashes.size(), 1u);
        } else {
          EXPECT_EQ(*s->medium, kMediumGpu);
          gpu_stored += static_cast<int>(s->block_hashes.size());
        }
      } else if (const auto* r = std::get_if<BlockRemoved>(&event)) {
        if (r->medium == std::optional<std::string>("CPU")) ++cpu_removed;
      }
    }
  }
  EXPECT_EQ(cpu_stored, 8);
  EXPECT_EQ(cpu_removed, 4);
  EXPECT_EQ(gpu_stored, 8);
  // The GPU pool (8 usable blocks) still holds both prompts: the tier's events are not its.
  EXPECT_EQ(gpu.blocks().size(), 8u);
}

}  // namespace
}  // namespace prefixsim::events
