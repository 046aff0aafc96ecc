#include "sim/cli/trace_flags.h"

#include <string>

#include "absl/strings/str_join.h"

namespace prefixsim::cli {

void AddTraceOptionFlags(CLI::App* command, TraceOptions* options) {
  command->add_option("--trace-format", options->format,
                      "Trace format (default: detected from the first record): " +
                          absl::StrJoin(RegisteredTraceFormats(), ", "));
  command->add_option("--trace-block-tokens", options->trace_block_tokens,
                      "Tokens per hash id in hash-id traces (default: mooncake 512, bailian 16)");
  command->add_option("--max-requests", options->max_requests,
                      "Replay at most N requests (0: all)");
  command->add_option("--trace-start-s", options->start_s,
                      "Skip requests before this many seconds after the trace's first record");
  command->add_option("--trace-end-s", options->end_s,
                      "Stop at this many seconds after the trace's first record");
  command->add_option("--time-scale", options->time_scale,
                      "Multiply arrival gaps by this (0.5 = twice as fast)");
  command->add_option("--session-sample", options->session_sample_fraction,
                      "Keep this fraction of sessions (requests, if the trace has no sessions), "
                      "chosen reproducibly from --seed");
  command->add_flag("--strict-arrival-order", options->reject_backwards_arrivals,
                    "Reject arrival times that go backwards instead of clamping them");
}

}  // namespace prefixsim::cli
