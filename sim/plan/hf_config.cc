// HuggingFace config.json → ModelSpec (issue 7; docs/design.md §4.2).
//
// Each supported family has one mapping function that turns the (text) config into the per-layer
// list of KV specs, as vLLM builds them for that model class; a small table selects the function
// by model_type (or, failing that, by architectures). Adding a family is one function plus one
// table line.
//
// Conventions shared by all families:
// * Shapes are per tensor-parallel rank (docs/semantics.md §2): an attention layer keeps
//   max(1, num_key_value_heads / tp) KV heads (vLLM replicates KV heads when tp exceeds them, and
//   requires one of the two to divide the other). MLA's latent is not split by TP. Mamba-like
//   states are split as vLLM's MambaStateShapeCalculator does (conv channels and heads / tp).
// * KV dtype: ModelLoadOptions::kv_dtype (the engine JSON or a flag) if set, else vLLM's "auto":
//   fp8 when the checkpoint declares an 8-bit quantization_config.kv_cache_scheme
//   (llm-compressor), otherwise the model dtype: fp16 when the config's torch_dtype/dtype is
//   float16, otherwise bf16 (vLLM also serves float32 checkpoints in bf16 by default).
// * Mamba-like state dtypes follow vLLM's MambaStateDtypeCalculator with mamba_cache_dtype and
//   mamba_ssm_cache_dtype left at "auto": conv states in the model dtype (2 bytes); the gated
//   delta net's recurrent state in the model dtype unless the config names mamba_ssm_dtype
//   (as Qwen3.5 does, which vLLM honours); KDA's recurrent state in float32.
// * Speculative-decoding widening of conv states (num_spec extra columns) is not included: the
//   state sizes are those without speculative decoding.
// * MTP modules shipped inside the checkpoint (DeepSeek-V3's num_nextn_predict_layers, Qwen3-Next's
//   MTP layer) become drafter layers of the same spec as the matching target layers. Other
//   drafters (EAGLE heads, DSpark) are separate models and are not in this config.
// * Layers of the same spec are merged into one entry with a count (the planner groups by spec,
//   not by position); target entries come first, in order of first appearance, then drafters.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "prefixsim/model.h"
#include "sim/plan/json_config.h"
#include "sim/util/status_macros.h"

namespace prefixsim {
namespace {

using Json = nlohmann::json;

// Typed access to one JSON object of the config, with errors of the form
// "source:LINE: field 'text_config.num_key_value_heads': missing" (the line of the field, or of
// the closest enclosing value when it is missing). A JSON null counts as absent, as it does for
// HuggingFace (e.g. "sliding_window": null).
class HfObject {
 public:
  HfObject(const Json& object, std::string path, const JsonConfig& doc)
      : object_(&object), path_(std::move(path)), doc_(&doc) {}

  const Json& json() const { return *object_; }
  const JsonConfig& doc() const { return *doc_; }

  std::string FieldName(std::string_view key) const {
    return path_.empty() ? std::string(key) : absl::StrCat(path_, ".", AbslView(key));
  }
  absl::Status Error(std::string_view key, std::string_view message) const {
    return doc_->Error(FieldName(key), message);
  }
  absl::Status Missing(std::string_view key) const { return Error(key, "missing"); }

  // nullptr when absent or null.
  const Json* Find(std::string_view key) const {
    auto it = object_->find(std::string(key));
    if (it == object_->end() || it->is_null()) return nullptr;
    return &*it;
  }
  bool Has(std::string_view key) const { return Find(key) != nullptr; }

  absl::StatusOr<std::optional<int64_t>> OptionalInt(std::string_view key,
                                                     int64_t min_value = 1) const {
    return doc_->OptionalInt(*object_, path_, key, min_value);
  }
  absl::StatusOr<int64_t> Int(std::string_view key, int64_t min_value = 1) const {
    PREFIXSIM_ASSIGN_OR_RETURN(std::optional<int64_t> value, OptionalInt(key, min_value));
    if (!value.has_value()) return Missing(key);
    return *value;
  }
  absl::StatusOr<std::optional<bool>> OptionalBool(std::string_view key) const {
    return doc_->OptionalBool(*object_, path_, key);
  }
  absl::StatusOr<std::optional<std::string>> OptionalString(std::string_view key) const {
    return doc_->OptionalString(*object_, path_, key);
  }
  // A list of strings; nullopt when absent. If `expected_size` >= 0 the list must have it.
  absl::StatusOr<std::optional<std::vector<std::string>>> OptionalStringList(
      std::string_view key, int64_t expected_size) const {
    const Json* value = Find(key);
    if (value == nullptr) return std::optional<std::vector<std::string>>();
    if (!value->is_array()) return Error(key, "expected a list of strings");
    std::vector<std::string> result;
    for (const Json& item : *value) {
      if (!item.is_string()) return Error(key, "expected a list of strings");
      result.push_back(item.get<std::string>());
    }
    if (expected_size >= 0 && static_cast<int64_t>(result.size()) != expected_size) {
      return Error(key, absl::StrCat("has ", result.size(), " entries, expected ", expected_size,
                                     " (num_hidden_layers)"));
    }
    return std::optional<std::vector<std::string>>(std::move(result));
  }
  // A list of integers; nullopt when absent.
  absl::StatusOr<std::optional<std::vector<int64_t>>> OptionalIntList(std::string_view key) const {
    const Json* value = Find(key);
    if (value == nullptr) return std::optional<std::vector<int64_t>>();
    if (!value->is_array()) return Error(key, "expected a list of integers");
    std::vector<int64_t> result;
    for (const Json& item : *value) {
      if (!item.is_number_integer()) return Error(key, "expected a list of integers");
      result.push_back(item.get<int64_t>());
    }
    return std::optional<std::vector<int64_t>>(std::move(result));
  }

 private:
  const Json* object_;
  std::string path_;
  const JsonConfig* doc_;
};

// What a family mapping function gets.
struct HfContext {
  HfObject config;  // the text config (nested text_config unwrapped)
  int tp = 1;
  KvDtype kv_dtype = KvDtype::kBf16;
  int model_dtype_bytes = 2;  // conv / default mamba state element size
  // Defaults applied for fields the config left out (ModelSpec::assumptions).
  std::vector<std::string>* assumptions = nullptr;
};

void Assume(const HfContext& ctx, std::string text) {
  if (ctx.assumptions == nullptr) return;
  if (std::find(ctx.assumptions->begin(), ctx.assumptions->end(), text) == ctx.assumptions->end()) {
    ctx.assumptions->push_back(std::move(text));
  }
}

// The per-layer list a mapping function produces, in model order.
struct HfLayers {
  std::vector<LayerSpec> target;
  std::vector<LayerSpec> drafter;
};

// ---- Shared pieces -----------------------------------------------------------------------------

// KV heads per TP rank, as vLLM's attention layers compute them.
absl::StatusOr<int> KvHeadsPerRank(const HfContext& ctx, int64_t total, std::string_view field) {
  if (total >= ctx.tp) {
    if (total % ctx.tp != 0) {
      return ctx.config.Error(field, absl::StrCat(total, " KV heads cannot be split over ",
                                                  "tensor_parallel_size ", ctx.tp));
    }
    return static_cast<int>(total / ctx.tp);
  }
  if (ctx.tp % total != 0) {
    return ctx.config.Error(field, absl::StrCat(total, " KV heads cannot be replicated over ",
                                                "tensor_parallel_size ", ctx.tp));
  }
  return 1;  // replicated
}

// vLLM's divide(): exact division by the TP size or an error naming the field.
absl::StatusOr<int64_t> DividePerRank(const HfContext& ctx, int64_t value, std::string_view field) {
  if (value % ctx.tp != 0) {
    return ctx.config.Error(
        field, absl::StrCat(value, " is not divisible by ", "tensor_parallel_size ", ctx.tp));
  }
  return value / ctx.tp;
}

struct AttentionShape {
  int kv_heads = 0;  // per rank
  int head_size = 0;
};

// num_key_value_heads (HF default: num_attention_heads) and head_dim (HF default:
// hidden_size / num_attention_heads, or `default_head_dim` for families whose config class has
// one, e.g. Gemma 3's 256).
absl::StatusOr<AttentionShape> ReadAttentionShape(const HfContext& ctx,
                                                  std::optional<int64_t> default_head_dim = {}) {
  const HfObject& c = ctx.config;
  PREFIXSIM_ASSIGN_OR_RETURN(std::optional<int64_t> kv_heads, c.OptionalInt("num_key_value_heads"));
  PREFIXSIM_ASSIGN_OR_RETURN(std::optional<int64_t> heads, c.OptionalInt("num_attention_heads"));
  if (!kv_heads.has_value()) {
    if (!heads.has_value()) {
      return c.Error("num_key_value_heads", "missing (and no 'num_attention_heads' to default to)");
    }
    kv_heads = heads;
    // HF's config classes (LlamaConfig and the others mapped here) default it the same way "for
    // backward compatibility": plain multi-head attention, the largest KV cache possible.
    Assume(ctx, absl::StrCat("field '", c.FieldName("num_key_value_heads"),
                             "' missing: using num_attention_heads = ", *heads,
                             " KV heads (HF's default: multi-head attention)"));
  }
  PREFIXSIM_ASSIGN_OR_RETURN(std::optional<int64_t> head_dim, c.OptionalInt("head_dim"));
  if (!head_dim.has_value() && default_head_dim.has_value()) {
    head_dim = default_head_dim;
    Assume(ctx, absl::StrCat("field '", c.FieldName("head_dim"), "' missing: using ", *head_dim,
                             " (the config class default)"));
  }
  if (!head_dim.has_value()) {
    PREFIXSIM_ASSIGN_OR_RETURN(std::optional<int64_t> hidden, c.OptionalInt("hidden_size"));
    if (!hidden.has_value() || !heads.has_value()) {
      return c.Error("head_dim",
                     "missing (and no 'hidden_size' / 'num_attention_heads' to derive it from)");
    }
    if (*hidden % *heads != 0) {
      return c.Error("head_dim",
                     absl::StrCat("missing, and hidden_size ", *hidden,
                                  " is not a multiple of num_attention_heads ", *heads));
    }
    head_dim = *hidden / *heads;
    Assume(ctx, absl::StrCat("field '", c.FieldName("head_dim"),
                             "' missing: using hidden_size / num_attention_heads = ", *head_dim,
                             " (HF's default)"));
  }
  AttentionShape shape;
  PREFIXSIM_ASSIGN_OR_RETURN(shape.kv_heads, KvHeadsPerRank(ctx, *kv_heads, "num_key_value_heads"));
  shape.head_size = static_cast<int>(*head_dim);
  return shape;
}

LayerSpec AttentionLayer(const HfContext& ctx, LayerKind kind, const AttentionShape& shape) {
  LayerSpec layer;
  layer.kind = kind;
  layer.num_kv_heads = shape.kv_heads;
  layer.head_size = shape.head_size;
  layer.kv_dtype = ctx.kv_dtype;
  return layer;
}

LayerSpec FullLayer(const HfContext& ctx, const AttentionShape& shape) {
  return AttentionLayer(ctx, LayerKind::kFullAttention, shape);
}

LayerSpec SlidingLayer(const HfContext& ctx, const AttentionShape& shape, int64_t window) {
  LayerSpec layer = AttentionLayer(ctx, LayerKind::kSlidingWindow, shape);
  layer.sliding_window = window;
  return layer;
}

LayerSpec ChunkedLayer(const HfContext& ctx, const AttentionShape& shape, int64_t chunk) {
  LayerSpec layer = AttentionLayer(ctx, LayerKind::kChunkedLocal, shape);
  layer.attention_chunk_size = chunk;
  return layer;
}

absl::StatusOr<LayerSpec> MlaLayer(const HfContext& ctx) {
  LayerSpec layer;
  layer.kind = LayerKind::kMla;
  PREFIXSIM_ASSIGN_OR_RETURN(int64_t rank, ctx.config.Int("kv_lora_rank"));
  PREFIXSIM_ASSIGN_OR_RETURN(int64_t rope, ctx.config.Int("qk_rope_head_dim", 0));
  layer.kv_lora_rank = static_cast<int>(rank);
  layer.qk_rope_head_dim = static_cast<int>(rope);
  layer.kv_dtype = ctx.kv_dtype;
  return layer;
}

LayerSpec MambaLayer(int64_t state_bytes) {
  LayerSpec layer;
  layer.kind = LayerKind::kMamba;
  layer.state_bytes = state_bytes;
  return layer;
}

std::vector<LayerSpec> Repeat(const LayerSpec& layer, int64_t n) {
  return std::vector<LayerSpec>(static_cast<size_t>(n), layer);
}

// The per-layer kinds named by HF's `layer_types` (transformers ≥ 4.53 writes it for hybrid
// attention models): full_attention, sliding_attention, chunked_attention.
absl::StatusOr<std::vector<LayerSpec>> LayersFromLayerTypes(const HfContext& ctx,
                                                            const AttentionShape& shape,
                                                            const std::vector<std::string>& types) {
  std::vector<LayerSpec> layers;
  for (const std::string& type : types) {
    if (type == "full_attention") {
      layers.push_back(FullLayer(ctx, shape));
    } else if (type == "sliding_attention") {
      PREFIXSIM_ASSIGN_OR_RETURN(int64_t window, ctx.config.Int("sliding_window"));
      layers.push_back(SlidingLayer(ctx, shape, window));
    } else if (type == "chunked_attention") {
      PREFIXSIM_ASSIGN_OR_RETURN(int64_t chunk, ctx.config.Int("attention_chunk_size"));
      layers.push_back(ChunkedLayer(ctx, shape, chunk));
    } else {
      return ctx.config.Error("layer_types",
                              absl::StrCat("unsupported layer type '", type,
                                           "' (known: full_attention, sliding_attention, "
                                           "chunked_attention)"));
    }
  }
  return layers;
}

// Model-level sliding window, as vLLM's ModelConfig.get_sliding_window reads it: `sliding_window`
// unless `use_sliding_window` is false.
absl::StatusOr<std::optional<int64_t>> ModelSlidingWindow(const HfContext& ctx) {
  PREFIXSIM_ASSIGN_OR_RETURN(std::optional<bool> use,
                             ctx.config.OptionalBool("use_sliding_window"));
  if (use.has_value() && !*use) return std::optional<int64_t>();
  return ctx.config.OptionalInt("sliding_window");
}

// ---- Families ----------------------------------------------------------------------------------

// Llama, Mistral, Mixtral, Qwen2/2.5, Qwen3 (dense and MoE): GQA full attention on every layer.
// A model-level sliding window (Mistral-7B-v0.1) applies to all layers, as in vLLM; Qwen2's
// partial sliding window (max_window_layers < num_hidden_layers) is rejected as vLLM rejects it.
absl::StatusOr<HfLayers> MapDense(const HfContext& ctx) {
  const HfObject& c = ctx.config;
  PREFIXSIM_ASSIGN_OR_RETURN(int64_t n, c.Int("num_hidden_layers"));
  PREFIXSIM_ASSIGN_OR_RETURN(AttentionShape shape, ReadAttentionShape(ctx));
  HfLayers out;
  PREFIXSIM_ASSIGN_OR_RETURN(auto types, c.OptionalStringList("layer_types", n));
  if (types.has_value()) {
    PREFIXSIM_ASSIGN_OR_RETURN(out.target, LayersFromLayerTypes(ctx, shape, *types));
    return out;
  }
  PREFIXSIM_ASSIGN_OR_RETURN(std::optional<int64_t> window, ModelSlidingWindow(ctx));
  if (!window.has_value()) {
    out.target = Repeat(FullLayer(ctx, shape), n);
    return out;
  }
  PREFIXSIM_ASSIGN_OR_RETURN(std::optional<bool> use, c.OptionalBool("use_sliding_window"));
  PREFIXSIM_ASSIGN_OR_RETURN(std::optional<int64_t> max_window_layers,
                             c.OptionalInt("max_window_layers", 0));
  if (use.value_or(false) && max_window_layers.has_value() && *max_window_layers < n) {
    return c.Error("max_window_layers",
                   absl::StrCat(*max_window_layers, " < num_hidden_layers ", n,
                                ": a sliding window on only some layers is not supported "
                                "(vLLM rejects it too)"));
  }
  out.target = Repeat(SlidingLayer(ctx, shape, *window), n);
  return out;
}

// The layers of `layer_types` when the config has them; otherwise layer i (from 0) uses the
// sliding window unless (i + 1) is a multiple of `full_every`.
absl::StatusOr<HfLayers> MapSlidingPattern(const HfContext& ctx, int64_t full_every) {
  const HfObject& c = ctx.config;
  PREFIXSIM_ASSIGN_OR_RETURN(int64_t n, c.Int("num_hidden_layers"));
  PREFIXSIM_ASSIGN_OR_RETURN(AttentionShape shape, ReadAttentionShape(ctx));
  HfLayers out;
  PREFIXSIM_ASSIGN_OR_RETURN(auto types, c.OptionalStringList("layer_types", n));
  if (types.has_value()) {
    PREFIXSIM_ASSIGN_OR_RETURN(out.target, LayersFromLayerTypes(ctx, shape, *types));
    return out;
  }
  PREFIXSIM_ASSIGN_OR_RETURN(int64_t window, c.Int("sliding_window"));
  for (int64_t i = 0; i < n; ++i) {
    out.target.push_back((i + 1) % full_every != 0 ? SlidingLayer(ctx, shape, window)
                                                   : FullLayer(ctx, shape));
  }
  return out;
}

// gpt-oss: alternating sliding (even layers) and full attention, one shape, sliding_window 128.
absl::StatusOr<HfLayers> MapGptOss(const HfContext& ctx) { return MapSlidingPattern(ctx, 2); }

// Gemma 2: local (sliding) and global layers alternate, starting with a local one.
absl::StatusOr<HfLayers> MapGemma2(const HfContext& ctx) {
  return MapGptOss(ctx);  // same rule: layer_types, else even layers sliding
}

// Gemma 3: five local layers then one global (sliding_window_pattern, default 6). The multimodal
// configs nest this in text_config, and transformers writes a nested config as a diff against the
// Gemma3TextConfig defaults, so the table supplies those defaults (e.g. gemma-3-4b-it names no
// head counts: 8 query heads, 4 KV heads of 256).
absl::StatusOr<HfLayers> MapGemma3(const HfContext& ctx) {
  const HfObject& c = ctx.config;
  PREFIXSIM_ASSIGN_OR_RETURN(std::optional<int64_t> pattern,
                             c.OptionalInt("sliding_window_pattern"));
  if (!pattern.has_value()) {
    PREFIXSIM_ASSIGN_OR_RETURN(pattern, c.OptionalInt("_sliding_window_pattern"));
  }
  return MapSlidingPattern(ctx, pattern.value_or(6));
}

// Llama 4: RoPE layers use chunked local attention (attention_chunk_size), every fourth layer is a
// NoPE global layer. no_rope_layers[i] == 0 marks a NoPE layer; an empty list means the default
// interval (no_rope_layer_interval, 4), as in Llama4TextConfig.
absl::StatusOr<HfLayers> MapLlama4(const HfContext& ctx) {
  const HfObject& c = ctx.config;
  PREFIXSIM_ASSIGN_OR_RETURN(int64_t n, c.Int("num_hidden_layers"));
  PREFIXSIM_ASSIGN_OR_RETURN(AttentionShape shape, ReadAttentionShape(ctx));
  HfLayers out;
  PREFIXSIM_ASSIGN_OR_RETURN(auto types, c.OptionalStringList("layer_types", n));
  if (types.has_value()) {
    PREFIXSIM_ASSIGN_OR_RETURN(out.target, LayersFromLayerTypes(ctx, shape, *types));
    return out;
  }
  PREFIXSIM_ASSIGN_OR_RETURN(std::optional<int64_t> chunk, c.OptionalInt("attention_chunk_size"));
  PREFIXSIM_ASSIGN_OR_RETURN(auto no_rope, c.OptionalIntList("no_rope_layers"));
  std::vector<int64_t> uses_rope;
  if (no_rope.has_value() && !no_rope->empty()) {
    if (static_cast<int64_t>(no_rope->size()) != n) {
      return c.Error("no_rope_layers", absl::StrCat("has ", no_rope->size(), " entries, expected ",
                                                    n, " (num_hidden_layers)"));
    }
    uses_rope = *no_rope;
  } else {
    PREFIXSIM_ASSIGN_OR_RETURN(std::optional<int64_t> interval,
                               c.OptionalInt("no_rope_layer_interval"));
    for (int64_t i = 0; i < n; ++i) uses_rope.push_back((i + 1) % interval.value_or(4) != 0);
  }
  for (int64_t i = 0; i < n; ++i) {
    const bool nope = uses_rope[static_cast<size_t>(i)] == 0;
    out.target.push_back(!nope && chunk.has_value() ? ChunkedLayer(ctx, shape, *chunk)
                                                    : FullLayer(ctx, shape));
  }
  return out;
}

// DeepSeek-V2/V3, Kimi-K2: MLA on every layer (one latent of kv_lora_rank + qk_rope_head_dim per
// token, not split by TP); num_nextn_predict_layers MTP layers become MLA drafter layers.
absl::StatusOr<HfLayers> MapDeepseekMla(const HfContext& ctx) {
  const HfObject& c = ctx.config;
  PREFIXSIM_ASSIGN_OR_RETURN(int64_t n, c.Int("num_hidden_layers"));
  PREFIXSIM_ASSIGN_OR_RETURN(LayerSpec mla, MlaLayer(ctx));
  PREFIXSIM_ASSIGN_OR_RETURN(std::optional<int64_t> mtp,
                             c.OptionalInt("num_nextn_predict_layers", 0));
  HfLayers out;
  out.target = Repeat(mla, n);
  out.drafter = Repeat(mla, mtp.value_or(0));
  return out;
}

// Element size of a mamba state dtype named in the config (mamba_ssm_dtype).
absl::StatusOr<int> StateDtypeBytes(const HfContext& ctx, std::string_view key,
                                    const std::string& name) {
  if (name == "float32") return 4;
  if (name == "bfloat16" || name == "float16") return 2;
  return ctx.config.Error(
      key, absl::StrCat("unknown dtype '", name, "' (known: float32, bfloat16, float16)"));
}

// Qwen3-Next / Qwen3.5: gated delta net (linear attention) layers with a full-attention layer
// every full_attention_interval layers. The GDN state per rank is vLLM's
// gated_delta_net_state_shape: a conv state of (conv_kernel - 1) × conv_dim / tp with
// conv_dim = 2·key_heads·key_dim + value_heads·value_dim, and a recurrent state of
// value_heads / tp × value_dim × key_dim. The MTP layer (num_nextn_predict_layers, else
// mtp_num_hidden_layers, else 1 as in vLLM's Qwen3NextMTP) is a full-attention drafter layer.
absl::StatusOr<HfLayers> MapQwen3Next(const HfContext& ctx) {
  const HfObject& c = ctx.config;
  PREFIXSIM_ASSIGN_OR_RETURN(int64_t n, c.Int("num_hidden_layers"));
  PREFIXSIM_ASSIGN_OR_RETURN(AttentionShape shape, ReadAttentionShape(ctx));
  PREFIXSIM_ASSIGN_OR_RETURN(int64_t key_heads, c.Int("linear_num_key_heads"));
  PREFIXSIM_ASSIGN_OR_RETURN(int64_t value_heads, c.Int("linear_num_value_heads"));
  PREFIXSIM_ASSIGN_OR_RETURN(int64_t key_dim, c.Int("linear_key_head_dim"));
  PREFIXSIM_ASSIGN_OR_RETURN(int64_t value_dim, c.Int("linear_value_head_dim"));
  PREFIXSIM_ASSIGN_OR_RETURN(int64_t conv_kernel, c.Int("linear_conv_kernel_dim"));
  PREFIXSIM_ASSIGN_OR_RETURN(int64_t conv_dim,
                             DividePerRank(ctx, 2 * key_heads * key_dim + value_heads * value_dim,
                                           "linear_num_key_heads"));
  PREFIXSIM_ASSIGN_OR_RETURN(int64_t heads_per_rank,
                             DividePerRank(ctx, value_heads, "linear_num_value_heads"));
  int ssm_bytes = ctx.model_dtype_bytes;
  PREFIXSIM_ASSIGN_OR_RETURN(std::optional<std::string> ssm_dtype,
                             c.OptionalString("mamba_ssm_dtype"));
  if (ssm_dtype.has_value()) {
    PREFIXSIM_ASSIGN_OR_RETURN(ssm_bytes, StateDtypeBytes(ctx, "mamba_ssm_dtype", *ssm_dtype));
  }
  const int64_t state_bytes = (conv_kernel - 1) * conv_dim * ctx.model_dtype_bytes +
                              heads_per_rank * value_dim * key_dim * ssm_bytes;

  std::vector<bool> full(static_cast<size_t>(n), false);
  PREFIXSIM_ASSIGN_OR_RETURN(auto types, c.OptionalStringList("layer_types", n));
  if (types.has_value()) {
    for (int64_t i = 0; i < n; ++i) {
      const std::string& type = (*types)[static_cast<size_t>(i)];
      if (type == "full_attention") {
        full[static_cast<size_t>(i)] = true;
      } else if (type != "linear_attention") {
        return c.Error("layer_types", absl::StrCat("unsupported layer type '", type,
                                                   "' (known: full_attention, "
                                                   "linear_attention)"));
      }
    }
  } else {
    PREFIXSIM_ASSIGN_OR_RETURN(int64_t interval, c.Int("full_attention_interval"));
    for (int64_t i = 0; i < n; ++i) full[static_cast<size_t>(i)] = (i + 1) % interval == 0;
  }
  HfLayers out;
  for (bool is_full : full) {
    out.target.push_back(is_full ? FullLayer(ctx, shape) : MambaLayer(state_bytes));
  }
  PREFIXSIM_ASSIGN_OR_RETURN(std::optional<int64_t> mtp,
                             c.OptionalInt("num_nextn_predict_layers", 0));
  if (!mtp.has_value()) {
    PREFIXSIM_ASSIGN_OR_RETURN(mtp, c.OptionalInt("mtp_num_hidden_layers", 0));
  }
  out.drafter = Repeat(FullLayer(ctx, shape), mtp.value_or(1));
  return out;
}

// Kimi-Linear: KDA (Kimi delta attention) layers and MLA layers, listed (1-based) in
// linear_attn_config.full_attn_layers / kda_layers. The KDA state per rank is vLLM's
// kda_state_shape: a conv state of (short_conv_kernel_size - 1) × 3·num_heads·head_dim / tp in
// the model dtype, and a recurrent state of num_heads / tp × head_dim × head_dim in float32.
absl::StatusOr<HfLayers> MapKimiLinear(const HfContext& ctx) {
  const HfObject& c = ctx.config;
  PREFIXSIM_ASSIGN_OR_RETURN(int64_t n, c.Int("num_hidden_layers"));
  const Json* linear = c.Find("linear_attn_config");
  if (linear == nullptr) return c.Missing("linear_attn_config");
  if (!linear->is_object()) return c.Error("linear_attn_config", "expected an object");
  HfObject lin(*linear, c.FieldName("linear_attn_config"), c.doc());
  PREFIXSIM_ASSIGN_OR_RETURN(int64_t heads, lin.Int("num_heads"));
  PREFIXSIM_ASSIGN_OR_RETURN(int64_t head_dim, lin.Int("head_dim"));
  PREFIXSIM_ASSIGN_OR_RETURN(int64_t conv_kernel, lin.Int("short_conv_kernel_size"));
  PREFIXSIM_ASSIGN_OR_RETURN(auto full_layers, lin.OptionalIntList("full_attn_layers"));
  if (!full_layers.has_value()) return lin.Missing("full_attn_layers");
  PREFIXSIM_ASSIGN_OR_RETURN(auto kda_layers, lin.OptionalIntList("kda_layers"));
  PREFIXSIM_ASSIGN_OR_RETURN(
      int64_t conv_dim, DividePerRank(ctx, 3 * heads * head_dim, "linear_attn_config.num_heads"));
  PREFIXSIM_ASSIGN_OR_RETURN(int64_t heads_per_rank,
                             DividePerRank(ctx, heads, "linear_attn_config.num_heads"));
  const int64_t state_bytes = (conv_kernel - 1) * conv_dim * ctx.model_dtype_bytes +
                              heads_per_rank * head_dim * head_dim * 4;
  PREFIXSIM_ASSIGN_OR_RETURN(LayerSpec mla, MlaLayer(ctx));
  auto contains = [](const std::vector<int64_t>& list, int64_t v) {
    return std::find(list.begin(), list.end(), v) != list.end();
  };
  HfLayers out;
  for (int64_t i = 1; i <= n; ++i) {
    const bool is_full = contains(*full_layers, i);
    const bool is_kda = kda_layers.has_value() ? contains(*kda_layers, i) : !is_full;
    if (is_full == is_kda) {
      return lin.Error(is_full ? "kda_layers" : "full_attn_layers",
                       absl::StrCat("layer ", i, " (1-based) is ",
                                    is_full ? "in both full_attn_layers and kda_layers"
                                            : "in neither full_attn_layers nor kda_layers"));
    }
    out.target.push_back(is_full ? mla : MambaLayer(state_bytes));
  }
  PREFIXSIM_ASSIGN_OR_RETURN(std::optional<int64_t> mtp,
                             c.OptionalInt("num_nextn_predict_layers", 0));
  out.drafter = Repeat(mla, mtp.value_or(0));
  return out;
}

// ---- The family table --------------------------------------------------------------------------

using FamilyMapper = absl::StatusOr<HfLayers> (*)(const HfContext&);

struct Family {
  std::vector<std::string_view> model_types;
  std::vector<std::string_view> architectures;
  FamilyMapper map;
  // Defaults of the HF config class for fields a saved config may omit (a JSON object), or "".
  std::string_view defaults = "";
};

const std::vector<Family>& Families() {
  static const auto* families = new std::vector<Family>{
      {{"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe"},
       {"LlamaForCausalLM", "MistralForCausalLM", "MixtralForCausalLM", "Qwen2ForCausalLM",
        "Qwen2MoeForCausalLM", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM"},
       MapDense},
      {{"gpt_oss"}, {"GptOssForCausalLM"}, MapGptOss},
      {{"gemma2"}, {"Gemma2ForCausalLM"}, MapGemma2},
      {{"gemma3", "gemma3_text"},
       {"Gemma3ForCausalLM", "Gemma3ForConditionalGeneration"},
       MapGemma3,
       R"({"num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
           "sliding_window": 4096, "sliding_window_pattern": 6})"},
      {{"llama4", "llama4_text"},
       {"Llama4ForCausalLM", "Llama4ForConditionalGeneration"},
       MapLlama4},
      {{"deepseek_v2", "deepseek_v3", "kimi_k2", "kimi_k25"},
       {"DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM"},
       MapDeepseekMla},
      {{"qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text"},
       {"Qwen3NextForCausalLM", "Qwen3_5ForConditionalGeneration",
        "Qwen3_5MoeForConditionalGeneration"},
       MapQwen3Next},
      {{"kimi_linear"}, {"KimiLinearForCausalLM"}, MapKimiLinear},
  };
  return *families;
}

std::string SupportedList() {
  std::vector<std::string> names;
  for (const Family& family : Families()) {
    for (std::string_view t : family.model_types) names.emplace_back(t);
  }
  return absl::StrJoin(names, ", ");
}

const Family* FindByModelType(std::string_view model_type) {
  for (const Family& family : Families()) {
    for (std::string_view t : family.model_types) {
      if (t == model_type) return &family;
    }
  }
  return nullptr;
}

const Family* FindByArchitecture(std::string_view architecture) {
  for (const Family& family : Families()) {
    for (std::string_view a : family.architectures) {
      if (a == architecture) return &family;
    }
  }
  return nullptr;
}

std::vector<std::string> Architectures(const Json& object) {
  std::vector<std::string> result;
  auto it = object.find("architectures");
  if (it == object.end() || !it->is_array()) return result;
  for (const Json& item : *it) {
    if (item.is_string()) result.push_back(item.get<std::string>());
  }
  return result;
}

std::string ModelType(const Json& object) {
  auto it = object.find("model_type");
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The layers merged by identical spec, in order of first appearance.
void AppendMerged(const std::vector<LayerSpec>& layers, bool drafter, std::vector<LayerSpec>& out) {
  auto same = [](const LayerSpec& a, const LayerSpec& b) {
    return a.kind == b.kind && a.num_kv_heads == b.num_kv_heads && a.head_size == b.head_size &&
           a.head_size_v == b.head_size_v && a.kv_lora_rank == b.kv_lora_rank &&
           a.qk_rope_head_dim == b.qk_rope_head_dim &&
           a.bytes_per_token_override == b.bytes_per_token_override &&
           a.sliding_window == b.sliding_window &&
           a.attention_chunk_size == b.attention_chunk_size && a.state_bytes == b.state_bytes &&
           a.kv_dtype == b.kv_dtype && a.drafter == b.drafter;
  };
  const size_t first = out.size();
  for (LayerSpec layer : layers) {
    layer.drafter = drafter;
    layer.count = 1;
    auto it = std::find_if(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(),
                           [&](const LayerSpec& entry) { return same(entry, layer); });
    if (it != out.end()) {
      ++it->count;
    } else {
      out.push_back(layer);
    }
  }
}

std::string NameFromSource(std::string_view source, const Json& root, std::string_view model_type) {
  std::string_view base = source;
  if (size_t slash = base.find_last_of('/'); slash != std::string_view::npos) {
    base = base.substr(slash + 1);
  }
  if (base.size() > 5 && base.substr(base.size() - 5) == ".json") {
    base = base.substr(0, base.size() - 5);
  }
  if (!base.empty() && base != "config") return std::string(base);
  auto it = root.find("_name_or_path");
  if (it != root.end() && it->is_string() && !it->get<std::string>().empty()) {
    return it->get<std::string>();
  }
  return std::string(model_type);
}

}  // namespace

bool LooksLikeHfConfig(std::string_view text) {
  Json root = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (!root.is_object()) return false;
  return root.contains("model_type") || root.contains("architectures");
}

absl::StatusOr<ModelSpec> ImportHfConfig(std::string_view text, std::string_view source,
                                         const ModelLoadOptions& options) {
  PREFIXSIM_ASSIGN_OR_RETURN(JsonConfig doc, JsonConfig::Parse(text, source));
  const Json& root = doc.root();
  if (!root.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(AbslView(source), ": a HuggingFace config must be a JSON object"));
  }
  const int tp = options.tensor_parallel_size.value_or(1);
  if (tp < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(AbslView(source), ": tensor_parallel_size must be at least 1, got ", tp));
  }

  // Multimodal wrappers (Gemma 3, Llama 4, Qwen3.5, Kimi-K2.5) nest the language model in
  // text_config; the family is the text model's, else the wrapper's.
  const Json* text_config = &root;
  std::string path;
  auto nested = root.find("text_config");
  if (nested != root.end() && nested->is_object()) {
    text_config = &*nested;
    path = "text_config";
  }
  const std::string outer_type = ModelType(root);
  const std::string inner_type = ModelType(*text_config);
  const Family* family = FindByModelType(inner_type);
  if (family == nullptr) family = FindByModelType(outer_type);
  std::vector<std::string> archs = Architectures(*text_config);
  if (text_config != &root) {
    std::vector<std::string> outer = Architectures(root);
    archs.insert(archs.end(), outer.begin(), outer.end());
  }
  for (size_t i = 0; family == nullptr && i < archs.size(); ++i) {
    family = FindByArchitecture(archs[i]);
  }
  if (family == nullptr) {
    std::string what =
        outer_type.empty() && inner_type.empty()
            ? std::string("no model_type")
            : absl::StrCat("model_type '", inner_type.empty() ? outer_type : inner_type, "'");
    if (!archs.empty())
      absl::StrAppend(&what, ", architectures [", absl::StrJoin(archs, ", "), "]");
    return absl::InvalidArgumentError(
        absl::StrCat(AbslView(source), ": unsupported HuggingFace architecture (", what,
                     "); supported model_type values: ", SupportedList()));
  }

  // Class defaults fill the fields the saved config left out (a null stays null).
  Json with_defaults;
  std::vector<std::string> assumptions;
  if (!family->defaults.empty()) {
    with_defaults = *text_config;
    const Json defaults = Json::parse(family->defaults);
    for (auto it = defaults.begin(); it != defaults.end(); ++it) {
      if (!with_defaults.contains(it.key())) {
        with_defaults[it.key()] = it.value();
        assumptions.push_back(
            absl::StrCat("field '", path.empty() ? it.key() : absl::StrCat(path, ".", it.key()),
                         "' missing: using the config class default ", it.value().dump()));
      }
    }
    text_config = &with_defaults;
  }
  HfContext ctx{HfObject(*text_config, path, doc)};
  ctx.tp = tp;
  ctx.assumptions = &assumptions;
  // The model dtype: torch_dtype (older transformers) or dtype (newer), on either level.
  std::string model_dtype;
  for (const Json* object : std::vector<const Json*>{text_config, &root}) {
    for (const char* key : {"torch_dtype", "dtype"}) {
      auto it = object->find(key);
      if (model_dtype.empty() && it != object->end() && it->is_string()) {
        model_dtype = it->get<std::string>();
      }
    }
  }
  ctx.model_dtype_bytes = 2;  // bf16 / fp16; float32 checkpoints are served in bf16 by default
  ctx.kv_dtype = options.kv_dtype.has_value()
                     ? *options.kv_dtype
                     : (model_dtype == "float16" ? KvDtype::kFp16 : KvDtype::kBf16);
  // An llm-compressor checkpoint that declares an 8-bit KV cache scheme
  // (quantization_config.kv_cache_scheme) gets an fp8 KV cache under vLLM's "auto" kv dtype.
  if (!options.kv_dtype.has_value()) {
    for (const Json* object : std::vector<const Json*>{text_config, &root}) {
      auto quant = object->find("quantization_config");
      if (quant == object->end() || !quant->is_object()) continue;
      auto scheme = quant->find("kv_cache_scheme");
      if (scheme == quant->end() || !scheme->is_object()) continue;
      auto bits = scheme->find("num_bits");
      if (bits != scheme->end() && bits->is_number_integer() && bits->get<int>() == 8) {
        ctx.kv_dtype = KvDtype::kFp8;
      }
    }
  }

  PREFIXSIM_ASSIGN_OR_RETURN(HfLayers layers, family->map(ctx));
  if (layers.target.empty()) {
    return ctx.config.Error("num_hidden_layers", "the model has no layers");
  }
  ModelSpec model;
  model.source = std::string(source);
  model.name = NameFromSource(source, root, inner_type.empty() ? outer_type : inner_type);
  AppendMerged(layers.target, /*drafter=*/false, model.layers);
  AppendMerged(layers.drafter, /*drafter=*/true, model.layers);
  model.tensor_parallel_size = tp;
  model.kv_cache_dtype = options.kv_dtype;
  model.assumptions = std::move(assumptions);
  return model;
}

}  // namespace prefixsim
