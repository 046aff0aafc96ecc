// Files of vLLM KV event batches (docs/kv-events.md):
//  * msgpack: each batch's payload (msgpack_codec.h) preceded by its length as a 4-byte
//    big-endian unsigned integer; nothing else (no header, no sequence numbers: a batch's
//    sequence number is its index in the file, as vLLM numbers its batches from 0);
//  * jsonl: one JSON object per line, {"ts", "events", "data_parallel_rank"}, each event an object
//    with vLLM's field names and its tag under "type", fields in the msgpack encoding's order.
#ifndef PREFIXSIM_SIM_EVENTS_EVENT_LOG_H_
#define PREFIXSIM_SIM_EVENTS_EVENT_LOG_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/events/kv_events.h"

namespace prefixsim::events {

enum class EventLogFormat { kMsgpack, kJsonLines };

// "msgpack" or "jsonl".
absl::StatusOr<EventLogFormat> ParseEventLogFormat(std::string_view name);

std::string BatchToJsonLine(const EventBatch& batch);  // without the newline

// Appends one batch to `out` in `format`.
void WriteBatch(const EventBatch& batch, EventLogFormat format, std::ostream& out);
// The length-prefixed record of a msgpack payload.
void WriteLengthPrefixed(std::string_view payload, std::ostream& out);

// Parses a whole log held in memory; the format is told by the first byte ('{' or whitespace:
// JSON lines; anything else: length-prefixed msgpack). Errors are InvalidArgument and start with
// `name` and the byte offset (msgpack) or line number (jsonl) of the fault.
absl::StatusOr<std::vector<EventBatch>> ParseEventLog(std::string_view contents,
                                                      std::string_view name);
// Reads and parses the file at `path` (NotFound if it cannot be read).
absl::StatusOr<std::vector<EventBatch>> ReadEventLog(const std::string& path);

}  // namespace prefixsim::events

#endif  // PREFIXSIM_SIM_EVENTS_EVENT_LOG_H_
