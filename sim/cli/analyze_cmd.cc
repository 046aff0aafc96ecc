// `prefixsim analyze --trace T`: what a trace could give at best, independent of the engine
// (docs/design.md §4.1): the prefix-sharing forest, the upper-bound hit rate per hit alignment, and
// the hit rate per cache capacity under LRU and the offline optimum.
#include <algorithm>
#include <cctype>
#include <exception>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "prefixsim/analyze.h"
#include "prefixsim/trace.h"
#include "sim/cli/commands.h"
#include "sim/cli/exit_codes.h"
#include "sim/cli/replay_common.h"
#include "sim/cli/trace_flags.h"
#include "sim/util/atomic_file.h"
#include "sim/util/status_macros.h"

namespace prefixsim::cli {
namespace {

// CLI11's PositiveNumber prints a range up to DBL_MAX; this says it plainly.
const CLI::Validator kPositive(
    [](std::string& value) -> std::string {
      try {
        if (std::stoll(value) > 0) return "";
      } catch (const std::exception&) {
      }
      return "must be a positive integer, got '" + value + "'";
    },
    "POSITIVE");

// analyze has no model and no engine, so it cannot turn bytes into blocks: a size with a unit is
// refused with the reason rather than misread (compare/replay --capacities do take bytes).
const CLI::Validator kCapacityBlocks(
    [](std::string& value) -> std::string {
      const bool has_unit = std::any_of(value.begin(), value.end(), [](char c) {
        return std::isalpha(static_cast<unsigned char>(c));
      });
      if (has_unit) {
        return "'" + value +
               "' is a memory size, but analyze has no model or engine to turn bytes into "
               "blocks: its capacities count blocks of --block-tokens tokens (e.g. "
               "--capacity-blocks 1024,4096); replay/compare --capacities take sizes in bytes";
      }
      return kPositive(value);
    },
    "BLOCKS");

struct AnalyzeFlags {
  std::string trace;
  TraceOptions trace_options;
  int64_t block_tokens = 0;
  std::vector<int64_t> alignments;
  std::vector<int64_t> capacities;
  bool no_capacity_curve = false;
  std::string json_out;
};

absl::Status RunAnalyzeCommand(const AnalyzeFlags& flags, CommandOutput& out) {
  PREFIXSIM_RETURN_IF_ERROR(CheckOutputFile(flags.json_out, "--json"));
  if (flags.trace != "-") {
    PREFIXSIM_ASSIGN_OR_RETURN(std::unique_ptr<TraceReader> reader,
                               OpenTrace(flags.trace, flags.trace_options));
    if (!reader->has_prefix_identity()) {
      out.err << "prefixsim analyze: warning: " << flags.trace
              << " has no prefix identity (lengths only): nothing is shared, so every hit "
                 "rate below is 0 by construction\n";
    }
  }
  AnalyzeOptions options;
  options.block_tokens = flags.block_tokens;
  options.alignments.insert(options.alignments.end(), flags.alignments.begin(),
                            flags.alignments.end());
  options.capacities = flags.capacities;
  options.capacity_curve = !flags.no_capacity_curve;
  PREFIXSIM_ASSIGN_OR_RETURN(AnalyzeResult result,
                             AnalyzeTraceFile(flags.trace, flags.trace_options, options));
  // With --json - stdout carries the JSON only.
  if (flags.json_out != "-") {
    out.out << "trace                 " << flags.trace << "\n" << FormatAnalyzeResult(result);
  }
  if (!flags.json_out.empty()) {
    PREFIXSIM_RETURN_IF_ERROR(
        WriteOutput(flags.json_out, AnalyzeResultToJson(result) + "\n", out.out));
  }
  return absl::OkStatus();
}

}  // namespace

void AddAnalyzeCommand(CLI::App& app, CommandContext& ctx) {
  auto flags = std::make_shared<AnalyzeFlags>();
  auto* cmd = app.add_subcommand(
      "analyze",
      "Trace statistics independent of an engine: prefix-sharing forest, upper-bound hit rate "
      "per hit alignment, hit rate vs cache capacity (LRU and offline optimum)");
  cmd->add_option("--trace", flags->trace, "Trace file (plain, .gz or .zst)")->required();
  AddTraceOptionFlags(cmd, &flags->trace_options);
  cmd->add_option("--seed", flags->trace_options.seed, "Seed for --session-sample")
      ->capture_default_str()
      ->needs(cmd->get_option("--session-sample"));
  cmd->add_option("--block-tokens", flags->block_tokens,
                  "Tokens per analysis block (default: the trace's native block, one hash id: "
                  "mooncake 512 or --trace-block-tokens, bailian 16; 16 for token-level traces)")
      ->check(kPositive);
  cmd->add_option("--alignments", flags->alignments,
                  "Extra hit alignments in tokens, comma separated (e.g. 1536,1728,13824), added "
                  "to the powers of two 16..16384")
      ->delimiter(',')
      ->check(kPositive);
  // Blocks, not bytes: the name says so, unlike compare/replay --capacities (bytes); the old name
  // stays as an alias so that existing scripts keep working.
  CLI::Option* capacity_blocks =
      cmd->add_option("--capacity-blocks", flags->capacities,
                      "Cache capacities in blocks of --block-tokens tokens, comma separated "
                      "(default: powers of two up to the number of unique full blocks, and that "
                      "number)")
          ->delimiter(',')
          ->check(kCapacityBlocks);
  CLI::Option* capacities =
      cmd->add_option("--capacities", flags->capacities,
                      "Alias of --capacity-blocks, kept for old scripts: counts blocks, not bytes "
                      "(a size such as 64GiB is refused)")
          ->delimiter(',')
          ->check(kCapacityBlocks)
          ->excludes(capacity_blocks);
  cmd->add_flag("--no-capacity-curve", flags->no_capacity_curve,
                "Skip the capacity curve (saves 4 bytes per prompt block of memory)")
      ->excludes(capacity_blocks)
      ->excludes(capacities);
  cmd->add_option("--json", flags->json_out, "Write the JSON report to this file");
  SetCommandRun(cmd, "analyze", ctx,
                [flags](CommandOutput& out) { return RunAnalyzeCommand(*flags, out); });
}

}  // namespace prefixsim::cli
