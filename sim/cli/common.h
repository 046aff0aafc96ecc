// Options shared by the subcommands that build a KV plan: --model, --engine, --policy, and a flag
// for every numeric option of the engine JSON (docs/design.md §4.1).
#ifndef PREFIXSIM_SIM_CLI_COMMON_H_
#define PREFIXSIM_SIM_CLI_COMMON_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "prefixsim/engine_config.h"
#include "prefixsim/model.h"
#include "sim/run/model_engine.h"

namespace prefixsim::cli {

// The model/engine loading lives in sim/run (the grid loads its points the same way).
using run::EngineOverrides;
using run::LoadModelAndEngine;
using run::ModelAndEngine;
using run::ModelEngineOptions;

// A CLI11 validator for a memory-size option: "64GiB", "1.5TiB", "68719476736"
// (sim/util/byte_size.h); it rewrites the value to its byte count, so it goes in ->transform()
// (->check() validates a copy) and the option can be an int64.
CLI::Validator ByteSizeValidator();

// Validators for numeric options whose failures read "flag: '0' is not a positive number" (CLI11's
// own PositiveNumber and NonNegativeNumber print the whole range of a double).
CLI::Validator PositiveNumber();
CLI::Validator NonNegativeNumber();

// Adds --model, --engine and the override flags to `cmd`.
void AddModelEngineOptions(CLI::App* cmd, ModelEngineOptions* options);

// Adds --replicas, --router, --overlap-weight and --ttft-slo-ms to `cmd`.
void AddFleetOptions(CLI::App* cmd, EngineOverrides* overrides);

// The items of a comma-separated flag value, each trimmed of spaces, empty items dropped:
// "old, new" and "old,new" are the same list.
std::vector<std::string> SplitCommaList(std::string_view text);

// Prints "prefixsim <command>: <message>" to stderr and returns the exit code for `status`: the one
// place where an error becomes text for the user (every command's errors come here through
// RunCommand, sim/cli/commands.h).
int ReportError(std::string_view command, const absl::Status& status);

}  // namespace prefixsim::cli

#endif  // PREFIXSIM_SIM_CLI_COMMON_H_
