// The model: a list of layer groups with their KV shapes (docs/design.md §4.2).
#ifndef PREFIXSIM_MODEL_H_
#define PREFIXSIM_MODEL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace prefixsim {

enum class LayerKind { kFullAttention, kMla, kSlidingWindow, kChunkedLocal, kMamba };

// "full_attention", "mla", "sliding_window", "chunked_local", "mamba".
std::string_view LayerKindName(LayerKind kind);
std::optional<LayerKind> ParseLayerKind(std::string_view name);
inline bool IsAttention(LayerKind kind) { return kind != LayerKind::kMamba; }

enum class KvDtype { kBf16, kFp16, kFp8, kFp32 };
std::string_view KvDtypeName(KvDtype dtype);
std::optional<KvDtype> ParseKvDtype(std::string_view name);
// Every spelling ParseKvDtype accepts, "auto" first, for error messages.
std::string KvDtypeSpellings();
int KvDtypeBytes(KvDtype dtype);

// One entry of the model's "layers" list: `count` identical layers.
struct LayerSpec {
  LayerKind kind = LayerKind::kFullAttention;
  int count = 1;
  // full_attention / sliding_window / chunked_local shape. After loading (LoadModel,
  // ParseModelJson) every shape is per tensor-parallel rank (docs/planner.md).
  int num_kv_heads = 0;
  int head_size = 0;
  int head_size_v = 0;  // 0: same as head_size.
  // mla shape: one latent tensor of kv_lora_rank + qk_rope_head_dim elements per token.
  int kv_lora_rank = 0;
  int qk_rope_head_dim = 0;
  // If > 0, replaces the shape-derived bytes per token of an attention layer.
  int64_t bytes_per_token_override = 0;
  int64_t sliding_window = 0;        // tokens; sliding_window only.
  int64_t attention_chunk_size = 0;  // tokens; chunked_local only.
  int64_t state_bytes = 0;           // mamba only: the whole per-request state page.
  // mamba only: the heads the state is split by over tensor-parallel ranks (0: not given).
  int num_heads = 0;
  KvDtype kv_dtype = KvDtype::kBf16;
  // Speculative-decoding drafter layers exist only when the engine enables speculation.
  bool drafter = false;

  // Bytes of KV per token for one layer (docs/semantics.md §2.1). REQUIRES: IsAttention(kind).
  int64_t BytesPerToken() const;
};

struct ModelSpec {
  std::string name;
  std::vector<LayerSpec> layers;
  // Parameters active per forward pass of the target model (all ranks; MoE: the activated
  // experts), for the analytic cost model; 0 = unknown (estimated from the layer count).
  // Drafter layers are not included.
  double active_params = 0;
  std::string active_params_source;  // where the number comes from
  std::string source;                // where it was read from (for messages)
  // The tensor-parallel size the layer shapes are per rank for, and the kv_cache_dtype applied
  // to the attention layers (nullopt: "auto", each layer's own). The planner refuses an engine
  // whose tensor_parallel_size / kv_cache_dtype differ: load the model with the engine's.
  int tensor_parallel_size = 1;
  std::optional<KvDtype> kv_cache_dtype;
  // Values the loader supplied because the file left them out, or rules it applied that the file
  // cannot confirm (e.g. HF's num_key_value_heads default); the plan lists them as warnings.
  std::vector<std::string> assumptions;
};

// Options for reading a model file: the engine's tensor_parallel_size and kv_cache_dtype, which
// turn the file's shapes into per-rank shapes (docs/planner.md).
struct ModelLoadOptions {
  // Unset: the model's own (native JSON "tensor_parallel_size", default 1; HF configs: 1).
  std::optional<int> tensor_parallel_size;
  // Unset: vLLM's "auto" (each layer's kv_dtype; HF: the checkpoint's). Set: every attention
  // layer's KV dtype; mamba states keep theirs (vLLM's mamba_cache_dtype is separate).
  std::optional<KvDtype> kv_dtype;
};

// Parses a native model JSON (docs/design.md §4.2) and applies `options`. `source` names the file
// in error messages.
absl::StatusOr<ModelSpec> ParseModelJson(std::string_view text, std::string_view source,
                                         const ModelLoadOptions& options = {});

// Reads a model file: the native form, or a HuggingFace config.json (detected by its fields),
// or the name of a preset in configs/models/ (without ".json").
absl::StatusOr<ModelSpec> LoadModel(std::string_view path_or_preset,
                                    const ModelLoadOptions& options = {});

// Converts a HuggingFace config.json text to a ModelSpec (docs/semantics.md names the fields read).
absl::StatusOr<ModelSpec> ImportHfConfig(std::string_view text, std::string_view source,
                                         const ModelLoadOptions& options);
// True if the JSON text looks like a HuggingFace config (has model_type or architectures).
bool LooksLikeHfConfig(std::string_view text);

}  // namespace prefixsim

#endif  // PREFIXSIM_MODEL_H_
