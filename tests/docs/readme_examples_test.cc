// Every command the README shows runs from a clone, and its example sessions are what the binary
// prints. The README's indented blocks are read line by line:
//  * `$ ./build/prefixsim ...` followed by output lines: run from the source directory; each
//    output line shown must appear in the real output, in the same order, trailing spaces aside
//    ("..." stands for lines left out);
//  * `./build/prefixsim ...` without a prompt: run, and must exit 0. Paths under /tmp/ are
//    moved into the test's own temporary folder so that runs do not share files;
//  * any other command (`bash scripts/...`, `cmake ...`) is not run here, for the reason given
//    in kNotRun; an unlisted one fails the test, so a new README command gets a decision;
//  * other indented lines (the synopsis, layout listings) are not commands.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"

namespace prefixsim {
namespace {

// Commands of the README that this test does not run, and why.
const std::map<std::string, std::string>& NotRun() {
  static const auto* not_run = new std::map<std::string, std::string>{
      {"bash scripts/demo.sh",
       "installs Debian packages and builds; its two prefixsim commands are the README's examples"},
      {"bash scripts/test.sh", "runs this very suite (a phase of .ci/run)"},
      {"cmake --install build --prefix /opt/prefixsim",
       "writes outside the checkout; scripts/test_install.sh installs into a temporary prefix"},
  };
  return *not_run;
}

struct Command {
  int line = 0;  // of the command in README.md
  std::string text;
  bool session = false;               // shown with a `$ ` prompt and its output
  std::vector<std::string> expected;  // session output; "..." = any lines
};

std::string TrimRight(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

// What starts a command line in an indented block.
bool IsCommand(std::string_view text) {
  for (std::string_view prefix : {"$ ", "./", "bash ", "cmake ", "ctest ", "sudo ", "zstdcat "}) {
    if (text.starts_with(prefix)) return true;
  }
  return false;
}

std::vector<Command> ReadmeCommands(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::vector<Command> out;
  const std::string indent = "    ";
  for (size_t i = 0; i < lines.size(); ++i) {
    if (!absl::StartsWith(lines[i], indent)) continue;
    std::string text = lines[i].substr(indent.size());
    if (!IsCommand(text)) continue;  // a layout listing, a synopsis, a table
    Command c;
    c.line = static_cast<int>(i + 1);
    c.session = text.starts_with("$ ");
    if (c.session) text.erase(0, 2);
    while (absl::EndsWith(TrimRight(text), "\\") && i + 1 < lines.size()) {
      text = TrimRight(text);
      text.pop_back();
      absl::StrAppend(&text, " ", absl::StripLeadingAsciiWhitespace(lines[++i]));
    }
    c.text = TrimRight(text);
    if (c.session) {
      while (i + 1 < lines.size() && absl::StartsWith(lines[i + 1], indent) &&
             !absl::StartsWith(lines[i + 1], indent + "$ ")) {
        c.expected.push_back(TrimRight(lines[++i].substr(indent.size())));
      }
    }
    out.push_back(c);
  }
  return out;
}

// stdout and stderr of a shell command, and its exit status.
std::string RunShell(const std::string& command, int* exit_code) {
  std::string out;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return out;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.append(buffer, n);
  const int status = pclose(pipe);
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

class ReadmeCommandsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    commands_ = ReadmeCommands(std::string(PREFIXSIM_SOURCE_DIR) + "/README.md");
    ASSERT_GE(commands_.size(), 5u) << "the README's commands were not found";
    scratch_ =
        std::filesystem::temp_directory_path() / absl::StrCat("prefixsim_readme_", ::getpid());
    std::filesystem::create_directories(scratch_);
  }
  void TearDown() override { std::filesystem::remove_all(scratch_); }

  // Runs a README command line from the source directory, with ./build/prefixsim standing for
  // the binary under test.
  std::string Run(const Command& c, int* exit_code) {
    std::string args = c.text.substr(std::string("./build/prefixsim").size());
    args = absl::StrReplaceAll(args, {{"/tmp/", scratch_.string() + "/"}});
    return RunShell(absl::StrCat("cd '", PREFIXSIM_SOURCE_DIR, "' && '", PREFIXSIM_BINARY, "'",
                                 args, " </dev/null"),
                    exit_code);
  }

  std::vector<Command> commands_;
  std::filesystem::path scratch_;
};

TEST_F(ReadmeCommandsTest, SessionsPrintWhatTheReadmeShows) {
  int sessions = 0;
  for (const Command& c : commands_) {
    if (!c.session) continue;
    SCOPED_TRACE(absl::StrCat("README.md:", c.line, ": ", c.text));
    ASSERT_TRUE(absl::StartsWith(c.text, "./build/prefixsim "));
    ++sessions;
    int exit_code = -1;
    const std::string output = Run(c, &exit_code);
    EXPECT_EQ(exit_code, 0) << output;
    std::istringstream got(output);
    std::vector<std::string> actual;
    for (std::string l; std::getline(got, l);) actual.push_back(TrimRight(l));
    size_t at = 0;
    for (const std::string& want : c.expected) {
      if (want == "...") continue;
      while (at < actual.size() && actual[at] != want) ++at;
      EXPECT_LT(at, actual.size())
          << "README line not printed (in this order): '" << want << "'\nactual output:\n"
          << output;
      if (at >= actual.size()) break;
      ++at;
    }
  }
  EXPECT_GE(sessions, 3);
}

TEST_F(ReadmeCommandsTest, EveryOtherCommandRunsOrIsListedWithAReason) {
  int ran = 0;
  for (const Command& c : commands_) {
    if (c.session) continue;
    SCOPED_TRACE(absl::StrCat("README.md:", c.line, ": ", c.text));
    if (absl::StartsWith(c.text, "./build/prefixsim ")) {
      ++ran;
      int exit_code = -1;
      const std::string output = Run(c, &exit_code);
      EXPECT_EQ(exit_code, 0) << output;
      continue;
    }
    const auto reason = NotRun().find(c.text);
    if (reason == NotRun().end()) {
      ADD_FAILURE() << "a README command this test neither runs nor lists in NotRun() with a "
                       "reason";
      continue;
    }
    std::printf("not run: README.md:%d: %s (%s)\n", c.line, c.text.c_str(), reason->second.c_str());
  }
  EXPECT_GE(ran, 2);
}

// The README is a user's entry, not the manual: what the tool is, the two commands, an example,
// a map of commands and links. Details belong in docs/.
TEST(ReadmeTest, StaysShortEnoughToRead) {
  std::ifstream in(std::string(PREFIXSIM_SOURCE_DIR) + "/README.md");
  ASSERT_TRUE(in);
  int lines = 0;
  for (std::string l; std::getline(in, l);) ++lines;
  EXPECT_LE(lines, 250) << "README.md has " << lines << " lines; move details to docs/";
}

}  // namespace
}  // namespace prefixsim
