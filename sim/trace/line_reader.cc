#include "sim/trace/line_reader.h"

#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "sim/util/status_macros.h"
#include "simdjson.h"

namespace prefixsim {
namespace {

static_assert(kLinePadding >= simdjson::SIMDJSON_PADDING, "lines must be parseable in place");

absl::Status OpenError(const std::string& path) {
  std::string message = absl::StrCat(path, ": cannot open: ", std::strerror(errno));
  if (errno == ENOENT || errno == ENOTDIR) return absl::NotFoundError(message);
  return absl::InvalidArgumentError(message);
}

// The raw bytes of a file or of standard input. The first bytes were already read to look at
// the magic number (a pipe cannot be rewound), so they are handed out first.
class FileSource : public ByteSource {
 public:
  FileSource(std::string name, std::FILE* file, bool owned, std::string head)
      : name_(std::move(name)), file_(file), owned_(owned), head_(std::move(head)) {}
  ~FileSource() override {
    if (owned_) std::fclose(file_);
  }
  absl::StatusOr<size_t> Read(char* buffer, size_t size) override {
    if (head_pos_ < head_.size()) {
      size_t n = std::min(size, head_.size() - head_pos_);
      std::memcpy(buffer, head_.data() + head_pos_, n);
      head_pos_ += n;
      return n;
    }
    size_t n = std::fread(buffer, 1, size, file_);
    if (n == 0 && std::ferror(file_)) {
      return absl::InvalidArgumentError(absl::StrCat(name_, ": read error"));
    }
    return n;
  }

 private:
  std::string name_;
  std::FILE* file_;
  bool owned_;
  std::string head_;
  size_t head_pos_ = 0;
};

// gzip (one or more concatenated members, as `cat a.gz b.gz` makes) over a raw source.
class GzipSource : public ByteSource {
 public:
  GzipSource(std::string name, std::unique_ptr<ByteSource> raw)
      : name_(std::move(name)), raw_(std::move(raw)), input_buffer_(1 << 17) {
    stream_.zalloc = Z_NULL;
    stream_.zfree = Z_NULL;
    stream_.opaque = Z_NULL;
    stream_.next_in = Z_NULL;
    stream_.avail_in = 0;
    init_ = inflateInit2(&stream_, 16 + MAX_WBITS);  // 16: gzip header and trailer
  }
  ~GzipSource() override {
    if (init_ == Z_OK) inflateEnd(&stream_);
  }
  absl::StatusOr<size_t> Read(char* buffer, size_t size) override {
    if (init_ != Z_OK) return Corrupt("cannot initialize zlib");
    if (size == 0) return size_t{0};
    stream_.next_out = reinterpret_cast<Bytef*>(buffer);
    stream_.avail_out = static_cast<uInt>(std::min<size_t>(size, 1u << 30));
    const uInt wanted = stream_.avail_out;
    while (stream_.avail_out == wanted) {
      if (stream_.avail_in == 0) {
        PREFIXSIM_ASSIGN_OR_RETURN(size_t n,
                                   raw_->Read(input_buffer_.data(), input_buffer_.size()));
        if (n == 0) {
          if (in_member_) return Corrupt("truncated stream");
          return size_t{0};
        }
        stream_.next_in = reinterpret_cast<Bytef*>(input_buffer_.data());
        stream_.avail_in = static_cast<uInt>(n);
      }
      if (!in_member_) {
        // The next member of a multi-member file starts here.
        if (inflateReset(&stream_) != Z_OK) return Corrupt("cannot reset zlib");
        in_member_ = true;
      }
      int rc = inflate(&stream_, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        in_member_ = false;
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        return Corrupt(stream_.msg != nullptr ? stream_.msg : "inflate failed");
      }
    }
    return static_cast<size_t>(wanted - stream_.avail_out);
  }

 private:
  absl::Status Corrupt(const char* what) const {
    return absl::InvalidArgumentError(absl::StrCat(name_, ": corrupt gzip data: ", what));
  }

  std::string name_;
  std::unique_ptr<ByteSource> raw_;
  std::vector<char> input_buffer_;
  z_stream stream_{};
  int init_ = Z_STREAM_ERROR;
  bool in_member_ = true;
};

class ZstdSource : public ByteSource {
 public:
  ZstdSource(std::string name, std::unique_ptr<ByteSource> raw)
      : name_(std::move(name)),
        raw_(std::move(raw)),
        dctx_(ZSTD_createDCtx()),
        input_buffer_(ZSTD_DStreamInSize()) {}
  ~ZstdSource() override { ZSTD_freeDCtx(dctx_); }
  absl::StatusOr<size_t> Read(char* buffer, size_t size) override {
    ZSTD_outBuffer output{buffer, size, 0};
    while (output.pos == 0) {
      if (input_.pos == input_.size) {
        PREFIXSIM_ASSIGN_OR_RETURN(size_t n,
                                   raw_->Read(input_buffer_.data(), input_buffer_.size()));
        if (n == 0) {
          // A frame still open at end of file means the file was cut short.
          if (last_result_ != 0) {
            return absl::InvalidArgumentError(
                absl::StrCat(name_, ": corrupt zstd data: truncated frame"));
          }
          return size_t{0};
        }
        input_ = ZSTD_inBuffer{input_buffer_.data(), n, 0};
      }
      last_result_ = ZSTD_decompressStream(dctx_, &output, &input_);
      if (ZSTD_isError(last_result_)) {
        return absl::InvalidArgumentError(
            absl::StrCat(name_, ": corrupt zstd data: ", ZSTD_getErrorName(last_result_)));
      }
    }
    return output.pos;
  }

 private:
  std::string name_;
  std::unique_ptr<ByteSource> raw_;
  ZSTD_DCtx* dctx_;
  std::vector<char> input_buffer_;
  ZSTD_inBuffer input_{nullptr, 0, 0};
  size_t last_result_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ByteSource>> OpenByteSource(const std::string& path) {
  const bool is_stdin = path == "-";
  // A pipe can be read once: a second reader (compare opens the trace once per policy) would
  // see the rest of what the first one left, so it is refused instead.
  static std::atomic<bool> stdin_taken{false};
  if (is_stdin && stdin_taken.exchange(true)) {
    return absl::InvalidArgumentError(
        "-: standard input can be read only once per run; save the trace to a file to read it "
        "again (e.g. once per policy)");
  }
  std::FILE* file = is_stdin ? stdin : std::fopen(path.c_str(), "rb");
  if (file == nullptr) return OpenError(path);
  const std::string name = is_stdin ? "<stdin>" : path;
  // The magic bytes decide, for files and standard input alike (never the name).
  char magic[4] = {0, 0, 0, 0};
  size_t n = std::fread(magic, 1, sizeof(magic), file);
  if (n < sizeof(magic) && std::ferror(file)) {
    if (!is_stdin) std::fclose(file);
    return absl::InvalidArgumentError(absl::StrCat(name, ": read error"));
  }
  auto raw = std::make_unique<FileSource>(name, file, !is_stdin, std::string(magic, n));
  const auto* m = reinterpret_cast<const unsigned char*>(magic);
  if (n >= 2 && m[0] == 0x1f && m[1] == 0x8b) {
    return std::make_unique<GzipSource>(name, std::move(raw));
  }
  if (n == 4 && m[0] == 0x28 && m[1] == 0xb5 && m[2] == 0x2f && m[3] == 0xfd) {
    return std::make_unique<ZstdSource>(name, std::move(raw));
  }
  return raw;
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
