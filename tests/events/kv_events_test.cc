// vLLM KV cache events of the simulated engine (docs/kv-events.md): the events of a replay
// against the simulated cache at every step, the wire format against an independent reader
// (tests/events/vllm_kv_events.py, Debian's python3-msgpack), the codecs and their errors, and
// the --kv-events outputs of the CLI.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#define MSGPACK_NO_BOOST
#include <fstream>
#include <map>
#include <msgpack.hpp>
#include <set>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "sim/events/event_log.h"
#include "sim/events/event_recorder.h"
#include "sim/events/msgpack_codec.h"
#include "tests/cli_runner.h"
#include "tests/events/kv_events_test_util.h"

namespace prefixsim {
namespace {

using ::prefixsim::testing::ReadFile;
using ::prefixsim::testing::RunCli;
using ::prefixsim::testing::TempOutputPath;
using ::testing::HasSubstr;
using testing_kv::Group;
using testing_kv::Plan;

struct PlanCase {
  const char* name;
  KvPlan plan;
};

// Failures name the case, not the plan's bytes.
void PrintTo(const PlanCase& c, std::ostream* os) { *os << c.name; }

std::vector<PlanCase> Plans() {
  return {
      {"unitary", testing_kv::Unitary(LayerKind::kFullAttention, 4, 40)},
      {"hybrid_swa_mamba",
       Plan({Group(LayerKind::kFullAttention, 8), Group(LayerKind::kSlidingWindow, 8, 16),
             Group(LayerKind::kMamba, 8)},
            90, 8, 8, 8)},
      // Blocks of two hash chunks next to blocks of one: a block's hash is its last chunk's.
      {"coarse_full_fine_mamba",
       Plan({Group(LayerKind::kFullAttention, 16), Group(LayerKind::kMamba, 8)}, 60, 16, 8, 16)},
  };
}

class KvEventsPerPlanTest : public ::testing::TestWithParam<PlanCase> {};

// Stores minus removes, applied batch by batch, equal what each group's prefix index holds after
// every step; the small pools make sure that blocks are evicted (removes are exercised).
TEST_P(KvEventsPerPlanTest, EventsMatchTheSimulatedCacheAtEveryStep) {
  const KvPlan& plan = GetParam().plan;
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    events::CachedBlocks seen;
    int64_t stores = 0, removes = 0, batches = 0;
    std::vector<bool> group_stored(plan.groups.size(), false);
    events::EventRecorder recorder(plan, /*replica=*/0, [&](events::EventBatch&& batch) {
      ++batches;
      EXPECT_EQ(batch.data_parallel_rank, 0);
      for (const events::KvEvent& e : batch.events) {
        if (const auto* s = std::get_if<events::BlockStored>(&e)) {
          stores += static_cast<int64_t>(s->block_hashes.size());
          group_stored[static_cast<size_t>(*s->group_idx)] = true;
          EXPECT_EQ(s->block_size, plan.groups[static_cast<size_t>(*s->group_idx)].block_size);
          EXPECT_EQ(s->token_ids.size(), s->block_hashes.size() * s->block_size);
        } else if (const auto* r = std::get_if<events::BlockRemoved>(&e)) {
          removes += static_cast<int64_t>(r->block_hashes.size());
        }
      }
      const absl::Status applied = seen.Apply(batch);
      EXPECT_TRUE(applied.ok()) << applied;
    });
    EngineConfig engine = testing_engine::SmallEngine(32);
    engine.max_num_seqs = 5;
    int steps = 0;
    testing_events::DriveReplay(
        plan, engine, testing_events::FamilyRequests(seed, 40), &recorder, [&](Simulator& sim) {
          ++steps;
          ASSERT_EQ(testing_events::CacheLines(seen.blocks()),
                    testing_events::CacheLines(testing_events::ManagerBlocks(sim.kv())))
              << "step " << steps;
        });
    EXPECT_GT(batches, 0);
    EXPECT_GT(stores, 0);
    EXPECT_GT(removes, 0) << "the pool is too large to evict: the test checks no remove";
    for (size_t g = 0; g < group_stored.size(); ++g) EXPECT_TRUE(group_stored[g]) << "group " << g;
  }
}

// The msgpack log, read by an independent decoder written from vLLM's schema (python3-msgpack),
// gives the simulated cache's final contents.
TEST_P(KvEventsPerPlanTest, IndependentDecoderReconstructsTheCache) {
  const std::string python = testing_events::DebianPython();
  if (python.empty()) GTEST_SKIP() << "/usr/bin/python3 with python3-msgpack is not installed";
  const KvPlan& plan = GetParam().plan;
  std::ostringstream log;
  events::EventRecorder recorder(plan, 0, [&](events::EventBatch&& batch) {
    events::WriteBatch(batch, events::EventLogFormat::kMsgpack, log);
  });
  std::string final_cache;
  EngineConfig engine = testing_engine::SmallEngine(32);
  engine.max_num_seqs = 5;
  testing_events::DriveReplay(
      plan, engine, testing_events::FamilyRequests(7, 40), &recorder, [&](Simulator& sim) {
        final_cache = testing_events::CacheLines(testing_events::ManagerBlocks(sim.kv()));
      });
  ASSERT_FALSE(final_cache.empty());
  const std::string path = TempOutputPath(std::string("events_") + GetParam().name + ".msgpack");
  std::ofstream(path, std::ios::binary) << log.str();
  const auto r =
      testing_events::RunShell(python + " " + testing_events::ScriptPath() + " decode " + path);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, final_cache);
}

INSTANTIATE_TEST_SUITE_P(Plans, KvEventsPerPlanTest, ::testing::ValuesIn(Plans()),
                         [](const ::testing::TestParamInfo<PlanCase>& info) {
                           return std::string(info.param.name);
                         });

events::EventBatch SampleBatch() {
  events::EventBatch b;
  b.ts = 12.625;
  b.data_parallel_rank = 3;
  events::BlockStored s;
  s.block_hashes = {0xfedcba9876543210ULL, 17};
  s.parent_block_hash = 0x8000000000000001ULL;
  s.token_ids = {1, 2, 3, 4, 5, 6, 7, 8};
  s.block_size = 4;
  s.medium = "GPU";
  s.group_idx = 1;
  s.kv_cache_spec_kind = "sliding_window";
  s.kv_cache_spec_sliding_window = 4096;
  b.events.emplace_back(s);
  events::BlockRemoved r;
  r.block_hashes = {99};
  r.medium = "GPU";
  r.group_idx = 0;
  b.events.emplace_back(r);
  b.events.emplace_back(events::AllBlocksCleared{});
  return b;
}

TEST(KvEventsCodecTest, MsgpackAndJsonLinesRoundTrip) {
  const events::EventBatch b = SampleBatch();
  auto decoded = events::DecodeMsgpack(events::EncodeMsgpack(b));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, b);
  std::ostringstream jsonl;
  events::WriteBatch(b, events::EventLogFormat::kJsonLines, jsonl);
  events::WriteBatch(b, events::EventLogFormat::kJsonLines, jsonl);
  auto parsed = events::ParseEventLog(jsonl.str(), "x.jsonl");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->size(), 2u);
  EXPECT_EQ((*parsed)[1], b);
  // vLLM's field names, the tag first.
  EXPECT_THAT(jsonl.str(),
              HasSubstr("{\"type\":\"BlockStored\",\"block_hashes\":[18364758544493064720,17],"
                        "\"parent_block_hash\":9223372036854775809,"));
}

// msgspec writes ts as a float64 even when it is integral; a typed decoder (msgspec's, vLLM's
// reference subscriber) refuses an integer there.
TEST(KvEventsCodecTest, TimestampIsAlwaysFloat64) {
  events::EventBatch b;
  b.ts = 2.0;
  b.data_parallel_rank = 0;
  const std::string bytes = events::EncodeMsgpack(b);
  ASSERT_GE(bytes.size(), 10u);
  EXPECT_EQ(static_cast<uint8_t>(bytes[0]), 0x93);  // fixarray of 3
  EXPECT_EQ(static_cast<uint8_t>(bytes[1]), 0xcb);  // float64
}

// Logs recorded from vLLM before it dropped array_like (events as arrays, tag first, fields by
// position) and batches written as maps decode too; hashes sent as bytes keep their last 8 bytes.
TEST(KvEventsCodecTest, DecodesLegacyArrayEventsAndBytesHashes) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> p(buf);
  p.pack_map(2);
  p.pack(std::string("ts"));
  p.pack_double(1.5);
  p.pack(std::string("events"));
  p.pack_array(2);
  p.pack_array(7);  // BlockStored: tag, block_hashes, parent, token_ids, block_size, lora, medium
  p.pack(std::string("BlockStored"));
  p.pack_array(1);
  const char digest[10] = {9, 9, 0, 0, 0, 0, 0, 0, 1, 2};
  p.pack_bin(10);
  p.pack_bin_body(digest, 10);
  p.pack_nil();
  p.pack_array(2);
  p.pack(1);
  p.pack(2);
  p.pack(2);
  p.pack_nil();
  p.pack(std::string("GPU"));
  p.pack_array(2);
  p.pack(std::string("BlockRemoved"));
  p.pack_array(1);
  p.pack(uint64_t{258});
  auto b = events::DecodeMsgpack(std::string_view(buf.data(), buf.size()));
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(b->events.size(), 2u);
  const auto& s = std::get<events::BlockStored>(b->events[0]);
  EXPECT_EQ(s.block_hashes, std::vector<uint64_t>{258});
  EXPECT_EQ(s.block_size, 2);
  EXPECT_FALSE(s.group_idx.has_value());
  EXPECT_EQ(std::get<events::BlockRemoved>(b->events[1]).block_hashes, std::vector<uint64_t>{258});
}

// Every truncation of a valid log is an error naming the file and a byte offset inside it, and
// a corrupted byte never crashes the reader.
TEST(KvEventsCodecTest, TruncatedLogsNameFileAndOffset) {
  std::ostringstream log;
  events::WriteBatch(SampleBatch(), events::EventLogFormat::kMsgpack, log);
  events::WriteBatch(SampleBatch(), events::EventLogFormat::kMsgpack, log);
  const std::string whole = log.str();
  ASSERT_TRUE(events::ParseEventLog(whole, "ok.msgpack").ok());
  const size_t first_record = whole.size() / 2;  // two equal records
  for (size_t n = 1; n < whole.size(); ++n) {
    if (n == first_record) continue;  // a whole first batch is a valid log
    auto r = events::ParseEventLog(std::string_view(whole).substr(0, n), "cut.msgpack");
    ASSERT_FALSE(r.ok()) << n;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("cut.msgpack: "));
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("byte "));
  }
  // A payload whose inner truncation is caught by the decoder names the payload's own offset.
  std::string bad = whole.substr(0, first_record - 5);
  const uint32_t inner = static_cast<uint32_t>(bad.size() - 4);
  bad[0] = static_cast<char>(inner >> 24);
  bad[1] = static_cast<char>(inner >> 16);
  bad[2] = static_cast<char>(inner >> 8);
  bad[3] = static_cast<char>(inner);
  auto r = events::ParseEventLog(bad, "inner.msgpack");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("inner.msgpack: batch 0: byte "));
  for (size_t i = 4; i < whole.size(); ++i) {
    std::string flipped = whole;
    flipped[i] = static_cast<char>(flipped[i] ^ 0x5a);
    (void)events::ParseEventLog(flipped, "flipped.msgpack");  // must return, error or not
  }
  auto j = events::ParseEventLog("{\"ts\": 1, \"events\": []}\n{\"ts\": 2, \"events\": [{]}\n",
                                 "bad.jsonl");
  ASSERT_FALSE(j.ok());
  EXPECT_THAT(std::string(j.status().message()), HasSubstr("bad.jsonl: line 2: "));
}

TEST(KvEventsRecorderTest, TokenIdsAreTheTracesLiteralTokens) {
  Request r = testing_kv::Literal(5, testing_kv::Iota(10, 40));
  EXPECT_EQ(events::TokenIds(r, 2, 6), (std::vector<int64_t>{42, 43, 44, 45}));
  // Beyond the prompt: the engine's own output, a stand-in id that is the same every time.
  const std::vector<int64_t> generated = events::TokenIds(r, 8, 14);
  ASSERT_EQ(generated.size(), 6u);
  EXPECT_EQ(generated[0], 48);
  EXPECT_EQ(generated, events::TokenIds(r, 8, 14));
  EXPECT_NE(generated[2], generated[3]);
  for (int64_t t : generated) EXPECT_LT(t, int64_t{1} << 31);
}

const std::string kTokens = std::string(PREFIXSIM_SOURCE_DIR) + "/traces/sample_tokens.jsonl";

// Same inputs, byte-identical event files; the JSON-lines variant carries the same batches.
TEST(KvEventsCliTest, ReplayWritesDeterministicEventFiles) {
  const std::string args =
      "replay --trace " + kTokens +
      " --model qwen3-next-80b-a3b --engine h200 --no-progress --no-wall-time --seed 3";
  const std::string a = TempOutputPath("det_a.msgpack"), b = TempOutputPath("det_b.msgpack"),
                    j = TempOutputPath("det.jsonl");
  ASSERT_EQ(RunCli(args + " --kv-events " + a).exit_code, 0);
  ASSERT_EQ(RunCli(args + " --kv-events " + b).exit_code, 0);
  ASSERT_EQ(RunCli(args + " --kv-events " + j + " --kv-events-format jsonl").exit_code, 0);
  const std::string bytes = ReadFile(a);
  ASSERT_FALSE(bytes.empty());
  EXPECT_EQ(bytes, ReadFile(b));
  auto from_msgpack = events::ReadEventLog(a);
  auto from_jsonl = events::ReadEventLog(j);
  ASSERT_TRUE(from_msgpack.ok()) << from_msgpack.status();
  ASSERT_TRUE(from_jsonl.ok()) << from_jsonl.status();
  EXPECT_EQ(*from_msgpack, *from_jsonl);
  // Every removal follows its store.
  events::CachedBlocks cache;
  for (const events::EventBatch& batch : *from_msgpack) {
    ASSERT_TRUE(cache.Apply(batch).ok());
    EXPECT_EQ(batch.data_parallel_rank, 0);
  }
  EXPECT_FALSE(cache.blocks().empty());
}

// A fleet writes one stream; each replica's batches carry its index as data_parallel_rank, in
// simulated-time order, and each replica's history is consistent on its own.
TEST(KvEventsCliTest, FleetBatchesCarryTheirReplica) {
  const std::string path = TempOutputPath("fleet_events.msgpack");
  const auto r = RunCli("replay --trace " + kTokens +
                        " --model qwen3-next-80b-a3b --engine h200 --no-progress --replicas 2 "
                        "--router round_robin --kv-events " +
                        path);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto log = events::ReadEventLog(path);
  ASSERT_TRUE(log.ok()) << log.status();
  std::map<int64_t, events::CachedBlocks> caches;
  std::map<int64_t, double> last_ts;
  for (const events::EventBatch& b : *log) {
    ASSERT_TRUE(b.data_parallel_rank.has_value());
    const int64_t rank = *b.data_parallel_rank;
    EXPECT_GE(b.ts, last_ts[rank]);
    last_ts[rank] = b.ts;
    ASSERT_TRUE(caches[rank].Apply(b).ok()) << "replica " << rank;
  }
  EXPECT_EQ(caches.size(), 2u);
  for (const auto& [rank, cache] : caches) EXPECT_FALSE(cache.blocks().empty()) << rank;
}

// A file past --kv-events-warn-size is said once on stderr, with its size and what bounds it; a
// run below the size says nothing; the file itself is whole either way.
TEST(KvEventsCliTest, LargeEventFilesAreSaidOnce) {
  const std::string args =
      "replay --trace " + kTokens +
      " --model qwen3-next-80b-a3b --engine h200 --no-progress "
      "--replicas 2 --router round_robin --kv-events-format jsonl --kv-events ";
  const std::string small = TempOutputPath("warn_small.jsonl");
  const auto quiet = RunCli(args + small);
  ASSERT_EQ(quiet.exit_code, 0) << quiet.output;
  EXPECT_EQ(quiet.output.find("--kv-events file has passed"), std::string::npos) << quiet.output;
  const std::string big = TempOutputPath("warn_big.jsonl");
  const auto loud = RunCli(args + big + " --kv-events-warn-size 4KiB");
  ASSERT_EQ(loud.exit_code, 0) << loud.output;
  const size_t at = loud.output.find("the --kv-events file has passed");
  ASSERT_NE(at, std::string::npos) << loud.output;
  EXPECT_EQ(loud.output.find("the --kv-events file has passed", at + 1), std::string::npos)
      << "said once: " << loud.output;
  EXPECT_NE(loud.output.find("--kv-events-format msgpack writes it smaller"), std::string::npos);
  EXPECT_EQ(ReadFile(big), ReadFile(small));
}

// Replicas stepped on several threads hold their batches until the fleet's thread delivers
// them in run order (KvEventSink::DeliversInRunOrder): the stream is the one of one thread.
TEST(KvEventsCliTest, ThreadsLeaveTheEventFileAsItWas) {
  const std::string args = "replay --trace " + kTokens +
                           " --model qwen3-next-80b-a3b --engine h200 --no-progress "
                           "--no-wall-time --replicas 4 --router kv_aware --kv-events ";
  const std::string one = TempOutputPath("threads_1.msgpack");
  const std::string three = TempOutputPath("threads_3.msgpack");
  const auto r1 = RunCli(args + one + " --threads 1");
  ASSERT_EQ(r1.exit_code, 0) << r1.output;
  const auto r3 = RunCli(args + three + " --threads 3");
  ASSERT_EQ(r3.exit_code, 0) << r3.output;
  EXPECT_EQ(r1.output, r3.output);
  const std::string bytes = ReadFile(one);
  ASSERT_FALSE(bytes.empty());
  EXPECT_EQ(bytes, ReadFile(three));
  auto log = events::ReadEventLog(one);
  ASSERT_TRUE(log.ok()) << log.status();
  std::set<int64_t> ranks;
  for (const events::EventBatch& b : *log) ranks.insert(b.data_parallel_rank.value_or(-1));
  EXPECT_GE(ranks.size(), 2u) << "the case must interleave replicas";
}

TEST(KvEventsCliTest, CompareWritesOneFilePerPolicy) {
  const std::string base = TempOutputPath("cmp_events.msgpack");
  const auto r = RunCli("compare --trace " + kTokens +
                        " --model qwen3-next-80b-a3b --engine h200 --policies old,new "
                        "--no-progress --no-wall-time --kv-events " +
                        base);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* policy : {"old", "new"}) {
    auto log =
        events::ReadEventLog(TempOutputPath(std::string("cmp_events.") + policy + ".msgpack"));
    ASSERT_TRUE(log.ok()) << log.status();
    EXPECT_FALSE(log->empty()) << policy;
  }
  const auto bad = RunCli("replay --trace " + kTokens +
                          " --model qwen3-next-80b-a3b --engine h200 --no-progress "
                          "--kv-events " +
                          base + " --kv-events-format xml");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.output, HasSubstr("xml"));
}

}  // namespace
}  // namespace prefixsim
