// The KV events over ZMQ, end to end: `prefixsim replay --kv-events-zmq` started and stopped by
// the test, followed by a subscriber written against vLLM's frame layout (Debian's python3-zmq
// and python3-msgpack, tests/events/vllm_kv_events.py), which must rebuild the cached blocks
// exactly and get a requested range from the replay socket; for a fleet, one subscriber per
// replica on its offset port.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "sim/events/event_log.h"
#include "sim/events/zmq_publisher.h"
#include "tests/cli_runner.h"
#include "tests/events/kv_events_test_util.h"

namespace prefixsim {
namespace {

using ::prefixsim::testing::RunCli;
using ::prefixsim::testing::TempOutputPath;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// A TCP port the kernel says is free now.
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return -1;
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

// Starts `prefixsim replay` of the token sample publishing on `pub` with its replay socket on
// `replay` and its event log at `log` (stdout and stderr to `out`), plus `extra_flags`; it waits
// for one subscriber and lingers until killed. Returns its pid, or -1.
int StartPublishingReplay(const std::string& pub, const std::string& replay, const std::string& log,
                          const std::string& out, const std::string& extra_flags) {
  const auto started = testing_events::RunShell(
      std::string(PREFIXSIM_BINARY) + " replay --trace " + PREFIXSIM_SOURCE_DIR +
      "/traces/sample_tokens.jsonl --model qwen3-next-80b-a3b --engine h200 --no-progress " +
      extra_flags + " --kv-events " + log + " --kv-events-zmq " + pub + " --kv-events-replay " +
      replay + " --kv-events-topic kv-events --kv-events-wait-subscribers 1 " +
      "--kv-events-linger 300 > " + out + " 2>&1 & echo $!");
  int pid = 0;
  return absl::SimpleAtoi(absl::StripAsciiWhitespace(started.output), &pid) ? pid : -1;
}

TEST(KvEventsZmqTest, EndpointsAreOffsetByReplicaAsVllmOffsetsDpRanks) {
  EXPECT_EQ(*events::OffsetEndpointPort("tcp://*:5557", 0), "tcp://*:5557");
  EXPECT_EQ(*events::OffsetEndpointPort("tcp://*:5557", 3), "tcp://*:5560");
  EXPECT_EQ(*events::OffsetEndpointPort("tcp://127.0.0.1:9000", 1), "tcp://127.0.0.1:9001");
  EXPECT_EQ(*events::OffsetEndpointPort("inproc://cache", 2), "inproc://cache_dp2");
  EXPECT_FALSE(events::OffsetEndpointPort("ipc:///tmp/x", 1).ok());
  EXPECT_FALSE(events::OffsetEndpointPort("tcp://host", 1).ok());
}

// Every replica's endpoints are checked before any is bound: replica r binds both ports plus r,
// so 5557 and 5558 collide from two replicas on (replica 1's publisher is replica 0's replay
// socket); malformed endpoints name the accepted forms.
TEST(KvEventsZmqTest, EndpointSetsAreCheckedForEveryReplicaBeforeBinding) {
  auto check = [](std::string pub, std::string replay, int replicas) {
    events::ZmqPublisherOptions options;
    options.endpoint = pub;
    options.replay_endpoint = replay;
    return events::CheckPublisherEndpoints(options, replicas);
  };
  EXPECT_TRUE(check("tcp://*:5557", "tcp://*:5558", 1).ok());
  const absl::Status collide = check("tcp://*:5557", "tcp://*:5558", 4);
  ASSERT_FALSE(collide.ok());
  EXPECT_THAT(std::string(collide.message()),
              HasSubstr("replica 0's replay_endpoint (tcp://*:5558) is replica 1's endpoint"));
  EXPECT_TRUE(check("tcp://*:5557", "tcp://*:5561", 4).ok());
  EXPECT_FALSE(check("tcp://*:5557", "tcp://*:5560", 4).ok());
  EXPECT_FALSE(check("tcp://*:5557", "tcp://127.0.0.1:5557", 1).ok());  // one port, two binds
  EXPECT_TRUE(check("inproc://a", "inproc://b", 3).ok());
  EXPECT_TRUE(check("ipc:///tmp/a", "", 1).ok());
  EXPECT_THAT(std::string(check("ipc:///tmp/a", "", 2).message()), HasSubstr("one replica"));
  for (const char* bad :
       {"tcp://*", "foo", "tcp://*:65536", "tcp://*:0", "tcp://*:x", "inproc://"}) {
    const absl::Status s = check(bad, "", 1);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_THAT(std::string(s.message()), HasSubstr("expected tcp://HOST:PORT")) << bad;
  }
  EXPECT_THAT(std::string(check("tcp://*:65535", "", 2).message()), HasSubstr("above 65535"));
  // The command line refuses the README's former fleet example before the replay.
  const auto r = RunCli(testing::SampleReplayArgs(
      "sample_chat.jsonl",
      "--model kimi-k3-like --engine kimi-k3-dspark --kv-events-zmq tcp://127.0.0.1:5557 "
      "--kv-events-replay tcp://127.0.0.1:5558 --replicas 4",
      1));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("is replica 1's endpoint"));
}

TEST(KvEventsZmqTest, SubscriberRebuildsTheCacheAndTheReplaySocketServesARange) {
  const std::string python = testing_events::DebianPython(/*needs_zmq=*/true);
  if (python.empty()) {
    GTEST_SKIP() << "/usr/bin/python3 with python3-zmq and python3-msgpack is not installed";
  }
  const int pub_port = FreePort();
  int replay_port = FreePort();
  while (replay_port == pub_port) replay_port = FreePort();
  ASSERT_GT(pub_port, 0);
  ASSERT_GT(replay_port, 0);
  const std::string pub = "tcp://127.0.0.1:" + std::to_string(pub_port);
  const std::string replay = "tcp://127.0.0.1:" + std::to_string(replay_port);
  const std::string log = TempOutputPath("zmq_events.msgpack");
  const std::string out = TempOutputPath("zmq_replay.out");
  std::remove(log.c_str());  // the subscriber takes the log's appearance as the end of the run
  // The replay waits for one subscription before its first batch and lingers after its last
  // (serving replay requests) until the test kills it.
  const int pid = StartPublishingReplay(pub, replay, log, out, "");
  ASSERT_GT(pid, 0);
  const auto sub =
      testing_events::RunShell(python + " " + testing_events::ScriptPath() + " subscribe " + pub +
                               " " + replay + " kv-events " + log);
  kill(pid, SIGKILL);
  ASSERT_EQ(sub.exit_code, 0) << sub.output << testing::ReadFile(out);
  const auto decoded =
      testing_events::RunShell(python + " " + testing_events::ScriptPath() + " decode " + log);
  ASSERT_EQ(decoded.exit_code, 0) << decoded.output;
  ASSERT_FALSE(decoded.output.empty());
  // The live stream's cache is the log's, and the log's is the simulated one (kv_events_test).
  EXPECT_THAT(sub.output, StartsWith(decoded.output));
  EXPECT_THAT(sub.output.substr(decoded.output.size()), HasSubstr("replayed "));
}

// --realtime publishes each batch at its simulated time over --speedup: the run cannot end before
// its last batch's time has passed on the wall clock.
// A port p with p + 1 free as well (replica 1 of a fleet binds p + 1), away from `avoid` and
// avoid + 1.
int FreePortPair(int avoid) {
  for (int tries = 0; tries < 100; ++tries) {
    const int p = FreePort();
    if (p <= 0 || p + 1 > 65535 || p == avoid || p == avoid + 1 || p + 1 == avoid) continue;
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(p + 1));
    const bool free = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    close(fd);
    if (free) return p;
  }
  return -1;
}

// Two replicas behind round_robin: each publishes on its own port (the base port plus its index,
// as vLLM offsets by data-parallel rank) with its own sequence numbers and replay socket. One
// subscriber per replica rebuilds every replica's cache exactly (equal to the log's, by rank),
// and a replica's replay socket serves a requested range.
TEST(KvEventsZmqTest, AFleetsSubscribersRebuildEveryReplicasCache) {
  const std::string python = testing_events::DebianPython(/*needs_zmq=*/true);
  if (python.empty()) {
    GTEST_SKIP() << "/usr/bin/python3 with python3-zmq and python3-msgpack is not installed";
  }
  const int pub_port = FreePortPair(-10);
  const int replay_port = FreePortPair(pub_port);
  ASSERT_GT(pub_port, 0);
  ASSERT_GT(replay_port, 0);
  const std::string pub = "tcp://127.0.0.1:" + std::to_string(pub_port);
  const std::string replay = "tcp://127.0.0.1:" + std::to_string(replay_port);
  const std::string log = TempOutputPath("zmq_fleet_events.msgpack");
  const std::string out = TempOutputPath("zmq_fleet_replay.out");
  std::remove(log.c_str());  // the subscriber takes the log's appearance as the end of the run
  const int pid = StartPublishingReplay(pub, replay, log, out, "--replicas 2 --router round_robin");
  ASSERT_GT(pid, 0);
  const auto sub =
      testing_events::RunShell(python + " " + testing_events::ScriptPath() + " subscribe-fleet " +
                               pub + " " + replay + " kv-events " + log + " 2");
  kill(pid, SIGKILL);
  ASSERT_EQ(sub.exit_code, 0) << sub.output << testing::ReadFile(out);
  const auto decoded = testing_events::RunShell(python + " " + testing_events::ScriptPath() +
                                                " decode-by-rank " + log);
  ASSERT_EQ(decoded.exit_code, 0) << decoded.output;
  // Both replicas cached something, and the streams' caches are the log's.
  EXPECT_THAT(decoded.output, StartsWith("0 "));
  EXPECT_THAT(decoded.output, HasSubstr("\n1 "));
  EXPECT_THAT(sub.output, StartsWith(decoded.output));
  EXPECT_THAT(sub.output.substr(decoded.output.size()), HasSubstr("replayed replica 1 "));
}

TEST(KvEventsZmqTest, RealtimePacesBatchesAtSimulatedTime) {
  const std::string log = TempOutputPath("realtime_events.msgpack");
  const double speedup = 200;
  const auto start = std::chrono::steady_clock::now();
  const auto r =
      testing::RunCli("replay --trace " + std::string(PREFIXSIM_SOURCE_DIR) +
                      "/traces/sample_tokens.jsonl --model qwen3-next-80b-a3b "
                      "--engine h200 --no-progress --kv-events " +
                      log + " --kv-events-zmq tcp://127.0.0.1:" + std::to_string(FreePort()) +
                      " --realtime --speedup " + std::to_string(speedup));
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto batches = events::ReadEventLog(log);
  ASSERT_TRUE(batches.ok()) << batches.status();
  ASSERT_FALSE(batches->empty());
  EXPECT_GE(wall, batches->back().ts / speedup);
  EXPECT_GT(batches->back().ts / speedup, 0.5);  // long enough for the check to mean something
}

}  // namespace
}  // namespace prefixsim
