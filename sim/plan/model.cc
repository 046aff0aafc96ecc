#include "prefixsim/model.h"

#include <algorithm>
#include <array>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "prefixsim/status.h"
#include "sim/plan/json_config.h"

namespace prefixsim {
namespace {

constexpr std::array<std::pair<LayerKind, std::string_view>, 5> kLayerKindNames = {{
    {LayerKind::kFullAttention, "full_attention"},
    {LayerKind::kMla, "mla"},
    {LayerKind::kSlidingWindow, "sliding_window"},
    {LayerKind::kChunkedLocal, "chunked_local"},
    {LayerKind::kMamba, "mamba"},
}};

constexpr std::array<std::pair<KvDtype, std::string_view>, 4> kDtypeNames = {{
    {KvDtype::kBf16, "bf16"},
    {KvDtype::kFp16, "fp16"},
    {KvDtype::kFp8, "fp8"},
    {KvDtype::kFp32, "fp32"},
}};

std::string KindList() {
  std::vector<std::string> names;
  for (const auto& [kind, name] : kLayerKindNames) names.emplace_back(name);
  return absl::StrJoin(names, ", ");
}

absl::StatusOr<LayerSpec> ParseLayer(const JsonConfig& doc, const nlohmann::json& layer,
                                     const std::string& path) {
  if (!layer.is_object()) return doc.Error(path, "must be an object");
  // A misspelt field would otherwise be silently ignored and a default used in its place.
  static constexpr std::array<std::string_view, 14> kKnownKeys = {
      "kind",           "count",         "num_kv_heads",     "head_size",
      "head_size_v",    "kv_lora_rank",  "qk_rope_head_dim", "bytes_per_token",
      "sliding_window", "attention_chunk_size", "state_bytes", "kv_dtype",
      "drafter",        "description"};
  for (const auto& [key, value] : layer.items()) {
    if (std::find(kKnownKeys.begin(), kKnownKeys.end(), key) == kKnownKeys.end()) {
      return doc.Error(JsonConfig::Join(path, key), "unknown field");
    }
  }
  LayerSpec spec;
  PREFIXSIM_ASSIGN_OR_RETURN(auto kind_name, doc.OptionalString(layer, path, "kind"));
  if (!kind_name) return doc.Error(JsonConfig::Join(path, "kind"), "missing");
  auto kind = ParseLayerKind(*kind_name);
  if (!kind) {
    return doc.Error(JsonConfig::Join(path, "kind"),
                     absl::StrCat("unknown layer kind '", *kind_name, "' (known: ", KindList(),
                                  ")"));
  }
  spec.kind = *kind;
  PREFIXSIM_ASSIGN_OR_RETURN(spec.count, doc.RequiredInt(layer, path, "count", 1));
  PREFIXSIM_ASSIGN_OR_RETURN(auto drafter, doc.OptionalBool(layer, path, "drafter"));
  spec.drafter = drafter.value_or(false);
  PREFIXSIM_ASSIGN_OR_RETURN(auto dtype_name, doc.OptionalString(layer, path, "kv_dtype"));
  if (dtype_name) {
    auto dtype = ParseKvDtype(*dtype_name);
    if (!dtype) {
      return doc.Error(JsonConfig::Join(path, "kv_dtype"),
                       absl::StrCat("unknown dtype '", *dtype_name, "' (known: bf16, fp16, fp8, fp32)"));
    }
    spec.kv_dtype = *dtype;
  }
  if (spec.kind == LayerKind::kMamba) {
    PREFIXSIM_ASSIGN_OR_RETURN(spec.state_bytes, doc.RequiredInt(layer, path, "state_bytes", 1));
    return spec;
  }
  PREFIXSIM_ASSIGN_OR_RETURN(auto bpt, doc.OptionalInt(layer, path, "bytes_per_token", 1));
  spec.bytes_per_token_override = bpt.value_or(0);
  if (spec.kind == LayerKind::kMla) {
    if (!bpt) {
      PREFIXSIM_ASSIGN_OR_RETURN(spec.kv_lora_rank, doc.RequiredInt(layer, path, "kv_lora_rank", 1));
      PREFIXSIM_ASSIGN_OR_RETURN(spec.qk_rope_head_dim,
                                 doc.RequiredInt(layer, path, "qk_rope_head_dim", 0));
    }
  } else if (!bpt) {
    PREFIXSIM_ASSIGN_OR_RETURN(spec.num_kv_heads, doc.RequiredInt(layer, path, "num_kv_heads", 1));
    PREFIXSIM_ASSIGN_OR_RETURN(spec.head_size, doc.RequiredInt(layer, path, "head_size", 1));
    PREFIXSIM_ASSIGN_OR_RETURN(auto head_size_v, doc.OptionalInt(layer, path, "head_size_v", 1));
    spec.head_size_v = static_cast<int>(head_size_v.value_or(0));
  }
  if (spec.kind == LayerKind::kSlidingWindow) {
    PREFIXSIM_ASSIGN_OR_RETURN(spec.sliding_window,
                               doc.RequiredInt(layer, path, "sliding_window", 1));
  }
  if (spec.kind == LayerKind::kChunkedLocal) {
    PREFIXSIM_ASSIGN_OR_RETURN(spec.attention_chunk_size,
                               doc.RequiredInt(layer, path, "attention_chunk_size", 1));
  }
  return spec;
}

}  // namespace

std::string_view LayerKindName(LayerKind kind) {
  for (const auto& [k, name] : kLayerKindNames) {
    if (k == kind) return name;
  }
  return "?";
}

std::optional<LayerKind> ParseLayerKind(std::string_view name) {
  for (const auto& [kind, n] : kLayerKindNames) {
    if (n == name) return kind;
  }
  return std::nullopt;
}

std::string_view KvDtypeName(KvDtype dtype) {
  for (const auto& [d, name] : kDtypeNames) {
    if (d == dtype) return name;
  }
  return "?";
}

std::optional<KvDtype> ParseKvDtype(std::string_view name) {
  for (const auto& [dtype, n] : kDtypeNames) {
    if (n == name) return dtype;
  }
  if (name == "bfloat16") return KvDtype::kBf16;
  if (name == "float16" || name == "half") return KvDtype::kFp16;
  if (name == "fp8_e4m3" || name == "fp8_e5m2") return KvDtype::kFp8;
  if (name == "float32" || name == "float") return KvDtype::kFp32;
  return std::nullopt;
}

int KvDtypeBytes(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kBf16:
    case KvDtype::kFp16:
      return 2;
    case KvDtype::kFp8:
      return 1;
    case KvDtype::kFp32:
      return 4;
  }
  return 2;
}

int64_t LayerSpec::BytesPerToken() const {
  PREFIXSIM_DCHECK(IsAttention(kind));
  if (bytes_per_token_override > 0) return bytes_per_token_override;
  const int64_t element = KvDtypeBytes(kv_dtype);
  if (kind == LayerKind::kMla) {
    // One latent tensor (no separate V): reference §2.1.
    return static_cast<int64_t>(kv_lora_rank + qk_rope_head_dim) * element;
  }
  const int64_t v = head_size_v > 0 ? head_size_v : head_size;
  return static_cast<int64_t>(num_kv_heads) * (head_size + v) * element;
}

absl::StatusOr<ModelSpec> ParseModelJson(std::string_view text, std::string_view source) {
  PREFIXSIM_ASSIGN_OR_RETURN(JsonConfig doc, JsonConfig::Parse(text, source));
  const nlohmann::json& root = doc.root();
  if (!root.is_object()) return doc.Error("", "a model must be a JSON object");
  ModelSpec model;
  model.source = std::string(source);
  PREFIXSIM_ASSIGN_OR_RETURN(auto name, doc.OptionalString(root, "", "name"));
  model.name = name.value_or(std::string(source));
  PREFIXSIM_ASSIGN_OR_RETURN(auto active, doc.OptionalNumber(root, "", "active_params", 1, 1e15));
  if (active) model.active_params = *active;
  PREFIXSIM_ASSIGN_OR_RETURN(auto active_source,
                             doc.OptionalString(root, "", "active_params_source"));
  if (active_source) model.active_params_source = *active_source;
  auto layers = root.find("layers");
  if (layers == root.end()) return doc.Error("layers", "missing");
  if (!layers->is_array() || layers->empty()) {
    return doc.Error("layers", "must be a non-empty list of layer entries");
  }
  for (size_t i = 0; i < layers->size(); ++i) {
    PREFIXSIM_ASSIGN_OR_RETURN(LayerSpec layer,
                               ParseLayer(doc, (*layers)[i], absl::StrCat("layers[", i, "]")));
    model.layers.push_back(layer);
  }
  return model;
}

absl::StatusOr<ModelSpec> LoadModel(std::string_view path_or_preset,
                                    const ModelLoadOptions& options) {
  std::string arg(path_or_preset);
  std::error_code ec;
  if (std::filesystem::is_directory(arg, ec)) {
    // A HuggingFace model directory (a snapshot or a checkout): its config.json.
    const std::filesystem::path config = std::filesystem::path(arg) / "config.json";
    if (!std::filesystem::is_regular_file(config, ec)) {
      return absl::NotFoundError(absl::StrCat(
          arg,
          ": a directory without config.json (--model takes a model JSON, a HuggingFace "
          "config.json, a HuggingFace model directory holding one, or a preset name)"));
    }
    arg = config.string();
  }
  PREFIXSIM_ASSIGN_OR_RETURN(std::string path, ResolvePresetPath(arg, "models"));
  PREFIXSIM_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  if (LooksLikeHfConfig(text)) return ImportHfConfig(text, path, options);
  return ParseModelJson(text, path);
}

}  // namespace prefixsim
