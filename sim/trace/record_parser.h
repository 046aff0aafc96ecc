// The internal interface of one trace format: it turns one line into the content and lengths of a
// Request. Everything shared (streaming, decompression, arrival order, the time window, sampling,
// ids) lives in trace_reader.cc, so a format is one parser file plus one registration line in
// registry.cc.
#ifndef PREFIXSIM_SIM_TRACE_RECORD_PARSER_H_
#define PREFIXSIM_SIM_TRACE_RECORD_PARSER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "prefixsim/request.h"
#include "prefixsim/trace.h"
#include "sim/util/registry.h"

namespace prefixsim {

// Where a record came from, for error messages "path:line: field 'x': ...".
struct RecordLocation {
  std::string_view path;
  int64_t line = 0;
  int64_t record_index = 0;  // 0-based index among the records of the file (not lines)
};

// What a parser extracts besides the Request's content.
struct ParsedRecordInfo {
  int64_t timestamp_ns = 0;  // original arrival time, in ns
  // Key for session sampling: hash of the session id, or of the record index when the format has
  // no sessions (then sampling keeps a fraction of requests).
  uint64_t sampling_key = 0;
};

class RecordParser {
 public:
  virtual ~RecordParser() = default;
  // Parses `line` (followed in memory by kLinePadding readable bytes) into *out, whose vectors
  // and strings arrive empty. Returns false for a line that is not a record (a CSV header).
  virtual absl::StatusOr<bool> Parse(std::string_view line, const RecordLocation& location,
                                     Request* out, ParsedRecordInfo* info) = 0;
  // The name of the arrival-time field, for errors about arrival order.
  virtual std::string_view timestamp_field() const = 0;
};

// The first non-blank line of a file, as seen by format detection.
struct FirstRecord {
  std::string_view line;
  bool is_json_object = false;
  std::vector<std::string> json_keys;  // top-level keys when is_json_object
  bool HasKey(std::string_view key) const;
};

struct TraceFormat {
  std::string name;
  std::string description;
  std::function<bool(const FirstRecord&)> detect;
  std::function<std::unique_ptr<RecordParser>(const TraceOptions&)> create;
  // False for formats that carry lengths only: every request gets its own content, so no prefix
  // is ever shared and hit rates are 0 by construction.
  bool prefix_identity = true;
  // Records give hash ids, each standing for TraceOptions::trace_block_tokens tokens; other
  // formats refuse that option.
  bool hash_id_blocks = false;
};

// Registered formats, in detection order.
const Registry<TraceFormat>& TraceFormats();

// Parsers (one file each).
std::unique_ptr<RecordParser> NewMooncakeParser(const TraceOptions& options);
std::unique_ptr<RecordParser> NewBailianParser(const TraceOptions& options);
std::unique_ptr<RecordParser> NewTokensParser(const TraceOptions& options);
std::unique_ptr<RecordParser> NewLlmServingSimParser(const TraceOptions& options);
std::unique_ptr<RecordParser> NewLengthsParser(const TraceOptions& options);

}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_TRACE_RECORD_PARSER_H_
