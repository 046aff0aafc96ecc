// Helpers for the KV event tests: a replay driven step by step (so that the simulated cache can be
// read between steps), the python reader of tests/events/vllm_kv_events.py.
#ifndef PREFIXSIM_TESTS_EVENTS_KV_EVENTS_TEST_UTIL_H_
#define PREFIXSIM_TESTS_EVENTS_KV_EVENTS_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/engine/simulator.h"
#include "sim/events/cached_blocks.h"
#include "sim/kv/cache_contents.h"
#include "tests/engine/engine_test_util.h"

namespace prefixsim::testing_events {

// Requests sharing a few prefix families, so that blocks are hit, duplicated and evicted.
inline std::vector<Request> FamilyRequests(uint64_t seed, int n) {
  std::mt19937_64 rng(seed);
  std::vector<Request> reqs;
  for (int i = 0; i < n; ++i) {
    const int family = static_cast<int>(rng() % 3);
    const int prefix_len = 8 * static_cast<int>(rng() % 6);
    const int suffix_len = 1 + static_cast<int>(rng() % 40);
    reqs.push_back(
        testing_engine::Req(i, i * 0.3,
                            testing_kv::Concat(testing_kv::Iota(prefix_len, 1000 * (family + 1)),
                                               testing_kv::Iota(suffix_len, 100000 + 100 * i)),
                            1 + static_cast<int64_t>(rng() % 20)));
  }
  return reqs;
}

// Replays `requests` on one replica whose KV events go to `sink`, calling `after_step` with the
// replica after each scheduled step (when vLLM publishes the step's batch).
inline void DriveReplay(const KvPlan& plan, const EngineConfig& engine,
                        std::vector<Request> requests, KvEventSink* sink,
                        const std::function<void(Simulator&)>& after_step) {
  ReplayOptions options;
  options.kv_event_sink = [sink](int) { return sink; };
  auto sim = Simulator::Create(plan, ModelSpec{}, engine, options, ReplayTuning{}, 0, nullptr);
  ASSERT_TRUE(sim.ok()) << sim.status();
  size_t next = 0;
  int64_t now = 0;
  for (;;) {
    while (next < requests.size() && requests[next].arrival_ns <= now) {
      auto r = std::make_unique<Request>(requests[next++]);
      KvCacheManager::PrepareRequest(plan, r.get());
      (*sim)->Admit(std::move(r), now);
    }
    auto dt = (*sim)->StartStep(now);
    ASSERT_TRUE(dt.ok()) << dt.status();
    if (*dt == 0) {
      if (next == requests.size()) break;
      now = requests[next].arrival_ns;
      continue;
    }
    after_step(**sim);
    now += *dt;
    (*sim)->FinishStep(now);
  }
}

// The simulated cache as "group hash count" lines, sorted (the python reader's output).
inline std::string CacheLines(const std::map<std::pair<int64_t, uint64_t>, int64_t>& blocks) {
  std::ostringstream out;
  for (const auto& [key, n] : blocks) out << key.first << " " << key.second << " " << n << "\n";
  return out.str();
}

inline std::map<std::pair<int64_t, uint64_t>, int64_t> ManagerBlocks(const KvCacheManager& m) {
  std::map<std::pair<int64_t, uint64_t>, int64_t> out;
  for (const auto& [group, hash] : kv::CachedBlockList(m)) ++out[{group, hash.hash}];
  return out;
}

// Debian's python3 with python3-msgpack (and python3-zmq for `needs_zmq`), or "" when it is
// missing: the tests that need it skip, saying why.
inline std::string DebianPython(bool needs_zmq = false) {
  const std::string python = "/usr/bin/python3";
  const std::string probe =
      python + " -c 'import msgpack" + (needs_zmq ? ", zmq" : "") + "' >/dev/null 2>&1";
  return std::system(probe.c_str()) == 0 ? python : "";
}

// Runs a shell command; its output (stdout and stderr) and exit code.
struct ShellResult {
  std::string output;
  int exit_code = -1;
};
inline ShellResult RunShell(const std::string& command) {
  ShellResult result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) result.output.append(buffer, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

inline std::string ScriptPath() {
  return absl::StrCat(PREFIXSIM_SOURCE_DIR, "/tests/events/vllm_kv_events.py");
}

}  // namespace prefixsim::testing_events

#endif  // PREFIXSIM_TESTS_EVENTS_KV_EVENTS_TEST_UTIL_H_
