// `lengths`: CSV with an arrival time in seconds, a prompt length and an output length (Azure LLM
// inference traces as processed by Vidur: arrived_at, num_prefill_tokens, num_decode_tokens).
// It shapes arrivals only: every request gets its own virtual content, so nothing is shared.
// The header names the columns (any order, extra columns ignored); a file without a header has
// them in the order arrival, prompt, output.
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/trace/content_ids.h"
#include "sim/trace/json_fields.h"
#include "sim/trace/record_parser.h"

namespace prefixsim {
namespace {

constexpr std::string_view kArrivalNames[] = {"arrived_at", "arrival_s", "arrival_time",
                                              "arrival",    "timestamp", "time"};
constexpr std::string_view kPromptNames[] = {"num_prefill_tokens", "prompt_tokens", "input_length",
                                             "prompt_length",      "input_tokens",  "contexttokens",
                                             "context_tokens"};
constexpr std::string_view kOutputNames[] = {"num_decode_tokens", "output_tokens", "output_length",
                                             "generatedtokens", "generated_tokens"};

template <size_t N>
int FindColumn(const std::vector<std::string>& header, const std::string_view (&names)[N]) {
  for (size_t i = 0; i < header.size(); ++i) {
    for (std::string_view name : names) {
      if (header[i] == name) return static_cast<int>(i);
    }
  }
  return -1;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

void SplitCsv(std::string_view line, std::vector<std::string_view>* fields) {
  fields->clear();
  while (true) {
    size_t comma = line.find(',');
    fields->push_back(Trim(line.substr(0, comma)));
    if (comma == std::string_view::npos) return;
    line.remove_prefix(comma + 1);
  }
}

std::string Lower(std::string_view s) {
  std::string lower(s);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower;
}

// The whole field must be the number ("12abc" is not 12).
bool ParseNumber(std::string_view s, double* out) {
  if (s.empty()) return false;
  auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return error == std::errc() && end == s.data() + s.size();
}

bool ParseInteger(std::string_view s, int64_t* out) {
  if (s.empty()) return false;
  auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return error == std::errc() && end == s.data() + s.size();
}

// Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar (Howard Hinnant's
// days_from_civil).
int64_t DaysFromCivil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

// "YYYY-MM-DD HH:MM:SS[.fraction]" (the raw Azure LLM inference traces' TIMESTAMP), read as UTC.
// Only differences between arrivals matter, so the time zone does not.
bool ParseDateTimeNs(std::string_view s, int64_t* out_ns) {
  auto number = [&s](size_t pos, size_t len, int64_t* value) {
    if (pos + len > s.size()) return false;
    auto [end, error] = std::from_chars(s.data() + pos, s.data() + pos + len, *value);
    return error == std::errc() && end == s.data() + pos + len;
  };
  int64_t year, month, day, hour, minute, second;
  if (s.size() < 19 || s[4] != '-' || s[7] != '-' || (s[10] != ' ' && s[10] != 'T') ||
      s[13] != ':' || s[16] != ':' || !number(0, 4, &year) || !number(5, 2, &month) ||
      !number(8, 2, &day) || !number(11, 2, &hour) || !number(14, 2, &minute) ||
      !number(17, 2, &second) || month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 ||
      minute > 59 || second > 60) {
    return false;
  }
  int64_t fraction_ns = 0;
  size_t pos = 19;
  if (pos < s.size() && s[pos] == '.') {
    int64_t scale = 100'000'000;
    for (++pos; pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos])); ++pos) {
      fraction_ns += (s[pos] - '0') * scale;
      scale /= 10;
    }
  }
  if (pos != s.size()) return false;
  int64_t seconds = DaysFromCivil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second;
  if (seconds < 0) return false;
  *out_ns = seconds * 1'000'000'000 + fraction_ns;
  return true;
}

class LengthsParser : public RecordParser {
 public:
  absl::StatusOr<bool> Parse(std::string_view line, const RecordLocation& location, Request* out,
                             ParsedRecordInfo* info) override {
    SplitCsv(line, &fields_);
    const std::vector<std::string_view>& fields = fields_;
    if (!columns_known_) {
      columns_known_ = true;
      double number = 0;
      if (!ParseNumber(fields[0], &number)) {
        std::vector<std::string> header;
        for (std::string_view field : fields) header.push_back(Lower(field));
        arrival_ = FindColumn(header, kArrivalNames);
        prompt_ = FindColumn(header, kPromptNames);
        output_ = FindColumn(header, kOutputNames);
        if (arrival_ < 0 || prompt_ < 0 || output_ < 0) {
          return RecordError(location,
                             "CSV header must name an arrival column (arrived_at), a prompt length "
                             "column (num_prefill_tokens) and an output length column "
                             "(num_decode_tokens)");
        }
        for (std::string_view field : fields) names_.emplace_back(field);
        columns_ = static_cast<int>(fields.size());
        return false;  // the header is not a record
      }
      names_ = {"arrival", "prompt_length", "output_length"};
      columns_ = 3;
    }
    if (static_cast<int>(fields.size()) < columns_) {
      return RecordError(location,
                         absl::StrCat("expected ", columns_, " CSV columns, got ", fields.size()));
    }
    double arrival_s = 0;
    if (ParseNumber(fields[arrival_], &arrival_s)) {
      if (!std::isfinite(arrival_s) || arrival_s < 0) {
        return FieldError(location, names_[arrival_], "must be a non-negative number");
      }
      // Nanoseconds must fit int64 (the reader subtracts arrival times).
      if (arrival_s * 1e9 >= 9.2e18) {
        return FieldError(location, names_[arrival_], "time out of range");
      }
      info->timestamp_ns = std::llround(arrival_s * 1e9);
    } else if (!ParseDateTimeNs(fields[arrival_], &info->timestamp_ns)) {
      return FieldError(location, names_[arrival_],
                        "must be a non-negative number of seconds or a date-time "
                        "'YYYY-MM-DD HH:MM:SS[.fraction]'");
    }
    int64_t prompt_length = 0;
    if (!ParseInteger(fields[prompt_], &prompt_length) || prompt_length < 1 ||
        prompt_length > UINT32_MAX) {
      return FieldError(location, names_[prompt_], "must be a positive integer");
    }
    if (!ParseInteger(fields[output_], &out->output_tokens) || out->output_tokens < 0) {
      return FieldError(location, names_[output_], "must be a non-negative integer");
    }
    // Unique per record (the record's index in the file, so filtering does not change it).
    out->prompt.push_back(
        {ContentIdFor(ContentTag::kLengths, static_cast<uint64_t>(location.record_index)), 0,
         static_cast<uint32_t>(prompt_length)});
    out->prompt_tokens = prompt_length;
    info->sampling_key = static_cast<uint64_t>(location.record_index);
    return true;
  }
  std::string_view timestamp_field() const override { return names_[arrival_]; }

 private:
  bool columns_known_ = false;
  int columns_ = 3;
  int arrival_ = 0, prompt_ = 1, output_ = 2;
  std::vector<std::string> names_;
  std::vector<std::string_view> fields_;  // reused: no allocation per record
};

}  // namespace

std::unique_ptr<RecordParser> NewLengthsParser(const TraceOptions&) {
  return std::make_unique<LengthsParser>();
}

}  // namespace prefixsim
