// `bailian` (Alibaba Bailian / Qwen usage traces): {chat_id, parent_chat_id, timestamp (s),
// input_length, output_length, turn, hash_ids}, one hash id per 16-token block. The session of a
// request is the chat_id of the first turn of its conversation, found by following
// parent_chat_id; this keeps one small map entry per chat seen (the only state that grows with
// the trace, 16 bytes per request).
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "sim/trace/content_ids.h"
#include "sim/trace/hash_id_blocks.h"
#include "sim/trace/json_fields.h"
#include "sim/trace/record_parser.h"
#include "sim/util/status_macros.h"
#include "simdjson.h"

namespace prefixsim {
namespace {

class BailianParser : public RecordParser {
 public:
  explicit BailianParser(int64_t block_tokens) : block_tokens_(block_tokens) {}

  absl::StatusOr<bool> Parse(std::string_view line, const RecordLocation& location, Request* out,
                             ParsedRecordInfo* info) override {
    simdjson::dom::object record;
    PREFIXSIM_RETURN_IF_ERROR(ParseJsonObject(parser_, line, location, &record));
    int64_t chat_id = 0;
    PREFIXSIM_RETURN_IF_ERROR(RequireInteger(record, "chat_id", location, 0, &chat_id));
    // parent_chat_id: -1 (or absent/null) for the first turn.
    int64_t parent_chat_id = -1;
    simdjson::dom::element parent;
    if (FindField(record, "parent_chat_id", &parent)) {
      PREFIXSIM_RETURN_IF_ERROR(ToInteger(parent, "parent_chat_id", location, -1, &parent_chat_id));
    }
    PREFIXSIM_RETURN_IF_ERROR(RequireTimeNs(record, "timestamp", location,
                                            /*ns_per_unit=*/1'000'000'000, &info->timestamp_ns));
    int64_t input_length = 0;
    PREFIXSIM_RETURN_IF_ERROR(RequireInteger(record, "input_length", location, 1, &input_length));
    PREFIXSIM_RETURN_IF_ERROR(
        RequireInteger(record, "output_length", location, 0, &out->output_tokens));
    simdjson::dom::element turn_value;
    if (FindField(record, "turn", &turn_value)) {
      int64_t turn = 0;
      PREFIXSIM_RETURN_IF_ERROR(ToInteger(turn_value, "turn", location, 0, &turn));
    }
    simdjson::dom::array hash_ids;
    PREFIXSIM_RETURN_IF_ERROR(RequireArray(record, "hash_ids", location, &hash_ids));
    PREFIXSIM_RETURN_IF_ERROR(AppendHashIdBlocks(hash_ids, "hash_ids", input_length, block_tokens_,
                                                 ContentTag::kBailian, location, out));

    int64_t root = chat_id;
    if (parent_chat_id >= 0) {
      auto it = root_of_chat_.find(parent_chat_id);
      // A parent outside the trace (cut by the trace's start) roots its own conversation.
      root = it != root_of_chat_.end() ? it->second : parent_chat_id;
    }
    root_of_chat_[chat_id] = root;
    out->session_id = absl::StrCat(root);
    info->sampling_key = StableStringHash(out->session_id);
    return true;
  }
  std::string_view timestamp_field() const override { return "timestamp"; }

 private:
  int64_t block_tokens_;
  simdjson::dom::parser parser_;
  absl::flat_hash_map<int64_t, int64_t> root_of_chat_;
};

}  // namespace

std::unique_ptr<RecordParser> NewBailianParser(const TraceOptions& options) {
  return std::make_unique<BailianParser>(options.trace_block_tokens > 0 ? options.trace_block_tokens
                                                                        : 16);
}

}  // namespace prefixsim
