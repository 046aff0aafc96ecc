// The front ends print the library's option names (sim/util/option_names.h) their way: every
// flag of the table is one a command takes, a library error reaches the terminal with the flag in
// the field's place, and the Python module's keywords are the flags with underscores.
#include "sim/run/option_flags.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "tests/cli_runner.h"

namespace prefixsim::run {
namespace {

using ::prefixsim::testing::RunCli;

TEST(OptionFlagsTest, EveryFlagOfTheTableIsACommandsFlag) {
  std::string help;
  for (const char* command : {"replay", "compare", "analyze", "gen-trace", "sweep", "regress",
                              "kernel-bench", "parity", "resolve", "tune"}) {
    help += RunCli(std::string(command) + " --help").output;
  }
  std::set<std::string> fields;
  for (const auto& [field, flag] : OptionFlags()) {
    EXPECT_TRUE(fields.insert(field).second) << field << " is in the table twice";
    EXPECT_NE(help.find(flag), std::string::npos) << field << " -> " << flag << ": no command "
                                                  << "takes " << flag;
  }
}

TEST(OptionFlagsTest, TheCliSpellsTheLibrarysNames) {
  EXPECT_EQ(SpellAsFlags("`max_requests` must be non-negative (0 = all)"),
            "--max-requests must be non-negative (0 = all)");
  EXPECT_EQ(SpellAsFlags("(`replicas=auto` `router=kv_aware`)"),
            "(--replicas auto --router kv_aware)");
  EXPECT_EQ(SpellAsFlags("`router.view=delayed` without `router.event_delay_ms`"),
            "--router-view delayed without --kv-event-delay-ms");
  EXPECT_EQ(SpellAsFlags("`no_such_option` stays"), "`no_such_option` stays");
}

TEST(OptionFlagsTest, KeywordsAreTheFlagsWithUnderscores) {
  EXPECT_EQ(SpellAsKeywords("`start_s` must be non-negative"),
            "`trace_start_s` must be non-negative");
  EXPECT_EQ(SpellAsKeywords("spread the load (`replicas=auto`)"),
            "spread the load (`replicas=\"auto\"`)");
  EXPECT_EQ(SpellAsKeywords("`no_such_option` stays"), "`no_such_option` stays");
}

TEST(OptionFlagsTest, LibraryErrorsReachTheTerminalWithFlags) {
  const auto r = RunCli("replay --trace " + std::string(PREFIXSIM_SOURCE_DIR) +
                        "/traces/sample_chat.jsonl --model llama-3.1-8b --engine llama-3.1-8b"
                        " --time-scale 0");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--time-scale"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find('`'), std::string::npos) << r.output;
}

}  // namespace
}  // namespace prefixsim::run
