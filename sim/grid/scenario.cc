// Scenario files (docs/scenarios.md): reading, checking every key and value, expanding the grids
// into points. Kept apart from the runners (point.cc, sweep.cc) so that it builds with the readers
// alone (the scenario fuzz target).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "sim/grid/grid.h"
#include "sim/grid/point_config.h"
#include "sim/run/model_engine.h"
#include "sim/util/byte_size.h"
#include "sim/util/status_macros.h"

namespace prefixsim::grid {

using Json = nlohmann::ordered_json;

// nlohmann::json sorts keys.
std::string Canonical(const Json& values) { return nlohmann::json(values).dump(); }

absl::Status FieldError(const std::string& file, const std::string& field,
                        std::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(file, ": field ", field, ": ", AbslView(message)));
}

absl::StatusOr<Json> ReadJsonFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return Json::parse(ss.str());
  } catch (const nlohmann::json::exception& e) {
    // A syntax error, or a number too large for a double (out_of_range.406).
    return absl::InvalidArgumentError(absl::StrCat(path, ": invalid JSON: ", e.what()));
  }
}

namespace {

namespace fs = std::filesystem;

using Setter = std::function<absl::Status(const Json&, const std::string& dir, PointConfig&)>;

absl::Status Expect(bool ok, const char* what) {
  return ok ? absl::OkStatus() : absl::InvalidArgumentError(absl::StrCat("expected ", what));
}

// A relative path resolves against the scenario file's directory.
std::string ResolvePath(const std::string& value, const std::string& dir) {
  if (value.empty() || fs::path(value).is_absolute() || dir.empty()) return value;
  return (fs::path(dir) / value).lexically_normal().string();
}

// Model/engine: a preset name stays a name; anything that looks like a path resolves.
std::string ResolveConfig(const std::string& value, const std::string& dir) {
  const bool is_path = value.find('/') != std::string::npos ||
                       (value.size() > 5 && value.substr(value.size() - 5) == ".json");
  return is_path ? ResolvePath(value, dir) : value;
}

Setter String(std::function<void(PointConfig&, const std::string&, const std::string&)> set) {
  return [set](const Json& v, const std::string& dir, PointConfig& c) {
    PREFIXSIM_RETURN_IF_ERROR(Expect(v.is_string(), "a string"));
    set(c, v.get<std::string>(), dir);
    return absl::OkStatus();
  };
}

template <typename T>
Setter Int(T EngineOverridesMember) {
  return [EngineOverridesMember](const Json& v, const std::string&, PointConfig& c) {
    PREFIXSIM_RETURN_IF_ERROR(Expect(v.is_number_integer(), "an integer"));
    c.replay.model_engine.overrides.*EngineOverridesMember = v.get<int64_t>();
    return absl::OkStatus();
  };
}

// A memory size: an integer byte count or a string such as "64GiB" (sim/util/byte_size.h).
template <typename T>
Setter Bytes(T EngineOverridesMember) {
  return [EngineOverridesMember](const Json& v, const std::string&, PointConfig& c) {
    if (v.is_string()) {
      PREFIXSIM_ASSIGN_OR_RETURN(int64_t bytes, ParseByteSize(v.get<std::string>(), ""));
      c.replay.model_engine.overrides.*EngineOverridesMember = bytes;
      return absl::OkStatus();
    }
    PREFIXSIM_RETURN_IF_ERROR(Expect(v.is_number_integer() && v.get<int64_t>() > 0,
                                     "a positive integer (bytes) or a size such as \"64GiB\""));
    c.replay.model_engine.overrides.*EngineOverridesMember = v.get<int64_t>();
    return absl::OkStatus();
  };
}

template <typename T>
Setter Double(T member) {
  return [member](const Json& v, const std::string&, PointConfig& c) {
    PREFIXSIM_RETURN_IF_ERROR(Expect(v.is_number(), "a number"));
    c.replay.model_engine.overrides.*member = v.get<double>();
    return absl::OkStatus();
  };
}

template <typename T>
Setter Bool(T member) {
  return [member](const Json& v, const std::string&, PointConfig& c) {
    PREFIXSIM_RETURN_IF_ERROR(Expect(v.is_boolean(), "true or false"));
    c.replay.model_engine.overrides.*member = v.get<bool>();
    return absl::OkStatus();
  };
}

template <typename T>
Setter OverrideString(T member) {
  return [member](const Json& v, const std::string&, PointConfig& c) {
    PREFIXSIM_RETURN_IF_ERROR(Expect(v.is_string(), "a string"));
    c.replay.model_engine.overrides.*member = v.get<std::string>();
    return absl::OkStatus();
  };
}

using O = run::EngineOverrides;

// The keys a scenario may set: a new axis key is one line here.
const std::vector<std::pair<std::string, Setter>>& KeyTable() {
  static const auto* table = new std::vector<std::pair<std::string, Setter>>{
      {"model", String([](PointConfig& c, const std::string& v, const std::string& d) {
         c.replay.model_engine.model = ResolveConfig(v, d);
       })},
      {"engine", String([](PointConfig& c, const std::string& v, const std::string& d) {
         c.replay.model_engine.engine = ResolveConfig(v, d);
       })},
      {"trace", String([](PointConfig& c, const std::string& v, const std::string& d) {
         c.replay.trace = ResolvePath(v, d);
       })},
      {"policy",
       String([](PointConfig& c, const std::string& v, const std::string&) { c.policy = v; })},
      {"seed",
       [](const Json& v, const std::string&, PointConfig& c) {
         PREFIXSIM_RETURN_IF_ERROR(
             Expect(v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0),
                    "a non-negative integer"));
         c.replay.seed = v.get<uint64_t>();
         return absl::OkStatus();
       }},
      {"time_scale",
       [](const Json& v, const std::string&, PointConfig& c) {
         PREFIXSIM_RETURN_IF_ERROR(
             Expect(v.is_number() && v.get<double>() > 0, "a positive number"));
         c.replay.trace_options.time_scale = v.get<double>();
         return absl::OkStatus();
       }},
      {"block_size", Int(&O::block_size)},
      {"kv_cache_bytes", Bytes(&O::kv_cache_bytes)},
      {"num_gpu_blocks", Int(&O::num_gpu_blocks)},
      {"max_num_batched_tokens", Int(&O::max_num_batched_tokens)},
      {"max_num_seqs", Int(&O::max_num_seqs)},
      {"max_model_len", Int(&O::max_model_len)},
      {"long_prefill_token_threshold", Int(&O::long_prefill_token_threshold)},
      {"prefix_match_unit", Int(&O::prefix_match_unit)},
      {"tensor_parallel_size", Int(&O::tensor_parallel_size)},
      {"num_speculative_tokens", Int(&O::num_speculative_tokens)},
      {"speculative_method", OverrideString(&O::speculative_method)},
      {"kv_cache_dtype", OverrideString(&O::kv_cache_dtype)},
      {"enable_prefix_caching", Bool(&O::enable_prefix_caching)},
      {"enable_chunked_prefill", Bool(&O::enable_chunked_prefill)},
      {"disable_eagle_block_drop", Bool(&O::disable_eagle_block_drop)},
      {"scheduler_reserve_full_isl", Bool(&O::scheduler_reserve_full_isl)},
      {"kv_offloading_size", Double(&O::kv_offloading_size)},
      {"kv_offload_store_threshold", Int(&O::kv_offload_store_threshold)},
      {"kv_offload_prompt_only", Bool(&O::kv_offload_prompt_only)},
      {"kv_offload_slot_sizing", OverrideString(&O::kv_offload_slot_sizing)},
      {"kv_offload_load_gbps", Double(&O::kv_offload_load_gbps)},
      {"kv_offload_store_gbps", Double(&O::kv_offload_store_gbps)},
      {"prefix_cache_retention_interval",
       [](const Json& v, const std::string&, PointConfig& c) {
         auto& o = c.replay.model_engine.overrides.prefix_cache_retention_interval;
         if (v.is_null() || (v.is_string() && v.get<std::string>() == "dense")) {
           o = "dense";
           return absl::OkStatus();
         }
         PREFIXSIM_RETURN_IF_ERROR(Expect(v.is_number_integer() && v.get<int64_t>() >= 0,
                                          "a number of tokens (0 or more), null or \"dense\""));
         o = std::to_string(v.get<int64_t>());
         return absl::OkStatus();
       }},
      {"no_speculative",
       [](const Json& v, const std::string&, PointConfig& c) {
         PREFIXSIM_RETURN_IF_ERROR(Expect(v.is_boolean(), "true or false"));
         c.replay.model_engine.overrides.no_speculative = v.get<bool>();
         return absl::OkStatus();
       }},
      {"replicas",
       [](const Json& v, const std::string&, PointConfig& c) {
         if (v.is_number_integer()) {
           c.replay.model_engine.overrides.replicas = std::to_string(v.get<int64_t>());
           return absl::OkStatus();
         }
         PREFIXSIM_RETURN_IF_ERROR(Expect(v.is_string(), "an integer or \"auto\""));
         c.replay.model_engine.overrides.replicas = v.get<std::string>();
         return absl::OkStatus();
       }},
      {"router", OverrideString(&O::router)},
      {"overlap_weight", Double(&O::overlap_weight)},
      {"ttft_slo_ms", Double(&O::ttft_slo_ms)},
  };
  return *table;
}

const Setter* FindSetter(const std::string& key) {
  for (const auto& [k, s] : KeyTable()) {
    if (k == key) return &s;
  }
  return nullptr;
}

// Checks one key/value pair by applying it to a scratch config.
absl::Status CheckValue(const std::string& file, const std::string& field, const std::string& key,
                        const Json& value) {
  const Setter* setter = FindSetter(key);
  if (setter == nullptr) {
    return FieldError(
        file, field,
        absl::StrCat("unknown key '", key, "' (known: ", absl::StrJoin(KnownKeys(), ", "), ")"));
  }
  PointConfig scratch;
  absl::Status s = (*setter)(value, "", scratch);
  if (!s.ok()) return FieldError(file, field, StdView(s.message()));
  return absl::OkStatus();
}

absl::Status ExpandGrid(const std::string& file, const std::string& where, const Json& base,
                        const Json& axes, Scenario& out) {
  std::vector<std::pair<std::string, std::vector<Json>>> axis_list;
  if (!axes.is_null()) {
    if (!axes.is_object()) {
      return FieldError(file, where + "axes", "expected an object of key: [values]");
    }
    for (const auto& [key, values] : axes.items()) {
      const std::string field = absl::StrCat(where, "axes.", key);
      if (!values.is_array()) return FieldError(file, field, "expected a list of values");
      if (values.empty()) return FieldError(file, field, "empty axis (give at least one value)");
      std::vector<Json> vs;
      for (size_t i = 0; i < values.size(); ++i) {
        PREFIXSIM_RETURN_IF_ERROR(
            CheckValue(file, absl::StrCat(field, "[", i, "]"), key, values[i]));
        vs.push_back(values[i]);
      }
      axis_list.emplace_back(key, std::move(vs));
      if (std::find(out.axis_keys.begin(), out.axis_keys.end(), key) == out.axis_keys.end()) {
        out.axis_keys.push_back(key);
      }
    }
  }
  // Product: the last axis varies fastest.
  std::vector<size_t> idx(axis_list.size(), 0);
  while (true) {
    Point p;
    p.index = static_cast<int64_t>(out.points.size());
    p.values = base;
    for (size_t a = 0; a < axis_list.size(); ++a) {
      p.values[axis_list[a].first] = axis_list[a].second[idx[a]];
      p.axes.push_back(axis_list[a].first);
    }
    p.id = HashHex(Canonical(p.values)).substr(0, 12);
    out.points.push_back(std::move(p));
    size_t a = axis_list.size();
    while (a > 0) {
      --a;
      if (++idx[a] < axis_list[a].second.size()) break;
      idx[a] = 0;
      if (a == 0) return absl::OkStatus();
    }
    if (axis_list.empty()) return absl::OkStatus();
  }
}

absl::Status CheckBase(const std::string& file, const std::string& where, const Json& base) {
  if (!base.is_object()) return FieldError(file, where, "expected an object");
  for (const auto& [key, value] : base.items()) {
    PREFIXSIM_RETURN_IF_ERROR(CheckValue(file, absl::StrCat(where, ".", key), key, value));
  }
  return absl::OkStatus();
}

constexpr const char* kToleranceForms =
    "expected {\"abs\": x} and/or {\"rel\": x} (optionally with \"direction\": "
    "\"higher_is_better\" or \"lower_is_better\"), or {\"max_increase\": ...} and/or "
    "{\"max_decrease\": ...}";

// `v`: a number (an absolute bound) or {"abs": x, "rel": y}.
absl::Status ParseBound(const std::string& file, const std::string& field, const Json& v,
                        ToleranceBound& out) {
  if (v.is_number()) {
    if (v.get<double>() < 0) return FieldError(file, field, "expected a number >= 0");
    out.abs = v.get<double>();
    return absl::OkStatus();
  }
  if (!v.is_object() || v.empty()) {
    return FieldError(file, field, "expected a number >= 0 or {\"abs\": x, \"rel\": y}");
  }
  for (const auto& [k, x] : v.items()) {
    if (k != "abs" && k != "rel") {
      return FieldError(file, field + "." + k, "unknown field (known: abs, rel)");
    }
    if (!x.is_number() || x.get<double>() < 0) {
      return FieldError(file, field + "." + k, "expected a number >= 0");
    }
    (k == "abs" ? out.abs : out.rel) = x.get<double>();
  }
  return absl::OkStatus();
}

absl::Status ParseTolerance(const std::string& file, const std::string& field, const Json& tol,
                            Tolerance& out) {
  if (!tol.is_object() || tol.empty()) return FieldError(file, field, kToleranceForms);
  ToleranceBound both;
  std::string direction;
  bool one_sided_form = false;
  for (const auto& [k, v] : tol.items()) {
    const std::string sub = field + "." + k;
    if (k == "abs" || k == "rel") {
      if (!v.is_number() || v.get<double>() < 0) {
        return FieldError(file, sub, "expected a number >= 0");
      }
      (k == "abs" ? both.abs : both.rel) = v.get<double>();
    } else if (k == "direction") {
      if (!v.is_string() || (v.get<std::string>() != "higher_is_better" &&
                             v.get<std::string>() != "lower_is_better")) {
        return FieldError(file, sub, "expected \"higher_is_better\" or \"lower_is_better\"");
      }
      direction = v.get<std::string>();
    } else if (k == "max_increase" || k == "max_decrease") {
      one_sided_form = true;
      PREFIXSIM_RETURN_IF_ERROR(
          ParseBound(file, sub, v, k == "max_increase" ? out.increase : out.decrease));
    } else {
      return FieldError(file, sub,
                        "unknown field (known: abs, rel, direction, max_increase, max_decrease)");
    }
  }
  if (one_sided_form) {
    // Two ways of saying which side is bounded would have to agree; one way is clearer.
    if (both.bounded() || !direction.empty()) {
      return FieldError(file, field,
                        "give either abs/rel (with an optional direction) or "
                        "max_increase/max_decrease, not both");
    }
    return absl::OkStatus();
  }
  if (!both.bounded()) return FieldError(file, field, kToleranceForms);
  out.increase = direction == "higher_is_better" ? ToleranceBound{} : both;
  out.decrease = direction == "lower_is_better" ? ToleranceBound{} : both;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PointConfig> ConfigFor(const Scenario& scenario, const Point& point) {
  PointConfig c;
  c.replay.no_progress = true;
  for (const auto& [key, value] : point.values.items()) {
    const Setter* setter = FindSetter(key);
    if (setter == nullptr) return absl::InvalidArgumentError("unknown key " + key);
    PREFIXSIM_RETURN_IF_ERROR((*setter)(value, scenario.dir, c));
  }
  return c;
}

std::vector<std::string> KnownKeys() {
  std::vector<std::string> keys;
  for (const auto& [k, s] : KeyTable()) keys.push_back(k);
  return keys;
}

std::string HashHex(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char ch : text) {
    h ^= ch;
    h *= 0x100000001b3ULL;
  }
  return absl::StrFormat("%016x", h);
}

absl::StatusOr<Scenario> LoadScenario(const std::string& path) {
  PREFIXSIM_ASSIGN_OR_RETURN(Json j, ReadJsonFile(path));
  if (!j.is_object()) return FieldError(path, "(top level)", "expected an object");
  Scenario s;
  s.path = path;
  s.dir = fs::path(path).parent_path().string();
  for (const auto& item : j.items()) {
    const std::string& key = item.key();
    static const char* kTop[] = {"name", "description", "base", "axes", "grids", "tolerances"};
    if (std::find_if(std::begin(kTop), std::end(kTop), [&](const char* k) { return key == k; }) ==
        std::end(kTop)) {
      return FieldError(path, key,
                        "unknown field (known: name, description, base, axes, grids, tolerances)");
    }
  }
  if (!j.contains("name") || !j["name"].is_string() || j["name"].get<std::string>().empty()) {
    return FieldError(path, "name", "expected a non-empty string");
  }
  s.name = j["name"].get<std::string>();
  Json base = j.contains("base") ? j["base"] : Json::object();
  PREFIXSIM_RETURN_IF_ERROR(CheckBase(path, "base", base));
  const Json axes = j.contains("axes") ? j["axes"] : Json();
  if (j.contains("grids")) {
    if (j.contains("axes")) return FieldError(path, "axes", "give either axes or grids, not both");
    const Json& grids = j["grids"];
    if (!grids.is_array() || grids.empty()) {
      return FieldError(path, "grids", "expected a non-empty list of {base, axes}");
    }
    for (size_t g = 0; g < grids.size(); ++g) {
      const std::string where = absl::StrCat("grids[", g, "].");
      if (!grids[g].is_object())
        return FieldError(path, "grids[" + std::to_string(g) + "]", "expected an object");
      for (const auto& [key, value] : grids[g].items()) {
        if (key != "base" && key != "axes") {
          return FieldError(path, where + key, "unknown field (known: base, axes)");
        }
      }
      Json gbase = base;
      if (grids[g].contains("base")) {
        PREFIXSIM_RETURN_IF_ERROR(CheckBase(path, where + "base", grids[g]["base"]));
        for (const auto& [key, value] : grids[g]["base"].items()) gbase[key] = value;
      }
      PREFIXSIM_RETURN_IF_ERROR(
          ExpandGrid(path, where, gbase, grids[g].contains("axes") ? grids[g]["axes"] : Json(), s));
    }
  } else {
    PREFIXSIM_RETURN_IF_ERROR(ExpandGrid(path, "", base, axes, s));
  }
  // Every point needs a trace, model and engine.
  for (const Point& p : s.points) {
    for (const char* key : {"trace", "model", "engine"}) {
      if (!p.values.contains(key)) {
        return FieldError(path, absl::StrCat("base.", key),
                          absl::StrCat("missing (point ", p.index, " has no ", key, ")"));
      }
    }
  }
  // Two points with the same values would share an id.
  absl::flat_hash_map<std::string, int64_t> seen;
  for (const Point& p : s.points) {
    auto [it, inserted] = seen.emplace(p.id, p.index);
    if (!inserted) {
      return FieldError(path, "axes",
                        absl::StrCat("points ", it->second, " and ", p.index,
                                     " have the same values (duplicate axis value?)"));
    }
  }
  if (j.contains("tolerances")) {
    const Json& t = j["tolerances"];
    if (!t.is_object()) return FieldError(path, "tolerances", "expected an object");
    for (const auto& [metric, tol] : t.items()) {
      Tolerance tv;
      PREFIXSIM_RETURN_IF_ERROR(ParseTolerance(path, "tolerances." + metric, tol, tv));
      s.tolerances.emplace_back(metric, tv);
    }
  }
  return s;
}

absl::Status ParseShard(const std::string& text, int* shard, int* num_shards) {
  const size_t slash = text.find('/');
  int i = -1, n = -1;
  if (slash == std::string::npos || !absl::SimpleAtoi(text.substr(0, slash), &i) ||
      !absl::SimpleAtoi(text.substr(slash + 1), &n) || n < 1 || i < 0 || i >= n) {
    return absl::InvalidArgumentError(
        absl::StrCat("`shard`: '", text, "': expected I/N with 0 <= I < N"));
  }
  *shard = i;
  *num_shards = n;
  return absl::OkStatus();
}

std::vector<Point> ShardPoints(const std::vector<Point>& points, int shard, int num_shards) {
  std::vector<Point> out;
  for (const Point& p : points) {
    if (p.index % num_shards == shard) out.push_back(p);
  }
  return out;
}

}  // namespace prefixsim::grid
