// vLLM's KVEventBatch in msgpack, both ways (docs/kv-events.md). The encoder writes what current
// vLLM publishes: the batch as an array [ts, events, data_parallel_rank], each event a map whose
// first entry is its tag under "type", fields in vLLM's order, defaults omitted as msgspec's
// omit_defaults does. The decoder also reads what older vLLM published (each event an array with
// the tag first, fields by position) and a batch written as a map, so one reader serves logs
// recorded from any vLLM with KV events.
#ifndef PREFIXSIM_SIM_EVENTS_MSGPACK_CODEC_H_
#define PREFIXSIM_SIM_EVENTS_MSGPACK_CODEC_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "sim/events/kv_events.h"

namespace prefixsim::events {

std::string EncodeMsgpack(const EventBatch& batch);

// Decodes one payload. Errors are InvalidArgument and name the byte offset of the fault,
// counted from `base_offset` (where the payload starts in its file or stream). The whole payload
// must be one batch: trailing bytes are an error.
absl::StatusOr<EventBatch> DecodeMsgpack(std::string_view payload, uint64_t base_offset = 0);

}  // namespace prefixsim::events

#endif  // PREFIXSIM_SIM_EVENTS_MSGPACK_CODEC_H_
