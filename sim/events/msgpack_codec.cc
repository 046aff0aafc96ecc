#include "sim/events/msgpack_codec.h"

// msgpack-cxx's packer needs no Boost for what we use.
#define MSGPACK_NO_BOOST
#include <cstring>
#include <msgpack.hpp>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "sim/util/status_macros.h"

namespace prefixsim::events {
namespace {

using Packer = msgpack::packer<msgpack::sbuffer>;

void PackString(Packer& p, std::string_view s) {
  p.pack_str(static_cast<uint32_t>(s.size()));
  p.pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
}

// msgspec writes a float field as float64 whatever its value; msgpack-cxx's pack_double would
// write an integral value (ts 0.0, 2.0) as an integer, which typed decoders refuse.
void PackFloat64(msgpack::sbuffer& buffer, double d) {
  uint64_t bits;
  std::memcpy(&bits, &d, 8);
  char out[9];
  out[0] = static_cast<char>(0xcb);
  for (int i = 0; i < 8; ++i) out[1 + i] = static_cast<char>(bits >> (56 - 8 * i));
  buffer.write(out, 9);
}

void PackHashes(Packer& p, const std::vector<ExternalBlockHash>& hashes) {
  p.pack_array(static_cast<uint32_t>(hashes.size()));
  for (ExternalBlockHash h : hashes) p.pack_uint64(h);
}

template <typename T>
void PackOptional(Packer& p, const std::optional<T>& v) {
  if (!v.has_value()) {
    p.pack_nil();
  } else if constexpr (std::is_same_v<T, std::string>) {
    PackString(p, *v);
  } else {
    p.pack(*v);
  }
}

void PackEvent(Packer& p, const BlockStored& e) {
  // Fields without a default in vLLM are always written (None as nil); those with one only when
  // set (omit_defaults). extra_keys: one nil per block, as vLLM writes for plain-text blocks.
  const uint32_t n = 9 + (e.group_idx ? 1 : 0) + (e.kv_cache_spec_kind ? 1 : 0) +
                     (e.kv_cache_spec_sliding_window ? 1 : 0);
  p.pack_map(n);
  PackString(p, "type");
  PackString(p, "BlockStored");
  PackString(p, "block_hashes");
  PackHashes(p, e.block_hashes);
  PackString(p, "parent_block_hash");
  if (e.parent_block_hash) {
    p.pack_uint64(*e.parent_block_hash);
  } else {
    p.pack_nil();
  }
  PackString(p, "token_ids");
  p.pack_array(static_cast<uint32_t>(e.token_ids.size()));
  for (int64_t t : e.token_ids) p.pack_int64(t);
  PackString(p, "block_size");
  p.pack_int64(e.block_size);
  PackString(p, "lora_id");
  p.pack_nil();
  PackString(p, "medium");
  PackOptional(p, e.medium);
  PackString(p, "lora_name");
  p.pack_nil();
  PackString(p, "extra_keys");
  p.pack_array(static_cast<uint32_t>(e.block_hashes.size()));
  for (size_t i = 0; i < e.block_hashes.size(); ++i) p.pack_nil();
  if (e.group_idx) {
    PackString(p, "group_idx");
    p.pack_int64(*e.group_idx);
  }
  if (e.kv_cache_spec_kind) {
    PackString(p, "kv_cache_spec_kind");
    PackString(p, *e.kv_cache_spec_kind);
  }
  if (e.kv_cache_spec_sliding_window) {
    PackString(p, "kv_cache_spec_sliding_window");
    p.pack_int64(*e.kv_cache_spec_sliding_window);
  }
}

void PackEvent(Packer& p, const BlockRemoved& e) {
  p.pack_map(3 + (e.group_idx ? 1 : 0));
  PackString(p, "type");
  PackString(p, "BlockRemoved");
  PackString(p, "block_hashes");
  PackHashes(p, e.block_hashes);
  PackString(p, "medium");
  PackOptional(p, e.medium);
  if (e.group_idx) {
    PackString(p, "group_idx");
    p.pack_int64(*e.group_idx);
  }
}

void PackEvent(Packer& p, const AllBlocksCleared&) {
  p.pack_map(1);
  PackString(p, "type");
  PackString(p, "AllBlocksCleared");
}

// A bounds-checked msgpack reader that knows where it is, for errors a user can act on.
class Reader {
 public:
  Reader(std::string_view data, uint64_t base) : data_(data), base_(base) {}

  size_t pos() const { return pos_; }
  bool done() const { return pos_ == data_.size(); }

  absl::Status Error(std::string_view what) const { return ErrorAt(pos_, what); }
  absl::Status ErrorAt(size_t at, std::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("byte ", base_ + at, ": ", std::string(what)));
  }

  absl::StatusOr<uint8_t> Peek() const {
    if (pos_ >= data_.size()) return Error("truncated: expected a msgpack value");
    return static_cast<uint8_t>(data_[pos_]);
  }

  bool TakeNil() {
    if (pos_ < data_.size() && static_cast<uint8_t>(data_[pos_]) == 0xc0) {
      ++pos_;
      return true;
    }
    return false;
  }

  absl::StatusOr<uint32_t> ArrayHeader() {
    PREFIXSIM_ASSIGN_OR_RETURN(const uint8_t b, Peek());
    uint64_t n;
    if ((b & 0xf0) == 0x90) {
      ++pos_;
      n = b & 0x0f;
    } else if (b == 0xdc || b == 0xdd) {
      ++pos_;
      PREFIXSIM_ASSIGN_OR_RETURN(n, BigEndian(b == 0xdc ? 2 : 4));
    } else {
      return Error(absl::StrCat("expected an array, found ", TypeName(b)));
    }
    return CheckCount(n);
  }

  absl::StatusOr<uint32_t> MapHeader() {
    PREFIXSIM_ASSIGN_OR_RETURN(const uint8_t b, Peek());
    uint64_t n;
    if ((b & 0xf0) == 0x80) {
      ++pos_;
      n = b & 0x0f;
    } else if (b == 0xde || b == 0xdf) {
      ++pos_;
      PREFIXSIM_ASSIGN_OR_RETURN(n, BigEndian(b == 0xde ? 2 : 4));
    } else {
      return Error(absl::StrCat("expected a map, found ", TypeName(b)));
    }
    return CheckCount(n);
  }

  // An integer that fits in int64 (token ids, sizes, ranks).
  absl::StatusOr<int64_t> Int() {
    const size_t at = pos_;
    bool negative = false;
    PREFIXSIM_ASSIGN_OR_RETURN(const uint64_t v, RawInt(&negative));
    if (!negative && v > static_cast<uint64_t>(INT64_MAX)) return ErrorAt(at, "integer too large");
    return static_cast<int64_t>(v);
  }

  // A block hash: an unsigned (or non-negative) integer, or bytes of which the last 8 count.
  absl::StatusOr<uint64_t> Hash() {
    PREFIXSIM_ASSIGN_OR_RETURN(const uint8_t b, Peek());
    if (b == 0xc4 || b == 0xc5 || b == 0xc6) {
      PREFIXSIM_ASSIGN_OR_RETURN(const std::string_view bytes, Bytes());
      uint64_t h = 0;
      const size_t from = bytes.size() > 8 ? bytes.size() - 8 : 0;
      for (size_t i = from; i < bytes.size(); ++i) h = (h << 8) | static_cast<uint8_t>(bytes[i]);
      return h;
    }
    const size_t at = pos_;
    bool negative = false;
    PREFIXSIM_ASSIGN_OR_RETURN(const uint64_t v, RawInt(&negative));
    if (negative) return ErrorAt(at, "a block hash must not be negative");
    return v;
  }

  absl::StatusOr<double> Double() {
    PREFIXSIM_ASSIGN_OR_RETURN(const uint8_t b, Peek());
    if (b == 0xcb) {
      ++pos_;
      PREFIXSIM_ASSIGN_OR_RETURN(const uint64_t bits, BigEndian(8));
      double d;
      std::memcpy(&d, &bits, 8);
      return d;
    }
    if (b == 0xca) {
      ++pos_;
      PREFIXSIM_ASSIGN_OR_RETURN(const uint64_t bits, BigEndian(4));
      const uint32_t b32 = static_cast<uint32_t>(bits);
      float f;
      std::memcpy(&f, &b32, 4);
      return static_cast<double>(f);
    }
    PREFIXSIM_ASSIGN_OR_RETURN(const int64_t i, Int());
    return static_cast<double>(i);
  }

  absl::StatusOr<std::string_view> String() {
    PREFIXSIM_ASSIGN_OR_RETURN(const uint8_t b, Peek());
    uint64_t n;
    if ((b & 0xe0) == 0xa0) {
      ++pos_;
      n = b & 0x1f;
    } else if (b >= 0xd9 && b <= 0xdb) {
      ++pos_;
      PREFIXSIM_ASSIGN_OR_RETURN(n, BigEndian(b == 0xd9 ? 1 : b == 0xda ? 2 : 4));
    } else {
      return Error(absl::StrCat("expected a string, found ", TypeName(b)));
    }
    return Take(n);
  }

  absl::StatusOr<std::string_view> Bytes() {
    PREFIXSIM_ASSIGN_OR_RETURN(const uint8_t b, Peek());
    if (b < 0xc4 || b > 0xc6) return Error(absl::StrCat("expected bytes, found ", TypeName(b)));
    ++pos_;
    PREFIXSIM_ASSIGN_OR_RETURN(const uint64_t n, BigEndian(b == 0xc4 ? 1 : b == 0xc5 ? 2 : 4));
    return Take(n);
  }

  // Skips one value of any type (fields we do not use: lora ids, extra keys). Nesting is
  // bounded, so a hostile payload cannot exhaust the stack.
  absl::Status Skip(int depth = 0) {
    if (depth > 64) return Error("values nested too deeply");
    PREFIXSIM_ASSIGN_OR_RETURN(const uint8_t b, Peek());
    if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
      ++pos_;
      return absl::OkStatus();
    }
    if ((b & 0xf0) == 0x90 || b == 0xdc || b == 0xdd) {
      PREFIXSIM_ASSIGN_OR_RETURN(const uint32_t n, ArrayHeader());
      for (uint32_t i = 0; i < n; ++i) PREFIXSIM_RETURN_IF_ERROR(Skip(depth + 1));
      return absl::OkStatus();
    }
    if ((b & 0xf0) == 0x80 || b == 0xde || b == 0xdf) {
      PREFIXSIM_ASSIGN_OR_RETURN(const uint32_t n, MapHeader());
      for (uint32_t i = 0; i < 2 * n; ++i) PREFIXSIM_RETURN_IF_ERROR(Skip(depth + 1));
      return absl::OkStatus();
    }
    if ((b & 0xe0) == 0xa0 || (b >= 0xd9 && b <= 0xdb)) return String().status();
    if (b >= 0xc4 && b <= 0xc6) return Bytes().status();
    if (b == 0xca || b == 0xcb) return Double().status();
    if (b >= 0xcc && b <= 0xd3) {
      bool negative;
      return RawInt(&negative).status();
    }
    // Extensions: fixext 1..16 and ext 8/16/32 (a type byte, then the data).
    ++pos_;
    uint64_t n;
    if (b >= 0xd4 && b <= 0xd8) {
      n = uint64_t{1} << (b - 0xd4);
    } else if (b >= 0xc7 && b <= 0xc9) {
      PREFIXSIM_ASSIGN_OR_RETURN(n, BigEndian(b == 0xc7 ? 1 : b == 0xc8 ? 2 : 4));
    } else {
      return ErrorAt(pos_ - 1, "invalid msgpack type byte 0xc1");
    }
    return Take(n + 1).status();
  }

 private:
  absl::StatusOr<uint64_t> BigEndian(int bytes) {
    if (data_.size() - pos_ < static_cast<size_t>(bytes)) return Error("truncated value");
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v = (v << 8) | static_cast<uint8_t>(data_[pos_++]);
    return v;
  }
  absl::StatusOr<std::string_view> Take(uint64_t n) {
    if (data_.size() - pos_ < n) return Error(absl::StrCat("truncated: ", n, " bytes announced"));
    const std::string_view out = data_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  // Every element takes at least one byte: a count beyond the bytes left is a lie (and would
  // make us reserve memory the payload does not back).
  absl::StatusOr<uint32_t> CheckCount(uint64_t n) {
    if (n > data_.size() - pos_) {
      return Error(absl::StrCat("truncated: ", n, " elements announced, ", data_.size() - pos_,
                                " bytes left"));
    }
    return static_cast<uint32_t>(n);
  }
  absl::StatusOr<uint64_t> RawInt(bool* negative) {
    PREFIXSIM_ASSIGN_OR_RETURN(const uint8_t b, Peek());
    *negative = false;
    if (b <= 0x7f) {
      ++pos_;
      return b;
    }
    if (b >= 0xe0) {
      ++pos_;
      *negative = true;
      return static_cast<uint64_t>(static_cast<int64_t>(static_cast<int8_t>(b)));
    }
    if (b >= 0xcc && b <= 0xcf) {
      ++pos_;
      return BigEndian(1 << (b - 0xcc));
    }
    if (b >= 0xd0 && b <= 0xd3) {
      ++pos_;
      const int bytes = 1 << (b - 0xd0);
      PREFIXSIM_ASSIGN_OR_RETURN(const uint64_t raw, BigEndian(bytes));
      // Sign-extend from `bytes` bytes.
      const int shift = 64 - 8 * bytes;
      const int64_t v = static_cast<int64_t>(raw << shift) >> shift;
      *negative = v < 0;
      return static_cast<uint64_t>(v);
    }
    return Error(absl::StrCat("expected an integer, found ", TypeName(b)));
  }
  static std::string TypeName(uint8_t b) {
    if (b <= 0x7f || b >= 0xe0 || (b >= 0xcc && b <= 0xd3)) return "an integer";
    if ((b & 0xf0) == 0x80 || b == 0xde || b == 0xdf) return "a map";
    if ((b & 0xf0) == 0x90 || b == 0xdc || b == 0xdd) return "an array";
    if ((b & 0xe0) == 0xa0 || (b >= 0xd9 && b <= 0xdb)) return "a string";
    if (b == 0xc0) return "nil";
    if (b == 0xc2 || b == 0xc3) return "a boolean";
    if (b == 0xca || b == 0xcb) return "a float";
    if (b >= 0xc4 && b <= 0xc6) return "bytes";
    return absl::StrCat("type byte 0x", absl::Hex(b));
  }

  std::string_view data_;
  uint64_t base_;
  size_t pos_ = 0;
};

absl::StatusOr<std::vector<ExternalBlockHash>> ReadHashes(Reader& r) {
  PREFIXSIM_ASSIGN_OR_RETURN(const uint32_t n, r.ArrayHeader());
  std::vector<ExternalBlockHash> out;
  out.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    PREFIXSIM_ASSIGN_OR_RETURN(const uint64_t h, r.Hash());
    out.push_back(h);
  }
  return out;
}

absl::StatusOr<std::optional<int64_t>> ReadOptionalInt(Reader& r) {
  if (r.TakeNil()) return std::optional<int64_t>();
  PREFIXSIM_ASSIGN_OR_RETURN(const int64_t v, r.Int());
  return std::optional<int64_t>(v);
}

absl::StatusOr<std::optional<std::string>> ReadOptionalString(Reader& r) {
  if (r.TakeNil()) return std::optional<std::string>();
  PREFIXSIM_ASSIGN_OR_RETURN(const std::string_view v, r.String());
  return std::optional<std::string>(std::string(v));
}

// One field of a BlockStored, by name (map form) or by position (array form).
absl::Status ReadStoredField(Reader& r, std::string_view name, BlockStored* e) {
  if (name == "block_hashes") {
    PREFIXSIM_ASSIGN_OR_RETURN(e->block_hashes, ReadHashes(r));
  } else if (name == "parent_block_hash") {
    if (!r.TakeNil()) {
      PREFIXSIM_ASSIGN_OR_RETURN(const uint64_t h, r.Hash());
      e->parent_block_hash = h;
    }
  } else if (name == "token_ids") {
    PREFIXSIM_ASSIGN_OR_RETURN(const uint32_t n, r.ArrayHeader());
    e->token_ids.reserve(n);
    for (uint32_t i = 0; i < n; ++i) {
      PREFIXSIM_ASSIGN_OR_RETURN(const int64_t t, r.Int());
      e->token_ids.push_back(t);
    }
  } else if (name == "block_size") {
    PREFIXSIM_ASSIGN_OR_RETURN(e->block_size, r.Int());
  } else if (name == "medium") {
    PREFIXSIM_ASSIGN_OR_RETURN(e->medium, ReadOptionalString(r));
  } else if (name == "group_idx") {
    PREFIXSIM_ASSIGN_OR_RETURN(e->group_idx, ReadOptionalInt(r));
  } else if (name == "kv_cache_spec_kind") {
    PREFIXSIM_ASSIGN_OR_RETURN(e->kv_cache_spec_kind, ReadOptionalString(r));
  } else if (name == "kv_cache_spec_sliding_window") {
    PREFIXSIM_ASSIGN_OR_RETURN(e->kv_cache_spec_sliding_window, ReadOptionalInt(r));
  } else {
    return r.Skip();  // lora_id, lora_name, extra_keys, and fields of later versions
  }
  return absl::OkStatus();
}

absl::Status ReadRemovedField(Reader& r, std::string_view name, BlockRemoved* e) {
  if (name == "block_hashes") {
    PREFIXSIM_ASSIGN_OR_RETURN(e->block_hashes, ReadHashes(r));
  } else if (name == "medium") {
    PREFIXSIM_ASSIGN_OR_RETURN(e->medium, ReadOptionalString(r));
  } else if (name == "group_idx") {
    PREFIXSIM_ASSIGN_OR_RETURN(e->group_idx, ReadOptionalInt(r));
  } else {
    return r.Skip();
  }
  return absl::OkStatus();
}

// Field order of the array form: the structs' declaration order (docs/kv-events.md).
constexpr std::string_view kStoredFields[] = {"block_hashes",
                                              "parent_block_hash",
                                              "token_ids",
                                              "block_size",
                                              "lora_id",
                                              "medium",
                                              "lora_name",
                                              "extra_keys",
                                              "group_idx",
                                              "kv_cache_spec_kind",
                                              "kv_cache_spec_sliding_window"};
constexpr std::string_view kRemovedFields[] = {"block_hashes", "medium", "group_idx"};

template <typename Event, size_t N>
absl::Status ReadFields(Reader& r, bool map_form, uint32_t count,
                        const std::string_view (&positions)[N],
                        absl::Status (*read_field)(Reader&, std::string_view, Event*), Event* e) {
  for (uint32_t i = 0; i < count; ++i) {
    if (map_form) {
      PREFIXSIM_ASSIGN_OR_RETURN(const std::string_view name, r.String());
      PREFIXSIM_RETURN_IF_ERROR(read_field(r, name, e));
    } else {
      PREFIXSIM_RETURN_IF_ERROR(read_field(r, i < N ? positions[i] : std::string_view(), e));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<KvEvent> ReadEvent(Reader& r) {
  const size_t start = r.pos();
  PREFIXSIM_ASSIGN_OR_RETURN(const uint8_t b, r.Peek());
  const bool map_form = (b & 0xf0) == 0x80 || b == 0xde || b == 0xdf;
  uint32_t count;
  std::string_view tag;
  if (map_form) {
    PREFIXSIM_ASSIGN_OR_RETURN(count, r.MapHeader());
    // msgspec writes the tag first; we insist on it, which keeps the reader one pass.
    if (count == 0) return r.ErrorAt(start, "an event map without its \"type\" tag");
    PREFIXSIM_ASSIGN_OR_RETURN(const std::string_view key, r.String());
    if (key != "type") return r.ErrorAt(start, "an event map must start with its \"type\" tag");
    PREFIXSIM_ASSIGN_OR_RETURN(tag, r.String());
  } else {
    PREFIXSIM_ASSIGN_OR_RETURN(count, r.ArrayHeader());
    if (count == 0) return r.ErrorAt(start, "an empty event array (expected its tag first)");
    PREFIXSIM_ASSIGN_OR_RETURN(tag, r.String());
  }
  --count;
  if (tag == "BlockStored") {
    BlockStored e;
    PREFIXSIM_RETURN_IF_ERROR(ReadFields(r, map_form, count, kStoredFields, &ReadStoredField, &e));
    return KvEvent(std::move(e));
  }
  if (tag == "BlockRemoved") {
    BlockRemoved e;
    PREFIXSIM_RETURN_IF_ERROR(
        ReadFields(r, map_form, count, kRemovedFields, &ReadRemovedField, &e));
    return KvEvent(std::move(e));
  }
  if (tag == "AllBlocksCleared") {
    for (uint32_t i = 0; i < count * (map_form ? 2 : 1); ++i) PREFIXSIM_RETURN_IF_ERROR(r.Skip());
    return KvEvent(AllBlocksCleared{});
  }
  return r.ErrorAt(start, absl::StrCat("unknown event type \"", std::string(tag), "\""));
}

absl::Status ReadEvents(Reader& r, EventBatch* batch) {
  PREFIXSIM_ASSIGN_OR_RETURN(const uint32_t n, r.ArrayHeader());
  batch->events.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    PREFIXSIM_ASSIGN_OR_RETURN(KvEvent e, ReadEvent(r));
    batch->events.push_back(std::move(e));
  }
  return absl::OkStatus();
}

}  // namespace

std::string EncodeMsgpack(const EventBatch& batch) {
  msgpack::sbuffer buffer;
  Packer p(buffer);
  p.pack_array(batch.data_parallel_rank ? 3 : 2);
  PackFloat64(buffer, batch.ts);
  p.pack_array(static_cast<uint32_t>(batch.events.size()));
  for (const KvEvent& e : batch.events) std::visit([&p](const auto& v) { PackEvent(p, v); }, e);
  if (batch.data_parallel_rank) p.pack_int64(*batch.data_parallel_rank);
  return std::string(buffer.data(), buffer.size());
}

absl::StatusOr<EventBatch> DecodeMsgpack(std::string_view payload, uint64_t base_offset) {
  Reader r(payload, base_offset);
  EventBatch batch;
  PREFIXSIM_ASSIGN_OR_RETURN(const uint8_t b, r.Peek());
  if ((b & 0xf0) == 0x80 || b == 0xde || b == 0xdf) {
    PREFIXSIM_ASSIGN_OR_RETURN(const uint32_t n, r.MapHeader());
    bool has_ts = false, has_events = false;
    for (uint32_t i = 0; i < n; ++i) {
      PREFIXSIM_ASSIGN_OR_RETURN(const std::string_view name, r.String());
      if (name == "ts") {
        PREFIXSIM_ASSIGN_OR_RETURN(batch.ts, r.Double());
        has_ts = true;
      } else if (name == "events") {
        PREFIXSIM_RETURN_IF_ERROR(ReadEvents(r, &batch));
        has_events = true;
      } else if (name == "data_parallel_rank") {
        PREFIXSIM_ASSIGN_OR_RETURN(batch.data_parallel_rank, ReadOptionalInt(r));
      } else {
        PREFIXSIM_RETURN_IF_ERROR(r.Skip());
      }
    }
    if (!has_ts || !has_events) return r.ErrorAt(0, "a batch map needs \"ts\" and \"events\"");
  } else {
    PREFIXSIM_ASSIGN_OR_RETURN(const uint32_t n, r.ArrayHeader());
    if (n < 2) return r.ErrorAt(0, "a batch array needs at least [ts, events]");
    PREFIXSIM_ASSIGN_OR_RETURN(batch.ts, r.Double());
    PREFIXSIM_RETURN_IF_ERROR(ReadEvents(r, &batch));
    if (n >= 3) {
      PREFIXSIM_ASSIGN_OR_RETURN(batch.data_parallel_rank, ReadOptionalInt(r));
    }
    for (uint32_t i = 3; i < n; ++i) PREFIXSIM_RETURN_IF_ERROR(r.Skip());
  }
  if (!r.done()) return r.Error("trailing bytes after the batch");
  return batch;
}

}  // namespace prefixsim::events
