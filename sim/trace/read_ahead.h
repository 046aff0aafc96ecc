// A trace reader that parses ahead on its own thread: while the simulation runs one request, the
// next ones are read, decompressed and parsed on another core. The requests, their order, the
// errors (in order: every request before a bad record is still delivered) and the end are
// exactly those of the wrapped reader; only where the parsing happens changes.
#ifndef PREFIXSIM_SIM_TRACE_READ_AHEAD_H_
#define PREFIXSIM_SIM_TRACE_READ_AHEAD_H_

#include <cstddef>
#include <functional>
#include <memory>

#include "prefixsim/trace.h"

namespace prefixsim {

struct ReadAheadOptions {
  // Requests parsed per hand-over (one lock per batch, not per request).
  size_t batch_requests = 64;
  // Batches waiting at most: memory stays bounded by batch_requests * max_batches requests.
  size_t max_batches = 16;
  // Run on the read-ahead thread on each request after it is parsed (null: nothing): work for
  // the engine that depends on the request alone, such as KvCacheManager::PrepareRequest.
  std::function<void(Request*)> prepare;
};

// Wraps `inner`, which from now on is used only by the read-ahead thread. stats() are the inner
// reader's once the end or an error was delivered; before that they lag behind (zeros).
// REQUIRES: inner != nullptr.
std::unique_ptr<TraceReader> ReadAhead(std::unique_ptr<TraceReader> inner,
                                       const ReadAheadOptions& options = {});

}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_TRACE_READ_AHEAD_H_
