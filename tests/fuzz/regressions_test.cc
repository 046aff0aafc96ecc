// Replays every input of tests/fuzz/corpus/<target>/ (the seeds and every input that once
// crashed a fuzz target) through that target's body, so a fixed crash stays fixed in the normal
// suite, sanitizer build included.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/fuzz/fuzz_targets.h"

namespace prefixsim::fuzz {
namespace {

using Body = std::function<void(const uint8_t*, size_t)>;

const std::map<std::string, Body>& Targets() {
  static const auto* targets = new std::map<std::string, Body>{
      {"trace_bailian_fuzz", [](const uint8_t* d, size_t n) { FuzzTrace(d, n, "bailian"); }},
      {"trace_mooncake_fuzz", [](const uint8_t* d, size_t n) { FuzzTrace(d, n, "mooncake"); }},
      {"trace_tokens_fuzz", [](const uint8_t* d, size_t n) { FuzzTrace(d, n, "tokens"); }},
      {"trace_llmservingsim_fuzz",
       [](const uint8_t* d, size_t n) { FuzzTrace(d, n, "llmservingsim"); }},
      {"trace_lengths_fuzz", [](const uint8_t* d, size_t n) { FuzzTrace(d, n, "lengths"); }},
      {"trace_auto_fuzz", [](const uint8_t* d, size_t n) { FuzzTrace(d, n, ""); }},
      {"model_json_fuzz", FuzzModelJson},
      {"engine_json_fuzz", FuzzEngineJson},
      {"hf_config_fuzz", FuzzHfConfig},
      {"step_table_fuzz", FuzzStepTable},
      {"scenario_fuzz", FuzzScenario},
      {"kv_events_msgpack_fuzz", FuzzKvEventsMsgpack},
      {"kv_event_log_fuzz", FuzzKvEventLog},
      {"prom_text_fuzz", FuzzPromText},
  };
  return *targets;
}

const std::filesystem::path kCorpus =
    std::filesystem::path(PREFIXSIM_SOURCE_DIR) / "tests/fuzz/corpus";

TEST(FuzzRegressionTest, EveryTargetHasASourceAndASeedCorpus) {
  for (const auto& [name, body] : Targets()) {
    EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(PREFIXSIM_SOURCE_DIR) / "tests/fuzz" /
                                        (name + ".cc")))
        << name;
    EXPECT_TRUE(std::filesystem::is_directory(kCorpus / name)) << name;
  }
  for (const auto& entry : std::filesystem::directory_iterator(kCorpus)) {
    if (entry.is_directory()) {
      EXPECT_TRUE(Targets().contains(entry.path().filename().string())) << entry.path();
    }
  }
}

TEST(FuzzRegressionTest, EveryCorpusInputRunsCleanly) {
  int inputs = 0;
  for (const auto& [name, body] : Targets()) {
    if (!std::filesystem::is_directory(kCorpus / name)) continue;
    for (const auto& entry : std::filesystem::directory_iterator(kCorpus / name)) {
      if (!entry.is_regular_file()) continue;
      SCOPED_TRACE(entry.path().string());
      std::ifstream in(entry.path(), std::ios::binary);
      std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
      body(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
      ++inputs;
    }
  }
  EXPECT_GT(inputs, 0);
}

// Found by model_json_fuzz: a number too large for a double made nlohmann throw out_of_range,
// which JsonConfig::Parse did not catch (only parse_error), so the run aborted.
TEST(FuzzRegressionTest, NumberOverflowInAConfigIsAnErrorNotACrash) {
  auto model = ParseModelJson("{\"name\": \"m\", \"layers\": 1e999}", "m.json");
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(model.status().message()).find("m.json: invalid JSON"), std::string::npos)
      << model.status();
}

// Found by engine_json_fuzz: an integer field given as a float beyond int64 was converted with
// static_cast (undefined behaviour, UBSan's float-cast-overflow).
TEST(FuzzRegressionTest, IntegerFieldsOutsideInt64AreErrors) {
  for (const char* value : {"1.3e94", "-1e19", "9223372036854775808.0", "18446744073709551615"}) {
    SCOPED_TRACE(value);
    auto engine = ParseEngineJson(
        std::string("{\"kv_cache_bytes\": 68719476736, \"max_model_len\": ") + value + "}",
        "e.json");
    ASSERT_FALSE(engine.ok());
    EXPECT_NE(std::string(engine.status().message()).find("max_model_len"), std::string::npos)
        << engine.status();
  }
}

}  // namespace
}  // namespace prefixsim::fuzz
