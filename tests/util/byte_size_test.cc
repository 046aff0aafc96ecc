// The one size parser (sim/util/byte_size.h) behind every byte option and byte field.
#include "sim/util/byte_size.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

namespace prefixsim {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

int64_t Parse(const std::string& text) {
  absl::StatusOr<int64_t> bytes = ParseByteSize(text, "--kv-cache-bytes");
  EXPECT_TRUE(bytes.ok()) << text << ": " << bytes.status();
  return bytes.value_or(-1);
}

std::string ErrorOf(const std::string& text, ByteSizeOptions options = {}) {
  absl::StatusOr<int64_t> bytes = ParseByteSize(text, "--kv-cache-bytes", options);
  EXPECT_FALSE(bytes.ok()) << text << " parsed as " << bytes.value_or(0);
  if (bytes.ok()) return "";
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(bytes.status().message());
}

TEST(ByteSizeTest, PlainBytes) {
  EXPECT_EQ(Parse("68719476736"), 64 * kGiB);
  EXPECT_EQ(Parse("1"), 1);
  EXPECT_EQ(Parse(" 4096 "), 4096);
  EXPECT_EQ(Parse("+4096"), 4096);
  EXPECT_EQ(Parse("4096B"), 4096);
  EXPECT_EQ(Parse("9223372036854775807"), std::numeric_limits<int64_t>::max());
}

TEST(ByteSizeTest, BinaryUnits) {
  EXPECT_EQ(Parse("4KiB"), 4096);
  EXPECT_EQ(Parse("512MiB"), 512 * (int64_t{1} << 20));
  EXPECT_EQ(Parse("64GiB"), 64 * kGiB);
  EXPECT_EQ(Parse("1TiB"), 1024 * kGiB);
  EXPECT_EQ(Parse("1PiB"), int64_t{1} << 50);
  EXPECT_EQ(Parse("64 GiB"), 64 * kGiB);
  EXPECT_EQ(Parse("64gib"), 64 * kGiB);
  EXPECT_EQ(Parse("64GIB"), 64 * kGiB);
}

TEST(ByteSizeTest, DecimalUnitsArePowersOfTen) {
  EXPECT_EQ(Parse("1KB"), 1000);
  EXPECT_EQ(Parse("3MB"), 3000000);
  EXPECT_EQ(Parse("80GB"), 80000000000);
  EXPECT_EQ(Parse("2TB"), 2000000000000);
  EXPECT_EQ(Parse("1PB"), 1000000000000000);
  EXPECT_NE(Parse("64GB"), Parse("64GiB"));
}

TEST(ByteSizeTest, FractionsAreExactAndRoundDown) {
  EXPECT_EQ(Parse("1.5TiB"), 1536 * kGiB);
  EXPECT_EQ(Parse("0.5GiB"), 512 * (int64_t{1} << 20));
  EXPECT_EQ(Parse(".5KiB"), 512);
  EXPECT_EQ(Parse("1.KiB"), 1024);
  EXPECT_EQ(Parse("0.3KiB"), 307);  // 307.2 bytes
  EXPECT_EQ(Parse("1.25GB"), 1250000000);
  // More fraction digits than a double holds: still exact.
  EXPECT_EQ(Parse("1.0000000000000000001GiB"), kGiB);
  EXPECT_EQ(Parse("7.5PiB"), (int64_t{15} << 50) / 2);
}

TEST(ByteSizeTest, ErrorsNameTheOptionAndTheAcceptedForms) {
  const std::string e = ErrorOf("64XB");
  EXPECT_NE(e.find("--kv-cache-bytes"), std::string::npos) << e;
  EXPECT_NE(e.find("'64XB'"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown unit 'XB'"), std::string::npos) << e;
  EXPECT_NE(e.find("GiB"), std::string::npos) << e;
  EXPECT_NE(e.find("powers of 1000"), std::string::npos) << e;
  EXPECT_LT(e.size(), 400u) << "no 300-digit ranges: " << e;
}

TEST(ByteSizeTest, RejectsNegativeZeroJunkAndOverflow) {
  EXPECT_NE(ErrorOf("-1").find("negative"), std::string::npos);
  EXPECT_NE(ErrorOf("-64GiB").find("negative"), std::string::npos);
  EXPECT_NE(ErrorOf("0").find("must be positive"), std::string::npos);
  EXPECT_NE(ErrorOf("0GiB").find("must be positive"), std::string::npos);
  EXPECT_NE(ErrorOf("0.1B").find("must be positive"), std::string::npos);  // rounds down to 0
  EXPECT_NE(ErrorOf("").find("empty"), std::string::npos);
  EXPECT_NE(ErrorOf("   ").find("empty"), std::string::npos);
  EXPECT_NE(ErrorOf("GiB").find("no number"), std::string::npos);
  EXPECT_NE(ErrorOf("abc").find("no number"), std::string::npos);
  EXPECT_NE(ErrorOf("1e9").find("unknown unit"), std::string::npos);
  EXPECT_NE(ErrorOf("64 Gi B").find("unknown unit"), std::string::npos);
  EXPECT_NE(ErrorOf("0x100").find("unknown unit"), std::string::npos);
  EXPECT_NE(ErrorOf("1.5").find("whole number"), std::string::npos);
  EXPECT_NE(ErrorOf("1.2.3GiB").find("unknown unit"), std::string::npos);
  EXPECT_NE(ErrorOf("9223372036854775808").find("too large"), std::string::npos);
  EXPECT_NE(ErrorOf("99999999999999999999999").find("too large"), std::string::npos);
  EXPECT_NE(ErrorOf("8388608TiB").find("too large"), std::string::npos);  // 2^63
}

TEST(ByteSizeTest, ZeroWhereAllowed) {
  ByteSizeOptions zero_ok;
  zero_ok.allow_zero = true;
  absl::StatusOr<int64_t> bytes = ParseByteSize("0", "x", zero_ok);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, 0);
  EXPECT_FALSE(ParseByteSize("-0", "x", zero_ok).ok());
}

TEST(ByteSizeTest, ErrorWithoutAName) {
  absl::StatusOr<int64_t> bytes = ParseByteSize("4XB", "");
  ASSERT_FALSE(bytes.ok());
  EXPECT_EQ(std::string(bytes.status().message()).rfind("'4XB' is not a size", 0), 0u)
      << bytes.status();
}

TEST(ByteSizeTest, Lists) {
  absl::StatusOr<std::vector<int64_t>> list = ParseByteSizeList("16GiB, 1TiB,4096,512MiB", "c");
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(*list, (std::vector<int64_t>{16 * kGiB, 1024 * kGiB, 4096, 512 << 20}));
  EXPECT_FALSE(ParseByteSizeList("", "c").ok());
  absl::StatusOr<std::vector<int64_t>> bad = ParseByteSizeList("16GiB,4XB", "--capacities");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'4XB'"), absl::string_view::npos) << bad.status();
}

TEST(ByteSizeTest, FormatRoundTrips) {
  EXPECT_EQ(FormatByteSize(64 * kGiB), "64GiB");
  EXPECT_EQ(FormatByteSize(1536 * (int64_t{1} << 20)), "1536MiB");
  EXPECT_EQ(FormatByteSize(1000), "1000");
  for (int64_t b : {int64_t{1}, int64_t{4096}, 3 * kGiB, int64_t{1} << 50, int64_t{123456789}}) {
    EXPECT_EQ(Parse(FormatByteSize(b)), b) << FormatByteSize(b);
  }
}

}  // namespace
}  // namespace prefixsim
