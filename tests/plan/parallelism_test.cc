// tensor_parallel_size and kv_cache_dtype on native models and HF configs (issue 26;
// docs/planner.md). Expected numbers come from the page formulas of docs/semantics.md §2.1
// (page = B·H·(Dk+Dv)·s per layer, MLA B·(kv_lora_rank+rope)·s), vLLM's per-rank KV heads
// max(1, total / tp) (ModelConfig.get_num_kv_heads, MLA: the latent on every rank) and §6.4
// (num_blocks = kv_cache_bytes // bytes_per_block, kv_cache_bytes per GPU).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "prefixsim/engine_config.h"
#include "prefixsim/kv_plan.h"
#include "prefixsim/model.h"
#include "sim/util/status_macros.h"

namespace prefixsim {
namespace {

using ::testing::HasSubstr;

struct Loaded {
  ModelSpec model;
  EngineConfig engine;
  KvPlan plan;
};

// What `prefixsim resolve` does: the engine first, then the model with the engine's TP and dtype.
absl::StatusOr<Loaded> Resolve(std::string_view model, std::string_view engine, int tp,
                               std::optional<KvDtype> dtype = {}, std::string_view policy = "new") {
  Loaded out;
  PREFIXSIM_ASSIGN_OR_RETURN(out.engine, LoadEngine(engine));
  out.engine.tensor_parallel_size = tp;
  out.engine.kv_cache_dtype = dtype;
  ModelLoadOptions options;
  options.tensor_parallel_size = tp;
  options.kv_dtype = dtype;
  PREFIXSIM_ASSIGN_OR_RETURN(out.model, LoadModel(model, options));
  PREFIXSIM_ASSIGN_OR_RETURN(out.plan, ResolveKvPlan(out.model, out.engine, policy));
  return out;
}

std::string WriteTemp(const std::string& name, const std::string& text) {
  auto dir = std::filesystem::temp_directory_path() / "prefixsim_parallelism_test";
  std::filesystem::create_directories(dir);
  auto path = dir / name;
  std::ofstream(path) << text;
  return path.string();
}

constexpr int64_t kLlamaKvBytes = int64_t{40} << 30;  // engine preset llama-3.1-8b

// Llama-3.1-8B: 32 layers, 8 KV heads of 128, bf16, FLASH_ATTN block 16, one group.
TEST(ParallelismTest, LlamaPagesShrinkWithTpUntilOneHeadPerRank) {
  struct Case {
    int tp;
    int64_t heads_per_rank;
  };
  for (const Case& c : {Case{1, 8}, Case{2, 4}, Case{8, 1}, Case{16, 1}}) {
    SCOPED_TRACE(c.tp);
    auto r = Resolve("llama-3.1-8b", "llama-3.1-8b", c.tp);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->plan.groups.size(), 1u);
    const int64_t page = 16 * c.heads_per_rank * (128 + 128) * 2;
    EXPECT_EQ(r->plan.groups[0].page_bytes, page);
    EXPECT_EQ(r->plan.bytes_per_block, 32 * page);
    EXPECT_EQ(r->plan.num_blocks, kLlamaKvBytes / (32 * page));
    EXPECT_EQ(r->model.layers[0].num_kv_heads, c.heads_per_rank);
  }
  // The issue's numbers: TP 1 gives 65,536-byte pages and 20,480 blocks, TP 8 one eighth.
  auto tp1 = Resolve("llama-3.1-8b", "llama-3.1-8b", 1);
  auto tp8 = Resolve("llama-3.1-8b", "llama-3.1-8b", 8);
  ASSERT_TRUE(tp1.ok() && tp8.ok());
  EXPECT_EQ(tp1->plan.groups[0].page_bytes, 65536);
  EXPECT_EQ(tp1->plan.num_blocks, 20480);
  EXPECT_EQ(tp8->plan.groups[0].page_bytes, 8192);
  EXPECT_EQ(tp8->plan.num_blocks, 8 * 20480);
}

TEST(ParallelismTest, Fp8HalvesLlamaPagesAndAutoKeepsTheModelDtype) {
  auto fp8 = Resolve("llama-3.1-8b", "llama-3.1-8b", 1, KvDtype::kFp8);
  auto autod = Resolve("llama-3.1-8b", "llama-3.1-8b", 1);
  auto fp32 = Resolve("llama-3.1-8b", "llama-3.1-8b", 1, KvDtype::kFp32);
  ASSERT_TRUE(fp8.ok() && autod.ok() && fp32.ok());
  EXPECT_EQ(autod->plan.groups[0].page_bytes, 16 * 8 * 256 * 2);
  EXPECT_EQ(fp8->plan.groups[0].page_bytes, 16 * 8 * 256 * 1);
  EXPECT_EQ(fp32->plan.groups[0].page_bytes, 16 * 8 * 256 * 4);
  EXPECT_EQ(fp8->plan.num_blocks, kLlamaKvBytes / (32 * 16 * 8 * 256));
  EXPECT_EQ(fp8->plan.num_blocks, 2 * autod->plan.num_blocks);
}

// DeepSeek-V3: 61 MLA layers, latent 512 + 64 in bf16, FLASHMLA block 64 (h200 engine, 64 GiB).
TEST(ParallelismTest, MlaLatentIsReplicatedAtTp8) {
  auto tp8 = Resolve("deepseek-v3", "h200", 8);
  ASSERT_TRUE(tp8.ok()) << tp8.status();
  ASSERT_EQ(tp8->plan.groups.size(), 1u);
  const int64_t page = 64 * (512 + 64) * 2;
  EXPECT_EQ(tp8->plan.groups[0].page_bytes, page);
  EXPECT_EQ(tp8->plan.num_blocks, (int64_t{64} << 30) / (61 * page));
  // fp8 halves the latent (docs/semantics.md §2.1: 576 B/token).
  auto fp8 = Resolve("deepseek-v3", "h200", 8, KvDtype::kFp8);
  ASSERT_TRUE(fp8.ok()) << fp8.status();
  EXPECT_EQ(fp8->plan.groups[0].page_bytes, 64 * 576);
}

// Qwen3-Next: GDN states (vLLM's gated_delta_net_state_shape: conv (4-1)·(2·16·128 + 32·128)
// and recurrent 32·128·128, bf16) and 2 KV heads of 256 on the full-attention layers.
TEST(ParallelismTest, MambaHybridAtTp2SplitsStatesAndHeads) {
  auto r = Resolve("qwen3-next-80b-a3b", "h200", 2);
  ASSERT_TRUE(r.ok()) << r.status();
  const int64_t state_tp2 = 3 * (2 * 16 * 128 + 32 * 128) / 2 * 2 + 32 / 2 * 128 * 128 * 2;
  const LayerSpec* mamba = nullptr;
  const LayerSpec* full = nullptr;
  for (const LayerSpec& l : r->model.layers) {
    if (l.kind == LayerKind::kMamba) mamba = &l;
    if (l.kind == LayerKind::kFullAttention && !l.drafter) full = &l;
  }
  ASSERT_NE(mamba, nullptr);
  ASSERT_NE(full, nullptr);
  EXPECT_EQ(mamba->state_bytes, state_tp2);
  EXPECT_EQ(full->num_kv_heads, 1);
  // The preset gives no num_heads: the even split is printed as an assumption.
  EXPECT_THAT(r->plan.warnings, ::testing::Contains(HasSubstr("assumed to split evenly")));
  // docs/semantics.md §4: the attention block is raised until its page holds the state:
  // k · cdiv(state, k · per_token) with k = 16 and per_token = 1 · 512 · 2.
  const int64_t per_token = 1 * 512 * 2;
  const int64_t block = 16 * ((state_tp2 + 16 * per_token - 1) / (16 * per_token));
  EXPECT_EQ(r->plan.primary_block_size, block);
  for (const KvGroup& g : r->plan.groups) EXPECT_EQ(g.page_bytes, block * per_token);
}

TEST(ParallelismTest, MambaNumHeadsChecksTheSplit) {
  const std::string path = WriteTemp("mamba_heads.json", R"({"name": "m", "layers": [
    {"kind": "full_attention", "count": 2, "num_kv_heads": 4, "head_size": 128},
    {"kind": "mamba", "count": 2, "state_bytes": 3000000, "num_heads": 6}]})");
  ModelLoadOptions tp2;
  tp2.tensor_parallel_size = 2;
  auto ok = LoadModel(path, tp2);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->layers[1].state_bytes, 1500000);
  EXPECT_EQ(ok->layers[1].num_heads, 3);
  EXPECT_TRUE(ok->assumptions.empty());
  ModelLoadOptions tp4;
  tp4.tensor_parallel_size = 4;
  auto bad = LoadModel(path, tp4);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("layers[1].num_heads"));
  EXPECT_THAT(bad.status().message(), HasSubstr("6 state heads cannot be split"));
}

TEST(ParallelismTest, BytesPerTokenLayersRefuseWhatCannotBeApplied) {
  const std::string path = WriteTemp("bpt.json", R"({"name": "m", "layers": [
    {"kind": "mla", "count": 2, "bytes_per_token": 1152},
    {"kind": "sliding_window", "count": 2, "bytes_per_token": 1024, "kv_dtype": "fp8",
     "sliding_window": 4096}]})");
  ModelLoadOptions tp2;
  tp2.tensor_parallel_size = 2;
  auto by_tp = LoadModel(path, tp2);
  ASSERT_FALSE(by_tp.ok());
  EXPECT_THAT(by_tp.status().message(), HasSubstr("layers[1].bytes_per_token"));
  EXPECT_THAT(by_tp.status().message(), HasSubstr("tensor_parallel_size 2 cannot be applied"));
  ModelLoadOptions bf16;
  bf16.kv_dtype = KvDtype::kBf16;
  auto by_dtype = LoadModel(path, bf16);
  ASSERT_FALSE(by_dtype.ok());
  EXPECT_THAT(by_dtype.status().message(), HasSubstr("layers[1].bytes_per_token"));
  EXPECT_THAT(by_dtype.status().message(), HasSubstr("kv_cache_dtype bf16 cannot be applied"));
  // The MLA entry names no kv_dtype, so its bytes are for the default bf16: fp8 is refused.
  ModelLoadOptions fp8;
  fp8.kv_dtype = KvDtype::kFp8;
  auto mla_fp8 = LoadModel(path, fp8);
  ASSERT_FALSE(mla_fp8.ok());
  EXPECT_THAT(mla_fp8.status().message(), HasSubstr("layers[0].bytes_per_token"));
  // The latent is the same on every rank, and the dtype the bytes were given for changes
  // nothing: both are accepted.
  auto mla_only = WriteTemp("bpt_mla.json", R"({"name": "m", "layers": [
    {"kind": "mla", "count": 2, "bytes_per_token": 1152, "kv_dtype": "bf16"}]})");
  ModelLoadOptions tp8_bf16;
  tp8_bf16.tensor_parallel_size = 8;
  tp8_bf16.kv_dtype = KvDtype::kBf16;
  auto mla = LoadModel(mla_only, tp8_bf16);
  ASSERT_TRUE(mla.ok()) << mla.status();
  EXPECT_EQ(mla->layers[0].BytesPerToken(), 1152);
}

TEST(ParallelismTest, PerRankPresetIsRederivedWithAnAssumption) {
  // kimi-k3-like gives per-rank shapes at TP 4: 4 SWA heads of 128 in fp8, a 1,740,800-byte state.
  auto tp4 = Resolve("kimi-k3-like", "kimi-k3-dspark", 4);
  ASSERT_TRUE(tp4.ok()) << tp4.status();
  EXPECT_TRUE(tp4->model.assumptions.empty());
  auto tp8 = Resolve("kimi-k3-like", "kimi-k3-dspark", 8);
  ASSERT_TRUE(tp8.ok()) << tp8.status();
  for (const LayerSpec& l : tp8->model.layers) {
    if (l.kind == LayerKind::kSlidingWindow) {
      EXPECT_EQ(l.num_kv_heads, 4 * 4 / 8);
    } else if (l.kind == LayerKind::kMamba) {
      EXPECT_EQ(l.state_bytes, 1740800 * 4 / 8);
    } else {
      EXPECT_EQ(l.BytesPerToken(), 1152);
    }
  }
  EXPECT_THAT(tp8->plan.warnings,
              ::testing::Contains(HasSubstr("per rank at tensor_parallel_size 4")));
}

TEST(ParallelismTest, PlannerRefusesAModelLoadedForAnotherTpOrDtype) {
  auto model = LoadModel("llama-3.1-8b");
  auto engine = LoadEngine("llama-3.1-8b");
  ASSERT_TRUE(model.ok() && engine.ok());
  engine->tensor_parallel_size = 8;
  auto plan = ResolveKvPlan(*model, *engine, "new");
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(), HasSubstr("tensor_parallel_size 1 but the engine has 8"));
  engine->tensor_parallel_size = 1;
  engine->kv_cache_dtype = KvDtype::kFp8;
  plan = ResolveKvPlan(*model, *engine, "new");
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(), HasSubstr("kv_cache_dtype auto but the engine has fp8"));
}

TEST(ParallelismTest, TpThatNeitherDividesNorIsDividedIsRefused) {
  ModelLoadOptions tp3;
  tp3.tensor_parallel_size = 3;
  auto model = LoadModel("llama-3.1-8b", tp3);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("layers[0].num_kv_heads"));
  EXPECT_THAT(model.status().message(), HasSubstr("8 KV heads cannot be split"));
}

// HF's LlamaConfig defaults num_key_value_heads to num_attention_heads ("for backward
// compatibility") and head_dim to hidden_size / num_attention_heads; both are printed.
TEST(ParallelismTest, HfConfigWithoutKvHeadsUsesHfDefaultAndSaysSo) {
  const std::string path = WriteTemp("config.json", R"({"model_type": "llama",
    "architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2, "hidden_size": 8192,
    "num_attention_heads": 64, "torch_dtype": "bfloat16"})");
  ModelLoadOptions tp8;
  tp8.tensor_parallel_size = 8;
  auto model = LoadModel(path, tp8);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_EQ(model->layers.size(), 1u);
  EXPECT_EQ(model->layers[0].num_kv_heads, 64 / 8);
  EXPECT_EQ(model->layers[0].head_size, 8192 / 64);
  EXPECT_THAT(model->assumptions,
              ::testing::Contains(HasSubstr("'num_key_value_heads' missing: using "
                                            "num_attention_heads = 64")));
  EXPECT_THAT(model->assumptions, ::testing::Contains(HasSubstr("'head_dim' missing")));
  auto engine = LoadEngine("llama-3.1-8b");
  ASSERT_TRUE(engine.ok());
  engine->tensor_parallel_size = 8;
  auto plan = ResolveKvPlan(*model, *engine, "new");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(plan->warnings, ::testing::Contains(HasSubstr("num_key_value_heads")));
  // With the field given, nothing is assumed.
  const std::string full = WriteTemp("config_full.json", R"({"model_type": "llama",
    "num_hidden_layers": 2, "hidden_size": 8192, "num_attention_heads": 64,
    "num_key_value_heads": 8, "head_dim": 128})");
  auto given = LoadModel(full, tp8);
  ASSERT_TRUE(given.ok()) << given.status();
  EXPECT_TRUE(given->assumptions.empty());
  EXPECT_EQ(given->layers[0].num_kv_heads, 1);
}

}  // namespace
}  // namespace prefixsim
