// Streaming trace readers (docs/design.md §4.4). A reader yields one Request at a time; memory
// stays bounded by the current record, not by the trace.
//
// Conventions shared by every format (traces/README.md has the details):
//  * Request::id is the 0-based position in the emitted stream (after window, sampling and
//    TraceOptions::max_requests).
//  * Request::arrival_ns = (t - t_first_emitted) * time_scale, in int64 ns, where t is the
//    record's original timestamp: the first emitted request always arrives at 0.
//  * The time window [start_s, end_s) is in seconds since the trace's first record.
//  * Arrival times that go backwards (in file order) are clamped to the latest arrival seen so
//    far and counted in TraceReadStats::arrivals_clamped, unless reject_backwards_arrivals is
//    set, in which case the record is an error naming its line.
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
  std::string format;              // "" = auto-detect from the first record
  int64_t trace_block_tokens = 0;  // 0 = the format's default (mooncake 512, bailian 16)
  int64_t max_requests = 0;        // 0 = all
  double start_s = 0;              // time window, seconds since the first record: [start_s, end_s)
  double end_s = 0;                // 0 = no end
  double time_scale = 1.0;         // arrival times are multiplied by this (0.5 = twice as fast)
  double session_sample_fraction = 1.0;  // keep this fraction of sessions (hash of session id)
  uint64_t seed = 0;                     // for sampling
  // Backwards arrival times: false = clamp and count, true = InvalidArgument naming the line.
  bool reject_backwards_arrivals = false;
};

// What a reader did so far; useful for warnings ("clamped 3 arrivals") and for benchmarks.
struct TraceReadStats {
  int64_t records = 0;              // records parsed (headers and blank lines excluded)
  int64_t requests = 0;             // requests emitted
  int64_t skipped_by_window = 0;    // records before start_s
  int64_t skipped_by_sampling = 0;  // records of sessions not sampled
  int64_t arrivals_clamped = 0;     // records whose arrival went backwards and was clamped
  int64_t bytes = 0;                // uncompressed bytes consumed
};

class TraceReader {
 public:
  virtual ~TraceReader() = default;
  // Reads the next request into *out. Returns false at the end of the trace, an error
  // (InvalidArgument naming file, line and field) on a bad record.
  virtual absl::StatusOr<bool> Next(Request* out) = 0;
  virtual std::string_view format() const = 0;
  // False when the trace cannot say which requests share a prefix (the `lengths` format): every
  // request is unique content and prefix-cache hit rates are 0 by construction.
  virtual bool has_prefix_identity() const { return true; }
  virtual const TraceReadStats& stats() const = 0;
};

// Opens a trace file (plain, .gz or .zst, recognized by their magic bytes). NotFound if the file
// cannot be opened; InvalidArgument for bad options, an unknown format or an undetectable one.
absl::StatusOr<std::unique_ptr<TraceReader>> OpenTrace(std::string_view path,
                                                       const TraceOptions& options = {});
std::vector<std::string> RegisteredTraceFormats();

}  // namespace prefixsim

#endif  // PREFIXSIM_TRACE_H_
