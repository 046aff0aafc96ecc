#include "sim/util/option_names.h"

namespace prefixsim {
namespace {

// What may stand between the backticks of an option name: a field (lower case, digits,
// underscores, dots for a JSON path) and an optional "=value".
bool IsOptionName(std::string_view token) {
  if (token.empty() || !(token[0] >= 'a' && token[0] <= 'z')) return false;
  const size_t eq = token.find('=');
  for (char c : token.substr(0, eq)) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.')) return false;
  }
  return eq == std::string_view::npos || eq + 1 < token.size();
}

}  // namespace

std::string OptionName(std::string_view field, std::string_view value) {
  std::string name = "`";
  name.append(field);
  if (!value.empty()) name.append("=").append(value);
  name.append("`");
  return name;
}

std::string SpellOptionNames(std::string_view text, const OptionSpelling& spell) {
  std::string out;
  out.reserve(text.size());
  size_t at = 0;
  while (at < text.size()) {
    const size_t open = text.find('`', at);
    const size_t close = open == std::string_view::npos ? open : text.find('`', open + 1);
    if (close == std::string_view::npos) break;
    const std::string_view token = text.substr(open + 1, close - open - 1);
    out.append(text.substr(at, open - at));
    std::optional<std::string> spelt;
    if (IsOptionName(token)) {
      const size_t eq = token.find('=');
      spelt = eq == std::string_view::npos ? spell(token, {})
                                           : spell(token.substr(0, eq), token.substr(eq + 1));
    }
    if (spelt.has_value()) {
      out.append(*spelt);
      at = close + 1;
    } else {
      // Not an option this front end spells: keep the opening backtick and look again from the
      // closing one, which may open a name.
      out.append("`");
      at = open + 1;
    }
  }
  out.append(text.substr(at));
  return out;
}

}  // namespace prefixsim
