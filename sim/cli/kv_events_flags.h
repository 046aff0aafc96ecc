// The --kv-events flags of `replay` and `compare` (docs/kv-events.md): vLLM's KV cache events of
// the simulated engine, to a file and/or a ZMQ PUB socket as vLLM publishes them.
#ifndef PREFIXSIM_SIM_CLI_KV_EVENTS_FLAGS_H_
#define PREFIXSIM_SIM_CLI_KV_EVENTS_FLAGS_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "prefixsim/engine_config.h"
#include "prefixsim/kv_event_sink.h"
#include "prefixsim/kv_plan.h"
#include "sim/events/event_log.h"
#include "sim/events/event_recorder.h"
#include "sim/events/zmq_publisher.h"
#include "sim/util/atomic_file.h"

namespace prefixsim::cli {

struct KvEventsCliOptions {
  std::string file;
  std::string format = "msgpack";
  std::string zmq_endpoint;
  std::string zmq_topic;
  std::string zmq_replay_endpoint;
  int wait_subscribers = 0;
  double wait_timeout_s = 60;
  double linger_s = 0;
  bool realtime = false;
  double speedup = 1;
  int64_t warn_size_bytes = int64_t{1} << 30;  // a file past this size is said once on stderr
  bool enabled() const { return !file.empty() || !zmq_endpoint.empty(); }
};

// `with_zmq`: also the ZMQ flags (replay only: the policies of a compare would share ports).
void AddKvEventsCliOptions(CLI::App* cmd, KvEventsCliOptions* options, bool with_zmq);

// The event file of one policy's run: FILE itself for `replay`; for `compare`, FILE with
// ".<policy>" inserted before its extension (events.msgpack -> events.new.msgpack), or appended
// when it has none.
std::string KvEventsFileFor(const std::string& file, std::string_view policy);

// InvalidArgument on a fleet of --replicas auto: its search replays several fleets, whose events
// would interleave in one stream.
absl::Status CheckKvEventsFleetSize(const EngineConfig& engine);

// One run's event outputs: a recorder per replica, writing to one file in the order the
// simulation produces the batches (deterministic, so equal inputs give byte-identical files).
class KvEventsOutput {
 public:
  // Checks the options, opens `path` (published by Finish only; empty: no file) and binds the
  // ZMQ sockets of replicas [0, num_replicas) (more are bound when the fleet builds them), then
  // waits for --kv-events-wait-subscribers subscribers on each.
  static absl::StatusOr<std::unique_ptr<KvEventsOutput>> Open(const KvEventsCliOptions& options,
                                                              const std::string& path,
                                                              const KvPlan& plan,
                                                              int num_replicas = 1);
  // ReplayOptions::kv_event_sink: one recorder per replica, made on first request.
  std::function<KvEventSink*(int)> SinkFactory();
  // Hands on what the recorders still hold, publishes the file, keeps the sockets open
  // --kv-events-linger seconds (serving replay requests), then closes them.
  absl::Status Finish();
  int64_t num_batches() const { return num_batches_; }

 private:
  KvEventsOutput() = default;
  void Write(events::EventBatch&& batch);

  absl::Status StartPublisher(int replica);

  KvEventsCliOptions options_;
  KvPlan plan_;
  std::vector<std::unique_ptr<events::ZmqPublisher>> publishers_;
  absl::Status publisher_error_;
  std::chrono::steady_clock::time_point start_;
  events::EventLogFormat format_ = events::EventLogFormat::kMsgpack;
  std::unique_ptr<AtomicFileWriter> file_;
  std::mutex mu_;  // replicas of a fleet are built on one thread; this is cheap insurance
  std::vector<std::unique_ptr<events::EventRecorder>> recorders_;
  std::vector<int64_t> last_step_ns_;
  int64_t num_batches_ = 0;
  bool warned_size_ = false;
};

}  // namespace prefixsim::cli

#endif  // PREFIXSIM_SIM_CLI_KV_EVENTS_FLAGS_H_
