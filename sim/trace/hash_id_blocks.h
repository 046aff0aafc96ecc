// Expands hash-id blocks (Mooncake, Bailian) into virtual content segments.
#ifndef PREFIXSIM_SIM_TRACE_HASH_ID_BLOCKS_H_
#define PREFIXSIM_SIM_TRACE_HASH_ID_BLOCKS_H_

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "sim/trace/content_ids.h"
#include "sim/trace/record_parser.h"
#include "simdjson.h"

namespace prefixsim {

// Block id h becomes tokens [0, block_tokens) of content ContentIdFor(tag, h); the last block
// only [0, remainder of input_length). So the same id expands to the same tokens wherever it
// appears, at any simulated block size, and a partial block is a prefix of the full one.
// The ids must cover input_length exactly: ceil(input_length / block_tokens) of them.
absl::Status AppendHashIdBlocks(const simdjson::dom::array& hash_ids, std::string_view field,
                                int64_t input_length, int64_t block_tokens, ContentTag tag,
                                const RecordLocation& location, Request* out);

}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_TRACE_HASH_ID_BLOCKS_H_
