// The fields each object of the native model JSON and of the engine JSON accepts. Anything else
// is an "unknown field" error, so a misspelt knob cannot be silently ignored; the tests walk
// these lists to check that every field takes effect or is refused (issue 26).
#ifndef PREFIXSIM_SIM_PLAN_CONFIG_FIELDS_H_
#define PREFIXSIM_SIM_PLAN_CONFIG_FIELDS_H_

#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "sim/plan/json_config.h"

namespace prefixsim {

struct ConfigObjectFields {
  // Where the object sits: "" (top level), "layers[]", "speculative", "backend", ...
  std::string_view path;
  std::vector<std::string_view> fields;
};

const std::vector<ConfigObjectFields>& ModelJsonFields();
const std::vector<ConfigObjectFields>& EngineJsonFields();

// Fields that only document a file ("description", "notes", "source"): accepted, no effect.
bool IsDocumentationField(std::string_view field);

// The fields of `object` (found at `object_path`) that `known` does not list: an error naming the
// first one and the fields it could have meant.
absl::Status RejectUnknownFields(const JsonConfig& doc, const nlohmann::json& object,
                                 std::string_view object_path,
                                 const std::vector<std::string_view>& known);

}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_PLAN_CONFIG_FIELDS_H_
