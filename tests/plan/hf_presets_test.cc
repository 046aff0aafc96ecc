// The model presets in configs/models/ that come from HuggingFace configs are the converter's
// output for the configs in tests/data/hf/, plus their provenance. This test checks that every such
// preset matches a fresh conversion; run it with PREFIXSIM_WRITE_PRESETS=1 to (re)write them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "prefixsim/model.h"
#include "tests/cli_runner.h"

namespace prefixsim {
namespace {

using OrderedJson = nlohmann::ordered_json;

struct Preset {
  std::string name;     // configs/models/<name>.json
  std::string hf_file;  // tests/data/hf/<hf_file>.json
  std::string source;   // the public config it transcribes
  std::string notes;    // assumptions
};

constexpr char kCommon[] =
    " Shapes are for the whole model (TP=1); the KV dtype is bf16 (vLLM's 'auto', the model "
    "dtype). The engine's tensor_parallel_size and kv_cache_dtype (or --tensor-parallel-size / "
    "--kv-cache-dtype) derive the per-rank pages from them (docs/planner.md).";

std::string Hf(const std::string& repo) {
  return "https://huggingface.co/" + repo + "/blob/main/config.json";
}

const std::vector<Preset>& Presets() {
  static const auto* presets = new std::vector<Preset>{
      {"llama-3.1-8b", "llama-3.1-8b-instruct", Hf("meta-llama/Llama-3.1-8B-Instruct"),
       "Dense GQA, full attention on all 32 layers; head_size = hidden_size / heads = 128."},
      {"llama-3.1-70b", "llama-3.1-70b-instruct", Hf("meta-llama/Llama-3.1-70B-Instruct"),
       "Dense GQA, full attention on all 80 layers."},
      {"llama-3.1-405b", "llama-3.1-405b-instruct", Hf("meta-llama/Llama-3.1-405B-Instruct"),
       "Dense GQA, full attention on all 126 layers."},
      {"mistral-7b", "mistral-7b-instruct-v0.3", Hf("mistralai/Mistral-7B-Instruct-v0.3"),
       "v0.3 has sliding_window null: full attention on all 32 layers (v0.1's 4096-token window "
       "would make every layer sliding_window)."},
      {"qwen2.5-7b", "qwen2.5-7b-instruct", Hf("Qwen/Qwen2.5-7B-Instruct"),
       "use_sliding_window is false, so the sliding_window field is ignored (as vLLM does): full "
       "attention on all 28 layers."},
      {"qwen2.5-72b", "qwen2.5-72b-instruct", Hf("Qwen/Qwen2.5-72B-Instruct"),
       "use_sliding_window is false: full attention on all 80 layers."},
      {"qwen3-8b", "qwen3-8b", Hf("Qwen/Qwen3-8B"), "Dense GQA, head_dim 128, 36 layers."},
      {"qwen3-32b", "qwen3-32b", Hf("Qwen/Qwen3-32B"), "Dense GQA, head_dim 128, 64 layers."},
      {"qwen3-30b-a3b", "qwen3-30b-a3b", Hf("Qwen/Qwen3-30B-A3B"),
       "MoE; attention is GQA full attention on all 48 layers (4 KV heads)."},
      {"qwen3-235b-a22b", "qwen3-235b-a22b", Hf("Qwen/Qwen3-235B-A22B"),
       "MoE; attention is GQA full attention on all 94 layers (4 KV heads)."},
      {"gpt-oss-20b", "gpt-oss-20b", Hf("openai/gpt-oss-20b"),
       "layer_types alternates sliding_attention (window 128) and full_attention; both kinds have "
       "8 KV heads x 64 (2048 B/token). Attention sinks do not change the KV page."},
      {"gpt-oss-120b", "gpt-oss-120b", Hf("openai/gpt-oss-120b"),
       "36 layers alternating sliding (window 128) and full attention, 8 KV heads x 64."},
      {"gemma-2-9b", "gemma-2-9b", Hf("google/gemma-2-9b"),
       "Local (sliding 4096) and global layers alternate, layer 0 local: 21 + 21. The checkpoint "
       "is float32; vLLM serves it in bf16 by default, hence bf16 KV."},
      {"gemma-2-27b", "gemma-2-27b", Hf("google/gemma-2-27b"),
       "Local (sliding 4096) and global layers alternate: 23 + 23; 16 KV heads x 128. float32 "
       "checkpoint served in bf16."},
      {"gemma-3-4b", "gemma-3-4b-it", Hf("google/gemma-3-4b-it"),
       "text_config nested; it names no head counts, so Gemma3TextConfig's defaults apply (4 KV "
       "heads, head_dim 256). Five local layers (window 1024) per global layer: 29 + 5."},
      {"gemma-3-12b", "gemma-3-12b-it", Hf("google/gemma-3-12b-it"),
       "text_config nested; head_dim is Gemma3TextConfig's default 256. Five local layers (window "
       "1024) per global layer (sliding_window_pattern 6): 40 + 8."},
      {"gemma-3-27b", "gemma-3-27b-it", Hf("google/gemma-3-27b-it"),
       "text_config nested; 16 KV heads x 128. Five local layers (window 1024) per global layer: "
       "52 + 10."},
      {"llama-4-scout", "llama-4-scout-17b-16e-instruct",
       Hf("meta-llama/Llama-4-Scout-17B-16E-Instruct"),
       "text_config nested; no_rope_layers is empty, so the default interval 4 applies: RoPE "
       "layers "
       "use chunked local attention (chunk 8192), every fourth layer is a NoPE full-attention "
       "layer: 36 + 12. vLLM may disable the hybrid KV cache manager for chunked local attention "
       "on some backends (an engine setting)."},
      {"llama-4-maverick", "llama-4-maverick-17b-128e-instruct",
       Hf("meta-llama/Llama-4-Maverick-17B-128E-Instruct"),
       "Same attention layout as Scout (36 chunked local, chunk 8192, + 12 NoPE full); the MoE "
       "interleave differs but does not touch the KV cache."},
      {"deepseek-v3", "deepseek-v3", Hf("deepseek-ai/DeepSeek-V3"),
       "MLA on all 61 layers: one latent of kv_lora_rank 512 + qk_rope_head_dim 64 = 576 elements "
       "(1152 B/token in bf16), not split by TP. num_nextn_predict_layers 1: one MTP layer of the "
       "same spec, marked drafter. fp8 weights do not make the KV fp8."},
      {"kimi-k2", "kimi-k2-instruct", Hf("moonshotai/Kimi-K2-Instruct"),
       "DeepSeek-V3 architecture: MLA on all 61 layers (576-element latent, 1152 B/token bf16); "
       "num_nextn_predict_layers 0, so no drafter layers."},
      {"qwen3-next-80b-a3b", "qwen3-next-80b-a3b-instruct", Hf("Qwen/Qwen3-Next-80B-A3B-Instruct"),
       "full_attention_interval 4: 12 full-attention layers (2 KV heads x 256) and 36 gated delta "
       "net layers. GDN state per rank (vLLM gated_delta_net_state_shape): conv (4-1) x "
       "(2*16*128 + 32*128) bf16 = 49,152 B + recurrent 32 x 128 x 128 bf16 = 1,048,576 B; "
       "mamba_cache_dtype / mamba_ssm_cache_dtype 'auto', no speculative conv columns. One MTP "
       "layer (vLLM's default of 1) as a full-attention drafter layer."},
      {"kimi-linear-48b-a3b", "kimi-linear-48b-a3b-instruct",
       Hf("moonshotai/Kimi-Linear-48B-A3B-Instruct"),
       "linear_attn_config lists (1-based) 7 MLA layers (576-element latent, 1152 B/token bf16) "
       "and "
       "20 KDA layers. KDA state per rank (vLLM kda_state_shape / kda_state_dtype): conv (4-1) x "
       "3*32*128 bf16 = 73,728 B + recurrent 32 x 128 x 128 float32 = 2,097,152 B; no "
       "speculative conv columns. No MTP layers."},
  };
  return *presets;
}

std::string KindName(LayerKind kind) {
  switch (kind) {
    case LayerKind::kFullAttention:
      return "full_attention";
    case LayerKind::kMla:
      return "mla";
    case LayerKind::kSlidingWindow:
      return "sliding_window";
    case LayerKind::kChunkedLocal:
      return "chunked_local";
    case LayerKind::kMamba:
      return "mamba";
  }
  return "?";
}

std::string DtypeName(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kBf16:
      return "bf16";
    case KvDtype::kFp16:
      return "fp16";
    case KvDtype::kFp8:
      return "fp8";
    case KvDtype::kFp32:
      return "fp32";
  }
  return "?";
}

// The native model JSON (docs/design.md §4.2) of a converted model.
// `active` is the preset file as it stands: its active-parameter count and the source of that
// number are hand-written metadata (the config does not give them), carried over unchanged.
OrderedJson ToNative(const Preset& preset, const ModelSpec& model, const OrderedJson& active) {
  OrderedJson out;
  out["name"] = preset.name;
  for (const char* key : {"active_params", "active_params_source"}) {
    if (active.is_object() && active.contains(key)) out[key] = active[key];
  }
  out["source"] = preset.source;
  out["notes"] = preset.notes + kCommon;
  out["layers"] = OrderedJson::array();
  for (const LayerSpec& layer : model.layers) {
    OrderedJson entry;
    entry["kind"] = KindName(layer.kind);
    entry["count"] = layer.count;
    switch (layer.kind) {
      case LayerKind::kMla:
        entry["kv_lora_rank"] = layer.kv_lora_rank;
        entry["qk_rope_head_dim"] = layer.qk_rope_head_dim;
        break;
      case LayerKind::kMamba:
        entry["state_bytes"] = layer.state_bytes;
        break;
      default:
        entry["num_kv_heads"] = layer.num_kv_heads;
        entry["head_size"] = layer.head_size;
        if (layer.head_size_v > 0 && layer.head_size_v != layer.head_size) {
          entry["head_size_v"] = layer.head_size_v;
        }
        if (layer.kind == LayerKind::kSlidingWindow) entry["sliding_window"] = layer.sliding_window;
        if (layer.kind == LayerKind::kChunkedLocal) {
          entry["attention_chunk_size"] = layer.attention_chunk_size;
        }
        break;
    }
    if (IsAttention(layer.kind)) entry["kv_dtype"] = DtypeName(layer.kv_dtype);
    if (layer.drafter) entry["drafter"] = true;
    out["layers"].push_back(entry);
  }
  return out;
}

// One layer entry per line.
std::string Format(const OrderedJson& model) {
  std::string text = "{\n";
  for (const char* key : {"name", "active_params", "active_params_source", "source", "notes"}) {
    if (!model.contains(key)) continue;
    text += "  \"" + std::string(key) + "\": " + model[key].dump() + ",\n";
  }
  text += "  \"layers\": [\n";
  const OrderedJson& layers = model["layers"];
  for (size_t i = 0; i < layers.size(); ++i) {
    text += "    {";
    bool first = true;
    for (auto it = layers[i].begin(); it != layers[i].end(); ++it) {
      text += (first ? "\"" : ", \"") + it.key() + "\": " + it.value().dump();
      first = false;
    }
    text += i + 1 < layers.size() ? "},\n" : "}\n";
  }
  text += "  ]\n}\n";
  return text;
}

using ::prefixsim::testing::ReadFile;

TEST(HfPresetsTest, PresetsMatchTheirConvertedConfigs) {
  const std::string root = PREFIXSIM_SOURCE_DIR;
  const bool write = std::getenv("PREFIXSIM_WRITE_PRESETS") != nullptr;
  for (const Preset& preset : Presets()) {
    SCOPED_TRACE(preset.name);
    const std::string hf_path = root + "/tests/data/hf/" + preset.hf_file + ".json";
    absl::StatusOr<ModelSpec> model = ImportHfConfig(ReadFile(hf_path), hf_path, {});
    ASSERT_TRUE(model.ok()) << model.status();
    const std::string preset_path = root + "/configs/models/" + preset.name + ".json";
    const std::string current = ReadFile(preset_path);
    const OrderedJson expected =
        ToNative(preset, *model, OrderedJson::parse(current.empty() ? "{}" : current));
    // The analytic cost model needs a real parameter count, with where it comes from.
    EXPECT_GT(expected.value("active_params", 0.0), 1e8) << preset_path;
    EXPECT_FALSE(expected.value("active_params_source", "").empty()) << preset_path;
    if (write) {
      std::ofstream(preset_path) << Format(expected);
      continue;
    }
    const std::string text = ReadFile(preset_path);
    ASSERT_FALSE(text.empty()) << preset_path << " is missing; run with PREFIXSIM_WRITE_PRESETS=1";
    EXPECT_EQ(OrderedJson::parse(text), expected)
        << preset_path << " differs from the conversion; run with PREFIXSIM_WRITE_PRESETS=1";
  }
}

// The presets read back through the native parser give the converted layers, and the parser's
// bytes per token agree with the converted shapes.
TEST(HfPresetsTest, PresetsLoadThroughTheNativeParser) {
  const std::string root = PREFIXSIM_SOURCE_DIR;
  // At TP > 1 the native presets (whole-model shapes) are split by docs/planner.md's rules and
  // must give what the HF mapping gives at that TP (vLLM's per-rank shapes, docs/semantics.md §2).
  for (const Preset& preset : Presets()) {
    for (int tp : {1, 2, 8}) {
      SCOPED_TRACE(preset.name + " tp " + std::to_string(tp));
      ModelLoadOptions options;
      options.tensor_parallel_size = tp;
      const std::string hf_path = root + "/tests/data/hf/" + preset.hf_file + ".json";
      absl::StatusOr<ModelSpec> converted = ImportHfConfig(ReadFile(hf_path), hf_path, options);
      ASSERT_TRUE(converted.ok()) << converted.status();
      absl::StatusOr<ModelSpec> loaded = LoadModel(preset.name, options);
      ASSERT_TRUE(loaded.ok()) << loaded.status();
      EXPECT_EQ(loaded->name, preset.name);
      ASSERT_EQ(loaded->layers.size(), converted->layers.size());
      for (size_t i = 0; i < loaded->layers.size(); ++i) {
        const LayerSpec& a = loaded->layers[i];
        const LayerSpec& b = converted->layers[i];
        EXPECT_EQ(a.kind, b.kind);
        EXPECT_EQ(a.count, b.count);
        EXPECT_EQ(a.drafter, b.drafter);
        EXPECT_EQ(a.sliding_window, b.sliding_window);
        EXPECT_EQ(a.attention_chunk_size, b.attention_chunk_size);
        EXPECT_EQ(a.state_bytes, b.state_bytes);
        if (IsAttention(a.kind)) {
          EXPECT_EQ(a.BytesPerToken(), b.BytesPerToken());
        }
      }
    }
  }
}

// --model also takes the HuggingFace config itself, with the TP size of the engine.
TEST(HfPresetsTest, LoadModelReadsHfConfigsWithTensorParallel) {
  const std::string path =
      std::string(PREFIXSIM_SOURCE_DIR) + "/tests/data/hf/llama-4-scout-17b-16e-instruct.json";
  ModelLoadOptions options;
  options.tensor_parallel_size = 4;
  absl::StatusOr<ModelSpec> model = LoadModel(path, options);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_EQ(model->layers.size(), 2u);
  EXPECT_EQ(model->layers[0].kind, LayerKind::kChunkedLocal);
  EXPECT_EQ(model->layers[0].BytesPerToken(), 2 * 256 * 2);  // 8 KV heads / 4 ranks
}

}  // namespace
}  // namespace prefixsim
