#include "sim/events/event_log.h"

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "sim/events/msgpack_codec.h"
#include "sim/util/status_macros.h"

namespace prefixsim::events {
namespace {

using Json = nlohmann::ordered_json;

template <typename T>
Json OptionalJson(const std::optional<T>& v) {
  return v.has_value() ? Json(*v) : Json(nullptr);
}

Json EventJson(const BlockStored& e) {
  Json j;
  j["type"] = "BlockStored";
  j["block_hashes"] = e.block_hashes;
  j["parent_block_hash"] = OptionalJson(e.parent_block_hash);
  j["token_ids"] = e.token_ids;
  j["block_size"] = e.block_size;
  j["lora_id"] = nullptr;
  j["medium"] = OptionalJson(e.medium);
  j["lora_name"] = nullptr;
  j["extra_keys"] = Json(std::vector<std::nullptr_t>(e.block_hashes.size(), nullptr));
  if (e.group_idx) j["group_idx"] = *e.group_idx;
  if (e.kv_cache_spec_kind) j["kv_cache_spec_kind"] = *e.kv_cache_spec_kind;
  if (e.kv_cache_spec_sliding_window) {
    j["kv_cache_spec_sliding_window"] = *e.kv_cache_spec_sliding_window;
  }
  return j;
}

Json EventJson(const BlockRemoved& e) {
  Json j;
  j["type"] = "BlockRemoved";
  j["block_hashes"] = e.block_hashes;
  j["medium"] = OptionalJson(e.medium);
  if (e.group_idx) j["group_idx"] = *e.group_idx;
  return j;
}

Json EventJson(const AllBlocksCleared&) { return Json{{"type", "AllBlocksCleared"}}; }

// JSON -> values; a type error names the field.
absl::StatusOr<uint64_t> JsonHash(const Json& j, std::string_view field) {
  if (!j.is_number_unsigned() && !(j.is_number_integer() && j.get<int64_t>() >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(field), ": expected a non-negative integer"));
  }
  return j.get<uint64_t>();
}

absl::StatusOr<std::optional<int64_t>> JsonOptionalInt(const Json& o, const char* field) {
  auto it = o.find(field);
  if (it == o.end() || it->is_null()) return std::optional<int64_t>();
  if (!it->is_number_integer()) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(field), ": expected an integer"));
  }
  return std::optional<int64_t>(it->get<int64_t>());
}

absl::StatusOr<std::optional<std::string>> JsonOptionalString(const Json& o, const char* field) {
  auto it = o.find(field);
  if (it == o.end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_string())
    return absl::InvalidArgumentError(absl::StrCat(std::string(field), ": expected a string"));
  return std::optional<std::string>(it->get<std::string>());
}

absl::StatusOr<std::vector<uint64_t>> JsonHashes(const Json& o) {
  auto it = o.find("block_hashes");
  if (it == o.end() || !it->is_array()) {
    return absl::InvalidArgumentError("block_hashes: expected an array");
  }
  std::vector<uint64_t> out;
  for (const Json& h : *it) {
    PREFIXSIM_ASSIGN_OR_RETURN(const uint64_t v, JsonHash(h, "block_hashes"));
    out.push_back(v);
  }
  return out;
}

absl::StatusOr<KvEvent> EventFromJson(const Json& o) {
  if (!o.is_object() || !o.contains("type") || !o["type"].is_string()) {
    return absl::InvalidArgumentError("an event must be an object with a string \"type\"");
  }
  const std::string type = o["type"].get<std::string>();
  if (type == "BlockStored") {
    BlockStored e;
    PREFIXSIM_ASSIGN_OR_RETURN(e.block_hashes, JsonHashes(o));
    if (auto it = o.find("parent_block_hash"); it != o.end() && !it->is_null()) {
      PREFIXSIM_ASSIGN_OR_RETURN(const uint64_t h, JsonHash(*it, "parent_block_hash"));
      e.parent_block_hash = h;
    }
    if (auto it = o.find("token_ids"); it != o.end()) {
      if (!it->is_array()) return absl::InvalidArgumentError("token_ids: expected an array");
      for (const Json& t : *it) {
        if (!t.is_number_integer()) return absl::InvalidArgumentError("token_ids: not integers");
        e.token_ids.push_back(t.get<int64_t>());
      }
    }
    PREFIXSIM_ASSIGN_OR_RETURN(const std::optional<int64_t> size, JsonOptionalInt(o, "block_size"));
    e.block_size = size.value_or(0);
    PREFIXSIM_ASSIGN_OR_RETURN(e.medium, JsonOptionalString(o, "medium"));
    PREFIXSIM_ASSIGN_OR_RETURN(e.group_idx, JsonOptionalInt(o, "group_idx"));
    PREFIXSIM_ASSIGN_OR_RETURN(e.kv_cache_spec_kind, JsonOptionalString(o, "kv_cache_spec_kind"));
    PREFIXSIM_ASSIGN_OR_RETURN(e.kv_cache_spec_sliding_window,
                               JsonOptionalInt(o, "kv_cache_spec_sliding_window"));
    return KvEvent(std::move(e));
  }
  if (type == "BlockRemoved") {
    BlockRemoved e;
    PREFIXSIM_ASSIGN_OR_RETURN(e.block_hashes, JsonHashes(o));
    PREFIXSIM_ASSIGN_OR_RETURN(e.medium, JsonOptionalString(o, "medium"));
    PREFIXSIM_ASSIGN_OR_RETURN(e.group_idx, JsonOptionalInt(o, "group_idx"));
    return KvEvent(std::move(e));
  }
  if (type == "AllBlocksCleared") return KvEvent(AllBlocksCleared{});
  return absl::InvalidArgumentError(absl::StrCat("unknown event type \"", type, "\""));
}

absl::StatusOr<EventBatch> BatchFromJson(std::string_view line) {
  const Json j = Json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("not valid JSON");
  if (!j.is_object() || !j.contains("ts") || !j["ts"].is_number() || !j.contains("events") ||
      !j["events"].is_array()) {
    return absl::InvalidArgumentError("a batch needs a number \"ts\" and an array \"events\"");
  }
  EventBatch batch;
  batch.ts = j["ts"].get<double>();
  for (const Json& e : j["events"]) {
    PREFIXSIM_ASSIGN_OR_RETURN(KvEvent event, EventFromJson(e));
    batch.events.push_back(std::move(event));
  }
  PREFIXSIM_ASSIGN_OR_RETURN(batch.data_parallel_rank, JsonOptionalInt(j, "data_parallel_rank"));
  return batch;
}

absl::StatusOr<std::vector<EventBatch>> ParseJsonLines(std::string_view contents,
                                                       std::string_view name) {
  std::vector<EventBatch> out;
  int64_t line_no = 0;
  size_t start = 0;
  while (start < contents.size()) {
    size_t end = contents.find('\n', start);
    if (end == std::string_view::npos) end = contents.size();
    const std::string_view line = contents.substr(start, end - start);
    ++line_no;
    start = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    absl::StatusOr<EventBatch> batch = BatchFromJson(line);
    if (!batch.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(std::string(name), ": line ", line_no, ": ", batch.status().message()));
    }
    out.push_back(*std::move(batch));
  }
  return out;
}

}  // namespace

absl::StatusOr<EventLogFormat> ParseEventLogFormat(std::string_view name) {
  if (name == "msgpack") return EventLogFormat::kMsgpack;
  if (name == "jsonl") return EventLogFormat::kJsonLines;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown KV event format \"", std::string(name), "\" (msgpack, jsonl)"));
}

std::string BatchToJsonLine(const EventBatch& batch) {
  Json j;
  j["ts"] = batch.ts;
  Json events = Json::array();
  for (const KvEvent& e : batch.events) {
    events.push_back(std::visit([](const auto& v) { return EventJson(v); }, e));
  }
  j["events"] = std::move(events);
  j["data_parallel_rank"] = OptionalJson(batch.data_parallel_rank);
  return j.dump();
}

void WriteLengthPrefixed(std::string_view payload, std::ostream& out) {
  const uint32_t n = static_cast<uint32_t>(payload.size());
  const char prefix[4] = {static_cast<char>(n >> 24), static_cast<char>(n >> 16),
                          static_cast<char>(n >> 8), static_cast<char>(n)};
  out.write(prefix, 4);
  out.write(payload.data(), static_cast<std::streamsize>(payload.size()));
}

void WriteBatch(const EventBatch& batch, EventLogFormat format, std::ostream& out) {
  if (format == EventLogFormat::kJsonLines) {
    out << BatchToJsonLine(batch) << '\n';
  } else {
    WriteLengthPrefixed(EncodeMsgpack(batch), out);
  }
}

absl::StatusOr<std::vector<EventBatch>> ParseEventLog(std::string_view contents,
                                                      std::string_view name) {
  const size_t first = contents.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && contents[first] == '{') {
    return ParseJsonLines(contents, name);
  }
  std::vector<EventBatch> out;
  size_t pos = 0;
  while (pos < contents.size()) {
    if (contents.size() - pos < 4) {
      return absl::InvalidArgumentError(absl::StrCat(std::string(name), ": byte ", pos,
                                                     ": truncated length prefix (",
                                                     contents.size() - pos, " bytes)"));
    }
    uint32_t n = 0;
    for (int i = 0; i < 4; ++i) n = (n << 8) | static_cast<uint8_t>(contents[pos + i]);
    if (contents.size() - pos - 4 < n) {
      return absl::InvalidArgumentError(
          absl::StrCat(std::string(name), ": byte ", pos, ": batch ", out.size(), " announces ", n,
                       " bytes, the file has ", contents.size() - pos - 4, " left"));
    }
    absl::StatusOr<EventBatch> batch = DecodeMsgpack(contents.substr(pos + 4, n), pos + 4);
    if (!batch.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(std::string(name), ": batch ", out.size(), ": ", batch.status().message()));
    }
    out.push_back(*std::move(batch));
    pos += 4 + n;
  }
  return out;
}

absl::StatusOr<std::vector<EventBatch>> ReadEventLog(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open the KV event log"));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return ParseEventLog(buffer.str(), path);
}

}  // namespace prefixsim::events
