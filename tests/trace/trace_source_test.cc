// OpenTraceFromSource (sim/trace/trace_source.h): records held in memory (the Python module's
// traces given as dicts) read exactly as the same lines of a file, with errors naming the source.
#include "sim/trace/trace_source.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "tests/trace/trace_test_util.h"

namespace prefixsim {
namespace {

// Bytes from a string, a few at a time, so that lines cross reads.
class SmallReads : public ByteSource {
 public:
  explicit SmallReads(std::string text) : text_(std::move(text)) {}
  absl::StatusOr<size_t> Read(char* buffer, size_t size) override {
    const size_t n = std::min({size, text_.size() - position_, size_t{7}});
    std::memcpy(buffer, text_.data() + position_, n);
    position_ += n;
    return n;
  }

 private:
  std::string text_;
  size_t position_ = 0;
};

std::vector<Request> ReadAllOf(TraceReader& reader) {
  std::vector<Request> out;
  Request r;
  while (true) {
    absl::StatusOr<bool> more = reader.Next(&r);
    EXPECT_TRUE(more.ok()) << more.status();
    if (!more.ok() || !*more) break;
    out.push_back(r);
  }
  return out;
}

TEST(TraceSourceTest, ReadsTheFileOfTheSameLinesAsTheFileDoes) {
  const std::string path = std::string(PREFIXSIM_SOURCE_DIR) + "/traces/sample_chat.jsonl";
  TraceOptions options;
  options.max_requests = 50;
  options.time_scale = 0.5;
  auto from_file = OpenTrace(path, options);
  auto from_memory = OpenTraceFromSource(
      "records", std::make_unique<SmallReads>(testing::ReadFileBytes(path)), options);
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  ASSERT_TRUE(from_memory.ok()) << from_memory.status();
  EXPECT_EQ((*from_memory)->format(), (*from_file)->format());
  const std::vector<Request> a = ReadAllOf(**from_file), b = ReadAllOf(**from_memory);
  ASSERT_EQ(a.size(), 50u);
  ASSERT_EQ(b.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(b[i].arrival_ns, a[i].arrival_ns);
    EXPECT_EQ(b[i].prompt_tokens, a[i].prompt_tokens);
    EXPECT_EQ(b[i].output_tokens, a[i].output_tokens);
    EXPECT_EQ(testing::ExpandPrompt(b[i]), testing::ExpandPrompt(a[i]));
  }
}

TEST(TraceSourceTest, AnErrorNamesTheSourceAndTheLine) {
  auto reader = OpenTraceFromSource(
      "records",
      std::make_unique<SmallReads>(
          "{\"timestamp\": 0, \"input_length\": 1024, \"output_length\": 1, \"hash_ids\": [1, 2]}\n"
          "{\"timestamp\": 5, \"input_length\": 1024, \"output_length\": 1, \"hash_ids\": 3}\n"));
  ASSERT_TRUE(reader.ok()) << reader.status();
  Request r;
  ASSERT_TRUE(*(*reader)->Next(&r));
  absl::StatusOr<bool> second = (*reader)->Next(&r);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(second.status().message(), "records:2")) << second.status();
  EXPECT_TRUE(absl::StrContains(second.status().message(), "hash_ids")) << second.status();
}

TEST(TraceSourceTest, OptionsAreCheckedAsForAFile) {
  TraceOptions options;
  options.max_requests = -1;
  auto reader = OpenTraceFromSource("records", std::make_unique<SmallReads>("{}\n"), options);
  EXPECT_EQ(reader.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace prefixsim
