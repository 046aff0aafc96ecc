#include "sim/plan/config_fields.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "sim/util/status_macros.h"

namespace prefixsim {

bool IsDocumentationField(std::string_view field) {
  return field == "description" || field == "notes" || field == "source";
}

absl::Status RejectUnknownFields(const JsonConfig& doc, const nlohmann::json& object,
                                 std::string_view object_path,
                                 const std::vector<std::string_view>& known) {
  if (!object.is_object()) return absl::OkStatus();
  for (const auto& [key, value] : object.items()) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    std::string list;
    for (std::string_view k : known) absl::StrAppend(&list, list.empty() ? "" : ", ", AbslView(k));
    return doc.Error(JsonConfig::Join(object_path, key),
                     absl::StrCat("unknown field (known here: ", list, ")"));
  }
  return absl::OkStatus();
}

}  // namespace prefixsim
