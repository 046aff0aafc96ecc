// JsonConfig::OptionalInt, the one integer reader of the model, engine and HuggingFace configs:
// every int64_t value, nothing beyond (docs/design.md §4.2).
#include "sim/plan/json_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "prefixsim/model.h"

namespace prefixsim {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<std::optional<int64_t>> ReadInt(const std::string& literal) {
  auto doc = JsonConfig::Parse("{\"v\": " + literal + "}", "t.json");
  if (!doc.ok()) return doc.status();
  return doc->OptionalInt(doc->root(), "", "v", std::numeric_limits<int64_t>::min());
}

TEST(JsonConfigIntTest, TakesEveryInt64AtTheLimits) {
  EXPECT_EQ(ReadInt("-9223372036854775808").value(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(ReadInt("9223372036854775807").value(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(ReadInt("0").value(), 0);
  EXPECT_EQ(ReadInt("1e18").value(), int64_t{1'000'000'000'000'000'000});
  EXPECT_EQ(ReadInt("-4.0").value(), -4);
  EXPECT_FALSE(ReadInt("null").value().has_value());
}

TEST(JsonConfigIntTest, RefusesValuesBeyondInt64) {
  // 2^63 parses as an unsigned integer, -2^63-1 as a double (rounded to -2^63).
  for (const char* literal : {"9223372036854775808", "-9223372036854775809",
                              "9223372036854775808.0", "18446744073709551615", "-1e19", "1.3e94"}) {
    SCOPED_TRACE(literal);
    auto v = ReadInt(literal);
    ASSERT_FALSE(v.ok());
    EXPECT_THAT(std::string(v.status().message()), HasSubstr("t.json:1: field 'v': out of range"));
  }
  auto fraction = ReadInt("1.5");
  ASSERT_FALSE(fraction.ok());
  EXPECT_THAT(std::string(fraction.status().message()), HasSubstr("must be an integer, got 1.5"));
}

TEST(JsonConfigIntTest, HuggingFaceConfigsShareTheRangeCheck) {
  for (const char* literal : {"9223372036854775808", "-9223372036854775809"}) {
    SCOPED_TRACE(literal);
    auto model = ImportHfConfig(
        std::string(R"({"model_type": "llama", "num_hidden_layers": )") + literal + "}", "c.json",
        {});
    ASSERT_FALSE(model.ok());
    EXPECT_THAT(std::string(model.status().message()),
                HasSubstr("field 'num_hidden_layers': out of range"));
  }
}

}  // namespace
}  // namespace prefixsim
