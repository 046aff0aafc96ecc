#include "sim/trace/hash_id_blocks.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "sim/trace/json_fields.h"

namespace prefixsim {

absl::Status AppendHashIdBlocks(const simdjson::dom::array& hash_ids, std::string_view field,
                                int64_t input_length, int64_t block_tokens, ContentTag tag,
                                const RecordLocation& location, Request* out) {
  const int64_t needed = (input_length + block_tokens - 1) / block_tokens;
  const int64_t given = static_cast<int64_t>(hash_ids.size());
  if (given != needed) {
    return FieldError(location, field,
                      absl::StrCat(given, " block ids do not cover input_length ", input_length,
                                   " with ", block_tokens, "-token blocks (needs ", needed,
                                   "; set `trace_block_tokens` if the trace uses another size)"));
  }
  out->prompt.reserve(static_cast<size_t>(needed));
  int64_t remaining = input_length;
  for (simdjson::dom::element id_value : hash_ids) {
    int64_t id = 0;
    if (id_value.get_int64().get(id) || id < 0) {
      uint64_t big = 0;
      if (id_value.get_uint64().get(big)) {
        return FieldError(location, field, "block ids must be non-negative integers");
      }
      id = static_cast<int64_t>(big);
    }
    ContentSegment segment;
    segment.content_id = ContentIdFor(tag, static_cast<uint64_t>(id));
    segment.offset = 0;
    segment.length = static_cast<uint32_t>(std::min(remaining, block_tokens));
    remaining -= segment.length;
    out->prompt.push_back(segment);
  }
  out->prompt_tokens = input_length;
  return absl::OkStatus();
}

}  // namespace prefixsim
