// Model and engine JSON readers: fields, presets and every error path (docs/design.md §4.2, §4.3).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "prefixsim/engine_config.h"
#include "prefixsim/model.h"

namespace prefixsim {
namespace {

using ::testing::HasSubstr;

std::string Message(const absl::Status& s) { return std::string(s.message()); }

TEST(ModelJsonTest, ParsesAllKindsAndBytesPerToken) {
  auto model = ParseModelJson(R"({"name": "m", "layers": [
    {"kind": "mla", "count": 2, "kv_lora_rank": 512, "qk_rope_head_dim": 64},
    {"kind": "mla", "count": 1, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "kv_dtype": "fp8"},
    {"kind": "full_attention", "count": 3, "num_kv_heads": 8, "head_size": 128},
    {"kind": "full_attention", "count": 1, "num_kv_heads": 2, "head_size": 192, "head_size_v": 128},
    {"kind": "sliding_window", "count": 1, "num_kv_heads": 4, "head_size": 128, "kv_dtype": "fp8",
     "sliding_window": 4096, "drafter": true},
    {"kind": "chunked_local", "count": 1, "num_kv_heads": 8, "head_size": 128,
     "attention_chunk_size": 8192},
    {"kind": "mamba", "count": 4, "state_bytes": 1740800},
    {"kind": "full_attention", "count": 1, "bytes_per_token": 3000}]})",
                              "m.json");
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_EQ(model->layers.size(), 8u);
  EXPECT_EQ(model->layers[0].BytesPerToken(), 1152);  // docs/semantics.md §2.1: MLA bf16
  EXPECT_EQ(model->layers[1].BytesPerToken(), 576);   // MLA fp8
  EXPECT_EQ(model->layers[2].BytesPerToken(), 4096);
  EXPECT_EQ(model->layers[3].BytesPerToken(), 2 * (192 + 128) * 2);
  EXPECT_EQ(model->layers[4].BytesPerToken(), 1024);
  EXPECT_TRUE(model->layers[4].drafter);
  EXPECT_EQ(model->layers[4].sliding_window, 4096);
  EXPECT_EQ(model->layers[5].attention_chunk_size, 8192);
  EXPECT_EQ(model->layers[6].state_bytes, 1740800);
  EXPECT_EQ(model->layers[7].BytesPerToken(), 3000);
}

struct BadModelCase {
  const char* json;
  const char* expected;  // substring of the message
};

class BadModelTest : public ::testing::TestWithParam<BadModelCase> {};

TEST_P(BadModelTest, NamesFileLineAndField) {
  auto model = ParseModelJson(GetParam().json, "bad.json");
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(model.status()), HasSubstr("bad.json:"));
  EXPECT_THAT(Message(model.status()), HasSubstr(GetParam().expected));
}

INSTANTIATE_TEST_SUITE_P(
    Errors, BadModelTest,
    ::testing::Values(
        BadModelCase{R"({"layers": [{"kind": "warp", "count": 1}]})",
                     "bad.json:1: field 'layers[0].kind': unknown layer kind 'warp'"},
        BadModelCase{"{\"layers\": [\n {\"kind\": \"full_attention\", \"count\": 2,\n"
                     "  \"head_size\": 128}]}",
                     "bad.json:2: field 'layers[0].num_kv_heads': missing"},
        BadModelCase{"{\"layers\": [\n {\"kind\": \"mla\",\n \"count\": 0}]}",
                     "bad.json:3: field 'layers[0].count': must be >= 1"},
        BadModelCase{R"({"layers": [{"kind": "mamba", "count": 1, "state_bytes": -5}]})",
                     "field 'layers[0].state_bytes': must be >= 1"},
        BadModelCase{R"({"layers": [{"kind": "sliding_window", "count": 1, "num_kv_heads": 1,
                        "head_size": 64}]})",
                     "field 'layers[0].sliding_window': missing"},
        BadModelCase{R"({"layers": [{"kind": "full_attention", "count": 1, "num_kv_heads": "8",
                        "head_size": 64}]})",
                     "field 'layers[0].num_kv_heads': must be an integer"},
        BadModelCase{R"({"layers": [{"kind": "full_attention", "count": 1, "num_kv_heads": 8,
                        "head_size": 64, "kv_dtype": "int3"}]})",
                     "unknown dtype 'int3'"},
        BadModelCase{R"({"layers": [{"kind": "mla", "count": 1, "kv_lora_rank": 512,
                        "qk_rope_head_dim": 64, "kv_lora_rnak": 3}]})",
                     "field 'layers[0].kv_lora_rnak': unknown field"},
        BadModelCase{R"({"layers": []})", "field 'layers': must be a non-empty list"},
        BadModelCase{R"({"name": "x"})", "field 'layers': missing"},
        BadModelCase{"{\"layers\": [\n{\"kind\": \"mla\", \"count\": 1,",
                     "bad.json:2: invalid JSON"}));

TEST(EngineJsonTest, DefaultsAndDesignExample) {
  auto engine = ParseEngineJson(R"({"block_size": 1536,
    "backends": {"mla": "FLASHMLA", "sliding_window": "FLASH_ATTN",
                 "full_attention": {"name": "MY_KERNEL", "kernel_block_sizes": [64, {"multiple_of": 16}]}},
    "kv_cache_bytes": 68719476736, "max_num_batched_tokens": 8192, "max_num_seqs": 256,
    "max_model_len": 131072, "enable_prefix_caching": true, "enable_chunked_prefill": true,
    "long_prefill_token_threshold": 0, "prefix_match_unit": null, "mamba_cache_mode": "align",
    "speculative": {"method": "dspark", "num_speculative_tokens": 3,
                    "acceptance": {"model": "per_position", "rates": [0.8, 0.6, 0.4]}},
    "cost_model": {"kind": "analytic", "gpu": "h200"}})",
                                "e.json");
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_EQ(*engine->block_size, 1536);
  EXPECT_EQ(engine->BackendFor(LayerKind::kMla).name, "FLASHMLA");
  const AttentionBackend& custom = engine->BackendFor(LayerKind::kFullAttention);
  EXPECT_EQ(custom.name, "MY_KERNEL");
  ASSERT_EQ(custom.kernel_block_sizes.size(), 2u);
  EXPECT_FALSE(custom.kernel_block_sizes[0].multiple_of);
  EXPECT_TRUE(custom.kernel_block_sizes[1].multiple_of);
  EXPECT_FALSE(engine->prefix_match_unit.has_value());
  EXPECT_TRUE(engine->speculative.enabled);
  EXPECT_EQ(engine->speculative.LookaheadTokens(), 3);
  EXPECT_EQ(engine->speculative.acceptance.rates.size(), 3u);
  // Kinds not listed use the default backend, FLASH_ATTN.
  EXPECT_EQ(engine->BackendFor(LayerKind::kChunkedLocal).name, "FLASH_ATTN");
}

TEST(EngineJsonTest, NgramReservesNoLookahead) {
  auto engine = ParseEngineJson(R"({"num_gpu_blocks": 10, "speculative": {"method": "ngram",
      "num_speculative_tokens": 4, "acceptance": {"model": "geometric", "rates": [0.5]}}})",
                                "e.json");
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_EQ(engine->speculative.LookaheadTokens(), 0);
}

// vLLM's SpeculativeConfig.disable_eagle_block_drop: default false, read from the engine JSON.
TEST(EngineJsonTest, DisableEagleBlockDrop) {
  const char* spec = R"("speculative": {"method": "dspark", "num_speculative_tokens": 1,
      "acceptance": {"rates": [0.5]})";
  auto engine = ParseEngineJson(std::string("{\"num_gpu_blocks\": 10, ") + spec + "}}", "e.json");
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_FALSE(engine->speculative.disable_eagle_block_drop);
  engine = ParseEngineJson(
      std::string("{\"num_gpu_blocks\": 10, ") + spec + ", \"disable_eagle_block_drop\": true}}",
      "e.json");
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_TRUE(engine->speculative.disable_eagle_block_drop);
}

// Reference notes §2: mamba states at boundaries crossed inside a verify step; default cached.
TEST(EngineJsonTest, MambaSpecBoundaryStates) {
  auto engine = ParseEngineJson(R"({"num_gpu_blocks": 10})", "e.json");
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_EQ(engine->mamba_spec_boundary_states, MambaSpecBoundaryStates::kCached);
  engine = ParseEngineJson(R"({"num_gpu_blocks": 10, "mamba_spec_boundary_states": "skipped"})",
                           "e.json");
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_EQ(engine->mamba_spec_boundary_states, MambaSpecBoundaryStates::kSkipped);
  EXPECT_EQ(MambaSpecBoundaryStatesName(engine->mamba_spec_boundary_states), "skipped");
}

class BadEngineTest : public ::testing::TestWithParam<BadModelCase> {};

TEST_P(BadEngineTest, NamesFileAndField) {
  auto engine = ParseEngineJson(GetParam().json, "bad.json");
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(engine.status()), HasSubstr("bad.json"));
  EXPECT_THAT(Message(engine.status()), HasSubstr(GetParam().expected));
}

INSTANTIATE_TEST_SUITE_P(
    Errors, BadEngineTest,
    ::testing::Values(
        BadModelCase{R"({"block_size": 0, "num_gpu_blocks": 10})",
                     "field 'block_size': must be >= 1"},
        BadModelCase{R"({"block_size": 16})", "field 'kv_cache_bytes': missing"},
        BadModelCase{R"({"num_gpu_blocks": 10, "backends": {"mla": "NOPE"}})",
                     "field 'backends.mla': unknown attention backend 'NOPE'"},
        BadModelCase{R"({"num_gpu_blocks": 10, "backends": {"warp": "FLASH_ATTN"}})",
                     "field 'backends.warp': unknown attention kind"},
        BadModelCase{R"({"num_gpu_blocks": 10, "prefix_match_unit": -3})",
                     "field 'prefix_match_unit': must be >= 1"},
        BadModelCase{R"({"num_gpu_blocks": 10, "mamba_cache_mode": "some"})",
                     "field 'mamba_cache_mode': unknown mode"},
        BadModelCase{R"({"num_gpu_blocks": 10, "mamba_spec_boundary_states": "kept"})",
                     "field 'mamba_spec_boundary_states': unknown value 'kept' (known: cached, "
                     "skipped)"},
        BadModelCase{R"({"num_gpu_blocks": 10, "speculative": {"method": "dspark",
                        "num_speculative_tokens": 3, "acceptance": {"model": "per_position",
                        "rates": [0.8]}}})",
                     "per_position needs one rate per draft position (3)"},
        BadModelCase{R"({"num_gpu_blocks": 10, "speculative": {"method": "dspark",
                        "num_speculative_tokens": 2, "acceptance": {"model": "geometric",
                        "rates": [1.5]}}})",
                     "field 'speculative.acceptance.rates[0]': must be a probability"},
        BadModelCase{R"({"num_gpu_blocks": 10, "speculative": {"method": "warp",
                        "num_speculative_tokens": 2, "acceptance": {"rates": [0.5]}}})",
                     "unknown method 'warp'"},
        BadModelCase{R"({"num_gpu_blocks": 10, "speculative": {"method": "dspark",
                        "num_speculative_tokens": 1, "eagle_block_drop": false,
                        "acceptance": {"rates": [0.5]}}})",
                     "field 'speculative.eagle_block_drop': replaced by vLLM's "
                     "speculative.disable_eagle_block_drop"},
        BadModelCase{R"({"num_gpu_blocks": 10, "cost_model": {"kind": "magic"}})",
                     "field 'cost_model.kind': unknown kind 'magic'"},
        BadModelCase{"{\"num_gpu_blocks\": 10,\n\"max_num_seqs\": 1.5}",
                     "bad.json:2: field 'max_num_seqs': must be an integer"}));

TEST(PresetTest, MissingPresetIsNotFound) {
  auto model = LoadModel("no-such-model");
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kNotFound);
  auto engine = LoadEngine("/nonexistent/engine.json");
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace prefixsim
