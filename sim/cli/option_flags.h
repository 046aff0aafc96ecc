// The CLI's spelling of the options the library names (sim/util/option_names.h): `max_requests`
// is --max-requests, `replicas=auto` is --replicas auto. Errors and reports pass through
// SpellForCli before they are printed.
#ifndef PREFIXSIM_SIM_CLI_OPTION_FLAGS_H_
#define PREFIXSIM_SIM_CLI_OPTION_FLAGS_H_

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace prefixsim::cli {

// Every (option field, flag) pair the CLI knows, in the table's order.
const std::vector<std::pair<std::string, std::string>>& OptionFlags();

// The flag of option `field`; nullopt for a field no flag sets.
std::optional<std::string> FlagForOption(std::string_view field);

// `text` with the library's option names written as the CLI's flags.
std::string SpellForCli(std::string_view text);

}  // namespace prefixsim::cli

#endif  // PREFIXSIM_SIM_CLI_OPTION_FLAGS_H_
