// `prefixsim gen-trace`: reproducible synthetic traces (docs/design.md §4.1). Same flags and seed
// give a byte-identical file.
#include <iostream>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "sim/cli/commands.h"
#include "sim/cli/exit_codes.h"
#include "sim/cli/replay_common.h"
#include "sim/trace/gen/workload_generator.h"
#include "sim/util/atomic_file.h"
#include "sim/util/status_macros.h"

namespace prefixsim::cli {
namespace {

struct GenTraceFlags {
  WorkloadOptions workload;
  std::string out;
  std::string format = "mooncake";
  std::optional<int64_t> block_tokens;  // unset: 512
};

absl::Status RunGenTraceCommand(const GenTraceFlags& flags, CommandOutput& out) {
  if (flags.format != "mooncake" && flags.format != "tokens") {
    return absl::InvalidArgumentError(absl::StrCat("--format: unknown output format '",
                                                   flags.format, "'; one of mooncake, tokens"));
  }
  const int64_t block_tokens = flags.block_tokens.value_or(512);
  if (block_tokens < 1) return absl::InvalidArgumentError("--block-tokens must be positive");
  if (flags.block_tokens && flags.format != "mooncake") {
    return absl::InvalidArgumentError(
        "--block-tokens sets the tokens per hash id of --format mooncake; a tokens trace has none");
  }
  PREFIXSIM_RETURN_IF_ERROR(CheckOutputFile(flags.out, "--out"));
  PREFIXSIM_ASSIGN_OR_RETURN(std::vector<GeneratedRequest> requests,
                             GenerateWorkload(flags.workload));
  std::string text = flags.format == "mooncake" ? FormatMooncakeTrace(requests, block_tokens)
                                                : FormatTokensTrace(requests);
  PREFIXSIM_RETURN_IF_ERROR(WriteOutput(flags.out, text, out.out));
  // With --out - stdout carries the trace only; the summary goes to stderr.
  std::ostream& summary = flags.out == "-" ? out.err : out.out;
  summary << "wrote " << requests.size() << " requests (" << flags.workload.kind << ", "
          << flags.format << ", " << text.size() << " bytes) to " << flags.out << "\n";
  return absl::OkStatus();
}

}  // namespace

void AddGenTraceCommand(CLI::App& app, CommandContext& ctx) {
  auto flags = std::make_shared<GenTraceFlags>();
  auto* cmd = app.add_subcommand("gen-trace", "Generate a reproducible synthetic trace");
  cmd->add_option("--kind", flags->workload.kind, "Workload: chat, agentic, shared_doc")
      ->capture_default_str();
  cmd->add_option("--seed", flags->workload.seed, "Seed of the std::mt19937_64 generator")
      ->capture_default_str();
  cmd->add_option("--out", flags->out, "Output trace file")->required();
  cmd->add_option("--requests", flags->workload.requests, "Number of requests")
      ->capture_default_str();
  cmd->add_option("--rate", flags->workload.rate_per_s, "Mean request rate (requests/s)")
      ->capture_default_str();
  cmd->add_option("--arrival", flags->workload.arrival, "Arrival process: poisson, bursty")
      ->capture_default_str();
  cmd->add_option("--max-prompt-tokens", flags->workload.max_prompt_tokens,
                  "Conversations stop before a prompt would exceed this")
      ->capture_default_str();
  cmd->add_option("--format", flags->format, "Output format: mooncake (hash ids), tokens")
      ->capture_default_str();
  cmd->add_option("--block-tokens", flags->block_tokens,
                  "Tokens per hash id in mooncake output (readers need --trace-block-tokens "
                  "unless 512; default 512)");
  SetCommandRun(cmd, "gen-trace", ctx,
                [flags](CommandOutput& out) { return RunGenTraceCommand(*flags, out); });
}

}  // namespace prefixsim::cli
