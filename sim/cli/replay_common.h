// Options and helpers shared by `prefixsim replay` and `prefixsim compare`.
#ifndef PREFIXSIM_SIM_CLI_REPLAY_COMMON_H_
#define PREFIXSIM_SIM_CLI_REPLAY_COMMON_H_

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "prefixsim/engine.h"
#include "prefixsim/kv_plan.h"
#include "prefixsim/trace.h"
#include "sim/cli/common.h"
#include "sim/run/replay.h"

namespace prefixsim::cli {

// What the replay flags fill in (sim/run/replay.h runs it).
using ReplayCliOptions = run::ReplayConfig;

struct HtmlCliOptions;  // sim/cli/html_page.h

// An output flag of a command and the path it was given ("" = not given).
struct OutputFlag {
  const std::string& path;
  std::string_view flag;
};

// What `replay` and `compare` have checked and loaded before their first replay.
struct ReplayInputs {
  ModelAndEngine loaded;
  std::vector<KvPlan> plans;  // one per policy, in the order given
};

// The prologue of `replay` and `compare`, in the order a user reads the command line
// (sim/cli/input_checks.h), so that a bad input fails before a long run, not after it: every
// output can be written, the trace opens and its first record parses (a warning if it has no
// prefix identity), the model and engine load (their assumptions on `err`), each policy's plan
// resolves and passes vLLM's startup check, then --html/--capacities (CheckHtmlOptions).
// `command` names the command in the warnings.
absl::StatusOr<ReplayInputs> LoadReplayInputs(std::string_view command,
                                              const ReplayCliOptions& options,
                                              const std::vector<std::string>& policies,
                                              const std::vector<OutputFlag>& outputs,
                                              const HtmlCliOptions& html, std::ostream& err);

// The first line of a run's text summary: "model M   engine E   trace T".
std::string RunHeading(const ModelAndEngine& loaded, const std::string& trace);

// Adds --trace, --model/--engine and the engine overrides, trace shaping, --seed, ...
void AddReplayCliOptions(CLI::App* cmd, ReplayCliOptions* options);

// run::RunReplay with the process's interrupt flag (sim/cli/interrupt.h; set only where a command
// installed the handlers). `progress_label` non-empty: progress on stderr once the run has lasted
// a second: a line rewritten in place on a terminal, otherwise a line every 10 s (so that a CI
// log shows a long run is alive). `keep_records`, `record_sink`: as run::RunReplay's.
absl::StatusOr<ReplayResult> RunReplay(const ReplayCliOptions& options, const ModelSpec& model,
                                       const EngineConfig& engine, const KvPlan& plan,
                                       const std::string& progress_label, bool keep_records = true,
                                       std::function<void(const RequestRecord&)> record_sink = {});

// Warns on stderr about settings the run will not use (a block size the plan raised, a router on
// one replica). Once per command, before its replays (compare: with its first policy's plan; the
// primary block size does not depend on the policy).
void WarnAboutSettingsWithoutEffect(const ReplayCliOptions& options, const EngineConfig& engine,
                                    const KvPlan& plan);

// Writes `contents` to `path` ("-" = `stdout_stream`) through WriteFileAtomically
// (sim/util/atomic_file.h).
absl::Status WriteOutput(const std::string& path, std::string_view contents,
                         std::ostream& stdout_stream);

}  // namespace prefixsim::cli

#endif  // PREFIXSIM_SIM_CLI_REPLAY_COMMON_H_
