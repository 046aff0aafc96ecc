#include "sim/plan/json_config.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "sim/util/byte_size.h"
#include "sim/util/data_dir.h"
#include "sim/util/did_you_mean.h"
#include "sim/util/status_macros.h"

namespace prefixsim {
namespace {

// Records the starting line of every value by path. Assumes syntactically valid JSON (it runs
// after nlohmann accepted the text).
void IndexLines(std::string_view text, absl::flat_hash_map<std::string, int>& line_of_path) {
  struct Frame {
    bool is_array;
    std::string path;
    int next_index;
    std::string pending_key;
  };
  std::vector<Frame> stack;
  int line = 1;
  auto value_path = [&]() -> std::string {
    if (stack.empty()) return "";
    Frame& f = stack.back();
    if (f.is_array) return absl::StrCat(f.path, "[", f.next_index, "]");
    return JsonConfig::Join(f.path, f.pending_key);
  };
  bool expecting_key = false;
  size_t i = 0;
  auto begin_value = [&]() {
    std::string p = value_path();
    line_of_path.try_emplace(p, line);
    return p;
  };
  while (i < text.size()) {
    char c = text[i];
    if (c == '\n') {
      ++line;
      ++i;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r' || c == ',' || c == ':') {
      if (c == ',' && !stack.empty()) {
        if (stack.back().is_array) {
          ++stack.back().next_index;
        } else {
          expecting_key = true;
        }
      }
      ++i;
      continue;
    }
    if (c == '"') {
      size_t j = i + 1;
      std::string s;
      while (j < text.size() && text[j] != '"') {
        if (text[j] == '\\' && j + 1 < text.size()) {
          s.push_back(text[j + 1]);
          j += 2;
          continue;
        }
        s.push_back(text[j]);
        ++j;
      }
      if (expecting_key) {
        stack.back().pending_key = s;
        expecting_key = false;
      } else {
        begin_value();
      }
      i = j + 1;
      continue;
    }
    if (c == '{' || c == '[') {
      std::string p = begin_value();
      stack.push_back(Frame{c == '[', p, 0, ""});
      expecting_key = (c == '{');
      ++i;
      continue;
    }
    if (c == '}' || c == ']') {
      if (!stack.empty()) stack.pop_back();
      expecting_key = false;
      ++i;
      continue;
    }
    // Scalar literal.
    begin_value();
    while (i < text.size() && text[i] != ',' && text[i] != '}' && text[i] != ']' &&
           text[i] != '\n' && text[i] != ' ') {
      ++i;
    }
  }
}

}  // namespace

std::string JsonConfig::Join(std::string_view object_path, std::string_view key) {
  if (object_path.empty()) return std::string(key);
  return absl::StrCat(AbslView(object_path), ".", AbslView(key));
}

absl::StatusOr<JsonConfig> JsonConfig::Parse(std::string_view text, std::string_view source) {
  JsonConfig config;
  config.source_ = std::string(source);
  try {
    config.root_ = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    size_t byte = e.byte == 0 ? 0 : e.byte - 1;
    int line = 1;
    for (size_t i = 0; i < byte && i < text.size(); ++i) line += text[i] == '\n';
    std::string what = e.what();
    // nlohmann's message starts with "[json.exception.parse_error.101] parse error at ..."
    auto pos = what.find("] ");
    if (pos != std::string::npos) what = what.substr(pos + 2);
    return absl::InvalidArgumentError(
        absl::StrCat(AbslView(source), ":", line, ": invalid JSON: ", what));
  } catch (const nlohmann::json::exception& e) {
    // Not a syntax error but still bad input, e.g. a number too large for a double
    // ("[json.exception.out_of_range.406] number overflow parsing '1e999'").
    std::string what = e.what();
    auto pos = what.find("] ");
    if (pos != std::string::npos) what = what.substr(pos + 2);
    return absl::InvalidArgumentError(absl::StrCat(AbslView(source), ": invalid JSON: ", what));
  }
  IndexLines(text, config.line_of_path_);
  return config;
}

int JsonConfig::LineOf(std::string_view path) const {
  std::string p(path);
  while (true) {
    auto it = line_of_path_.find(p);
    if (it != line_of_path_.end()) return it->second;
    if (p.empty()) return 1;
    auto cut = p.find_last_of(".[");
    p = cut == std::string::npos ? "" : p.substr(0, cut);
  }
}

absl::Status JsonConfig::Error(std::string_view path, std::string_view message) const {
  return absl::InvalidArgumentError(absl::StrCat(source_, ":", LineOf(path), ": field '",
                                                 AbslView(path), "': ", AbslView(message)));
}

absl::StatusOr<std::optional<int64_t>> JsonConfig::OptionalInt(const nlohmann::json& object,
                                                               std::string_view object_path,
                                                               std::string_view key,
                                                               int64_t min_value) const {
  std::string path = Join(object_path, key);
  auto it = object.find(std::string(key));
  if (it == object.end() || it->is_null()) return std::optional<int64_t>();
  int64_t value = 0;
  // The integral values of int64_t only: casting a double at or beyond +-2^63 is undefined
  // behaviour. A double of exactly -2^63 is refused too, although int64_t holds it: an integer
  // literal below INT64_MIN (-2^63-1) reaches here as a double rounded to -2^63, and INT64_MIN
  // itself arrives as an integer.
  constexpr double kInt64Bound = 9223372036854775808.0;  // 2^63
  if (it->is_number_unsigned() &&
      it->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return Error(path, absl::StrCat("out of range, got ", it->dump()));
  } else if (it->is_number_integer()) {
    value = it->get<int64_t>();
  } else if (!it->is_number_float() || it->get<double>() != std::trunc(it->get<double>())) {
    return Error(path, absl::StrCat("must be an integer, got ", it->dump()));
  } else if (std::abs(it->get<double>()) >= kInt64Bound) {
    return Error(path, absl::StrCat("out of range, got ", it->dump()));
  } else {
    value = static_cast<int64_t>(it->get<double>());
  }
  if (value < min_value) {
    return Error(path, absl::StrCat("must be >= ", min_value, ", got ", value));
  }
  return std::optional<int64_t>(value);
}

absl::StatusOr<int64_t> JsonConfig::RequiredInt(const nlohmann::json& object,
                                                std::string_view object_path, std::string_view key,
                                                int64_t min_value) const {
  auto v = OptionalInt(object, object_path, key, min_value);
  if (!v.ok()) return v.status();
  if (!v->has_value()) return Error(Join(object_path, key), "missing");
  return **v;
}

absl::StatusOr<std::optional<int64_t>> JsonConfig::OptionalByteSize(const nlohmann::json& object,
                                                                    std::string_view object_path,
                                                                    std::string_view key) const {
  auto it = object.find(std::string(key));
  if (it == object.end() || it->is_null() || !it->is_string()) {
    return OptionalInt(object, object_path, key, 1);
  }
  const std::string path = Join(object_path, key);
  absl::StatusOr<int64_t> bytes = ParseByteSize(it->get<std::string>(), "size");
  if (!bytes.ok()) return Error(path, StdView(bytes.status().message()));
  return std::optional<int64_t>(*bytes);
}

absl::StatusOr<std::optional<double>> JsonConfig::OptionalNumber(const nlohmann::json& object,
                                                                 std::string_view object_path,
                                                                 std::string_view key,
                                                                 double min_value,
                                                                 double max_value) const {
  std::string path = Join(object_path, key);
  auto it = object.find(std::string(key));
  if (it == object.end() || it->is_null()) return std::optional<double>();
  if (!it->is_number()) return Error(path, absl::StrCat("must be a number, got ", it->dump()));
  double value = it->get<double>();
  if (value < min_value || value > max_value) {
    return Error(path, absl::StrFormat("must be in [%g, %g], got %g", min_value, max_value, value));
  }
  return std::optional<double>(value);
}

absl::StatusOr<std::optional<bool>> JsonConfig::OptionalBool(const nlohmann::json& object,
                                                             std::string_view object_path,
                                                             std::string_view key) const {
  auto it = object.find(std::string(key));
  if (it == object.end() || it->is_null()) return std::optional<bool>();
  if (!it->is_boolean()) {
    return Error(Join(object_path, key), absl::StrCat("must be true or false, got ", it->dump()));
  }
  return std::optional<bool>(it->get<bool>());
}

absl::StatusOr<std::optional<std::string>> JsonConfig::OptionalString(const nlohmann::json& object,
                                                                      std::string_view object_path,
                                                                      std::string_view key) const {
  auto it = object.find(std::string(key));
  if (it == object.end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_string()) {
    return Error(Join(object_path, key), absl::StrCat("must be a string, got ", it->dump()));
  }
  return std::optional<std::string>(it->get<std::string>());
}

absl::StatusOr<std::string> ReadFileToString(std::string_view path) {
  std::ifstream in{std::string(path), std::ios::binary};
  if (!in) return absl::NotFoundError(absl::StrCat(AbslView(path), ": cannot open file"));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

namespace {

// configs/ under each data root (sim/util/data_dir.h): $PREFIXSIM_CONFIG_DIR, the installed
// share/prefixsim next to the binary, the source tree.
std::vector<std::filesystem::path> PresetRoots() {
  std::vector<std::filesystem::path> roots = DataDirs();
  for (std::filesystem::path& root : roots) root /= "configs";
  return roots;
}

}  // namespace

std::vector<std::string> PresetNames(std::string_view kind) {
  namespace fs = std::filesystem;
  std::set<std::string> names;
  for (const fs::path& root : PresetRoots()) {
    std::error_code ec;
    for (fs::directory_iterator it(root / std::string(kind), ec), end; !ec && it != end;
         it.increment(ec)) {
      if (it->path().extension() == ".json") names.insert(it->path().stem().string());
    }
  }
  return {names.begin(), names.end()};
}

absl::StatusOr<std::string> ResolvePresetPath(std::string_view path_or_preset,
                                              std::string_view kind) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_regular_file(fs::path(std::string(path_or_preset)), ec)) {
    return std::string(path_or_preset);
  }
  if (fs::is_directory(fs::path(std::string(path_or_preset)), ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat(AbslView(path_or_preset), ": is a directory, not a JSON file"));
  }
  if (path_or_preset.find('/') == std::string_view::npos &&
      path_or_preset.find(".json") == std::string_view::npos) {
    for (const auto& root : PresetRoots()) {
      fs::path candidate =
          root / std::string(kind) / absl::StrCat(AbslView(path_or_preset), ".json");
      if (fs::is_regular_file(candidate, ec)) return candidate.string();
    }
    const std::vector<std::string> presets = PresetNames(kind);
    return absl::NotFoundError(absl::StrCat(
        AbslView(path_or_preset), ": no such file and no ", AbslView(kind),
        " preset of that name in configs/", AbslView(kind), "/",
        DidYouMean(path_or_preset, presets), " (presets: ", absl::StrJoin(presets, ", "), "; ",
        LookedIn(PresetRoots()), ")"));
  }
  return absl::NotFoundError(absl::StrCat(AbslView(path_or_preset), ": cannot open file"));
}

}  // namespace prefixsim
