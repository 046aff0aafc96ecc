// Placeholder: HuggingFace config import is issue 7 (being written on its own branch).
#include "absl/strings/str_cat.h"
#include "prefixsim/model.h"
#include "prefixsim/status.h"

namespace prefixsim {

bool LooksLikeHfConfig(std::string_view text) {
  return text.find("\"model_type\"") != std::string_view::npos ||
         text.find("\"architectures\"") != std::string_view::npos;
}

absl::StatusOr<ModelSpec> ImportHfConfig(std::string_view, std::string_view source,
                                         const ModelLoadOptions&) {
  return absl::UnimplementedError(
      absl::StrCat(AbslView(source), ": HuggingFace config.json import is not implemented yet"));
}

}  // namespace prefixsim
