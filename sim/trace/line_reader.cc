#include "sim/trace/line_reader.h"

#include <zlib.h>
#include <zstd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "simdjson.h"

namespace prefixsim {
namespace {

static_assert(kLinePadding >= simdjson::SIMDJSON_PADDING, "lines must be parseable in place");

absl::Status OpenError(const std::string& path) {
  std::string message = absl::StrCat(path, ": cannot open: ", std::strerror(errno));
  if (errno == ENOENT || errno == ENOTDIR) return absl::NotFoundError(message);
  return absl::InvalidArgumentError(message);
}

class PlainSource : public ByteSource {
 public:
  PlainSource(std::string path, std::FILE* file) : path_(std::move(path)), file_(file) {}
  ~PlainSource() override { std::fclose(file_); }
  absl::StatusOr<size_t> Read(char* buffer, size_t size) override {
    size_t n = std::fread(buffer, 1, size, file_);
    if (n == 0 && std::ferror(file_)) {
      return absl::InvalidArgumentError(absl::StrCat(path_, ": read error"));
    }
    return n;
  }

 private:
  std::string path_;
  std::FILE* file_;
};

class GzipSource : public ByteSource {
 public:
  GzipSource(std::string path, gzFile file) : path_(std::move(path)), file_(file) {
    gzbuffer(file_, 1 << 17);
  }
  ~GzipSource() override { gzclose(file_); }
  absl::StatusOr<size_t> Read(char* buffer, size_t size) override {
    int n = gzread(file_, buffer, static_cast<unsigned>(size));
    if (n < 0) {
      int code = 0;
      const char* message = gzerror(file_, &code);
      return absl::InvalidArgumentError(absl::StrCat(path_, ": corrupt gzip data: ", message));
    }
    // zlib reports a truncated stream as Z_BUF_ERROR once it runs out of input.
    if (n == 0) {
      int code = 0;
      const char* message = gzerror(file_, &code);
      if (code != Z_OK) {
        return absl::InvalidArgumentError(absl::StrCat(path_, ": corrupt gzip data: ", message));
      }
    }
    return static_cast<size_t>(n);
  }

 private:
  std::string path_;
  gzFile file_;
};

class ZstdSource : public ByteSource {
 public:
  ZstdSource(std::string path, std::FILE* file)
      : path_(std::move(path)),
        file_(file),
        dctx_(ZSTD_createDCtx()),
        input_buffer_(ZSTD_DStreamInSize()) {}
  ~ZstdSource() override {
    ZSTD_freeDCtx(dctx_);
    std::fclose(file_);
  }
  absl::StatusOr<size_t> Read(char* buffer, size_t size) override {
    ZSTD_outBuffer output{buffer, size, 0};
    while (output.pos == 0) {
      if (input_.pos == input_.size) {
        size_t n = std::fread(input_buffer_.data(), 1, input_buffer_.size(), file_);
        if (n == 0) {
          if (std::ferror(file_)) {
            return absl::InvalidArgumentError(absl::StrCat(path_, ": read error"));
          }
          // A frame still open at end of file means the file was cut short.
          if (last_result_ != 0) {
            return absl::InvalidArgumentError(
                absl::StrCat(path_, ": corrupt zstd data: truncated frame"));
          }
          return size_t{0};
        }
        input_ = ZSTD_inBuffer{input_buffer_.data(), n, 0};
      }
      last_result_ = ZSTD_decompressStream(dctx_, &output, &input_);
      if (ZSTD_isError(last_result_)) {
        return absl::InvalidArgumentError(
            absl::StrCat(path_, ": corrupt zstd data: ", ZSTD_getErrorName(last_result_)));
      }
    }
    return output.pos;
  }

 private:
  std::string path_;
  std::FILE* file_;
  ZSTD_DCtx* dctx_;
  std::vector<char> input_buffer_;
  ZSTD_inBuffer input_{nullptr, 0, 0};
  size_t last_result_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ByteSource>> OpenByteSource(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return OpenError(path);
  unsigned char magic[4] = {0, 0, 0, 0};
  size_t n = std::fread(magic, 1, sizeof(magic), file);
  std::rewind(file);
  if (n >= 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
    std::fclose(file);
    gzFile gz = gzopen(path.c_str(), "rb");
    if (gz == nullptr) return OpenError(path);
    return std::make_unique<GzipSource>(path, gz);
  }
  if (n == 4 && magic[0] == 0x28 && magic[1] == 0xb5 && magic[2] == 0x2f && magic[3] == 0xfd) {
    return std::make_unique<ZstdSource>(path, file);
  }
  return std::make_unique<PlainSource>(path, file);
}

absl::StatusOr<std::unique_ptr<LineReader>> LineReader::Open(const std::string& path) {
  auto source = OpenByteSource(path);
  if (!source.ok()) return source.status();
  return std::make_unique<LineReader>(std::move(source).value());
}

LineReader::LineReader(std::unique_ptr<ByteSource> source)
    : source_(std::move(source)), capacity_(1 << 18) {
  buffer_ = std::make_unique<char[]>(capacity_ + kLinePadding);
}

absl::StatusOr<bool> LineReader::Next(std::string_view* line) {
  size_t scanned = begin_;  // bytes before this offset hold no '\n'
  while (true) {
    const char* start = buffer_.get() + begin_;
    const void* newline = std::memchr(buffer_.get() + scanned, '\n', end_ - scanned);
    if (newline != nullptr || (eof_ && end_ > begin_)) {
      size_t line_end = newline != nullptr
                            ? static_cast<size_t>(static_cast<const char*>(newline) - buffer_.get())
                            : end_;
      size_t length = line_end - begin_;
      bytes_consumed_ += static_cast<int64_t>(length + (newline != nullptr ? 1 : 0));
      if (length > 0 && start[length - 1] == '\r') --length;
      *line = std::string_view(start, length);
      // Editors on Windows may start a file with a UTF-8 byte order mark; it is not content.
      if (line_number_ == 0 && line->starts_with("\xEF\xBB\xBF")) line->remove_prefix(3);
      begin_ = newline != nullptr ? line_end + 1 : end_;
      ++line_number_;
      return true;
    }
    if (eof_) return false;
    // Need more data: move the partial line to the front, grow if it fills the buffer.
    if (begin_ > 0) {
      std::memmove(buffer_.get(), buffer_.get() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    if (end_ == capacity_) {
      size_t new_capacity = capacity_ * 2;
      auto bigger = std::make_unique<char[]>(new_capacity + kLinePadding);
      std::memcpy(bigger.get(), buffer_.get(), end_);
      buffer_ = std::move(bigger);
      capacity_ = new_capacity;
    }
    scanned = end_;
    auto n = source_->Read(buffer_.get() + end_, capacity_ - end_);
    if (!n.ok()) return n.status();
    if (*n == 0) {
      eof_ = true;
    } else {
      end_ += *n;
    }
  }
}

}  // namespace prefixsim
