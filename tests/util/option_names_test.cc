// Option names in the library's messages (sim/util/option_names.h) and the CLI's spelling of
// them (sim/cli/option_flags.h).
#include "sim/util/option_names.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

namespace prefixsim {
namespace {

std::optional<std::string> Upper(std::string_view field, std::string_view value) {
  if (field != "max_requests" && field != "replicas") return std::nullopt;
  std::string out = "--";
  for (char c : field) out += c == '_' ? '-' : c;
  if (!value.empty()) out.append(" ").append(value);
  return out;
}

TEST(OptionNamesTest, NamesAreBacktickedFieldsWithAnOptionalValue) {
  EXPECT_EQ(OptionName("max_requests"), "`max_requests`");
  EXPECT_EQ(OptionName("replicas", "auto"), "`replicas=auto`");
}

TEST(OptionNamesTest, AFrontEndRewritesTheNamesItKnows) {
  EXPECT_EQ(SpellOptionNames("`max_requests` must be non-negative", Upper),
            "--max-requests must be non-negative");
  EXPECT_EQ(SpellOptionNames("spread the load (`replicas=auto`).", Upper),
            "spread the load (--replicas auto).");
  // Unknown names, code that is not an option name, and a lone backtick stay as they are.
  EXPECT_EQ(SpellOptionNames("`time_scale` and `Not An Option` and `", Upper),
            "`time_scale` and `Not An Option` and `");
  // A closing backtick of something else may open a name.
  EXPECT_EQ(SpellOptionNames("`a b``replicas`", Upper), "`a b`--replicas");
  EXPECT_EQ(SpellOptionNames("", Upper), "");
  EXPECT_EQ(SpellOptionNames("no names", Upper), "no names");
}

}  // namespace
}  // namespace prefixsim
