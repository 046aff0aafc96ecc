// `tokens` (native): {arrival_s, prompt_token_ids, output_length, output_token_ids?, session_id?,
// cache_salt?}. Exact token ids, so every block size and alignment is exact. Known output tokens
// become Request::output, so a follow-up turn whose prompt contains an earlier answer can hit on
// the blocks that answer filled.
#include "absl/strings/str_cat.h"
#include "sim/trace/content_ids.h"
#include "sim/trace/json_fields.h"
#include "sim/trace/record_parser.h"
#include "sim/util/status_macros.h"
#include "simdjson.h"

namespace prefixsim {
namespace {

class TokensParser : public RecordParser {
 public:
  absl::StatusOr<bool> Parse(std::string_view line, const RecordLocation& location, Request* out,
                             ParsedRecordInfo* info) override {
    simdjson::dom::object record;
    PREFIXSIM_RETURN_IF_ERROR(ParseJsonObject(parser_, line, location, &record));
    PREFIXSIM_RETURN_IF_ERROR(RequireTimeNs(record, "arrival_s", location,
                                            /*ns_per_unit=*/1'000'000'000, &info->timestamp_ns));
    simdjson::dom::array prompt_ids;
    PREFIXSIM_RETURN_IF_ERROR(RequireArray(record, "prompt_token_ids", location, &prompt_ids));
    if (prompt_ids.size() == 0)
      return FieldError(location, "prompt_token_ids", "must not be empty");
    PREFIXSIM_RETURN_IF_ERROR(
        AppendTokenIds(prompt_ids, "prompt_token_ids", location, &out->literal_tokens));
    const auto prompt_length = static_cast<uint32_t>(out->literal_tokens.size());
    out->prompt.push_back({ContentSegment::kLiteralContent, 0, prompt_length});
    out->prompt_tokens = prompt_length;
    PREFIXSIM_RETURN_IF_ERROR(
        RequireInteger(record, "output_length", location, 0, &out->output_tokens));

    simdjson::dom::element value;
    if (FindField(record, "output_token_ids", &value)) {
      simdjson::dom::array output_ids;
      if (value.get_array().get(output_ids)) {
        return FieldError(location, "output_token_ids", "must be an array");
      }
      if (static_cast<int64_t>(output_ids.size()) > out->output_tokens) {
        return FieldError(location, "output_token_ids",
                          absl::StrCat("has ", output_ids.size(),
                                       " tokens, more than output_length ", out->output_tokens));
      }
      PREFIXSIM_RETURN_IF_ERROR(
          AppendTokenIds(output_ids, "output_token_ids", location, &out->literal_tokens));
      const auto output_length = static_cast<uint32_t>(out->literal_tokens.size()) - prompt_length;
      if (output_length > 0) {
        out->output.push_back({ContentSegment::kLiteralContent, prompt_length, output_length});
      }
    }
    if (FindField(record, "session_id", &value)) {
      PREFIXSIM_RETURN_IF_ERROR(ToIdString(value, "session_id", location, &out->session_id));
    }
    if (FindField(record, "cache_salt", &value)) {
      std::string salt;
      PREFIXSIM_RETURN_IF_ERROR(ToIdString(value, "cache_salt", location, &salt));
      uint64_t key = StableStringHash(salt);
      out->namespace_key = key == 0 ? 1 : key;  // 0 means "no namespace"
    }
    info->sampling_key = out->session_id.empty() ? static_cast<uint64_t>(location.record_index)
                                                 : StableStringHash(out->session_id);
    return true;
  }
  std::string_view timestamp_field() const override { return "arrival_s"; }

 private:
  simdjson::dom::parser parser_;
};

}  // namespace

std::unique_ptr<RecordParser> NewTokensParser(const TraceOptions&) {
  return std::make_unique<TokensParser>();
}

}  // namespace prefixsim
