// Streams the lines of a plain, gzip or zstd file in bounded memory. Each returned line is
// followed in memory by at least kLinePadding readable bytes, so simdjson can parse it in place
// without copying.
#ifndef PREFIXSIM_SIM_TRACE_LINE_READER_H_
#define PREFIXSIM_SIM_TRACE_LINE_READER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace prefixsim {

inline constexpr size_t kLinePadding = 64;  // == SIMDJSON_PADDING, checked in line_reader.cc

// A stream of decompressed bytes.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Reads up to `size` bytes; 0 means end of stream.
  virtual absl::StatusOr<size_t> Read(char* buffer, size_t size) = 0;
};

// Opens `path` ("-" = standard input), choosing plain / gzip / zstd from the first bytes (the
// magic number), never from the name.
absl::StatusOr<std::unique_ptr<ByteSource>> OpenByteSource(const std::string& path);

class LineReader {
 public:
  static absl::StatusOr<std::unique_ptr<LineReader>> Open(const std::string& path);
  explicit LineReader(std::unique_ptr<ByteSource> source);

  // Sets *line to the next line without its '\n' (or "\r\n"). The view stays valid until the
  // next call. Returns false at end of file.
  absl::StatusOr<bool> Next(std::string_view* line);
  int64_t line_number() const { return line_number_; }  // 1-based number of the last line
  int64_t bytes_consumed() const { return bytes_consumed_; }

 private:
  std::unique_ptr<ByteSource> source_;
  std::unique_ptr<char[]> buffer_;
  size_t capacity_ = 0;  // usable bytes; the allocation has kLinePadding more
  size_t begin_ = 0;     // unread data is buffer_[begin_, end_)
  size_t end_ = 0;
  bool eof_ = false;
  int64_t line_number_ = 0;
  int64_t bytes_consumed_ = 0;
};

}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_TRACE_LINE_READER_H_
