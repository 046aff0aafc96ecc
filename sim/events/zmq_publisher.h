// Publishes KV event batches as vLLM's ZmqEventPublisher does (docs/kv-events.md): a PUB-side
// socket sending (topic, 8-byte big-endian sequence number, msgpack payload) frames, sequence
// numbers from 0, and an optional ROUTER socket that answers a request carrying an 8-byte
// big-endian start sequence with every buffered batch from there as (seq, payload) frames, then
// the end marker (seq -1, empty payload). Replica r binds the endpoints' ports plus r, as vLLM
// offsets them by data-parallel rank.
//
// The PUB side is an XPUB socket: the same wire protocol for subscribers, but it sees their
// subscriptions, so a run can wait for its subscribers before the first batch instead of losing
// what a slow joiner would miss (wait_subscribers). The sockets live on one service thread (ZMQ
// sockets are not thread-safe), which keeps answering replay requests until Close().
#ifndef PREFIXSIM_SIM_EVENTS_ZMQ_PUBLISHER_H_
#define PREFIXSIM_SIM_EVENTS_ZMQ_PUBLISHER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "sim/events/kv_events.h"

namespace prefixsim::events {

struct ZmqPublisherOptions {
  std::string endpoint;         // e.g. tcp://*:5557 or tcp://127.0.0.1:5557 (bound)
  std::string replay_endpoint;  // empty: no replay socket
  std::string topic;
  int64_t buffer_steps = 10000;  // batches kept for replay (vLLM's default)
  int hwm = 100000;              // send high-water mark (vLLM's default)
  int wait_subscribers = 0;      // subscriptions to wait for before the first batch
  double wait_timeout_s = 60;    // ... at most this long (then DeadlineExceeded)
};

// vLLM's offset_endpoint_port: tcp endpoints get their port plus `rank`; inproc ones a "_dp<rank>"
// suffix; rank 0 is unchanged. InvalidArgument for an endpoint without a port or of another
// transport (ipc endpoints are refused beyond rank 0, as vLLM does).
absl::StatusOr<std::string> OffsetEndpointPort(std::string_view endpoint, int rank);

// The endpoints replicas 0 .. num_replicas - 1 would bind (`endpoint`, and `replay_endpoint`
// when set), checked before any is bound: each of the form tcp://HOST:PORT (port 1-65535 for
// every replica), inproc://NAME or, on one replica, ipc://PATH; and no two of them the same
// (replica r's publisher port, the first's plus r, must not be another replica's replay port).
// InvalidArgument naming the field, the replicas and the endpoint.
absl::Status CheckPublisherEndpoints(const ZmqPublisherOptions& options, int num_replicas);

class ZmqPublisher {
 public:
  // Binds the sockets of replica `rank` and starts the service thread. Unavailable if an
  // endpoint cannot be bound.
  static absl::StatusOr<std::unique_ptr<ZmqPublisher>> Start(const ZmqPublisherOptions& options,
                                                             int rank);
  ~ZmqPublisher();
  ZmqPublisher(const ZmqPublisher&) = delete;
  ZmqPublisher& operator=(const ZmqPublisher&) = delete;

  // Waits for options.wait_subscribers subscriptions (returns at once when 0).
  absl::Status WaitForSubscribers();
  // Encodes the batch and hands it to the service thread, which sends it with the next
  // sequence number. Never blocks on the network.
  void Publish(const EventBatch& batch);
  // Sends what is queued, then stops the thread and closes the sockets.
  void Close();

  std::string endpoint() const;
  std::string replay_endpoint() const;

 private:
  struct Impl;
  explicit ZmqPublisher(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace prefixsim::events

#endif  // PREFIXSIM_SIM_EVENTS_ZMQ_PUBLISHER_H_
