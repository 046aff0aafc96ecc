#include "sim/cli/kv_events_flags.h"

#include <filesystem>
#include <iostream>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/cli/common.h"
#include "sim/util/status_macros.h"

namespace prefixsim::cli {

void AddKvEventsCliOptions(CLI::App* cmd, KvEventsCliOptions* o, bool with_zmq) {
  CLI::Option* file = cmd->add_option(
      "--kv-events", o->file,
      "write vLLM's KV cache events (one EventBatch per engine step) to this file; "
      "compare writes one file per policy (FILE with .POLICY before its extension)");
  cmd->add_option("--kv-events-format", o->format,
                  "msgpack (vLLM's payloads, each after a 4-byte big-endian length) or jsonl")
      ->capture_default_str()
      ->needs(file);
  cmd->add_option("--kv-events-warn-size", o->warn_size_bytes,
                  "say on stderr once the --kv-events file passes this size (a fleet's file grows "
                  "with every replica's steps)")
      ->transform(ByteSizeValidator())
      ->default_str("1GiB")
      ->needs(file);
  if (!with_zmq) return;
  // The publisher's settings do nothing without the publisher: CLI11 refuses them (exit 2).
  CLI::Option* zmq =
      cmd->add_option("--kv-events-zmq", o->zmq_endpoint,
                      "publish the KV events as vLLM does: PUB socket bound here (tcp://HOST:PORT; "
                      "replica r of a fleet binds PORT + r)");
  cmd->add_option("--kv-events-topic", o->zmq_topic, "the ZMQ topic frame (default empty)")
      ->needs(zmq);
  cmd->add_option("--kv-events-replay", o->zmq_replay_endpoint,
                  "a ROUTER socket bound here serves past batches on request, as vLLM's "
                  "replay_endpoint (replica r: PORT + r)")
      ->needs(zmq);
  cmd->add_option("--kv-events-wait-subscribers", o->wait_subscribers,
                  "before replaying, wait until this many subscribers subscribed to each "
                  "replica's socket (so that none misses the first batches)")
      ->check(NonNegativeNumber())
      ->needs(zmq);
  cmd->add_option("--kv-events-wait-timeout", o->wait_timeout_s,
                  "give up waiting for subscribers after this many seconds")
      ->capture_default_str()
      ->needs(zmq);
  cmd->add_option("--kv-events-linger", o->linger_s,
                  "keep the ZMQ sockets open this many seconds after the last batch (replay "
                  "requests are served meanwhile)")
      ->check(NonNegativeNumber())
      ->needs(zmq);
  CLI::Option* realtime =
      cmd->add_flag("--realtime", o->realtime,
                    "publish each batch at its simulated time (wall clock from the start)")
          ->needs(zmq);
  cmd->add_option("--speedup", o->speedup, "with --realtime: simulated seconds per wall second")
      ->check(PositiveNumber())
      ->capture_default_str()
      ->needs(realtime);
}

std::string KvEventsFileFor(const std::string& file, std::string_view policy) {
  const std::filesystem::path p(file);
  if (!p.has_extension()) return absl::StrCat(file, ".", std::string(policy));
  std::filesystem::path out = p;
  out.replace_extension(absl::StrCat(".", std::string(policy), p.extension().string()));
  return out.string();
}

absl::Status CheckKvEventsFleetSize(const EngineConfig& engine) {
  if (!engine.fleet.auto_replicas) return absl::OkStatus();
  return absl::InvalidArgumentError(
      "--kv-events needs a fixed fleet size; --replicas auto replays several");
}

absl::StatusOr<std::unique_ptr<KvEventsOutput>> KvEventsOutput::Open(
    const KvEventsCliOptions& options, const std::string& path, const KvPlan& plan,
    int num_replicas) {
  std::unique_ptr<KvEventsOutput> out(new KvEventsOutput());
  out->options_ = options;
  PREFIXSIM_ASSIGN_OR_RETURN(out->format_, events::ParseEventLogFormat(options.format));
  if (!path.empty()) {
    PREFIXSIM_ASSIGN_OR_RETURN(out->file_, AtomicFileWriter::Open(path));
  }
  out->plan_ = plan;
  if (!options.zmq_endpoint.empty()) {
    events::ZmqPublisherOptions endpoints;
    endpoints.endpoint = options.zmq_endpoint;
    endpoints.replay_endpoint = options.zmq_replay_endpoint;
    PREFIXSIM_RETURN_IF_ERROR(events::CheckPublisherEndpoints(endpoints, num_replicas));
    for (int r = 0; r < num_replicas; ++r) PREFIXSIM_RETURN_IF_ERROR(out->StartPublisher(r));
    for (const auto& p : out->publishers_) PREFIXSIM_RETURN_IF_ERROR(p->WaitForSubscribers());
  }
  out->start_ = std::chrono::steady_clock::now();
  return out;
}

absl::Status KvEventsOutput::StartPublisher(int replica) {
  if (static_cast<int>(publishers_.size()) <= replica) {
    publishers_.resize(static_cast<size_t>(replica) + 1);
  }
  events::ZmqPublisherOptions z;
  z.endpoint = options_.zmq_endpoint;
  z.replay_endpoint = options_.zmq_replay_endpoint;
  z.topic = options_.zmq_topic;
  z.wait_subscribers = options_.wait_subscribers;
  z.wait_timeout_s = options_.wait_timeout_s;
  PREFIXSIM_ASSIGN_OR_RETURN(publishers_[static_cast<size_t>(replica)],
                             events::ZmqPublisher::Start(z, replica));
  return absl::OkStatus();
}

std::function<KvEventSink*(int)> KvEventsOutput::SinkFactory() {
  return [this](int replica) -> KvEventSink* {
    std::lock_guard<std::mutex> lock(mu_);
    if (static_cast<int>(recorders_.size()) <= replica) {
      recorders_.resize(static_cast<size_t>(replica) + 1);
      last_step_ns_.resize(static_cast<size_t>(replica) + 1, 0);
    }
    auto& recorder = recorders_[static_cast<size_t>(replica)];
    if (!options_.zmq_endpoint.empty() &&
        (static_cast<int>(publishers_.size()) <= replica || publishers_[replica] == nullptr)) {
      // A replica beyond those opened up front (--replicas auto): a failure is reported at
      // Finish, and this replica's batches go to the file only.
      if (absl::Status s = StartPublisher(replica); !s.ok() && publisher_error_.ok()) {
        publisher_error_ = s;
      }
    }
    if (recorder == nullptr) {
      // Held until the fleet delivers them, in run order: replicas may step on several threads.
      recorder = std::make_unique<events::EventRecorder>(
          plan_, replica, [this](events::EventBatch&& batch) { Write(std::move(batch)); },
          /*hold_until_delivered=*/true);
    }
    return recorder.get();
  };
}

void KvEventsOutput::Write(events::EventBatch&& batch) {
  const size_t replica = static_cast<size_t>(batch.data_parallel_rank.value_or(0));
  if (replica < last_step_ns_.size()) {
    last_step_ns_[replica] = static_cast<int64_t>(batch.ts * 1e9 + 0.5);
  }
  if (file_ != nullptr) {
    events::WriteBatch(batch, format_, file_->stream());
    // The size is asked every 256 batches (tellp is a system call), so the warning comes a few
    // batches after the crossing.
    if (!warned_size_ && options_.warn_size_bytes > 0 && num_batches_ % 256 == 0) {
      const int64_t bytes = static_cast<int64_t>(file_->stream().tellp());
      if (bytes > options_.warn_size_bytes) {
        warned_size_ = true;
        std::cerr << "prefixsim: the --kv-events file has passed "
                  << absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / (1 << 20))
                  << " after " << num_batches_ + 1
                  << " batches and grows with every step of every replica"
                  << (format_ == events::EventLogFormat::kJsonLines
                          ? "; --kv-events-format msgpack writes it smaller"
                          : "")
                  << "; --max-requests or a trace window bounds it (this is said once; "
                     "--kv-events-warn-size sets the size)\n";
      }
    }
  }
  if (replica < publishers_.size() && publishers_[replica] != nullptr) {
    if (options_.realtime) {
      std::this_thread::sleep_until(
          start_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                       std::chrono::duration<double>(batch.ts / options_.speedup)));
    }
    publishers_[replica]->Publish(batch);
  }
  ++num_batches_;
}

absl::Status KvEventsOutput::Finish() {
  for (size_t r = 0; r < recorders_.size(); ++r) {
    if (recorders_[r] != nullptr) recorders_[r]->Flush(last_step_ns_[r]);
  }
  if (file_ != nullptr) PREFIXSIM_RETURN_IF_ERROR(file_->Commit());
  if (!publishers_.empty() && options_.linger_s > 0) {
    std::this_thread::sleep_for(std::chrono::duration<double>(options_.linger_s));
  }
  for (auto& p : publishers_) {
    if (p != nullptr) p->Close();
  }
  return publisher_error_;
}

}  // namespace prefixsim::cli
