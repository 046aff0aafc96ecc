// AnalyzeTraceFile: the analysis over a trace file opened with OpenTrace (kept apart from the
// core so that the core links without the readers).
#include <memory>
#include <string>

#include "prefixsim/analyze.h"
#include "prefixsim/trace.h"
#include "sim/util/status_macros.h"

namespace prefixsim {

absl::StatusOr<AnalyzeResult> AnalyzeTraceFile(const std::string& path,
                                               const TraceOptions& trace_options,
                                               const AnalyzeOptions& options) {
  PREFIXSIM_ASSIGN_OR_RETURN(std::unique_ptr<TraceReader> reader, OpenTrace(path, trace_options));
  AnalyzeOptions resolved = options;
  if (resolved.block_tokens == 0) {
    // The format's native block: one hash id is one analysis block.
    const int64_t trace_block = trace_options.trace_block_tokens;
    if (reader->format() == "mooncake") resolved.block_tokens = trace_block > 0 ? trace_block : 512;
    if (reader->format() == "bailian") resolved.block_tokens = trace_block > 0 ? trace_block : 16;
  }
  return AnalyzeRequestStream([&](Request* out) { return reader->Next(out); }, resolved);
}

}  // namespace prefixsim
