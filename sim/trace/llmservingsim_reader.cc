// `llmservingsim` (casys-kaist/LLMServingSim workloads): {input_toks, output_toks,
// arrival_time_ns, input_tok_ids, output_tok_ids}. Exact token ids; the lengths must agree with
// the id lists (output ids may be fewer than output_toks). No sessions.
#include "absl/strings/str_cat.h"
#include "sim/trace/json_fields.h"
#include "sim/trace/record_parser.h"
#include "sim/util/status_macros.h"
#include "simdjson.h"

namespace prefixsim {
namespace {

class LlmServingSimParser : public RecordParser {
 public:
  absl::StatusOr<bool> Parse(std::string_view line, const RecordLocation& location, Request* out,
                             ParsedRecordInfo* info) override {
    simdjson::dom::object record;
    PREFIXSIM_RETURN_IF_ERROR(ParseJsonObject(parser_, line, location, &record));
    int64_t input_toks = 0;
    PREFIXSIM_RETURN_IF_ERROR(RequireInteger(record, "input_toks", location, 1, &input_toks));
    PREFIXSIM_RETURN_IF_ERROR(
        RequireInteger(record, "output_toks", location, 0, &out->output_tokens));
    PREFIXSIM_RETURN_IF_ERROR(
        RequireTimeNs(record, "arrival_time_ns", location, /*ns_per_unit=*/1, &info->timestamp_ns));
    simdjson::dom::array input_ids;
    PREFIXSIM_RETURN_IF_ERROR(RequireArray(record, "input_tok_ids", location, &input_ids));
    if (static_cast<int64_t>(input_ids.size()) != input_toks) {
      return FieldError(
          location, "input_tok_ids",
          absl::StrCat("has ", input_ids.size(), " tokens but input_toks is ", input_toks));
    }
    PREFIXSIM_RETURN_IF_ERROR(
        AppendTokenIds(input_ids, "input_tok_ids", location, &out->literal_tokens));
    const auto prompt_length = static_cast<uint32_t>(input_toks);
    out->prompt.push_back({ContentSegment::kLiteralContent, 0, prompt_length});
    out->prompt_tokens = input_toks;

    simdjson::dom::element value;
    if (FindField(record, "output_tok_ids", &value)) {
      simdjson::dom::array output_ids;
      if (value.get_array().get(output_ids)) {
        return FieldError(location, "output_tok_ids", "must be an array");
      }
      if (static_cast<int64_t>(output_ids.size()) > out->output_tokens) {
        return FieldError(location, "output_tok_ids",
                          absl::StrCat("has ", output_ids.size(), " tokens, more than output_toks ",
                                       out->output_tokens));
      }
      PREFIXSIM_RETURN_IF_ERROR(
          AppendTokenIds(output_ids, "output_tok_ids", location, &out->literal_tokens));
      const auto output_length = static_cast<uint32_t>(out->literal_tokens.size()) - prompt_length;
      if (output_length > 0) {
        out->output.push_back({ContentSegment::kLiteralContent, prompt_length, output_length});
      }
    }
    info->sampling_key = static_cast<uint64_t>(location.record_index);
    return true;
  }
  std::string_view timestamp_field() const override { return "arrival_time_ns"; }

 private:
  simdjson::dom::parser parser_;
};

}  // namespace

std::unique_ptr<RecordParser> NewLlmServingSimParser(const TraceOptions&) {
  return std::make_unique<LlmServingSimParser>();
}

}  // namespace prefixsim
