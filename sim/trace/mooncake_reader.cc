// `mooncake` (kvcache-ai/Mooncake FAST'25 traces): {timestamp (ms), input_length, output_length,
// hash_ids}, one hash id per 512-token block (TraceOptions::trace_block_tokens for other sizes). No
// sessions: session sampling keeps a fraction of requests.
#include "sim/trace/content_ids.h"
#include "sim/trace/hash_id_blocks.h"
#include "sim/trace/json_fields.h"
#include "sim/trace/record_parser.h"
#include "sim/util/status_macros.h"
#include "simdjson.h"

namespace prefixsim {
namespace {

class MooncakeParser : public RecordParser {
 public:
  explicit MooncakeParser(int64_t block_tokens) : block_tokens_(block_tokens) {}

  absl::StatusOr<bool> Parse(std::string_view line, const RecordLocation& location, Request* out,
                             ParsedRecordInfo* info) override {
    simdjson::dom::object record;
    PREFIXSIM_RETURN_IF_ERROR(ParseJsonObject(parser_, line, location, &record));
    PREFIXSIM_RETURN_IF_ERROR(RequireTimeNs(record, "timestamp", location,
                                            /*ns_per_unit=*/1'000'000, &info->timestamp_ns));
    int64_t input_length = 0;
    PREFIXSIM_RETURN_IF_ERROR(RequireInteger(record, "input_length", location, 1, &input_length));
    PREFIXSIM_RETURN_IF_ERROR(
        RequireInteger(record, "output_length", location, 0, &out->output_tokens));
    simdjson::dom::array hash_ids;
    PREFIXSIM_RETURN_IF_ERROR(RequireArray(record, "hash_ids", location, &hash_ids));
    PREFIXSIM_RETURN_IF_ERROR(AppendHashIdBlocks(hash_ids, "hash_ids", input_length, block_tokens_,
                                                 ContentTag::kMooncake, location, out));
    info->sampling_key = static_cast<uint64_t>(location.record_index);
    return true;
  }
  std::string_view timestamp_field() const override { return "timestamp"; }

 private:
  int64_t block_tokens_;
  simdjson::dom::parser parser_;
};

}  // namespace

std::unique_ptr<RecordParser> NewMooncakeParser(const TraceOptions& options) {
  return std::make_unique<MooncakeParser>(
      options.trace_block_tokens > 0 ? options.trace_block_tokens : 512);
}

}  // namespace prefixsim
