// The streaming reader shared by every format: lines in, Requests out, with arrival order, the
// time window, session sampling, time scaling and max_requests applied here, once.
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "prefixsim/trace.h"
#include "sim/trace/content_ids.h"
#include "sim/trace/json_fields.h"
#include "sim/trace/line_reader.h"
#include "sim/trace/record_parser.h"
#include "sim/trace/trace_source.h"
#include "sim/util/status_macros.h"
#include "simdjson.h"

namespace prefixsim {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

bool IsBlank(std::string_view line) {
  for (char c : line) {
    if (!IsSpace(c)) return false;
  }
  return true;
}

bool StartsWithBrace(std::string_view line) {
  size_t i = 0;
  while (i < line.size() && IsSpace(line[i])) ++i;
  return i < line.size() && line[i] == '{';
}

class StreamingTraceReader : public TraceReader {
 public:
  StreamingTraceReader(std::string path, std::string format, const TraceOptions& options,
                       std::unique_ptr<LineReader> lines, std::unique_ptr<RecordParser> parser,
                       std::string_view first_line)
      : path_(std::move(path)),
        format_(std::move(format)),
        options_(options),
        lines_(std::move(lines)),
        parser_(std::move(parser)),
        pending_line_(first_line),
        has_pending_line_(!first_line.empty()) {
    start_ns_ = std::llround(options.start_s * 1e9);
    end_ns_ = options.end_s > 0 ? std::llround(options.end_s * 1e9) : 0;
    // Keep a session when its mixed key falls below fraction * 2^64.
    sample_threshold_ =
        options.session_sample_fraction >= 1.0
            ? std::numeric_limits<uint64_t>::max()
            : static_cast<uint64_t>(std::ldexp(options.session_sample_fraction, 64));
  }

  absl::StatusOr<bool> Next(Request* out) override {
    while (true) {
      if (done_) return false;
      if (options_.max_requests > 0 && stats_.requests >= options_.max_requests) {
        done_ = true;
        return false;
      }
      std::string_view line;
      if (has_pending_line_) {
        line = pending_line_;
        has_pending_line_ = false;
      } else {
        auto more = lines_->Next(&line);
        if (!more.ok()) return more.status();
        if (!*more) {
          stats_.bytes = lines_->bytes_consumed();
          return End();
        }
      }
      stats_.bytes = lines_->bytes_consumed();
      if (IsBlank(line)) continue;

      ClearRequest(out);
      RecordLocation location{path_, lines_->line_number(), stats_.records};
      ParsedRecordInfo info;
      auto is_record = parser_->Parse(line, location, out, &info);
      if (!is_record.ok()) return is_record.status();
      if (!*is_record) continue;
      ++stats_.records;

      int64_t t = info.timestamp_ns;
      if (have_previous_ && t < previous_ns_) {
        if (options_.reject_backwards_arrivals) {
          return FieldError(
              location, parser_->timestamp_field(),
              absl::StrCat("arrival time goes backwards (", t * 1e-9,
                           " s after an earlier record at ", previous_ns_ * 1e-9, " s)"));
        }
        t = previous_ns_;
        ++stats_.arrivals_clamped;
      }
      if (!have_previous_) first_ns_ = t;
      have_previous_ = true;
      previous_ns_ = t;

      const int64_t since_first = t - first_ns_;
      if (since_first < start_ns_) {
        ++stats_.skipped_by_window;
        continue;
      }
      // Arrivals never go backwards after clamping, so nothing later can be inside the window.
      if (end_ns_ > 0 && since_first >= end_ns_) return End();
      if (sample_threshold_ != std::numeric_limits<uint64_t>::max() &&
          MixPair(options_.seed, info.sampling_key) >= sample_threshold_) {
        ++stats_.skipped_by_sampling;
        continue;
      }
      if (!have_base_) {
        base_ns_ = t;
        have_base_ = true;
      }
      out->arrival_ns = options_.time_scale == 1.0
                            ? t - base_ns_
                            : std::llround(static_cast<double>(t - base_ns_) * options_.time_scale);
      out->id = static_cast<uint64_t>(stats_.requests++);
      return true;
    }
  }

  std::string_view format() const override { return format_; }
  bool has_prefix_identity() const override { return has_prefix_identity_; }

  // The trace is over. A window or sample that kept none of its records is an error: the replay
  // of nothing would report a hit rate of 0.
  absl::StatusOr<bool> End() {
    done_ = true;
    if (stats_.requests > 0 || stats_.records == 0) return false;
    return absl::InvalidArgumentError(absl::StrCat(
        path_, ": no record falls in the trace window and sample (`start_s` ", options_.start_s,
        ", `end_s` ", options_.end_s, ", `session_sample_fraction` ",
        options_.session_sample_fraction, "): ", stats_.records, " records read, arriving over ",
        static_cast<double>(previous_ns_ - first_ns_) * 1e-9, " s from the first"));
  }
  const TraceReadStats& stats() const override { return stats_; }
  void set_has_prefix_identity(bool value) { has_prefix_identity_ = value; }

 private:
  static void ClearRequest(Request* out) {
    // clear() keeps capacity: no allocation per record once the vectors have grown.
    out->id = 0;
    out->arrival_ns = 0;
    out->prompt_tokens = 0;
    out->output_tokens = 0;
    out->prompt.clear();
    out->output.clear();
    out->literal_tokens.clear();
    out->namespace_key = 0;
    out->session_id.clear();
    out->accepted_lengths.clear();
  }

  std::string path_;
  std::string format_;
  bool has_prefix_identity_ = true;
  TraceOptions options_;
  std::unique_ptr<LineReader> lines_;
  std::unique_ptr<RecordParser> parser_;
  std::string_view pending_line_;
  bool has_pending_line_;
  bool done_ = false;
  TraceReadStats stats_;
  int64_t start_ns_ = 0;
  int64_t end_ns_ = 0;
  uint64_t sample_threshold_ = 0;
  bool have_previous_ = false;
  int64_t previous_ns_ = 0;
  int64_t first_ns_ = 0;
  bool have_base_ = false;
  int64_t base_ns_ = 0;
};

absl::Status ValidateOptions(const TraceOptions& options) {
  if (options.trace_block_tokens < 0 || options.trace_block_tokens > (1 << 30)) {
    return absl::InvalidArgumentError("`trace_block_tokens` must be positive (0 = format default)");
  }
  if (options.max_requests < 0) {
    return absl::InvalidArgumentError("`max_requests` must be non-negative (0 = all)");
  }
  if (!std::isfinite(options.start_s) || options.start_s < 0) {
    return absl::InvalidArgumentError(
        "`start_s` (the trace window's start) must be a non-negative number of seconds");
  }
  if (!std::isfinite(options.end_s) || options.end_s < 0 ||
      (options.end_s > 0 && options.end_s <= options.start_s)) {
    return absl::InvalidArgumentError(
        "`end_s` (the trace window's end) must be after its start (0 = no end)");
  }
  if (!std::isfinite(options.time_scale) || options.time_scale <= 0) {
    return absl::InvalidArgumentError("`time_scale` must be a positive number");
  }
  if (!(options.session_sample_fraction > 0 && options.session_sample_fraction <= 1)) {
    return absl::InvalidArgumentError("session sample fraction must be in (0, 1]");
  }
  return absl::OkStatus();
}

// OpenTrace and OpenTraceFromSource: `open_lines` gives the lines once the options are checked.
absl::StatusOr<std::unique_ptr<TraceReader>> OpenTraceLines(
    std::string path,
    const std::function<absl::StatusOr<std::unique_ptr<LineReader>>()>& open_lines,
    const TraceOptions& options) {
  PREFIXSIM_RETURN_IF_ERROR(ValidateOptions(options));
  const TraceFormat* format = nullptr;
  if (!options.format.empty()) {
    format = TraceFormats().Find(options.format);
    if (format == nullptr) {
      return absl::InvalidArgumentError(TraceFormats().UnknownNameMessage(options.format));
    }
  }
  PREFIXSIM_ASSIGN_OR_RETURN(std::unique_ptr<LineReader> lines, open_lines());

  // The first non-blank line decides the format; it stays in the line reader's buffer and is
  // handed to the parser as the first record.
  std::string_view first_line;
  while (true) {
    PREFIXSIM_ASSIGN_OR_RETURN(bool more, lines->Next(&first_line));
    if (!more) {
      if (format == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": empty trace, cannot detect its format"));
      }
      first_line = {};
      break;
    }
    if (!IsBlank(first_line)) break;
  }
  if (format == nullptr) {
    FirstRecord first;
    first.line = first_line;
    simdjson::dom::parser parser;
    simdjson::dom::object object;
    RecordLocation location{path, lines->line_number(), 0};
    absl::Status json = ParseJsonObject(parser, first_line, location, &object);
    if (json.ok()) {
      first.is_json_object = true;
      for (auto field : object) first.json_keys.emplace_back(field.key);
    } else if (StartsWithBrace(first_line)) {
      return json;  // a JSONL trace whose first record is broken: say so, not "unknown format"
    }
    for (const auto& candidate : TraceFormats()) {
      if (candidate.value.detect(first)) {
        format = &candidate.value;
        break;
      }
    }
    if (format == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ":", lines->line_number(),
          ": cannot detect the trace format from the first record; set `format` (one of ",
          absl::StrJoin(RegisteredTraceFormats(), ", "), ")"));
    }
  }
  if (options.trace_block_tokens > 0 && !format->hash_id_blocks) {
    std::vector<std::string> hash_id_formats;
    for (const auto& f : TraceFormats()) {
      if (f.value.hash_id_blocks) hash_id_formats.push_back(f.name);
    }
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": `trace_block_tokens` sets the tokens per hash id of ",
                     absl::StrJoin(hash_id_formats, " and "), " traces; this trace is ",
                     format->name, ", which has none"));
  }
  auto parser = format->create(options);
  auto reader = std::make_unique<StreamingTraceReader>(
      path, format->name, options, std::move(lines), std::move(parser), first_line);
  reader->set_has_prefix_identity(format->prefix_identity);
  return reader;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TraceReader>> OpenTrace(std::string_view path_view,
                                                       const TraceOptions& options) {
  std::string path(path_view);
  return OpenTraceLines(
      path, [&path] { return LineReader::Open(path); }, options);
}

absl::StatusOr<std::unique_ptr<TraceReader>> OpenTraceFromSource(std::string name,
                                                                 std::unique_ptr<ByteSource> source,
                                                                 const TraceOptions& options) {
  return OpenTraceLines(
      std::move(name),
      [&source]() -> absl::StatusOr<std::unique_ptr<LineReader>> {
        return std::make_unique<LineReader>(std::move(source));
      },
      options);
}

}  // namespace prefixsim
