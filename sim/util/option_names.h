// How the library names an option in what it tells a user (an error, a report's advice): by the
// field a caller sets (TraceOptions::max_requests is `max_requests`), in backticks, with the value
// it suggests where it suggests one (`replicas=auto`). A front end that spells its options
// otherwise (the CLI's flags, the Python module's keywords) rewrites the names it knows with
// SpellOptionNames, so the library never knows the flags and an embedder reads its own fields.
#ifndef PREFIXSIM_SIM_UTIL_OPTION_NAMES_H_
#define PREFIXSIM_SIM_UTIL_OPTION_NAMES_H_

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace prefixsim {

// "`field`", or "`field=value`" with a value.
std::string OptionName(std::string_view field, std::string_view value = {});

// How a front end spells option `field` (with `value`, empty when none): nullopt leaves the
// backticked name as it is.
using OptionSpelling =
    std::function<std::optional<std::string>(std::string_view field, std::string_view value)>;

// `text` with every backticked option name that `spell` knows rewritten its way.
std::string SpellOptionNames(std::string_view text, const OptionSpelling& spell);

}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_UTIL_OPTION_NAMES_H_
