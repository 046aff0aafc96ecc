// Per-block detail of a KV cache's prefix index, for publishing it as vLLM publishes its KV cache
// events (BlockStored / BlockRemoved with group, block hash, parent hash, tokens).
// CacheEventListener (kv_cache_manager.h) stays the lean, keyed view a router's mirror needs;
// this one names the group and the request, which only an exporter wants. Optional: a manager
// without a sink pays one predictable branch per publish and per eviction.
#ifndef PREFIXSIM_KV_EVENT_SINK_H_
#define PREFIXSIM_KV_EVENT_SINK_H_

#include <cstdint>

#include "prefixsim/request.h"

namespace prefixsim {

class KvEventSink {
 public:
  virtual ~KvEventSink() = default;
  // The request whose blocks the stores that follow publish, with its chained chunk hashes at
  // the hash granularity H (chunk i covers tokens [i·H, (i+1)·H)). Valid until the next call.
  virtual void OnCachingRequest(const Request& request, const ChunkHash* chunks,
                                int64_t num_chunks) = 0;
  // One block of group `group` was published under `hash` (one of the chunk hashes above: the
  // last chunk inside the block). Duplicates are reported too: vLLM does not de-duplicate.
  virtual void OnBlockStored(int group, const ChunkHash& hash) = 0;
  // One block's key was dropped (evicted, or re-keyed by a partial block that grew).
  virtual void OnBlockRemoved(int group, const ChunkHash& hash) = 0;
  // A block of group `group`, named by its block hash, was written to or dropped from the offload
  // tier `medium` ("CPU", "FS", ...; docs/semantics.md §16). vLLM's offload events carry the hash
  // alone: no tokens, no parent.
  virtual void OnTierBlockStored(const char* /*medium*/, int /*group*/, uint64_t /*block_hash*/) {}
  virtual void OnTierBlockRemoved(const char* /*medium*/, int /*group*/, uint64_t /*block_hash*/) {}
  // The engine scheduled a step at simulated time `now_ns` (vLLM publishes one batch per step,
  // after scheduling). Called by the simulator, not the manager.
  virtual void OnStepScheduled(int64_t now_ns) = 0;

  // Threads (ReplayOptions::threads). A fleet whose replicas have sinks runs them on one
  // thread, so that every sink is called in the order of a single-threaded run, unless every
  // sink returns true here. Then a sink's calls come from whichever thread runs its replica (one
  // at a time; other replicas' sinks at once), and after each run of its replica's steps the
  // fleet calls Deliver from its own thread, in the order one thread would have run them. A sink
  // that shares anything with other replicas' sinks (a file, a socket) keeps what it would write
  // until Deliver: the stream is then the same for every thread count.
  virtual bool DeliversInRunOrder() const { return false; }
  virtual void Deliver() {}
};

}  // namespace prefixsim

#endif  // PREFIXSIM_KV_EVENT_SINK_H_
