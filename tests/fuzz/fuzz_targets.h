// The bodies of the libFuzzer targets (one *_fuzz.cc each), kept here so the GoogleTest suite
// can replay every corpus input, crashes found so far included, through the same code
// (regressions_test.cc). Each body accepts any bytes: an error status is a fine answer; a crash,
// hang, leak or sanitizer report is a bug.
#ifndef PREFIXSIM_TESTS_FUZZ_FUZZ_TARGETS_H_
#define PREFIXSIM_TESTS_FUZZ_FUZZ_TARGETS_H_

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "prefixsim/engine_config.h"
#include "prefixsim/model.h"
#include "prefixsim/request.h"
#include "prefixsim/trace.h"
#include "sim/cost/cost_model.h"
#include "sim/events/event_log.h"
#include "sim/events/msgpack_codec.h"
#include "sim/events/parity.h"
#include "sim/grid/grid.h"

namespace prefixsim::fuzz {

inline std::string_view AsText(const uint8_t* data, size_t size) {
  return std::string_view(reinterpret_cast<const char*>(data), size);
}

inline const std::string& TempTracePath() {
  static const std::string path = [] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/prefixsim_fuzz_" +
           std::to_string(::getpid()) + ".trace";
  }();
  return path;
}

// The input bytes go to a temp file, so plain, gzip and zstd are chosen the way a real file's
// are (from its magic bytes), and are read to the end as `format` ("" = auto-detect).
inline void FuzzTrace(const uint8_t* data, size_t size, const char* format) {
  const std::string& path = TempTracePath();
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, file) != size) std::abort();
  std::fclose(file);

  TraceOptions options;
  options.format = format;
  auto reader = OpenTrace(path, options);
  if (reader.ok()) {
    Request request;
    while (true) {
      auto more = (*reader)->Next(&request);
      if (!more.ok() || !*more) break;
    }
  }
  std::remove(path.c_str());
}

inline void FuzzModelJson(const uint8_t* data, size_t size) {
  (void)ParseModelJson(AsText(data, size), "fuzz.json");
}

inline void FuzzEngineJson(const uint8_t* data, size_t size) {
  auto engine = ParseEngineJson(AsText(data, size), "fuzz.json");
  if (engine.ok()) (void)ValidateEngineConfig(*engine);
}

// At TP 1 and TP 8, so the per-rank division paths run too.
inline void FuzzHfConfig(const uint8_t* data, size_t size) {
  std::string_view text = AsText(data, size);
  (void)LooksLikeHfConfig(text);
  ModelLoadOptions options;
  (void)ImportHfConfig(text, "config.json", options);
  options.tensor_parallel_size = 8;
  (void)ImportHfConfig(text, "config.json", options);
}

// The table cost model's step-time CSV, and interpolation on what parses.
inline void FuzzStepTable(const uint8_t* data, size_t size) {
  auto table = ParseStepTimeTable(AsText(data, size), "steps.csv");
  if (table.ok()) {
    (void)table->Interpolate(0, 0);
    (void)table->Interpolate(1, 4096);
    (void)table->Interpolate(1e6, 1e9);
  }
}

// A scenario file (sweep --grid, regress --suite): parsed and expanded into points, from a temp
// file as the commands read it. Not validated: that would open the models, engines and traces
// it names, wherever they are.
inline void FuzzScenario(const uint8_t* data, size_t size) {
  const std::string path = TempTracePath() + ".scenario.json";
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, file) != size) std::abort();
  std::fclose(file);
  auto scenario = grid::LoadScenario(path);
  if (scenario.ok()) (void)grid::ShardPoints(scenario->points, 1, 3);
  std::remove(path.c_str());
}

// One KV event payload (vLLM's msgpack batch, either event encoding); a decoded batch must
// encode and decode to itself.
inline void FuzzKvEventsMsgpack(const uint8_t* data, size_t size) {
  auto batch = events::DecodeMsgpack(AsText(data, size));
  if (!batch.ok()) return;
  auto again = events::DecodeMsgpack(events::EncodeMsgpack(*batch));
  if (!again.ok() || !(*again == *batch || batch->ts != batch->ts)) std::abort();
}

// A whole KV event log (length-prefixed msgpack or JSON lines, told by its first byte).
inline void FuzzKvEventLog(const uint8_t* data, size_t size) {
  (void)events::ParseEventLog(AsText(data, size), "fuzz.log");
}

// A Prometheus text exposition (vLLM's /metrics).
inline void FuzzPromText(const uint8_t* data, size_t size) {
  (void)events::ParsePromText(AsText(data, size), "fuzz.prom");
}

}  // namespace prefixsim::fuzz

#endif  // PREFIXSIM_TESTS_FUZZ_FUZZ_TARGETS_H_
