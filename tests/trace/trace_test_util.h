// Helpers for the trace tests: temp files, compression, reading a whole trace, and expanding a
// request into comparable per-token content keys.
#ifndef PREFIXSIM_TESTS_TRACE_TRACE_TEST_UTIL_H_
#define PREFIXSIM_TESTS_TRACE_TRACE_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <zlib.h>
#include <zstd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "prefixsim/request.h"
#include "prefixsim/trace.h"

namespace prefixsim::testing {

// A fresh temp path per call (tests may run in parallel under ctest).
inline std::string TempPath(const std::string& name) {
  static std::atomic<int> counter{0};
  std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) /
      ("prefixsim_trace_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

inline std::string ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

inline std::string WriteTemp(const std::string& name, const std::string& content) {
  std::string path = TempPath(name);
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

inline std::string WriteGzip(const std::string& name, const std::string& content) {
  std::string path = TempPath(name);
  gzFile file = gzopen(path.c_str(), "wb");
  EXPECT_NE(file, nullptr);
  EXPECT_EQ(gzwrite(file, content.data(), static_cast<unsigned>(content.size())),
            static_cast<int>(content.size()));
  gzclose(file);
  return path;
}

inline std::string ZstdBytes(const std::string& content) {
  std::string compressed(ZSTD_compressBound(content.size()), '\0');
  size_t n = ZSTD_compress(compressed.data(), compressed.size(), content.data(), content.size(), 3);
  EXPECT_FALSE(ZSTD_isError(n));
  compressed.resize(n);
  return compressed;
}

inline std::string WriteZstd(const std::string& name, const std::string& content) {
  return WriteTemp(name, ZstdBytes(content));
}

struct ReadResult {
  absl::Status status;
  std::vector<Request> requests;
  TraceReadStats stats;
  std::string format;
};

inline ReadResult ReadAll(const std::string& path, const TraceOptions& options = {}) {
  ReadResult result;
  auto reader = OpenTrace(path, options);
  if (!reader.ok()) {
    result.status = reader.status();
    return result;
  }
  result.format = std::string((*reader)->format());
  Request request;
  while (true) {
    auto more = (*reader)->Next(&request);
    if (!more.ok()) {
      result.status = more.status();
      break;
    }
    if (!*more) break;
    result.requests.push_back(request);
  }
  result.stats = (*reader)->stats();
  return result;
}

// Reads the trace at `path` whole into *result: success when it reads without error, detected as
// `format`, with `num_requests` requests (the readers' tests all start this way).
inline ::testing::AssertionResult ReadsAs(const std::string& path, const std::string& format,
                                          size_t num_requests, ReadResult* result) {
  *result = ReadAll(path);
  if (!result->status.ok()) {
    return ::testing::AssertionFailure() << path << ": " << result->status;
  }
  if (result->format != format) {
    return ::testing::AssertionFailure()
           << path << ": detected as " << result->format << ", not " << format;
  }
  if (result->requests.size() != num_requests) {
    return ::testing::AssertionFailure()
           << path << ": " << result->requests.size() << " requests, not " << num_requests;
  }
  return ::testing::AssertionSuccess();
}

// One key per token: (content_id, offset) for virtual content, (0, token id) for literal tokens.
// Two tokens are the same content exactly when their keys are equal.
using TokenKey = std::pair<uint64_t, uint64_t>;

inline std::vector<TokenKey> ExpandSegments(const Request& request,
                                            const std::vector<ContentSegment>& segments) {
  std::vector<TokenKey> keys;
  for (const ContentSegment& s : segments) {
    for (uint32_t i = 0; i < s.length; ++i) {
      if (s.content_id == ContentSegment::kLiteralContent) {
        keys.emplace_back(0, request.literal_tokens.at(s.offset + i));
      } else {
        keys.emplace_back(s.content_id, s.offset + i);
      }
    }
  }
  return keys;
}

inline std::vector<TokenKey> ExpandPrompt(const Request& request) {
  return ExpandSegments(request, request.prompt);
}

inline size_t CommonPrefix(const std::vector<TokenKey>& a, const std::vector<TokenKey>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

// Full blocks of `block_size` shared at the start of both prompts: what a prefix cache hashing
// blocks of that size could reuse.
inline size_t SharedFullBlocks(const Request& a, const Request& b, size_t block_size) {
  return CommonPrefix(ExpandPrompt(a), ExpandPrompt(b)) / block_size;
}

}  // namespace prefixsim::testing

#endif  // PREFIXSIM_TESTS_TRACE_TRACE_TEST_UTIL_H_
