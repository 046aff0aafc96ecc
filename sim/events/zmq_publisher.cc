#include "sim/events/zmq_publisher.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "sim/events/msgpack_codec.h"
#include "sim/util/status_macros.h"

namespace prefixsim::events {
namespace {

std::string SequenceBytes(int64_t seq) {
  std::string out(8, '\0');
  const uint64_t v = static_cast<uint64_t>(seq);
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>(v >> (56 - 8 * i));
  return out;
}

// The port of tcp://HOST:PORT, when it is one (1-65535).
std::optional<int> TcpPort(std::string_view endpoint) {
  const size_t colon = endpoint.rfind(':');
  int port = 0;
  if (colon == std::string_view::npos || colon < 6 ||
      !absl::SimpleAtoi(std::string(endpoint.substr(colon + 1)), &port) || port < 1 ||
      port > 65535) {
    return std::nullopt;
  }
  return port;
}

}  // namespace

absl::StatusOr<std::string> OffsetEndpointPort(std::string_view endpoint, int rank) {
  if (endpoint.empty() || rank == 0) return std::string(endpoint);
  if (endpoint.starts_with("inproc://")) return absl::StrCat(std::string(endpoint), "_dp", rank);
  if (endpoint.starts_with("tcp://")) {
    const std::optional<int> port = TcpPort(endpoint);
    if (!port) {
      return absl::InvalidArgumentError(absl::StrCat("KV event endpoint \"", std::string(endpoint),
                                                     "\" has no port to offset by replica"));
    }
    return absl::StrCat(std::string(endpoint.substr(0, endpoint.rfind(':') + 1)), *port + rank);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("KV event endpoint \"", std::string(endpoint),
                   "\": a fleet needs tcp or inproc endpoints (one per replica)"));
}

absl::Status CheckPublisherEndpoints(const ZmqPublisherOptions& options, int num_replicas) {
  // What a bind takes: a tcp port (any host: a wildcard bind meets every address), else the name.
  std::map<std::string, std::string> taken;  // -> "replica r's `field`"
  for (const auto& [field, endpoint] :
       {std::pair<const char*, const std::string&>{"endpoint", options.endpoint},
        {"replay_endpoint", options.replay_endpoint}}) {
    if (endpoint.empty()) continue;
    const bool tcp = endpoint.starts_with("tcp://");
    const std::optional<int> port = tcp ? TcpPort(endpoint) : std::nullopt;
    const bool named = (endpoint.starts_with("inproc://") || endpoint.starts_with("ipc://")) &&
                       endpoint.find("://") + 3 < endpoint.size();
    if (tcp ? !port.has_value() : !named) {
      return absl::InvalidArgumentError(absl::StrCat(
          "KV events ", field, " \"", endpoint,
          "\": expected tcp://HOST:PORT (HOST may be *), inproc://NAME or ipc://PATH"));
    }
    if (tcp && *port + num_replicas - 1 > 65535) {
      return absl::InvalidArgumentError(absl::StrCat(
          "KV events ", field, " \"", endpoint, "\": replica ", num_replicas - 1,
          " would bind port ", *port + num_replicas - 1, " (port + replica), above 65535"));
    }
    if (endpoint.starts_with("ipc://") && num_replicas > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("KV events ", field, " \"", endpoint,
                       "\": ipc endpoints serve one replica (vLLM offsets only tcp and inproc "
                       "endpoints by data-parallel rank)"));
    }
    for (int r = 0; r < num_replicas; ++r) {
      PREFIXSIM_ASSIGN_OR_RETURN(const std::string at, OffsetEndpointPort(endpoint, r));
      const std::string key = tcp ? absl::StrCat("tcp port ", *port + r) : at;
      const std::string who = absl::StrCat("replica ", r, "'s ", field);
      const auto [it, fresh] = taken.emplace(key, who);
      if (!fresh) {
        return absl::InvalidArgumentError(absl::StrCat(
            "KV events: ", who, " (", at, ") is ", it->second, ": replica r binds each endpoint's ",
            "port plus r, so with ", num_replicas, " replicas the ports of endpoint and ",
            "replay_endpoint must be at least ", num_replicas, " apart"));
      }
    }
  }
  return absl::OkStatus();
}

struct ZmqPublisher::Impl {
  ZmqPublisherOptions options;
  std::string endpoint, replay_endpoint;
  zmq::context_t context{1};
  zmq::socket_t pub{context, zmq::socket_type::xpub};
  zmq::socket_t replay;  // ROUTER, when asked for
  std::thread thread;

  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::string> queue;  // encoded payloads not yet sent
  bool stop = false;
  int subscriptions = 0;

  // Service thread only.
  int64_t next_seq = 0;
  std::deque<std::pair<int64_t, std::string>> buffer;

  void Send(std::string&& payload) {
    const int64_t seq = next_seq++;
    const std::string seq_bytes = SequenceBytes(seq);
    pub.send(zmq::buffer(options.topic), zmq::send_flags::sndmore);
    pub.send(zmq::buffer(seq_bytes), zmq::send_flags::sndmore);
    pub.send(zmq::buffer(payload), zmq::send_flags::none);
    buffer.emplace_back(seq, std::move(payload));
    if (static_cast<int64_t>(buffer.size()) > options.buffer_steps) buffer.pop_front();
  }

  void ServeReplay() {
    std::vector<zmq::message_t> frames;
    if (!zmq::recv_multipart(replay, std::back_inserter(frames), zmq::recv_flags::dontwait)) return;
    if (frames.size() != 3 || frames[2].size() != 8) return;  // vLLM ignores malformed requests
    uint64_t start = 0;
    for (size_t i = 0; i < 8; ++i) start = (start << 8) | frames[2].data<uint8_t>()[i];
    const std::string identity = frames[0].to_string();
    for (const auto& [seq, payload] : buffer) {
      if (static_cast<uint64_t>(seq) < start) continue;
      const std::string seq_bytes = SequenceBytes(seq);
      replay.send(zmq::buffer(identity), zmq::send_flags::sndmore);
      replay.send(zmq::const_buffer("", 0), zmq::send_flags::sndmore);
      replay.send(zmq::buffer(seq_bytes), zmq::send_flags::sndmore);
      replay.send(zmq::buffer(payload), zmq::send_flags::none);
    }
    const std::string end = SequenceBytes(-1);
    replay.send(zmq::buffer(identity), zmq::send_flags::sndmore);
    replay.send(zmq::const_buffer("", 0), zmq::send_flags::sndmore);
    replay.send(zmq::buffer(end), zmq::send_flags::sndmore);
    replay.send(zmq::const_buffer("", 0), zmq::send_flags::none);
  }

  void Run() {
    std::vector<zmq::pollitem_t> items = {{pub.handle(), 0, ZMQ_POLLIN, 0}};
    if (replay) items.push_back({replay.handle(), 0, ZMQ_POLLIN, 0});
    for (;;) {
      std::deque<std::string> ready;
      bool stopping;
      {
        std::lock_guard<std::mutex> lock(mu);
        ready.swap(queue);
        stopping = stop;
      }
      for (std::string& payload : ready) Send(std::move(payload));
      if (stopping) return;
      zmq::poll(items, std::chrono::milliseconds(2));
      if (items[0].revents & ZMQ_POLLIN) {
        // XPUB: a subscription (first byte 1) or an unsubscription (0).
        zmq::message_t msg;
        while (pub.recv(msg, zmq::recv_flags::dontwait)) {
          if (msg.size() > 0 && msg.data<uint8_t>()[0] == 1) {
            std::lock_guard<std::mutex> lock(mu);
            ++subscriptions;
            cv.notify_all();
          }
        }
      }
      if (items.size() > 1 && (items[1].revents & ZMQ_POLLIN)) ServeReplay();
    }
  }
};

ZmqPublisher::ZmqPublisher(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<ZmqPublisher>> ZmqPublisher::Start(
    const ZmqPublisherOptions& options, int rank) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  PREFIXSIM_ASSIGN_OR_RETURN(impl->endpoint, OffsetEndpointPort(options.endpoint, rank));
  PREFIXSIM_ASSIGN_OR_RETURN(impl->replay_endpoint,
                             OffsetEndpointPort(options.replay_endpoint, rank));
  try {
    impl->pub.set(zmq::sockopt::sndhwm, options.hwm);
    // Every subscription reaches us, not only the first per topic: we count subscribers.
    impl->pub.set(zmq::sockopt::xpub_verbose, 1);
    impl->pub.set(zmq::sockopt::linger, 1000);
    impl->pub.bind(impl->endpoint);
    if (!impl->replay_endpoint.empty()) {
      impl->replay = zmq::socket_t(impl->context, zmq::socket_type::router);
      impl->replay.set(zmq::sockopt::linger, 1000);
      impl->replay.bind(impl->replay_endpoint);
    }
  } catch (const zmq::error_t& e) {
    return absl::UnavailableError(absl::StrCat("KV events of replica ", rank, ": cannot bind ",
                                               impl->endpoint, " / ", impl->replay_endpoint, ": ",
                                               e.what()));
  }
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->Run(); });
  return std::unique_ptr<ZmqPublisher>(new ZmqPublisher(std::move(impl)));
}

ZmqPublisher::~ZmqPublisher() { Close(); }

absl::Status ZmqPublisher::WaitForSubscribers() {
  std::unique_lock<std::mutex> lock(impl_->mu);
  const bool ok = impl_->cv.wait_for(
      lock, std::chrono::duration<double>(impl_->options.wait_timeout_s),
      [this] { return impl_->subscriptions >= impl_->options.wait_subscribers; });
  if (!ok) {
    return absl::DeadlineExceededError(absl::StrCat(
        impl_->endpoint, ": ", impl_->subscriptions, " of ", impl_->options.wait_subscribers,
        " KV event subscribers after ", impl_->options.wait_timeout_s, " s"));
  }
  return absl::OkStatus();
}

void ZmqPublisher::Publish(const EventBatch& batch) {
  std::string payload = EncodeMsgpack(batch);
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->queue.push_back(std::move(payload));
}

void ZmqPublisher::Close() {
  if (impl_ == nullptr || !impl_->thread.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stop = true;
  }
  impl_->thread.join();
  impl_->pub.close();
  if (impl_->replay) impl_->replay.close();
}

std::string ZmqPublisher::endpoint() const { return impl_->endpoint; }
std::string ZmqPublisher::replay_endpoint() const { return impl_->replay_endpoint; }

}  // namespace prefixsim::events
