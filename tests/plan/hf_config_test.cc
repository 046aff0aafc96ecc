// HuggingFace config.json import (issue 7). The configs in tests/data/hf/ carry the values of the
// public model cards (see tests/data/hf/README.md); expected bytes are computed here from the
// page formulas of docs/semantics.md §2 and the state shapes of vLLM's MambaStateShapeCalculator.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "prefixsim/model.h"

namespace prefixsim {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::string ReadData(const std::string& name) {
  const std::string path = std::string(PREFIXSIM_SOURCE_DIR) + "/tests/data/hf/" + name + ".json";
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

ModelSpec Import(const std::string& name, ModelLoadOptions options = {}) {
  absl::StatusOr<ModelSpec> model = ImportHfConfig(ReadData(name), name + ".json", options);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *model : ModelSpec{};
}

absl::Status ImportError(const std::string& text, ModelLoadOptions options = {}) {
  return ImportHfConfig(text, "cfg.json", options).status();
}

std::string ErrorText(const std::string& text) { return std::string(ImportError(text).message()); }

int DtypeBytes(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kFp8:
      return 1;
    case KvDtype::kFp32:
      return 4;
    default:
      return 2;
  }
}

// docs/semantics.md §2.1, written out here because LayerSpec::BytesPerToken lives in the lead's
// file.
int64_t KvBytesPerToken(const LayerSpec& layer) {
  if (layer.kind == LayerKind::kMla) {
    return int64_t{layer.kv_lora_rank + layer.qk_rope_head_dim} * DtypeBytes(layer.kv_dtype);
  }
  const int v = layer.head_size_v > 0 ? layer.head_size_v : layer.head_size;
  return int64_t{layer.num_kv_heads} * (layer.head_size + v) * DtypeBytes(layer.kv_dtype);
}

int TotalLayers(const ModelSpec& model, bool drafter) {
  int n = 0;
  for (const LayerSpec& layer : model.layers) {
    if (layer.drafter == drafter) n += layer.count;
  }
  return n;
}

// Expects exactly one entry of `kind` (with the given drafter flag) and returns it.
LayerSpec Entry(const ModelSpec& model, LayerKind kind, bool drafter = false) {
  const LayerSpec* found = nullptr;
  for (const LayerSpec& layer : model.layers) {
    if (layer.kind == kind && layer.drafter == drafter) {
      EXPECT_EQ(found, nullptr) << "more than one entry of that kind";
      found = &layer;
    }
  }
  EXPECT_NE(found, nullptr) << "no entry of that kind";
  return found != nullptr ? *found : LayerSpec{};
}

// ---- Dense GQA ---------------------------------------------------------------------------------

TEST(HfConfigTest, Llama31_8bIsFullAttentionGqa) {
  ModelSpec model = Import("llama-3.1-8b-instruct");
  EXPECT_EQ(model.name, "llama-3.1-8b-instruct");
  ASSERT_EQ(model.layers.size(), 1u);
  const LayerSpec& layer = model.layers[0];
  EXPECT_EQ(layer.kind, LayerKind::kFullAttention);
  EXPECT_EQ(layer.count, 32);
  EXPECT_EQ(layer.num_kv_heads, 8);
  EXPECT_EQ(layer.head_size, 128);  // hidden_size 4096 / 32 heads (no head_dim field)
  EXPECT_EQ(layer.kv_dtype, KvDtype::kBf16);
  EXPECT_FALSE(layer.drafter);
  EXPECT_EQ(KvBytesPerToken(layer), 8 * 256 * 2);  // 4096 B/token/layer
}

TEST(HfConfigTest, LlamaFamilySizes) {
  EXPECT_EQ(Import("llama-3.1-70b-instruct").layers[0].count, 80);
  EXPECT_EQ(KvBytesPerToken(Import("llama-3.1-70b-instruct").layers[0]), 4096);
  EXPECT_EQ(Import("llama-3.1-405b-instruct").layers[0].count, 126);
  EXPECT_EQ(Import("llama-3.1-405b-instruct").layers[0].head_size, 128);
}

TEST(HfConfigTest, TensorParallelDividesKvHeadsAndReplicatesBeyondThem) {
  ModelLoadOptions tp2;
  tp2.tensor_parallel_size = 2;
  EXPECT_EQ(Import("llama-3.1-8b-instruct", tp2).layers[0].num_kv_heads, 4);
  EXPECT_EQ(KvBytesPerToken(Import("llama-3.1-8b-instruct", tp2).layers[0]), 2048);
  ModelLoadOptions tp16;
  tp16.tensor_parallel_size = 16;  // 8 KV heads over 16 ranks: replicated, one per rank
  EXPECT_EQ(Import("llama-3.1-8b-instruct", tp16).layers[0].num_kv_heads, 1);
}

TEST(HfConfigTest, TensorParallelThatSplitsNoHeadsEvenlyIsAnError) {
  ModelLoadOptions tp3;
  tp3.tensor_parallel_size = 3;
  absl::Status status =
      ImportHfConfig(ReadData("llama-3.1-8b-instruct"), "llama.json", tp3).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              AllOf(HasSubstr("llama.json"), HasSubstr("'num_key_value_heads'"),
                    HasSubstr("tensor_parallel_size 3")));
  ModelLoadOptions tp0;
  tp0.tensor_parallel_size = 0;
  EXPECT_THAT(
      std::string(
          ImportHfConfig(ReadData("llama-3.1-8b-instruct"), "llama.json", tp0).status().message()),
      HasSubstr("tensor_parallel_size must be at least 1"));
}

TEST(HfConfigTest, KvDtypeComesFromOptions) {
  ModelLoadOptions fp8;
  fp8.kv_dtype = KvDtype::kFp8;
  const LayerSpec layer = Import("llama-3.1-8b-instruct", fp8).layers[0];
  EXPECT_EQ(layer.kv_dtype, KvDtype::kFp8);
  EXPECT_EQ(KvBytesPerToken(layer), 2048);
}

TEST(HfConfigTest, Float16CheckpointDefaultsToFp16KvAndFloat32ToBf16) {
  EXPECT_EQ(Import("gemma-2-9b").layers[0].kv_dtype, KvDtype::kBf16);  // torch_dtype float32
  absl::StatusOr<ModelSpec> model = ImportHfConfig(
      R"({"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4,
          "hidden_size": 256, "torch_dtype": "float16"})",
      "f16.json", {});
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->layers[0].kv_dtype, KvDtype::kFp16);
  EXPECT_EQ(model->layers[0].num_kv_heads, 4);  // num_key_value_heads defaults to the heads
  EXPECT_EQ(model->layers[0].head_size, 64);
}

TEST(HfConfigTest, CheckpointKvCacheSchemeMakesTheKvFp8UnlessOptionsSayOtherwise) {
  const std::string text =
      R"({"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 32,
          "num_key_value_heads": 8, "hidden_size": 4096,
          "quantization_config": {"quant_method": "compressed-tensors",
            "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "tensor"}}})";
  absl::StatusOr<ModelSpec> model = ImportHfConfig(text, "fp8kv.json", {});
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->layers[0].kv_dtype, KvDtype::kFp8);
  ModelLoadOptions bf16;
  bf16.kv_dtype = KvDtype::kBf16;
  model = ImportHfConfig(text, "fp8kv.json", bf16);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->layers[0].kv_dtype, KvDtype::kBf16);
}

TEST(HfConfigTest, MistralV03IsFullAndV01SlidesOnEveryLayer) {
  ModelSpec v3 = Import("mistral-7b-instruct-v0.3");  // "sliding_window": null
  ASSERT_EQ(v3.layers.size(), 1u);
  EXPECT_EQ(v3.layers[0].kind, LayerKind::kFullAttention);
  EXPECT_EQ(v3.layers[0].count, 32);
  ModelSpec v1 = Import("mistral-7b-v0.1");  // model-level window 4096
  ASSERT_EQ(v1.layers.size(), 1u);
  EXPECT_EQ(v1.layers[0].kind, LayerKind::kSlidingWindow);
  EXPECT_EQ(v1.layers[0].count, 32);
  EXPECT_EQ(v1.layers[0].sliding_window, 4096);
  EXPECT_EQ(KvBytesPerToken(v1.layers[0]), 4096);
}

TEST(HfConfigTest, QwenDenseIgnoresDisabledSlidingWindow) {
  ModelSpec q25 = Import("qwen2.5-7b-instruct");  // sliding_window 131072, use_sliding_window false
  ASSERT_EQ(q25.layers.size(), 1u);
  EXPECT_EQ(q25.layers[0].kind, LayerKind::kFullAttention);
  EXPECT_EQ(q25.layers[0].count, 28);
  EXPECT_EQ(q25.layers[0].num_kv_heads, 4);
  EXPECT_EQ(q25.layers[0].head_size, 128);  // 3584 / 28
  EXPECT_EQ(KvBytesPerToken(q25.layers[0]), 2048);
  ModelSpec q3 = Import("qwen3-8b");
  EXPECT_EQ(q3.layers[0].count, 36);
  EXPECT_EQ(KvBytesPerToken(q3.layers[0]), 4096);
  ModelSpec moe = Import("qwen3-235b-a22b");
  EXPECT_EQ(moe.layers[0].count, 94);
  EXPECT_EQ(KvBytesPerToken(moe.layers[0]), 4 * 256 * 2);
  EXPECT_EQ(Import("qwen3-30b-a3b").layers[0].count, 48);
  EXPECT_EQ(Import("qwen2.5-72b-instruct").layers[0].count, 80);
  EXPECT_EQ(Import("qwen3-32b").layers[0].count, 64);
}

TEST(HfConfigTest, PartialSlidingWindowIsRejectedLikeVllm) {
  absl::Status status = ImportError(
      R"({"model_type": "qwen2", "num_hidden_layers": 28, "num_attention_heads": 28,
          "num_key_value_heads": 4, "hidden_size": 3584, "use_sliding_window": true,
          "sliding_window": 4096, "max_window_layers": 21})");
  EXPECT_THAT(std::string(status.message()),
              AllOf(HasSubstr("'max_window_layers'"), HasSubstr("only some layers")));
}

// ---- gpt-oss and Gemma: sliding and full layers ------------------------------------------------

TEST(HfConfigTest, GptOss20bAlternatesSlidingAndFull) {
  ModelSpec model = Import("gpt-oss-20b");
  ASSERT_EQ(model.layers.size(), 2u);
  const LayerSpec swa = Entry(model, LayerKind::kSlidingWindow);
  const LayerSpec full = Entry(model, LayerKind::kFullAttention);
  EXPECT_EQ(swa.count, 12);
  EXPECT_EQ(full.count, 12);
  EXPECT_EQ(swa.sliding_window, 128);
  EXPECT_EQ(swa.num_kv_heads, 8);
  EXPECT_EQ(swa.head_size, 64);
  // docs/semantics.md §13.C: 2048 B/token for both kinds.
  EXPECT_EQ(KvBytesPerToken(swa), 2048);
  EXPECT_EQ(KvBytesPerToken(full), 2048);
  EXPECT_EQ(model.layers[0].kind, LayerKind::kSlidingWindow);  // layer 0 slides
}

TEST(HfConfigTest, GptOss120bHas36Layers) {
  ModelSpec model = Import("gpt-oss-120b");
  EXPECT_EQ(Entry(model, LayerKind::kSlidingWindow).count, 18);
  EXPECT_EQ(Entry(model, LayerKind::kFullAttention).count, 18);
}

TEST(HfConfigTest, GptOssWithoutLayerTypesSlidesOnEvenLayers) {
  absl::StatusOr<ModelSpec> model = ImportHfConfig(
      R"({"model_type": "gpt_oss", "num_hidden_layers": 3, "num_attention_heads": 64,
          "num_key_value_heads": 8, "head_dim": 64, "sliding_window": 128})",
      "g.json", {});
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(Entry(*model, LayerKind::kSlidingWindow).count, 2);
  EXPECT_EQ(Entry(*model, LayerKind::kFullAttention).count, 1);
}

TEST(HfConfigTest, Gemma2InterleavesLocalAndGlobal) {
  ModelSpec model = Import("gemma-2-9b");
  const LayerSpec swa = Entry(model, LayerKind::kSlidingWindow);
  const LayerSpec full = Entry(model, LayerKind::kFullAttention);
  EXPECT_EQ(swa.count, 21);
  EXPECT_EQ(full.count, 21);
  EXPECT_EQ(swa.sliding_window, 4096);
  EXPECT_EQ(KvBytesPerToken(swa), 8 * 512 * 2);
  EXPECT_EQ(KvBytesPerToken(full), 8192);
  ModelSpec big = Import("gemma-2-27b");
  EXPECT_EQ(Entry(big, LayerKind::kSlidingWindow).count, 23);
  EXPECT_EQ(KvBytesPerToken(Entry(big, LayerKind::kFullAttention)), 16 * 256 * 2);
}

TEST(HfConfigTest, Gemma3NestedTextConfigFiveLocalToOneGlobal) {
  ModelSpec model = Import("gemma-3-27b-it");
  const LayerSpec swa = Entry(model, LayerKind::kSlidingWindow);
  const LayerSpec full = Entry(model, LayerKind::kFullAttention);
  EXPECT_EQ(full.count, 10);  // layers 5, 11, ..., 59
  EXPECT_EQ(swa.count, 52);
  EXPECT_EQ(swa.sliding_window, 1024);
  EXPECT_EQ(swa.num_kv_heads, 16);
  EXPECT_EQ(swa.head_size, 128);
  EXPECT_EQ(KvBytesPerToken(swa), 8192);  // docs/semantics.md §13.C: same bytes for both kinds
  EXPECT_EQ(KvBytesPerToken(full), 8192);
  ModelSpec m12 = Import("gemma-3-12b-it");  // no head_dim: Gemma3TextConfig's 256
  EXPECT_EQ(Entry(m12, LayerKind::kFullAttention).count, 8);
  EXPECT_EQ(Entry(m12, LayerKind::kSlidingWindow).count, 40);
  EXPECT_EQ(Entry(m12, LayerKind::kSlidingWindow).head_size, 256);
  EXPECT_EQ(KvBytesPerToken(Entry(m12, LayerKind::kSlidingWindow)), 8192);
}

TEST(HfConfigTest, Gemma3UsesClassDefaultsForOmittedHeads) {
  ModelSpec model = Import("gemma-3-4b-it");  // names neither head count nor head_dim
  const LayerSpec swa = Entry(model, LayerKind::kSlidingWindow);
  EXPECT_EQ(swa.num_kv_heads, 4);
  EXPECT_EQ(swa.head_size, 256);
  EXPECT_EQ(swa.count, 29);  // 34 layers, global at 5, 11, 17, 23, 29
  EXPECT_EQ(Entry(model, LayerKind::kFullAttention).count, 5);
  EXPECT_EQ(KvBytesPerToken(swa), 4096);
}

TEST(HfConfigTest, Gemma3LayerTypesWinOverThePattern) {
  absl::StatusOr<ModelSpec> model = ImportHfConfig(
      R"({"model_type": "gemma3_text", "num_hidden_layers": 4, "num_attention_heads": 4,
          "num_key_value_heads": 1, "head_dim": 256, "sliding_window": 512,
          "layer_types": ["sliding_attention", "full_attention", "full_attention",
                          "sliding_attention"]})",
      "g3.json", {});
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(Entry(*model, LayerKind::kSlidingWindow).count, 2);
  EXPECT_EQ(Entry(*model, LayerKind::kSlidingWindow).sliding_window, 512);
  EXPECT_EQ(Entry(*model, LayerKind::kFullAttention).count, 2);
}

// ---- Llama 4: chunked local attention ----------------------------------------------------------

TEST(HfConfigTest, Llama4ScoutChunkedLocalWithNopeGlobalLayers) {
  ModelSpec model = Import("llama-4-scout-17b-16e-instruct");
  const LayerSpec chunked = Entry(model, LayerKind::kChunkedLocal);
  const LayerSpec full = Entry(model, LayerKind::kFullAttention);
  EXPECT_EQ(chunked.count, 36);
  EXPECT_EQ(full.count, 12);  // every fourth layer is NoPE global attention
  EXPECT_EQ(chunked.attention_chunk_size, 8192);
  EXPECT_EQ(chunked.num_kv_heads, 8);
  EXPECT_EQ(chunked.head_size, 128);
  EXPECT_EQ(KvBytesPerToken(chunked), 4096);
  EXPECT_EQ(KvBytesPerToken(full), 4096);
  ModelSpec maverick = Import("llama-4-maverick-17b-128e-instruct");
  EXPECT_EQ(Entry(maverick, LayerKind::kChunkedLocal).count, 36);
}

TEST(HfConfigTest, Llama4ExplicitNoRopeLayers) {
  absl::StatusOr<ModelSpec> model = ImportHfConfig(
      R"({"model_type": "llama4_text", "num_hidden_layers": 4, "num_attention_heads": 40,
          "num_key_value_heads": 8, "head_dim": 128, "attention_chunk_size": 8192,
          "no_rope_layers": [1, 0, 0, 1]})",
      "l4.json", {});
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(Entry(*model, LayerKind::kChunkedLocal).count, 2);
  EXPECT_EQ(Entry(*model, LayerKind::kFullAttention).count, 2);
  EXPECT_THAT(ErrorText(R"({"model_type": "llama4_text", "num_hidden_layers": 4,
                              "num_attention_heads": 40, "num_key_value_heads": 8,
                              "head_dim": 128, "attention_chunk_size": 8192,
                              "no_rope_layers": [1, 0]})"),
              AllOf(HasSubstr("'no_rope_layers'"), HasSubstr("expected 4")));
}

// ---- MLA ---------------------------------------------------------------------------------------

TEST(HfConfigTest, DeepseekV3MlaWithMtpDrafterLayer) {
  ModelSpec model = Import("deepseek-v3");
  ASSERT_EQ(model.layers.size(), 2u);
  const LayerSpec target = Entry(model, LayerKind::kMla);
  const LayerSpec mtp = Entry(model, LayerKind::kMla, /*drafter=*/true);
  EXPECT_EQ(target.count, 61);
  EXPECT_EQ(target.kv_lora_rank, 512);
  EXPECT_EQ(target.qk_rope_head_dim, 64);
  EXPECT_EQ(KvBytesPerToken(target), 1152);  // docs/semantics.md §2.1: 576-dim latent in bf16
  EXPECT_EQ(mtp.count, 1);
  EXPECT_EQ(KvBytesPerToken(mtp), 1152);
  EXPECT_TRUE(model.layers[1].drafter);  // drafters come after the target layers
}

TEST(HfConfigTest, MlaIsNotSplitByTensorParallel) {
  ModelLoadOptions tp8;
  tp8.tensor_parallel_size = 8;
  tp8.kv_dtype = KvDtype::kFp8;
  const LayerSpec layer = Entry(Import("deepseek-v3", tp8), LayerKind::kMla);
  EXPECT_EQ(layer.kv_lora_rank, 512);
  EXPECT_EQ(KvBytesPerToken(layer), 576);
}

TEST(HfConfigTest, KimiK2IsMlaWithoutMtp) {
  ModelSpec model = Import("kimi-k2-instruct");
  ASSERT_EQ(model.layers.size(), 1u);
  EXPECT_EQ(model.layers[0].kind, LayerKind::kMla);
  EXPECT_EQ(model.layers[0].count, 61);
  EXPECT_EQ(TotalLayers(model, /*drafter=*/true), 0);
  EXPECT_EQ(KvBytesPerToken(model.layers[0]), 1152);
}

TEST(HfConfigTest, KimiK25WrapperNestsAKimiK2TextConfig) {
  absl::StatusOr<ModelSpec> model = ImportHfConfig(
      R"({"model_type": "kimi_k25", "vision_config": {"vt_num_hidden_layers": 27},
          "text_config": {"model_type": "kimi_k2", "architectures": ["DeepseekV3ForCausalLM"],
            "num_hidden_layers": 61, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
            "num_nextn_predict_layers": 0}})",
      "k25.json", {});
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_EQ(model->layers.size(), 1u);
  EXPECT_EQ(model->layers[0].kind, LayerKind::kMla);
  EXPECT_EQ(model->layers[0].count, 61);
}

TEST(HfConfigTest, MlaMissingLatentRankNamesTheField) {
  absl::Status status = ImportError(
      R"({"model_type": "deepseek_v3", "num_hidden_layers": 61, "qk_rope_head_dim": 64})");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(status.message()), "cfg.json:1: field 'kv_lora_rank': missing");
}

// ---- Linear-attention hybrids ------------------------------------------------------------------

// vLLM's gated_delta_net_state_shape, bf16 conv and recurrent states.
int64_t GdnStateBytes(int tp) {
  const int64_t conv_dim = (2 * 16 * 128 + 32 * 128) / tp;
  return 3 * conv_dim * 2 + (32 / tp) * 128 * 128 * 2;
}

TEST(HfConfigTest, Qwen3NextGatedDeltaNetStateAndFullAttention) {
  ModelSpec model = Import("qwen3-next-80b-a3b-instruct");
  const LayerSpec full = Entry(model, LayerKind::kFullAttention);
  const LayerSpec gdn = Entry(model, LayerKind::kMamba);
  const LayerSpec mtp = Entry(model, LayerKind::kFullAttention, /*drafter=*/true);
  EXPECT_EQ(full.count, 12);  // full_attention_interval 4
  EXPECT_EQ(gdn.count, 36);
  EXPECT_EQ(full.num_kv_heads, 2);
  EXPECT_EQ(full.head_size, 256);
  EXPECT_EQ(KvBytesPerToken(full), 2048);
  EXPECT_EQ(gdn.state_bytes, GdnStateBytes(1));
  EXPECT_EQ(gdn.state_bytes, 1097728);  // 49,152 conv + 1,048,576 recurrent
  EXPECT_EQ(mtp.count, 1);
  EXPECT_EQ(KvBytesPerToken(mtp), 2048);
  // docs/semantics.md §4 cross-check: 16 × cdiv(1,097,728, 16 × 2048) = 544-token blocks on CUDA.
  EXPECT_EQ(16 * ((gdn.state_bytes + 16 * 2048 - 1) / (16 * 2048)), 544);
}

TEST(HfConfigTest, Qwen3NextStateSplitsOverTensorParallel) {
  for (int tp : {2, 4, 8}) {
    ModelLoadOptions options;
    options.tensor_parallel_size = tp;
    ModelSpec model = Import("qwen3-next-80b-a3b-instruct", options);
    EXPECT_EQ(Entry(model, LayerKind::kMamba).state_bytes, GdnStateBytes(tp)) << tp;
    EXPECT_EQ(Entry(model, LayerKind::kFullAttention).num_kv_heads, 1) << tp;  // 2 heads
  }
}

TEST(HfConfigTest, Qwen35LayerTypesAndFloat32SsmState) {
  // The Qwen3.5-9B text config (nested, layer_types, mamba_ssm_dtype float32).
  absl::StatusOr<ModelSpec> model = ImportHfConfig(
      R"({"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5",
          "text_config": {"model_type": "qwen3_5_text", "num_hidden_layers": 8,
            "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 256,
            "layer_types": ["linear_attention", "linear_attention", "linear_attention",
                            "full_attention", "linear_attention", "linear_attention",
                            "linear_attention", "full_attention"],
            "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_num_key_heads": 16,
            "linear_num_value_heads": 32, "linear_value_head_dim": 128,
            "mamba_ssm_dtype": "float32", "mtp_num_hidden_layers": 1}})",
      "q35.json", {});
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(Entry(*model, LayerKind::kMamba).count, 6);
  EXPECT_EQ(Entry(*model, LayerKind::kMamba).state_bytes, 3 * 8192 * 2 + 32 * 128 * 128 * 4);
  EXPECT_EQ(Entry(*model, LayerKind::kFullAttention).count, 2);
  EXPECT_EQ(Entry(*model, LayerKind::kFullAttention, true).count, 1);
}

// vLLM's kda_state_shape: conv of 3·heads·dim channels in bf16, recurrent state in float32.
int64_t KdaStateBytes(int tp) { return 3 * (3 * 32 * 128 / tp) * 2 + (32 / tp) * 128 * 128 * 4; }

TEST(HfConfigTest, KimiLinearKdaAndMlaLayers) {
  ModelSpec model = Import("kimi-linear-48b-a3b-instruct");
  const LayerSpec mla = Entry(model, LayerKind::kMla);
  const LayerSpec kda = Entry(model, LayerKind::kMamba);
  EXPECT_EQ(mla.count, 7);
  EXPECT_EQ(kda.count, 20);
  EXPECT_EQ(KvBytesPerToken(mla), 1152);
  EXPECT_EQ(kda.state_bytes, KdaStateBytes(1));
  EXPECT_EQ(kda.state_bytes, 2170880);  // 73,728 conv + 2,097,152 recurrent
  EXPECT_EQ(TotalLayers(model, /*drafter=*/true), 0);
  EXPECT_EQ(model.layers[0].kind, LayerKind::kMamba);  // layer 1 is KDA
  ModelLoadOptions tp4;
  tp4.tensor_parallel_size = 4;
  ModelSpec split = Import("kimi-linear-48b-a3b-instruct", tp4);
  EXPECT_EQ(Entry(split, LayerKind::kMamba).state_bytes, KdaStateBytes(4));
  EXPECT_EQ(KvBytesPerToken(Entry(split, LayerKind::kMla)), 1152);
}

TEST(HfConfigTest, KimiLinearLayerListsMustCoverEveryLayerOnce) {
  EXPECT_THAT(ErrorText(R"({"model_type": "kimi_linear", "num_hidden_layers": 3,
                              "kv_lora_rank": 512, "qk_rope_head_dim": 64,
                              "linear_attn_config": {"num_heads": 32, "head_dim": 128,
                                "short_conv_kernel_size": 4, "full_attn_layers": [3],
                                "kda_layers": [1]}})"),
              AllOf(HasSubstr("'linear_attn_config.full_attn_layers'"),
                    HasSubstr("layer 2 (1-based) is in neither")));
  EXPECT_EQ(ErrorText(R"({"model_type": "kimi_linear", "num_hidden_layers": 3,
                            "linear_attn_config": {"head_dim": 128}})"),
            "cfg.json:2: field 'linear_attn_config.num_heads': missing");
  EXPECT_EQ(ErrorText(R"({"model_type": "kimi_linear", "num_hidden_layers": 3})"),
            "cfg.json:1: field 'linear_attn_config': missing");
}

TEST(HfConfigTest, LinearAttentionHeadsMustSplitOverTensorParallel) {
  ModelLoadOptions tp3;
  tp3.tensor_parallel_size = 3;
  absl::Status status =
      ImportHfConfig(ReadData("kimi-linear-48b-a3b-instruct"), "k.json", tp3).status();
  EXPECT_THAT(std::string(status.message()),
              AllOf(HasSubstr("'linear_attn_config.num_heads'"),
                    HasSubstr("not divisible by tensor_parallel_size 3")));
}

// ---- Errors ------------------------------------------------------------------------------------

TEST(HfConfigTest, UnknownArchitectureListsTheSupportedOnes) {
  absl::Status status =
      ImportError(R"({"model_type": "falcon", "architectures": ["FalconForCausalLM"]})");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              AllOf(HasSubstr("cfg.json: unsupported HuggingFace architecture"),
                    HasSubstr("model_type 'falcon'"), HasSubstr("FalconForCausalLM"),
                    HasSubstr("llama"), HasSubstr("gpt_oss"), HasSubstr("gemma3"),
                    HasSubstr("llama4"), HasSubstr("deepseek_v3"), HasSubstr("kimi_k2"),
                    HasSubstr("qwen3_next"), HasSubstr("kimi_linear")));
}

TEST(HfConfigTest, ArchitecturesSelectTheFamilyWhenModelTypeIsUnknown) {
  absl::StatusOr<ModelSpec> model = ImportHfConfig(
      R"({"model_type": "my_finetune", "architectures": ["DeepseekV3ForCausalLM"],
          "num_hidden_layers": 2, "kv_lora_rank": 512, "qk_rope_head_dim": 64})",
      "ft.json", {});
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->layers[0].kind, LayerKind::kMla);
}

TEST(HfConfigTest, MissingFieldsNameThemselves) {
  EXPECT_EQ(ErrorText(R"({"model_type": "llama", "num_attention_heads": 32})"),
            "cfg.json:1: field 'num_hidden_layers': missing");
  EXPECT_EQ(ErrorText(R"({"model_type": "llama", "num_hidden_layers": 2})"),
            "cfg.json:1: field 'num_key_value_heads': missing (and no 'num_attention_heads' to "
            "default to)");
  EXPECT_THAT(ErrorText(R"({"model_type": "llama", "num_hidden_layers": 2,
                              "num_key_value_heads": 8, "num_attention_heads": 32})"),
              HasSubstr("field 'head_dim': missing"));
  EXPECT_EQ(ErrorText(R"({"model_type": "gpt_oss", "num_hidden_layers": 2,
                            "num_attention_heads": 64, "num_key_value_heads": 8,
                            "head_dim": 64})"),
            "cfg.json:1: field 'sliding_window': missing");
  EXPECT_EQ(ErrorText(R"({"model_type": "qwen3_next", "num_hidden_layers": 4,
                            "num_attention_heads": 16, "num_key_value_heads": 2,
                            "head_dim": 256})"),
            "cfg.json:1: field 'linear_num_key_heads': missing");
  // Nested text_config fields carry their path.
  EXPECT_EQ(ErrorText(R"({"model_type": "llama4", "text_config": {"model_type": "llama4_text",
                            "num_attention_heads": 40}})"),
            "cfg.json:1: field 'text_config.num_hidden_layers': missing");
}

TEST(HfConfigTest, WrongTypesAndBadValuesAreErrors) {
  EXPECT_EQ(ErrorText(R"({"model_type": "llama", "num_hidden_layers": "32"})"),
            "cfg.json:1: field 'num_hidden_layers': must be an integer, got \"32\"");
  EXPECT_EQ(ErrorText(R"({"model_type": "llama", "num_hidden_layers": 0})"),
            "cfg.json:1: field 'num_hidden_layers': must be >= 1, got 0");
  EXPECT_THAT(ErrorText(R"({"model_type": "gpt_oss", "num_hidden_layers": 2,
                              "num_key_value_heads": 8, "head_dim": 64, "sliding_window": 128,
                              "layer_types": ["sliding_attention"]})"),
              AllOf(HasSubstr("'layer_types'"), HasSubstr("has 1 entries, expected 2")));
  EXPECT_THAT(ErrorText(R"({"model_type": "gpt_oss", "num_hidden_layers": 1,
                              "num_key_value_heads": 8, "head_dim": 64,
                              "layer_types": ["cross_attention"]})"),
              HasSubstr("unsupported layer type 'cross_attention'"));
  EXPECT_THAT(ErrorText(R"({"model_type": "qwen3_next", "num_hidden_layers": 4,
                              "num_key_value_heads": 2, "head_dim": 256,
                              "linear_num_key_heads": 16, "linear_num_value_heads": 32,
                              "linear_key_head_dim": 128, "linear_value_head_dim": 128,
                              "linear_conv_kernel_dim": 4, "full_attention_interval": 4,
                              "mamba_ssm_dtype": "int4"})"),
              HasSubstr("field 'mamba_ssm_dtype': unknown dtype 'int4'"));
}

TEST(HfConfigTest, ErrorsNameTheLineOfTheField) {
  std::string text = ReadData("gemma-2-9b");
  const std::string field = "\"sliding_window\": 4096";
  text.replace(text.find(field), field.size(), "\"sliding_window\": \"4k\"");
  EXPECT_EQ(std::string(ImportHfConfig(text, "gemma-2-9b.json", {}).status().message()),
            "gemma-2-9b.json:27: field 'sliding_window': must be an integer, got \"4k\"");
}

TEST(HfConfigTest, MalformedJsonIsAnError) {
  EXPECT_THAT(ErrorText("{\"model_type\": "), HasSubstr("cfg.json:1: invalid JSON"));
  EXPECT_THAT(ErrorText("[1, 2]"), HasSubstr("must be a JSON object"));
}

TEST(HfConfigTest, LooksLikeHfConfig) {
  EXPECT_TRUE(LooksLikeHfConfig(ReadData("llama-3.1-8b-instruct")));
  EXPECT_TRUE(LooksLikeHfConfig(R"({"architectures": ["LlamaForCausalLM"]})"));
  EXPECT_FALSE(LooksLikeHfConfig(R"({"name": "x", "layers": [{"kind": "mla"}]})"));
  EXPECT_FALSE(LooksLikeHfConfig(R"({"name": "x", "notes": "\"model_type\" is HF's"})"));
  EXPECT_FALSE(LooksLikeHfConfig("not json"));
}

}  // namespace
}  // namespace prefixsim
