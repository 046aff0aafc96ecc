// ReadAhead (sim/trace/read_ahead.h): the same requests, order, errors and stats as the reader it
// wraps, whatever the batch size, and no hang when the consumer stops early.
#include "sim/trace/read_ahead.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "tests/trace/trace_test_util.h"

namespace prefixsim {
namespace {

using testing::ExpandPrompt;
using testing::WriteTemp;

std::string Samples(const std::string& name) {
  return std::string(PREFIXSIM_SOURCE_DIR) + "/traces/" + name;
}

struct Drained {
  std::vector<Request> requests;
  absl::Status end;
};

ReadAheadOptions Options(size_t batch_requests, size_t max_batches) {
  ReadAheadOptions o;
  o.batch_requests = batch_requests;
  o.max_batches = max_batches;
  return o;
}

Drained Drain(TraceReader& reader) {
  Drained d;
  for (;;) {
    Request r;
    absl::StatusOr<bool> more = reader.Next(&r);
    if (!more.ok()) {
      d.end = more.status();
      return d;
    }
    if (!*more) return d;
    d.requests.push_back(std::move(r));
  }
}

void ExpectSame(const Drained& want, const Drained& got) {
  ASSERT_EQ(want.requests.size(), got.requests.size());
  for (size_t i = 0; i < want.requests.size(); ++i) {
    const Request& a = want.requests[i];
    const Request& b = got.requests[i];
    EXPECT_EQ(a.id, b.id);
    EXPECT_EQ(a.arrival_ns, b.arrival_ns);
    EXPECT_EQ(a.prompt_tokens, b.prompt_tokens);
    EXPECT_EQ(a.output_tokens, b.output_tokens);
    EXPECT_EQ(a.session_id, b.session_id);
    EXPECT_EQ(ExpandPrompt(a), ExpandPrompt(b)) << "request " << i;
  }
  EXPECT_EQ(want.end, got.end);
}

TEST(ReadAheadTest, SameRequestsInOrderForEveryBatchSize) {
  for (const char* name : {"sample_chat.jsonl", "sample_tokens.jsonl", "sample_agentic.jsonl"}) {
    auto plain = OpenTrace(Samples(name));
    ASSERT_TRUE(plain.ok()) << plain.status();
    const Drained want = Drain(**plain);
    ASSERT_GT(want.requests.size(), 10u);
    for (size_t batch : {1, 3, 64, 100000}) {
      auto inner = OpenTrace(Samples(name));
      ASSERT_TRUE(inner.ok());
      std::unique_ptr<TraceReader> ahead =
          ReadAhead(std::move(*inner), Options(batch, /*max_batches=*/2));
      EXPECT_EQ(ahead->format(), (*plain)->format());
      ExpectSame(want, Drain(*ahead));
      // At the end the stats are the wrapped reader's.
      EXPECT_EQ(ahead->stats().requests, (*plain)->stats().requests);
      EXPECT_EQ(ahead->stats().records, (*plain)->stats().records);
      EXPECT_EQ(ahead->stats().bytes, (*plain)->stats().bytes);
      // Past the end it stays at the end.
      Request r;
      auto more = ahead->Next(&r);
      ASSERT_TRUE(more.ok());
      EXPECT_FALSE(*more);
    }
  }
}

TEST(ReadAheadTest, AnErrorComesAfterTheRequestsBeforeIt) {
  const std::string path = WriteTemp(
      "bad.jsonl",
      "{\"timestamp\": 0, \"input_length\": 1024, \"output_length\": 4, \"hash_ids\": [1, 2]}\n"
      "{\"timestamp\": 5, \"input_length\": 512, \"output_length\": 4, \"hash_ids\": [1]}\n"
      "{\"timestamp\": 9, \"input_length\": \"many\", \"output_length\": 4, \"hash_ids\": [3]}\n"
      "{\"timestamp\": 12, \"input_length\": 512, \"output_length\": 4, \"hash_ids\": [4]}\n");
  auto plain = OpenTrace(path);
  ASSERT_TRUE(plain.ok()) << plain.status();
  const Drained want = Drain(**plain);
  ASSERT_EQ(want.requests.size(), 2u);
  ASSERT_FALSE(want.end.ok());
  EXPECT_NE(std::string(want.end.message()).find(":3"), std::string::npos) << want.end;
  auto inner = OpenTrace(path);
  ASSERT_TRUE(inner.ok());
  std::unique_ptr<TraceReader> ahead = ReadAhead(std::move(*inner), Options(1, 1));
  ExpectSame(want, Drain(*ahead));
}

TEST(ReadAheadTest, StoppingEarlyDoesNotHang) {
  auto inner = OpenTrace(Samples("sample_chat.jsonl"));
  ASSERT_TRUE(inner.ok());
  std::unique_ptr<TraceReader> ahead = ReadAhead(std::move(*inner), Options(2, 1));
  Request r;
  auto more = ahead->Next(&r);
  ASSERT_TRUE(more.ok() && *more);
  EXPECT_EQ(r.id, 0u);
  ahead.reset();  // the producer is blocked on a full queue: the destructor must release it
  SUCCEED();
}

// `prepare` runs once on every request, in order, on the read-ahead thread, before it is handed
// over (what it did is in the request the consumer gets).
TEST(ReadAheadTest, PrepareRunsOnEveryRequestOnTheReadAheadThread) {
  auto plain = OpenTrace(Samples("sample_chat.jsonl"));
  ASSERT_TRUE(plain.ok()) << plain.status();
  const Drained want = Drain(**plain);
  auto inner = OpenTrace(Samples("sample_chat.jsonl"));
  ASSERT_TRUE(inner.ok());
  ReadAheadOptions options = Options(3, 2);
  const std::thread::id consumer = std::this_thread::get_id();
  std::atomic<int> on_consumer_thread{0};
  int64_t prepared = 0;  // the read-ahead thread's only
  options.prepare = [&](Request* r) {
    if (std::this_thread::get_id() == consumer) on_consumer_thread += 1;
    r->prompt_hashes.chunk_tokens = ++prepared;
  };
  std::unique_ptr<TraceReader> ahead = ReadAhead(std::move(*inner), options);
  const Drained got = Drain(*ahead);
  ExpectSame(want, got);
  for (size_t i = 0; i < got.requests.size(); ++i) {
    EXPECT_EQ(got.requests[i].prompt_hashes.chunk_tokens, static_cast<int64_t>(i + 1));
  }
  EXPECT_EQ(on_consumer_thread.load(), 0);
}

}  // namespace
}  // namespace prefixsim
