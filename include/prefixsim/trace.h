// Streaming trace readers (DESIGN §4.4). A reader yields one Request at a time; memory stays
// bounded by the current record, not by the trace.
#ifndef PREFIXSIM_TRACE_H_
#define PREFIXSIM_TRACE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "prefixsim/request.h"

namespace prefixsim {

struct TraceOptions {
  std::string format;                // "" = auto-detect from the first record
  int64_t trace_block_tokens = 0;    // 0 = the format's default (mooncake 512, bailian 16)
  int64_t max_requests = 0;          // 0 = all
  double start_s = 0;                // time window on original arrival times: [start_s, end_s)
  double end_s = 0;                  // 0 = no end
  double time_scale = 1.0;           // arrival times are multiplied by this (0.5 = twice as fast)
  double session_sample_fraction = 1.0;  // keep this fraction of sessions (hash of session id)
  uint64_t seed = 0;                 // for sampling
};

class TraceReader {
 public:
  virtual ~TraceReader() = default;
  // Reads the next request into *out. Returns false at the end of the trace, an error
  // (InvalidArgument naming file, line and field) on a bad record.
  virtual absl::StatusOr<bool> Next(Request* out) = 0;
  virtual std::string_view format() const = 0;
};

// Opens a trace file (plain, .gz or .zst).
absl::StatusOr<std::unique_ptr<TraceReader>> OpenTrace(std::string_view path,
                                                       const TraceOptions& options = {});
std::vector<std::string> RegisteredTraceFormats();

}  // namespace prefixsim

#endif  // PREFIXSIM_TRACE_H_
