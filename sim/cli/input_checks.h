// Input checks of `prefixsim replay` and `prefixsim compare`, in the order a user reads the
// command line: the trace file exists and its first record parses, then the model and engine,
// then the plan, then capacity (vLLM's startup memory check, docs/semantics.md §1, §6.4).
#ifndef PREFIXSIM_SIM_CLI_INPUT_CHECKS_H_
#define PREFIXSIM_SIM_CLI_INPUT_CHECKS_H_

#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "prefixsim/kv_plan.h"
#include "prefixsim/trace.h"

namespace prefixsim::cli {

// NotFound "<path>: no such file" when the trace does not exist; otherwise opens it with
// `options` and reads its first request, so that a bad format or record is reported before
// any planning. "-" (standard input, readable once) is left to the replay.
// `has_prefix_identity` (optional) receives TraceReader::has_prefix_identity.
absl::Status CheckTraceInput(std::string_view path, const TraceOptions& options,
                             bool* has_prefix_identity = nullptr);

// The stderr warning for a trace without prefix identity (the `lengths` format): its hit rates
// are 0 by construction. Prints nothing for other traces.
void WarnIfNoPrefixIdentity(std::string_view command, std::string_view trace,
                            bool has_prefix_identity);

// ResolvePlanForServing (the startup memory check: a plan that vLLM would refuse to start with is
// an error for a replay), printing SmallPoolWarning on stderr.
absl::StatusOr<KvPlan> ResolvePlanWarningOfSmallPools(const ModelSpec& model,
                                                      const EngineConfig& engine,
                                                      std::string_view policy);

}  // namespace prefixsim::cli

#endif  // PREFIXSIM_SIM_CLI_INPUT_CHECKS_H_
