// Reading JSON configuration files with errors that name the file, the line and the field.
// nlohmann::json keeps no source positions, so a light pre-pass records the line on which every
// value starts, keyed by its path ("layers[2].num_kv_heads").
#ifndef PREFIXSIM_SIM_PLAN_JSON_CONFIG_H_
#define PREFIXSIM_SIM_PLAN_JSON_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace prefixsim {

class JsonConfig {
 public:
  // Parses `text`; a syntax error names `source` and the line.
  static absl::StatusOr<JsonConfig> Parse(std::string_view text, std::string_view source);

  const nlohmann::json& root() const { return root_; }
  const std::string& source() const { return source_; }

  // "source:LINE: field 'path': message", LINE being where the value at `path` (or the closest
  // enclosing value that exists) starts.
  absl::Status Error(std::string_view path, std::string_view message) const;
  int LineOf(std::string_view path) const;

  // Typed field access on `object` (found at `object_path`). A missing optional field gives
  // nullopt; a present one of the wrong type or out of range is an error.
  absl::StatusOr<std::optional<int64_t>> OptionalInt(const nlohmann::json& object,
                                                     std::string_view object_path,
                                                     std::string_view key, int64_t min_value) const;
  absl::StatusOr<int64_t> RequiredInt(const nlohmann::json& object, std::string_view object_path,
                                      std::string_view key, int64_t min_value) const;
  // A memory size: a positive integer, or a string such as "64GiB" (sim/util/byte_size.h).
  absl::StatusOr<std::optional<int64_t>> OptionalByteSize(const nlohmann::json& object,
                                                          std::string_view object_path,
                                                          std::string_view key) const;
  absl::StatusOr<std::optional<double>> OptionalNumber(const nlohmann::json& object,
                                                       std::string_view object_path,
                                                       std::string_view key, double min_value,
                                                       double max_value) const;
  absl::StatusOr<std::optional<bool>> OptionalBool(const nlohmann::json& object,
                                                   std::string_view object_path,
                                                   std::string_view key) const;
  absl::StatusOr<std::optional<std::string>> OptionalString(const nlohmann::json& object,
                                                            std::string_view object_path,
                                                            std::string_view key) const;

  static std::string Join(std::string_view object_path, std::string_view key);

 private:
  nlohmann::json root_;
  std::string source_;
  absl::flat_hash_map<std::string, int> line_of_path_;
};

// Reads a whole file. NotFound names the path.
absl::StatusOr<std::string> ReadFileToString(std::string_view path);

// The preset names of configs/<kind>/ under every data root (sim/util/data_dir.h), sorted.
std::vector<std::string> PresetNames(std::string_view kind);

// Resolves a config argument: an existing file path, or a preset name looked up as
// <root>/configs/<kind>/<name>.json in the first data root that has it (sim/util/data_dir.h).
absl::StatusOr<std::string> ResolvePresetPath(std::string_view path_or_preset,
                                              std::string_view kind);

}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_PLAN_JSON_CONFIG_H_
