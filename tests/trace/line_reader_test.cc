#include "sim/trace/line_reader.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/trace/trace_test_util.h"

namespace prefixsim {
namespace {

using ::prefixsim::testing::WriteGzip;
using ::prefixsim::testing::WriteTemp;
using ::prefixsim::testing::WriteZstd;

std::vector<std::string> AllLines(const std::string& path, absl::Status* status = nullptr) {
  std::vector<std::string> lines;
  auto reader = LineReader::Open(path);
  if (!reader.ok()) {
    if (status) *status = reader.status();
    return lines;
  }
  std::string_view line;
  while (true) {
    auto more = (*reader)->Next(&line);
    if (!more.ok()) {
      if (status) *status = more.status();
      return lines;
    }
    if (!*more) break;
    lines.emplace_back(line);
    EXPECT_EQ((*reader)->line_number(), static_cast<int64_t>(lines.size()));
  }
  return lines;
}

TEST(LineReaderTest, SplitsLinesStripsCarriageReturnsKeepsLastLineWithoutNewline) {
  std::string path = WriteTemp("a.txt", "one\r\ntwo\n\nthree");
  EXPECT_EQ(AllLines(path), (std::vector<std::string>{"one", "two", "", "three"}));
}

TEST(LineReaderTest, DropsAUtf8ByteOrderMarkOnTheFirstLineOnly) {
  std::string path = WriteTemp("bom.txt", "\xEF\xBB\xBF{\"a\": 1}\n\xEF\xBB\xBFx\n");
  EXPECT_EQ(AllLines(path), (std::vector<std::string>{"{\"a\": 1}", "\xEF\xBB\xBFx"}));
}

TEST(LineReaderTest, EmptyFileHasNoLines) {
  EXPECT_TRUE(AllLines(WriteTemp("empty.txt", "")).empty());
}

TEST(LineReaderTest, LinesLongerThanTheBufferGrowIt) {
  // The initial buffer is 256 KiB; a 1 MiB line forces growth across many reads.
  std::string long_line(1 << 20, 'x');
  long_line[12345] = 'y';
  std::string path = WriteTemp("long.txt", "a\n" + long_line + "\nb\n");
  auto lines = AllLines(path);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1], long_line);
  EXPECT_EQ(lines[2], "b");
}

TEST(LineReaderTest, GzipAndZstdAreDetectedByMagicBytesNotByName) {
  std::string content;
  for (int i = 0; i < 50000; ++i) content += "line " + std::to_string(i) + "\n";
  auto plain = AllLines(WriteTemp("p.jsonl", content));
  // Names without the usual extension: detection must not depend on them.
  auto gz = AllLines(WriteGzip("g.data", content));
  auto zst = AllLines(WriteZstd("z.data", content));
  ASSERT_EQ(plain.size(), 50000u);
  EXPECT_EQ(plain.back(), "line 49999");
  EXPECT_EQ(gz, plain);
  EXPECT_EQ(zst, plain);
}

TEST(LineReaderTest, MissingFileIsNotFound) {
  absl::Status status;
  AllLines("/nonexistent/dir/trace.jsonl", &status);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(status.message().find("/nonexistent/dir/trace.jsonl"), std::string::npos);
}

TEST(LineReaderTest, TruncatedCompressedFilesAreErrors) {
  std::string content;
  for (int i = 0; i < 20000; ++i) content += "record " + std::to_string(i * 7919) + "\n";
  std::string gz = testing::ReadFileBytes(WriteGzip("full.gz", content));
  std::string zst = testing::ZstdBytes(content);
  absl::Status gz_status, zst_status;
  AllLines(WriteTemp("cut.gz", gz.substr(0, gz.size() / 2)), &gz_status);
  AllLines(WriteTemp("cut.zst", zst.substr(0, zst.size() / 2)), &zst_status);
  EXPECT_EQ(gz_status.code(), absl::StatusCode::kInvalidArgument) << gz_status;
  EXPECT_NE(gz_status.message().find("gzip"), std::string::npos) << gz_status;
  EXPECT_EQ(zst_status.code(), absl::StatusCode::kInvalidArgument) << zst_status;
  EXPECT_NE(zst_status.message().find("zstd"), std::string::npos) << zst_status;
}

}  // namespace
}  // namespace prefixsim
