// The KV planner against the reference's worked examples (docs/semantics.md §4–§7, §13).
#include <gtest/gtest.h>

#include "prefixsim/engine_config.h"
#include "prefixsim/kv_plan.h"
#include "prefixsim/model.h"

namespace prefixsim {
namespace {

ModelSpec Preset(std::string_view name) {
  auto model = LoadModel(name);
  EXPECT_TRUE(model.ok()) << model.status();
  return *model;
}
EngineConfig Engine(std::string_view name) {
  auto engine = LoadEngine(name);
  EXPECT_TRUE(engine.ok()) << engine.status();
  return *engine;
}
KvPlan Plan(const ModelSpec& m, const EngineConfig& e, std::string_view policy) {
  auto plan = ResolveKvPlan(m, e, policy);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *plan : KvPlan{};
}
const KvGroup* FirstOfKind(const KvPlan& plan, LayerKind kind) {
  for (const KvGroup& g : plan.groups) {
    if (g.kind == kind) return &g;
  }
  return nullptr;
}

// §7: decode context parallelism scales the attention groups' blocks (MLA, SWA) in S and H,
// not the mamba group's: S = lcm(2 x 1536, 1536), H = gcd(2 x 1536, 1536).
TEST(PlannerTest, DecodeContextParallelismScalesAttentionBlocksNotMamba) {
  EngineConfig engine = Engine("kimi-k3-dspark");
  engine.decode_context_parallel_size = 2;
  const KvPlan plan = Plan(Preset("kimi-k3-like"), engine, "new");
  EXPECT_EQ(plan.primary_block_size, 1536);
  EXPECT_EQ(plan.scheduler_block_size, 3072);
  EXPECT_EQ(plan.hash_block_size, 1536);  // the unscaled mamba block takes part in the gcd
  EXPECT_EQ(plan.hit_alignment, 3072);
  // Under DCP a mamba block equal to H would turn partial hits on (§7), but the drafter's
  // sliding-window group (B x dcp = 3072 != H) has no fine-grained lookup: off again.
  EXPECT_FALSE(plan.partial_hits);
}

// docs/semantics.md §7: partial hits need an align-mode mamba block B > H, or B >= H under decode
// context parallelism. Kimi-K3-like without a drafter (MLA and KDA at 1536): with dcp = 1, B = H =
// 1536, no partial hits and A = S; with dcp = 2, H = gcd(3072, 1536) = 1536 = B: partial hits,
// A = H.
TEST(PlannerTest, MambaBlockEqualToHTurnsPartialHitsOnOnlyUnderDcp) {
  EngineConfig engine = Engine("kimi-k3");
  const KvPlan plain = Plan(Preset("kimi-k3-like"), engine, "new");
  EXPECT_EQ(plain.hash_block_size, 1536);
  EXPECT_FALSE(plain.partial_hits);
  EXPECT_EQ(plain.hit_alignment, plain.scheduler_block_size);
  engine.decode_context_parallel_size = 2;
  const KvPlan dcp = Plan(Preset("kimi-k3-like"), engine, "new");
  EXPECT_EQ(dcp.scheduler_block_size, 3072);
  EXPECT_EQ(dcp.hash_block_size, 1536);
  EXPECT_TRUE(dcp.partial_hits);
  EXPECT_EQ(dcp.hit_alignment, 1536);
}

// A single group under decode context parallelism: S = H = B x dcp (docs/semantics.md §7, the
// one-group branch), and hits align to it.
TEST(PlannerTest, DecodeContextParallelismScalesASingleGroupsBlocks) {
  EngineConfig engine = Engine("llama-3.1-8b");
  engine.decode_context_parallel_size = 2;
  const KvPlan plan = Plan(Preset("llama-3.1-8b"), engine, "new");
  ASSERT_EQ(plan.groups.size(), 1u);
  EXPECT_EQ(plan.groups[0].block_size, 16);
  EXPECT_EQ(plan.scheduler_block_size, 32);
  EXPECT_EQ(plan.hash_block_size, 32);
  EXPECT_EQ(plan.hit_alignment, 32);
}

// §13.B, the #53007 case: old policy, DSpark SWA drafter on FLASH_ATTN.
TEST(PlannerTest, KimiDsparkOldPolicyInflatesLcm) {
  KvPlan plan = Plan(Preset("kimi-k3-like"), Engine("kimi-k3-dspark"), "old");
  EXPECT_EQ(plan.primary_block_size, 1536);  // §4 mamba alignment
  const KvGroup* swa = FirstOfKind(plan, LayerKind::kSlidingWindow);
  ASSERT_NE(swa, nullptr);
  EXPECT_EQ(swa->block_size, 1728);
  EXPECT_EQ(swa->padding_bytes, 0);
  EXPECT_EQ(plan.scheduler_block_size, 13824);
  EXPECT_EQ(plan.hash_block_size, 192);
  EXPECT_EQ(plan.hit_alignment, 13824);
  EXPECT_FALSE(plan.partial_hits);
}

TEST(PlannerTest, KimiDsparkNewPolicyPadsAndKeepsPrimary) {
  KvPlan plan = Plan(Preset("kimi-k3-like"), Engine("kimi-k3-dspark"), "new");
  const KvGroup* swa = FirstOfKind(plan, LayerKind::kSlidingWindow);
  ASSERT_NE(swa, nullptr);
  EXPECT_EQ(swa->block_size, 1536);
  EXPECT_EQ(swa->page_bytes, 1769472);
  EXPECT_EQ(swa->padding_bytes, 196608);
  EXPECT_EQ(swa->num_drafter_layers, 5);
  EXPECT_EQ(plan.scheduler_block_size, 1536);
  EXPECT_EQ(plan.hash_block_size, 1536);
  EXPECT_EQ(plan.hit_alignment, 1536);
}

TEST(PlannerTest, KimiDsparkNewPolicyOnFlashInferStillScalesTo1728) {
  KvPlan plan = Plan(Preset("kimi-k3-like"), Engine("kimi-k3-dspark-flashinfer"), "new");
  const KvGroup* swa = FirstOfKind(plan, LayerKind::kSlidingWindow);
  ASSERT_NE(swa, nullptr);
  EXPECT_EQ(swa->block_size, 1728);
  EXPECT_EQ(swa->kernel_block_size, 64);  // §3.2: 1728 split into 27 kernel blocks of 64
  EXPECT_EQ(plan.scheduler_block_size, 13824);
}

TEST(PlannerTest, KimiWithoutSpeculationHasNoSwaGroup) {
  for (std::string_view policy : {"old", "new"}) {
    KvPlan plan = Plan(Preset("kimi-k3-like"), Engine("kimi-k3"), policy);
    EXPECT_EQ(FirstOfKind(plan, LayerKind::kSlidingWindow), nullptr) << policy;
    EXPECT_EQ(plan.scheduler_block_size, 1536) << policy;
    EXPECT_EQ(plan.hit_alignment, 1536) << policy;
    // §13.B grouping: 24 MLA + 69 KDA -> group_size 24 -> 1 + 3 groups.
    EXPECT_EQ(plan.group_size, 24);
    EXPECT_EQ(plan.groups.size(), 4u);
    EXPECT_EQ(plan.bytes_per_block, 24 * 1769472);
  }
}

TEST(PlannerTest, KimiDraftLayersShrinkGroupSize) {
  // §13.B [inferred]: adding 5 SWA draft layers gives group_size 5 -> 5 + 14 + 1 = 20 groups.
  KvPlan plan = Plan(Preset("kimi-k3-like"), Engine("kimi-k3-dspark"), "new");
  EXPECT_EQ(plan.group_size, 5);
  EXPECT_EQ(plan.groups.size(), 20u);
  EXPECT_EQ(plan.bytes_per_block, 5 * 1769472);
  EXPECT_EQ(plan.num_blocks, 68719476736 / (5 * 1769472));
  int mla_layers = 0, mla_padding = 0;
  for (const KvGroup& g : plan.groups) {
    if (g.kind == LayerKind::kMla) {
      mla_layers += g.num_layers;
      mla_padding += g.num_padding_layers;
    }
  }
  EXPECT_EQ(mla_layers, 24);
  EXPECT_EQ(mla_padding, 1);
}

TEST(PlannerTest, PrefixMatchUnit128RejectedUnderOldAcceptedUnderNew) {
  ModelSpec model = Preset("kimi-k3-like");
  EngineConfig engine = Engine("kimi-k3-dspark");
  engine.prefix_match_unit = 128;
  auto old_plan = ResolveKvPlan(model, engine, "old");
  ASSERT_FALSE(old_plan.ok());
  EXPECT_EQ(old_plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(old_plan.status().message().find("prefix_match_unit"), absl::string_view::npos);
  // §13.B: accepted under new, but partial hits stay off because of the SWA group: A = 1536.
  KvPlan new_plan = Plan(model, engine, "new");
  EXPECT_EQ(new_plan.hash_block_size, 128);
  EXPECT_FALSE(new_plan.partial_hits);
  EXPECT_EQ(new_plan.hit_alignment, 1536);
  // Without the drafter, A = 128.
  EngineConfig no_spec = Engine("kimi-k3");
  no_spec.prefix_match_unit = 128;
  KvPlan plain = Plan(model, no_spec, "new");
  EXPECT_TRUE(plain.partial_hits);
  EXPECT_EQ(plain.hit_alignment, 128);
}

TEST(PlannerTest, MlaFp8WithStateLargerThanPageRaisesPrimaryThenFailsUnderNew) {
  // §13.B, last bullet: MLA fp8 (576 B/token) + the same KDA state: P is raised to 3072.
  ModelSpec model = Preset("kimi-k3-like");
  model.layers[0].kv_dtype = KvDtype::kFp8;
  EngineConfig engine = Engine("kimi-k3-dspark");
  KvPlan old_plan = Plan(model, engine, "old");
  EXPECT_EQ(old_plan.primary_block_size, 3072);
  EXPECT_EQ(FirstOfKind(old_plan, LayerKind::kSlidingWindow)->block_size, 1728);
  EXPECT_EQ(old_plan.scheduler_block_size, 27648);
  EXPECT_EQ(old_plan.hash_block_size, 192);
  // New: the SWA page (3072 * 1024) is larger than the MLA page and not a multiple of it, so MLA
  // can be neither scaled nor padded; mamba rules out the full-allocation fallback.
  auto new_plan = ResolveKvPlan(model, engine, "new");
  ASSERT_FALSE(new_plan.ok());
  EXPECT_EQ(new_plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(new_plan.status().message().find("MLA"), absl::string_view::npos);
}

TEST(PlannerTest, MlaPlusSwaWithoutMambaUsesFullAllocationFallback) {
  // §6.1 step 7: MLA fp8 + a larger SWA page that MLA cannot match: SWA promoted to full.
  ModelSpec model;
  model.name = "mla-swa";
  LayerSpec mla;
  mla.kind = LayerKind::kMla;
  mla.count = 4;
  mla.kv_lora_rank = 512;
  mla.qk_rope_head_dim = 64;
  mla.kv_dtype = KvDtype::kFp8;  // 576 B/token
  LayerSpec swa;
  swa.kind = LayerKind::kSlidingWindow;
  swa.count = 2;
  swa.num_kv_heads = 4;
  swa.head_size = 128;
  swa.kv_dtype = KvDtype::kFp8;  // 1024 B/token
  swa.sliding_window = 4096;
  model.layers = {mla, swa};
  EngineConfig engine = Engine("kimi-k3");
  model.tensor_parallel_size = engine.tensor_parallel_size;  // the shapes above are per rank
  KvPlan plan = Plan(model, engine, "new");  // SWA page 64*1024... new: block 64 -> 65,536 B
  // P = 64 (FlashMLA preference): MLA page 36,864 B < SWA page 65,536 B, not a divisor.
  EXPECT_TRUE(plan.full_allocation_fallback);
  ASSERT_EQ(plan.groups.size(), 1u);
  EXPECT_EQ(plan.groups[0].num_layers, 6);
  EXPECT_EQ(plan.bytes_per_block, 4 * 64 * 576 + 2 * 64 * 1024);
}

// §13.C: gpt-oss-20b: two groups of 12 layers, S = 16, 393,216 bytes per block.
TEST(PlannerTest, GptOss20b) {
  for (std::string_view policy : {"old", "new"}) {
    KvPlan plan = Plan(Preset("gpt-oss-20b-layout"), Engine("gpt-oss-20b"), policy);
    ASSERT_EQ(plan.groups.size(), 2u) << policy;
    EXPECT_EQ(plan.groups[0].num_layers, 12);
    EXPECT_EQ(plan.groups[1].num_layers, 12);
    EXPECT_EQ(plan.scheduler_block_size, 16);
    EXPECT_EQ(plan.hash_block_size, 16);
    EXPECT_EQ(plan.bytes_per_block, 393216);
    EXPECT_EQ(plan.num_blocks, 109226);
  }
}

TEST(PlannerTest, GptOssWithEagle3PadsToThirteen) {
  KvPlan plan = Plan(Preset("gpt-oss-20b-layout"), Engine("gpt-oss-20b-eagle3"), "new");
  EXPECT_EQ(plan.group_size, 13);  // §6.3: 13 < 1.5 * 12
  ASSERT_EQ(plan.groups.size(), 2u);
  EXPECT_EQ(plan.groups[0].num_padding_layers, 1);
  // EAGLE3: no drafter MLA group, so every group is an eagle group (§6.3).
  EXPECT_TRUE(plan.groups[0].is_eagle_group);
  EXPECT_TRUE(plan.groups[1].is_eagle_group);
}

TEST(PlannerTest, GptOssBlockSize64OnFlashInfer) {
  // §13.C: FlashInfer + --block-size 64: old SWA 16 scaled x4 -> 64; new -> 64. S = 64.
  EngineConfig engine = Engine("gpt-oss-20b");
  engine.block_size = 64;
  engine.backends[LayerKind::kSlidingWindow] = *LookupBackend("FLASHINFER");
  engine.backends[LayerKind::kFullAttention] = *LookupBackend("FLASHINFER");
  for (std::string_view policy : {"old", "new"}) {
    KvPlan plan = Plan(Preset("gpt-oss-20b-layout"), engine, policy);
    EXPECT_EQ(plan.scheduler_block_size, 64) << policy;
    EXPECT_EQ(FirstOfKind(plan, LayerKind::kSlidingWindow)->block_size, 64) << policy;
  }
}

TEST(PlannerTest, DenseModelIsOneGroupWithDrafterOnlyWhenSpeculating) {
  KvPlan plain = Plan(Preset("llama-3.1-8b-layout"), Engine("llama-3.1-8b"), "new");
  ASSERT_EQ(plain.groups.size(), 1u);
  EXPECT_EQ(plain.groups[0].num_layers, 32);
  EXPECT_EQ(plain.bytes_per_block, 32 * 16 * 4096);
  EXPECT_EQ(plain.hit_alignment, 16);
  KvPlan eagle = Plan(Preset("llama-3.1-8b-layout"), Engine("llama-3.1-8b-eagle"), "new");
  ASSERT_EQ(eagle.groups.size(), 1u);
  EXPECT_EQ(eagle.groups[0].num_layers, 33);
  EXPECT_EQ(eagle.groups[0].num_drafter_layers, 1);
  EXPECT_TRUE(eagle.groups[0].is_eagle_group);
}

TEST(PlannerTest, NumGpuBlocksReplacesMemory) {
  EngineConfig engine = Engine("llama-3.1-8b");
  engine.num_gpu_blocks = 100;
  engine.max_model_len = 1024;
  KvPlan plan = Plan(Preset("llama-3.1-8b-layout"), engine, "new");
  EXPECT_EQ(plan.num_blocks, 100);
}

// Block ids are 32-bit: a pool of more blocks, from either field, is refused when planning, naming
// the field, instead of failing the pool's invariant (an abort) when the replay starts.
TEST(PlannerTest, MoreBlocksThanAPoolCanHoldIsAnError) {
  EngineConfig engine = Engine("llama-3.1-8b");
  engine.num_gpu_blocks = kMaxNumBlocks;
  auto fits = ResolveKvPlan(Preset("llama-3.1-8b-layout"), engine, "new");
  ASSERT_TRUE(fits.ok()) << fits.status();
  EXPECT_EQ(fits->num_blocks, kMaxNumBlocks);
  engine.num_gpu_blocks = kMaxNumBlocks + 1;
  auto over = ResolveKvPlan(Preset("llama-3.1-8b-layout"), engine, "new");
  ASSERT_EQ(over.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(over.status().message().find("num_gpu_blocks 2147483647 is more than the 2147483646"),
            std::string::npos)
      << over.status();
  engine.num_gpu_blocks.reset();
  engine.kv_cache_bytes = (kMaxNumBlocks + 1) * fits->bytes_per_block;
  over = ResolveKvPlan(Preset("llama-3.1-8b-layout"), engine, "new");
  ASSERT_EQ(over.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(over.status().message().find("kv_cache_bytes"), std::string::npos) << over.status();
}

// docs/semantics.md §1 / §6.4: vLLM applies num_gpu_blocks_override after its startup memory check,
// so a small block count is never refused (requests that cannot fit are skipped as does_not_fit).
TEST(PlannerTest, NumGpuBlocksSkipsTheStartupMemoryCheck) {
  EngineConfig engine = Engine("llama-3.1-8b");
  engine.num_gpu_blocks = 9;  // 8 usable blocks of 16 tokens < 4096 / 16
  engine.max_model_len = 4096;
  auto plan = ResolveKvPlan(Preset("llama-3.1-8b-layout"), engine, "new");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->num_blocks, 9);
  EXPECT_EQ(plan->blocks_per_max_len_request, 256);
  EXPECT_FALSE(plan->startup_check.performed);
  EXPECT_TRUE(plan->startup_check.ok);
  EXPECT_TRUE(CheckStartupMemory(*plan).ok());
}

// docs/semantics.md §1 / §2.3 / §6.4: with kv_cache_bytes the check runs (null block subtracted)
// and its failure is reported in the plan, not as a planning error; CheckStartupMemory turns it
// into vLLM's startup error naming both numbers and the two remedies.
TEST(PlannerTest, TooLittleMemoryForOneRequestFailsTheStartupCheck) {
  EngineConfig engine = Engine("llama-3.1-8b");
  const int64_t bytes_per_block = 32 * 16 * 4096;  // 32 layers x 16 tokens x 4096 B/token
  engine.kv_cache_bytes = 10 * bytes_per_block;    // 10 blocks, 9 usable = 144 tokens
  engine.max_model_len = 4096;
  auto plan = ResolveKvPlan(Preset("llama-3.1-8b-layout"), engine, "new");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->num_blocks, 10);
  EXPECT_TRUE(plan->startup_check.performed);
  EXPECT_FALSE(plan->startup_check.ok);
  EXPECT_EQ(plan->startup_check.max_fitting_model_len, 9 * 16);
  const absl::Status s = CheckStartupMemory(*plan);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  for (const char* part : {"max_model_len 4096", "256 blocks", "9 usable blocks",
                           "Raise kv_cache_bytes or lower max_model_len", "fits: 144"}) {
    EXPECT_NE(s.message().find(part), absl::string_view::npos) << part << ": " << s.message();
  }
  engine.kv_cache_bytes = 257 * bytes_per_block;  // exactly one request of 4096 tokens + null
  plan = ResolveKvPlan(Preset("llama-3.1-8b-layout"), engine, "new");
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->startup_check.ok);
  EXPECT_EQ(plan->startup_check.max_fitting_model_len, 4096);
}

TEST(PlannerTest, UnknownPolicyIsAnError) {
  auto plan = ResolveKvPlan(Preset("llama-3.1-8b-layout"), Engine("llama-3.1-8b"), "bogus");
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("old, new"), absl::string_view::npos);
}

TEST(PlannerTest, NoCommonKernelBlockIsAnError) {
  // §3.2: block 24 on FlashInfer (16, 32, 64): not accepted, and no declared size divides it.
  EngineConfig engine = Engine("llama-3.1-8b");
  engine.block_size = 24;
  engine.backends[LayerKind::kFullAttention] = *LookupBackend("FLASHINFER");
  auto plan = ResolveKvPlan(Preset("llama-3.1-8b-layout"), engine, "new");
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("no common block size"), absl::string_view::npos);
  // The error says which group's block it is, where it came from and what the backend runs.
  const std::string message(plan.status().message());
  EXPECT_NE(message.find("the full_attention layers' block of 24 tokens (policy new with primary "
                         "block size 24)"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("FLASHINFER runs kernel blocks of 16, 32, 64"), std::string::npos)
      << message;
}

TEST(PlannerTest, SharedSkipQuantPageIsTheSwaBudget) {
  // §5: with skip_page_size_padded both policies take the largest kernel block fitting the page.
  ModelSpec model = Preset("kimi-k3-like");
  EngineConfig engine = Engine("kimi-k3-dspark");
  engine.skip_page_size_padded = 40000;  // shared page: SWA picks 32 under both policies
  engine.backends[LayerKind::kSlidingWindow] =
      AttentionBackend{"ODD", {{16, false}, {32, false}}, 16};
  // 32 * 1024 = 32,768 padded to 40,000 bytes, which does not divide the MLA page, so unify pads
  // it and the 32-token block runs unsplit: valid.
  KvPlan plan = Plan(model, engine, "new");
  EXPECT_EQ(FirstOfKind(plan, LayerKind::kSlidingWindow)->block_size, 32);
  EXPECT_EQ(FirstOfKind(plan, LayerKind::kSlidingWindow)->kernel_block_size, 32);
  EXPECT_EQ(plan.scheduler_block_size, 1536);
}

}  // namespace
}  // namespace prefixsim
