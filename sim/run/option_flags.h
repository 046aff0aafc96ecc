// The front ends' spelling of the options the library names (sim/util/option_names.h). The CLI
// writes `max_requests` as --max-requests and `replicas=auto` as --replicas auto; the Python
// module's keyword arguments are the flags with underscores (`max_requests`, `trace_start_s`).
// Errors and reports pass through one of these before a user reads them.
#ifndef PREFIXSIM_SIM_RUN_OPTION_FLAGS_H_
#define PREFIXSIM_SIM_RUN_OPTION_FLAGS_H_

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace prefixsim::run {

// Every (option field, CLI flag) pair, in the table's order.
const std::vector<std::pair<std::string, std::string>>& OptionFlags();

// The flag of option `field`; nullopt for a field no flag sets.
std::optional<std::string> FlagForOption(std::string_view field);

// `text` with the library's option names written as the CLI's flags.
std::string SpellAsFlags(std::string_view text);

// `text` with the library's option names written as keyword arguments named like the flags
// (--trace-start-s: `trace_start_s`; `replicas=auto`: `replicas="auto"`), still in backticks.
std::string SpellAsKeywords(std::string_view text);

}  // namespace prefixsim::run

#endif  // PREFIXSIM_SIM_RUN_OPTION_FLAGS_H_
