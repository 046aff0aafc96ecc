// The trace-replay flags shared by every command that reads a trace (replay, compare, analyze):
// --trace-format, --trace-block-tokens, --max-requests, --trace-start-s, --trace-end-s,
// --time-scale, --session-sample. (--seed belongs to the command.)
#ifndef PREFIXSIM_SIM_CLI_TRACE_FLAGS_H_
#define PREFIXSIM_SIM_CLI_TRACE_FLAGS_H_

#include "CLI/CLI.hpp"
#include "prefixsim/trace.h"

namespace prefixsim::cli {

void AddTraceOptionFlags(CLI::App* command, TraceOptions* options);

}  // namespace prefixsim::cli

#endif  // PREFIXSIM_SIM_CLI_TRACE_FLAGS_H_
