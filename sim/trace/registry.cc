// The trace formats, one registration line each, in detection order: the first whose detector
// accepts the first record wins.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "sim/trace/record_parser.h"

namespace prefixsim {

bool FirstRecord::HasKey(std::string_view key) const {
  return std::find(json_keys.begin(), json_keys.end(), key) != json_keys.end();
}

const Registry<TraceFormat>& TraceFormats() {
  static const auto* formats = [] {
    auto* registry = new Registry<TraceFormat>("trace format");
    for (TraceFormat& format : std::vector<TraceFormat>{
             {"bailian",
              "JSONL: chat_id, parent_chat_id, timestamp (s), input_length, output_length, turn, "
              "hash_ids "
              "(16-token blocks)",
              [](const FirstRecord& r) { return r.HasKey("hash_ids") && r.HasKey("chat_id"); },
              NewBailianParser, /*prefix_identity=*/true, /*hash_id_blocks=*/true},
             {"mooncake",
              "JSONL: timestamp (ms), input_length, output_length, hash_ids (512-token blocks)",
              [](const FirstRecord& r) { return r.HasKey("hash_ids"); }, NewMooncakeParser,
              /*prefix_identity=*/true, /*hash_id_blocks=*/true},
             {"tokens",
              "JSONL: arrival_s, prompt_token_ids, output_length, output_token_ids?, session_id?, "
              "cache_salt?",
              [](const FirstRecord& r) { return r.HasKey("prompt_token_ids"); }, NewTokensParser},
             {"llmservingsim",
              "JSONL: input_toks, output_toks, arrival_time_ns, input_tok_ids, output_tok_ids",
              [](const FirstRecord& r) { return r.HasKey("input_tok_ids"); },
              NewLlmServingSimParser},
             {"lengths", "CSV: arrival time (s), prompt length, output length; no prefix identity",
              [](const FirstRecord& r) {
                return !r.is_json_object && r.line.find(',') != std::string_view::npos;
              },
              NewLengthsParser, /*prefix_identity=*/false},
         }) {
      std::string name = format.name;
      registry->Add(std::move(name), std::move(format));
    }
    return registry;
  }();
  return *formats;
}

std::vector<std::string> RegisteredTraceFormats() { return TraceFormats().Names(); }

}  // namespace prefixsim
