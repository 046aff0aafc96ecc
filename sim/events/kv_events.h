// vLLM's KV cache events as values: what one engine step stored and removed, as vLLM's
// `KVEventBatch` carries it (docs/kv-events.md has the schema and where it comes from). The
// encoders and decoders (msgpack_codec.h, json_lines.h) and the exporter (event_recorder.h) share
// these types; nothing here knows the simulator.
#ifndef PREFIXSIM_SIM_EVENTS_KV_EVENTS_H_
#define PREFIXSIM_SIM_EVENTS_KV_EVENTS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace prefixsim::events {

// vLLM exposes a block hash as an int (the low 64 bits of its digest, under
// VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES) or as the digest's bytes. We emit ints (our hashes are 64
// bits); a decoded bytes hash keeps its last 8 bytes, big-endian, which is vLLM's own conversion.
using ExternalBlockHash = uint64_t;

struct BlockStored {
  std::vector<ExternalBlockHash> block_hashes;
  std::optional<ExternalBlockHash> parent_block_hash;
  std::vector<int64_t> token_ids;
  int64_t block_size = 0;
  std::optional<std::string> medium;  // "GPU" for blocks of the engine's own pool
  std::optional<int64_t> group_idx;   // absent in events of vLLM versions before groups
  std::optional<std::string> kv_cache_spec_kind;
  std::optional<int64_t> kv_cache_spec_sliding_window;
  bool operator==(const BlockStored&) const = default;
};

struct BlockRemoved {
  std::vector<ExternalBlockHash> block_hashes;
  std::optional<std::string> medium;
  std::optional<int64_t> group_idx;
  bool operator==(const BlockRemoved&) const = default;
};

struct AllBlocksCleared {
  bool operator==(const AllBlocksCleared&) const = default;
};

using KvEvent = std::variant<BlockStored, BlockRemoved, AllBlocksCleared>;

struct EventBatch {
  double ts = 0;  // seconds; vLLM: wall time, prefixsim: simulated time
  std::vector<KvEvent> events;
  std::optional<int64_t> data_parallel_rank;
  bool operator==(const EventBatch&) const = default;
};

inline constexpr const char* kMediumGpu = "GPU";

}  // namespace prefixsim::events

#endif  // PREFIXSIM_SIM_EVENTS_KV_EVENTS_H_
