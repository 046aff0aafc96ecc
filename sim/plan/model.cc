#include "prefixsim/model.h"

#include <algorithm>
#include <array>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sim/plan/config_fields.h"
#include "sim/plan/json_config.h"
#include "sim/util/status_macros.h"

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
  PREFIXSIM_RETURN_IF_ERROR(RejectUnknownFields(doc, layer, path, ModelJsonFields()[1].fields));
  LayerSpec spec;
  PREFIXSIM_ASSIGN_OR_RETURN(auto kind_name, doc.OptionalString(layer, path, "kind"));
  if (!kind_name) return doc.Error(JsonConfig::Join(path, "kind"), "missing");
  auto kind = ParseLayerKind(*kind_name);
  if (!kind) {
    return doc.Error(
        JsonConfig::Join(path, "kind"),
        absl::StrCat("unknown layer kind '", *kind_name, "' (known: ", KindList(), ")"));
  }
  spec.kind = *kind;
  PREFIXSIM_ASSIGN_OR_RETURN(spec.count, doc.RequiredInt(layer, path, "count", 1));
  PREFIXSIM_ASSIGN_OR_RETURN(auto drafter, doc.OptionalBool(layer, path, "drafter"));
  spec.drafter = drafter.value_or(false);
  PREFIXSIM_ASSIGN_OR_RETURN(auto dtype_name, doc.OptionalString(layer, path, "kv_dtype"));
  if (dtype_name) {
    auto dtype = ParseKvDtype(*dtype_name);
    if (!dtype) {
      return doc.Error(
          JsonConfig::Join(path, "kv_dtype"),
          absl::StrCat("unknown dtype '", *dtype_name, "' (known: bf16, fp16, fp8, fp32)"));
    }
    spec.kv_dtype = *dtype;
  }
  if (spec.kind == LayerKind::kMamba) {
    PREFIXSIM_ASSIGN_OR_RETURN(spec.state_bytes, doc.RequiredInt(layer, path, "state_bytes", 1));
    PREFIXSIM_ASSIGN_OR_RETURN(auto heads, doc.OptionalInt(layer, path, "num_heads", 1));
    spec.num_heads = static_cast<int>(heads.value_or(0));
  }
  // Fields of another kind would be ignored; refuse them so the file says what is used.
  static constexpr std::array<std::pair<std::string_view, LayerKind>, 4> kOnlyFor = {{
      {"sliding_window", LayerKind::kSlidingWindow},
      {"attention_chunk_size", LayerKind::kChunkedLocal},
      {"state_bytes", LayerKind::kMamba},
      {"num_heads", LayerKind::kMamba},
  }};
  for (const auto& [key, kind] : kOnlyFor) {
    if (layer.contains(std::string(key)) && spec.kind != kind) {
      return doc.Error(JsonConfig::Join(path, key),
                       absl::StrCat("applies only to ", AbslView(LayerKindName(kind)),
                                    " layers, not ", AbslView(LayerKindName(spec.kind))));
    }
  }
  if (spec.kind == LayerKind::kMamba) {
    for (std::string_view key : {"num_kv_heads", "head_size", "head_size_v", "kv_lora_rank",
                                 "qk_rope_head_dim", "bytes_per_token", "kv_dtype"}) {
      if (layer.contains(std::string(key))) {
        return doc.Error(JsonConfig::Join(path, key),
                         "does not apply to mamba layers (their page is state_bytes)");
      }
    }
    return spec;
  }
  PREFIXSIM_ASSIGN_OR_RETURN(auto bpt, doc.OptionalInt(layer, path, "bytes_per_token", 1));
  spec.bytes_per_token_override = bpt.value_or(0);
  const bool mla = spec.kind == LayerKind::kMla;
  // A shape field the layer's form does not read would be silently ignored: refuse it.
  for (std::string_view key :
       {"num_kv_heads", "head_size", "head_size_v", "kv_lora_rank", "qk_rope_head_dim"}) {
    if (!layer.contains(std::string(key))) continue;
    const bool mla_key = key == "kv_lora_rank" || key == "qk_rope_head_dim";
    if (bpt) {
      return doc.Error(JsonConfig::Join(path, key),
                       "bytes_per_token replaces the layer's shape: give one or the other");
    }
    if (mla_key != mla) {
      return doc.Error(JsonConfig::Join(path, key),
                       mla ? "does not apply to mla layers (their shape is kv_lora_rank + "
                             "qk_rope_head_dim)"
                           : "applies only to mla layers");
    }
  }
  if (mla) {
    if (!bpt) {
      PREFIXSIM_ASSIGN_OR_RETURN(spec.kv_lora_rank,
                                 doc.RequiredInt(layer, path, "kv_lora_rank", 1));
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

// KV heads per rank as vLLM's ModelConfig.get_num_kv_heads computes them: max(1, total / tp).
// The QKV projection needs one of the two to divide the other (heads split, or each head
// replicated on tp / total ranks).
absl::StatusOr<int> KvHeadsPerRankOrError(int64_t total, int tp, std::string_view what) {
  if (total >= tp ? total % tp != 0 : tp % total != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        total, " KV heads", AbslView(what), " cannot be ", total >= tp ? "split" : "replicated",
        " over tensor_parallel_size ", tp, " (one must divide the other)"));
  }
  return static_cast<int>(std::max<int64_t>(1, total / tp));
}

// Turns the file's shapes (per rank at the model's own tensor_parallel_size) into per-rank
// shapes at `options`' tensor_parallel_size, and applies the kv_cache_dtype override; the rules
// are vLLM's page sizing per spec kind (docs/semantics.md §2.1, docs/planner.md). `error(i, field,
// msg)` names layers[i].field of the file.
template <typename ErrorFn>
absl::Status ApplyLoadOptions(ModelSpec& model, const ModelLoadOptions& options,
                              const ErrorFn& error) {
  const int from = model.tensor_parallel_size;
  const int to = options.tensor_parallel_size.value_or(from);
  if (to < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor_parallel_size must be at least 1, got ", to));
  }
  if (from != to && from > 1) {
    model.assumptions.push_back(absl::StrCat(
        "the model's shapes are per rank at tensor_parallel_size ", from, "; re-derived for ", to,
        " assuming its KV heads and states were split over ", from, " ranks, not replicated"));
  }
  for (size_t i = 0; i < model.layers.size(); ++i) {
    LayerSpec& layer = model.layers[i];
    if (from != to) {
      if (layer.kind == LayerKind::kMamba) {
        // vLLM's mamba state shapes divide the heads (and conv channels) by tp exactly, so the
        // page divides by tp too.
        const int64_t total = layer.state_bytes * from;
        if (layer.num_heads > 0) {
          const int64_t heads = int64_t{layer.num_heads} * from;
          if (heads % to != 0) {
            return error(i, "num_heads",
                         absl::StrCat(heads,
                                      " state heads cannot be split over "
                                      "tensor_parallel_size ",
                                      to, " (vLLM divides mamba heads exactly)"));
          }
          layer.num_heads = static_cast<int>(heads / to);
        } else if (to > 1) {
          model.assumptions.push_back(absl::StrCat(
              "layers[", i, "] (mamba): no num_heads given, so state_bytes ", total,
              " is assumed to split evenly over tensor_parallel_size ", to, " (",
              total % to == 0 ? absl::StrCat(total / to, " bytes per rank") : "it does not",
              "); give num_heads to have the split checked"));
        }
        if (total % to != 0) {
          return error(i, "state_bytes",
                       absl::StrCat("a state of ", total,
                                    " bytes cannot be split over "
                                    "tensor_parallel_size ",
                                    to));
        }
        layer.state_bytes = total / to;
      } else if (layer.kind != LayerKind::kMla) {
        // The MLA latent is one head shared by all query heads: every rank keeps all of it.
        if (layer.bytes_per_token_override > 0) {
          return error(i, "bytes_per_token",
                       absl::StrCat("gives no KV head count, so tensor_parallel_size ", to,
                                    " cannot be applied to it (the file's shapes are for ", from,
                                    "); give num_kv_heads and head_size instead"));
        }
        auto heads = KvHeadsPerRankOrError(int64_t{layer.num_kv_heads} * from, to, "");
        if (!heads.ok()) return error(i, "num_kv_heads", StdView(heads.status().message()));
        layer.num_kv_heads = *heads;
      }
    }
    if (options.kv_dtype && IsAttention(layer.kind) && layer.kv_dtype != *options.kv_dtype) {
      if (layer.bytes_per_token_override > 0) {
        return error(i, "bytes_per_token",
                     absl::StrCat("was given for kv_dtype ", AbslView(KvDtypeName(layer.kv_dtype)),
                                  ", so kv_cache_dtype ", AbslView(KvDtypeName(*options.kv_dtype)),
                                  " cannot be applied to it; give the layer's shape instead"));
      }
      layer.kv_dtype = *options.kv_dtype;
    }
  }
  model.tensor_parallel_size = to;
  model.kv_cache_dtype = options.kv_dtype;
  return absl::OkStatus();
}

}  // namespace

const std::vector<ConfigObjectFields>& ModelJsonFields() {
  static const auto* fields = new std::vector<ConfigObjectFields>{
      {"",
       {"name", "active_params", "active_params_source", "tensor_parallel_size", "layers",
        "description", "notes", "source"}},
      {"layers[]",
       {"kind", "count", "num_kv_heads", "head_size", "head_size_v", "kv_lora_rank",
        "qk_rope_head_dim", "bytes_per_token", "sliding_window", "attention_chunk_size",
        "state_bytes", "num_heads", "kv_dtype", "drafter", "description"}},
  };
  return *fields;
}

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

std::string KvDtypeSpellings() {
  return "auto, bf16, bfloat16, fp16, float16, half, fp8, fp8_e4m3, fp8_e5m2, fp32, float32, "
         "float";
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
    // One latent tensor (no separate V): docs/semantics.md §2.1.
    return static_cast<int64_t>(kv_lora_rank + qk_rope_head_dim) * element;
  }
  const int64_t v = head_size_v > 0 ? head_size_v : head_size;
  return static_cast<int64_t>(num_kv_heads) * (head_size + v) * element;
}

absl::StatusOr<ModelSpec> ParseModelJson(std::string_view text, std::string_view source,
                                         const ModelLoadOptions& options) {
  PREFIXSIM_ASSIGN_OR_RETURN(JsonConfig doc, JsonConfig::Parse(text, source));
  const nlohmann::json& root = doc.root();
  if (!root.is_object()) return doc.Error("", "a model must be a JSON object");
  PREFIXSIM_RETURN_IF_ERROR(RejectUnknownFields(doc, root, "", ModelJsonFields()[0].fields));
  ModelSpec model;
  model.source = std::string(source);
  PREFIXSIM_ASSIGN_OR_RETURN(auto name, doc.OptionalString(root, "", "name"));
  model.name = name.value_or(std::string(source));
  PREFIXSIM_ASSIGN_OR_RETURN(auto active, doc.OptionalNumber(root, "", "active_params", 1, 1e15));
  if (active) model.active_params = *active;
  PREFIXSIM_ASSIGN_OR_RETURN(auto active_source,
                             doc.OptionalString(root, "", "active_params_source"));
  if (active_source) model.active_params_source = *active_source;
  PREFIXSIM_ASSIGN_OR_RETURN(auto tp, doc.OptionalInt(root, "", "tensor_parallel_size", 1));
  if (tp) {
    if (*tp > 1 << 20) return doc.Error("tensor_parallel_size", "out of range");
    model.tensor_parallel_size = static_cast<int>(*tp);
  }
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
  PREFIXSIM_RETURN_IF_ERROR(ApplyLoadOptions(
      model, options, [&](size_t i, std::string_view field, std::string_view message) {
        return doc.Error(absl::StrCat("layers[", i, "].", AbslView(field)), message);
      }));
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
          ": a directory without config.json (`model` takes a model JSON, a HuggingFace "
          "config.json, a HuggingFace model directory holding one, or a preset name)"));
    }
    arg = config.string();
  }
  PREFIXSIM_ASSIGN_OR_RETURN(std::string path, ResolvePresetPath(arg, "models"));
  PREFIXSIM_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  if (LooksLikeHfConfig(text)) return ImportHfConfig(text, path, options);
  return ParseModelJson(text, path, options);
}

}  // namespace prefixsim
