// Offload tiers end to end on hand-computed cases (docs/semantics.md §16): a CPU hit after the GPU
// evicted the prefix, loaded while the request waits; store_threshold; a storage tier behind a
// small CPU tier; the engine JSON's offload fields. Block 16, full attention, 8 usable GPU blocks,
// every step 1 ms (SmallEngine); the CPU tier's slots are 1 KiB, one block of the one group.
#include <gtest/gtest.h>

#include <vector>

#include "prefixsim/engine_config.h"
#include "tests/engine/engine_test_util.h"

namespace prefixsim {
namespace {

using testing_engine::MustReplay;
using testing_engine::Req;
using testing_engine::SmallEngine;
using testing_engine::WithCpuTier;
using testing_kv::Concat;
using testing_kv::Iota;
using testing_kv::Unitary;

constexpr int64_t kMs = 1'000'000;

// r0 = A (64 tokens) at 0; r1 = 128 other tokens at 5 ms takes all 8 GPU blocks, evicting A; r2 =
// A + 16 new tokens at 10 ms. Without a tier r2 misses; with one, A's 4 blocks come back from CPU
// memory: the engine idles for the load (4 KiB at 25 GB/s, 164 ns), then computes 16 tokens.
TEST(OffloadReplayTest, ACpuHitAfterTheGpuEvictedThePrefix) {
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 16, 9);
  const std::vector<uint32_t> a = Iota(64);
  const std::vector<Request> reqs = {Req(0, 0, a, 1), Req(1, 5, Iota(128, 1000), 1),
                                     Req(2, 10, Concat(a, Iota(16, 5000)), 1)};
  const ReplayResult plain = MustReplay(plan, SmallEngine(8192), reqs);
  EXPECT_EQ(plain.per_request[2].hit_tokens, 0);
  EXPECT_FALSE(plain.offload.enabled);

  const ReplayResult r = MustReplay(plan, WithCpuTier(64), reqs);
  const RequestRecord& r2 = r.per_request[2];
  EXPECT_EQ(r2.hit_tokens, 64);
  EXPECT_EQ(r2.gpu_hit_tokens, 0);
  EXPECT_EQ(r2.tier_hit_tokens[0], 64);
  EXPECT_EQ(r2.first_token_ns, 10 * kMs + 164 + 1 * kMs);
  ASSERT_TRUE(r.offload.enabled);
  ASSERT_EQ(r.offload.tiers.size(), 1u);
  const OffloadTierStats& cpu = r.offload.tiers[0];
  EXPECT_EQ(cpu.medium, "CPU");
  EXPECT_EQ(cpu.hit_tokens, 64);
  EXPECT_EQ(cpu.loaded_blocks, 4);
  EXPECT_EQ(r.offload.loads, 1);
  // r0's 4 blocks, r1's 8, and r2's one block past its hit; all but the 4 loaded never paid off.
  EXPECT_EQ(cpu.stored_blocks, 13);
  EXPECT_EQ(cpu.never_loaded_blocks, 9);
  EXPECT_EQ(r.prefix_cache.hits, 64);
}

// The same with a request decoding all along (steps at every millisecond): r2 arrives at 10.5 ms,
// its lookup in the step at 11 ms starts the load, and it is admitted a step later, at 12 ms
// (vLLM's WAITING_FOR_REMOTE_KVS): first token at 13 ms, where a GPU miss computes all 80 tokens
// in the step at 11 ms.
TEST(OffloadReplayTest, ALoadedRequestIsAdmittedOneStepLater) {
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 16, 9);
  const std::vector<uint32_t> a = Iota(64);
  const std::vector<Request> reqs = {Req(9, 0, Iota(1, 90000), 30), Req(0, 0, a, 1),
                                     Req(1, 5, Iota(112, 1000), 1),
                                     Req(2, 10.5, Concat(a, Iota(16, 5000)), 1)};
  const ReplayResult plain = MustReplay(plan, SmallEngine(8192), reqs);
  EXPECT_EQ(plain.per_request[3].hit_tokens, 0);
  EXPECT_EQ(plain.per_request[3].first_token_ns, 12 * kMs);
  const ReplayResult r = MustReplay(plan, WithCpuTier(64), reqs);
  EXPECT_EQ(r.per_request[3].hit_tokens, 64);
  EXPECT_EQ(r.per_request[3].first_token_ns, 13 * kMs);
}

// The same with a slow link (1 MB/s: A's 4 KiB take 4.096 ms): the load started in the step at
// 11 ms ends at 15.096 ms, so r2 is admitted in the step at 16 ms, while the engine keeps
// stepping for the request that decodes.
TEST(OffloadReplayTest, ARequestWaitsForItsLoadWhileOthersRun) {
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 16, 9);
  const std::vector<uint32_t> a = Iota(64);
  EngineConfig e = WithCpuTier(64);
  e.kv_offload.cpu_load_bytes_per_s = 1e6;
  const ReplayResult r =
      MustReplay(plan, e,
                 {Req(9, 0, Iota(1, 90000), 30), Req(0, 0, a, 1), Req(1, 5, Iota(112, 1000), 1),
                  Req(2, 10.5, Concat(a, Iota(16, 5000)), 1)});
  EXPECT_EQ(r.per_request[3].hit_tokens, 64);
  EXPECT_EQ(r.per_request[3].first_token_ns, 17 * kMs);
  EXPECT_EQ(r.offload.load_wait_ns, 4'096'000);
}

// store_threshold 2 stores a block only once it was looked up twice; a lookup counts the blocks up
// to its first miss. r0 = A, r2 = A + X and r4 = A + Y, each after a flush of the GPU: r0's and
// r2's lookups count A's first block twice, so r2 stores that one block only, and r4 hits 16.
TEST(OffloadReplayTest, StoreThresholdStoresBlocksLookedUpOften) {
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 16, 9);
  const std::vector<uint32_t> a = Iota(64);
  EngineConfig e = WithCpuTier(64);
  e.kv_offload.store_threshold = 2;
  const ReplayResult r = MustReplay(
      plan, e,
      {Req(0, 0, a, 1), Req(1, 5, Iota(128, 1000), 1), Req(2, 10, Concat(a, Iota(16, 5000)), 1),
       Req(3, 15, Iota(128, 2000), 1), Req(4, 20, Concat(a, Iota(16, 7000)), 1)});
  EXPECT_EQ(r.per_request[2].hit_tokens, 0);
  EXPECT_EQ(r.per_request[4].hit_tokens, 16);
  EXPECT_EQ(r.per_request[4].tier_hit_tokens[0], 16);
  EXPECT_EQ(r.offload.tiers[0].stored_blocks, 1);
  EXPECT_GT(r.offload.stores_skipped, 0);
}

// A CPU tier of 4 slots in front of a file-system tier: r1 pushes A out of GPU and CPU, but the
// write-through copy in the file system serves r2 = A's first 48 tokens + 16 new ones. The load
// reads 3 KiB from the file system at 1 MB/s (3.072 ms), then moves it to the GPU (123 ns).
TEST(OffloadReplayTest, AStorageTierServesWhatTheCpuTierEvicted) {
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 16, 5);
  const std::vector<uint32_t> a = Iota(64);
  EngineConfig e = WithCpuTier(4);
  SecondaryTierConfig fs;
  fs.type = "fs";
  fs.capacity_bytes = 1 << 20;
  fs.read_bytes_per_s = 1e6;
  e.kv_offload.secondary_tiers.push_back(fs);
  const ReplayResult r = MustReplay(
      plan, e,
      {Req(0, 0, a, 1), Req(1, 5, Iota(64, 1000), 1),
       Req(2, 10, Concat(std::vector<uint32_t>(a.begin(), a.begin() + 48), Iota(16, 5000)), 1)});
  const RequestRecord& r2 = r.per_request[2];
  EXPECT_EQ(r2.hit_tokens, 48);
  EXPECT_EQ(r2.tier_hit_tokens[0], 0);
  EXPECT_EQ(r2.tier_hit_tokens[1], 48);
  EXPECT_EQ(r2.first_token_ns, 10 * kMs + 3'072'000 + 123 + 1 * kMs);
  ASSERT_EQ(r.offload.tiers.size(), 2u);
  EXPECT_EQ(r.offload.tiers[1].medium, "FS");
  EXPECT_EQ(r.offload.tiers[1].hit_tokens, 48);
  EXPECT_EQ(r.offload.tiers[0].hit_tokens, 0);
}

// Each replica of a fleet has its own tiers; the fleet's report sums them.
TEST(OffloadReplayTest, AFleetSumsItsReplicasTiers) {
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 16, 9);
  EngineConfig e = WithCpuTier(64);
  e.fleet.replicas = 2;
  const ReplayResult r = MustReplay(plan, e, {Req(0, 0, Iota(64), 1), Req(1, 1, Iota(64), 1)});
  ASSERT_EQ(r.offload.tiers.size(), 1u);
  EXPECT_EQ(r.offload.tiers[0].capacity_bytes, 2 * 64 * 1024);
  EXPECT_EQ(r.offload.tiers[0].stored_blocks, 8);
}

// Two replicas behind round_robin: r0 = A runs on replica 0, r1 = A + 16 new tokens on replica 1.
// With a file-system tier of each replica's own, replica 1 finds nothing; with one the fleet
// shares, it loads A's blocks that replica 0 wrote there (1 MB/s: 4 KiB take 4.096 ms).
TEST(OffloadReplayTest, ASharedTierServesOneReplicaWhatAnotherStored) {
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 16, 9);
  const std::vector<uint32_t> a = Iota(64);
  const std::vector<Request> reqs = {Req(0, 0, a, 1), Req(1, 10, Concat(a, Iota(16, 5000)), 1)};
  EngineConfig e = WithCpuTier(64);
  e.fleet.replicas = 2;
  SecondaryTierConfig fs;
  fs.capacity_bytes = 1 << 20;
  fs.read_bytes_per_s = 1e6;
  e.kv_offload.secondary_tiers.push_back(fs);
  const ReplayResult own = MustReplay(plan, e, reqs);
  EXPECT_EQ(own.per_request[1].replica, 1);
  EXPECT_EQ(own.per_request[1].hit_tokens, 0);
  EXPECT_EQ(own.offload.tiers[1].capacity_bytes, 2 << 20);

  e.kv_offload.secondary_tiers[0].shared = true;
  const ReplayResult shared = MustReplay(plan, e, reqs);
  const RequestRecord& r1 = shared.per_request[1];
  EXPECT_EQ(r1.replica, 1);
  EXPECT_EQ(r1.hit_tokens, 64);
  EXPECT_EQ(r1.tier_hit_tokens[1], 64);
  EXPECT_EQ(r1.first_token_ns, 10 * kMs + 4'096'000 + 164 + 1 * kMs);
  // One copy: its capacity and contents count once in the fleet's sum.
  EXPECT_EQ(shared.offload.tiers[1].capacity_bytes, 1 << 20);
  EXPECT_EQ(shared.offload.tiers[1].stored_blocks, 5);  // A's 4, then r1's block past its hit
}

// kv_aware sees the tiers: two replicas, A computed on replica 0 and pushed out of its GPU into its
// CPU tier by C, then B decoding there. For A + 16 new tokens both GPUs hold nothing, so a router
// blind to tiers picks the idle replica 1 (cost 80 against 80 + B's tokens) and misses; with
// llm-d's weight 0.8 replica 0's 64 CPU tokens count 51, it wins, and the request loads them.
TEST(OffloadReplayTest, AKvAwareRouterWeighsTokensInATier) {
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 16, 9);
  const std::vector<uint32_t> a = Iota(64);
  EngineConfig e = WithCpuTier(64);
  e.fleet.replicas = 2;
  e.fleet.router = "kv_aware";
  const std::vector<Request> reqs = {Req(0, 0, a, 1), Req(1, 5, Iota(128, 1000), 1),
                                     Req(2, 9, Iota(16, 3000), 60),
                                     Req(3, 10, Concat(a, Iota(16, 5000)), 1)};
  const ReplayResult weighed = MustReplay(plan, e, reqs);
  ASSERT_EQ(weighed.per_request[1].replica, 0);
  ASSERT_EQ(weighed.per_request[2].replica, 0);
  EXPECT_EQ(weighed.per_request[3].replica, 0);
  EXPECT_EQ(weighed.per_request[3].tier_hit_tokens[0], 64);
  e.fleet.view.cpu_tier_weight = 0;
  const ReplayResult blind = MustReplay(plan, e, reqs);
  EXPECT_EQ(blind.per_request[3].replica, 1);
  EXPECT_EQ(blind.per_request[3].hit_tokens, 0);
}

TEST(OffloadConfigTest, TheEngineJsonNamesTheFieldItRefuses) {
  auto parse = [](const std::string& extra) {
    return ParseEngineJson(R"({"num_gpu_blocks": 100, )" + extra + "}", "e.json");
  };
  const auto ok = parse(
      R"("kv_offloading_size": 256, "kv_transfer_config": {"kv_connector": "OffloadingConnector",
          "kv_connector_extra_config": {"store_threshold": 0, "offload_prompt_only": false,
          "secondary_tiers": [{"type": "fs", "capacity": "4TiB", "read_gbps": 5}]}},
          "kv_offload_link": {"load_gbps": 50, "slot_sizing": "largest_group"})");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_DOUBLE_EQ(ok->kv_offload.kv_offloading_size_gib, 256);
  EXPECT_FALSE(ok->kv_offload.offload_prompt_only);
  ASSERT_EQ(ok->kv_offload.secondary_tiers.size(), 1u);
  EXPECT_EQ(ok->kv_offload.secondary_tiers[0].capacity_bytes, int64_t{4} << 40);
  EXPECT_DOUBLE_EQ(ok->kv_offload.cpu_load_bytes_per_s, 50e9);
  EXPECT_EQ(ok->kv_offload.slot_sizing, OffloadSlotSizing::kLargestGroup);

  const struct {
    const char* json;
    const char* names;
  } bad[] = {
      {R"("kv_offloading_size": 1, "kv_transfer_config": {"kv_connector_extra_config":
          {"eviction_policy": "arc"}})",
       "kv_transfer_config.kv_connector_extra_config.eviction_policy"},
      {R"("kv_offloading_size": 1, "kv_transfer_config": {"kv_connector_extra_config":
          {"secondary_tiers": [{"type": "fs"}]}})",
       "secondary_tiers[0].capacity"},
      {R"("kv_offloading_size": 1, "kv_transfer_config": {"kv_connector_extra_config":
          {"store_threshold": 2, "secondary_tiers": [{"capacity": 1000}]}})",
       "store_threshold"},
      {R"("kv_transfer_config": {"kv_connector_extra_config":
          {"secondary_tiers": [{"capacity": 1000}]}})",
       "kv_offloading_size"},
      {R"("kv_transfer_config": {"kv_connector": "LMCacheConnectorV1"})",
       "kv_transfer_config.kv_connector"},
      {R"("kv_offload_link": {"slot_sizing": "per_slot"})", "kv_offload_link.slot_sizing"},
  };
  for (const auto& b : bad) {
    const auto parsed = parse(b.json);
    ASSERT_FALSE(parsed.ok()) << b.json;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find(b.names), std::string_view::npos)
        << parsed.status().message();
  }
}

}  // namespace
}  // namespace prefixsim
