// The README's example sessions are what the binary prints (issue 26: its numbers had drifted).
// Every indented block of README.md that starts with `$ ./build/prefixsim resolve|replay|compare|
// analyze ...` is run from the source directory; each output line the README shows must appear
// in the real output, in the same order, trailing spaces aside. A line "..." stands for lines
// left out. Examples that need what a test machine lacks (a Slurm cluster, files outside the
// repository) use other commands and are not run.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace prefixsim {
namespace {

struct Example {
  int line = 0;  // of the command in README.md
  std::string args;
  std::vector<std::string> expected;  // "..." = any lines
};

std::string TrimRight(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

std::vector<Example> ReadmeExamples(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::vector<Example> out;
  const std::string prompt = "    $ ./build/prefixsim ";
  for (size_t i = 0; i < lines.size(); ++i) {
    if (!absl::StartsWith(lines[i], prompt)) continue;
    Example e;
    e.line = static_cast<int>(i + 1);
    std::string cmd = lines[i].substr(prompt.size());
    while (absl::EndsWith(TrimRight(cmd), "\\") && i + 1 < lines.size()) {
      cmd = TrimRight(cmd);
      cmd.pop_back();
      absl::StrAppend(&cmd, " ", absl::StripLeadingAsciiWhitespace(lines[++i]));
    }
    e.args = cmd;
    while (i + 1 < lines.size() && absl::StartsWith(lines[i + 1], "    ") &&
           !absl::StartsWith(lines[i + 1], prompt)) {
      e.expected.push_back(TrimRight(lines[++i].substr(4)));
    }
    const bool runnable = absl::StartsWith(cmd, "resolve ") || absl::StartsWith(cmd, "replay ") ||
                          absl::StartsWith(cmd, "compare ") || absl::StartsWith(cmd, "analyze ");
    if (runnable) out.push_back(e);
  }
  return out;
}

// stdout and stderr of a shell command.
std::string RunShell(const std::string& command) {
  std::string out;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return out;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.append(buffer, n);
  pclose(pipe);
  return out;
}

TEST(ReadmeExamplesTest, OutputsAreWhatTheBinaryPrints) {
  const std::string src = PREFIXSIM_SOURCE_DIR;
  const std::vector<Example> examples = ReadmeExamples(src + "/README.md");
  ASSERT_GE(examples.size(), 3u) << "the README's examples were not found";
  for (const Example& e : examples) {
    SCOPED_TRACE(absl::StrCat("README.md:", e.line, ": ", e.args));
    // From the source directory, as the README's relative paths assume.
    const std::string output = RunShell("cd '" + src + "' && '" + PREFIXSIM_BINARY + "' " + e.args);
    std::istringstream got(output);
    std::vector<std::string> actual;
    for (std::string l; std::getline(got, l);) actual.push_back(TrimRight(l));
    size_t at = 0;
    for (const std::string& want : e.expected) {
      if (want == "...") continue;
      while (at < actual.size() && actual[at] != want) ++at;
      EXPECT_LT(at, actual.size()) << "README line not printed (in this order): '" << want
                                   << "'\nactual output:\n"
                                   << output;
      if (at >= actual.size()) break;
      ++at;
    }
  }
}

}  // namespace
}  // namespace prefixsim
