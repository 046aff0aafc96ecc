// `--trace -`: the trace comes from standard input, plain, gzip or zstd recognized from its first
// bytes, and replays exactly like the same trace read from a file.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "sim/trace/line_reader.h"
#include "tests/cli_runner.h"

namespace prefixsim {
namespace {

using ::prefixsim::testing::CliResult;
using ::prefixsim::testing::RunCli;

// Runs a whole shell command line (so it can start with `cat file |`).
CliResult RunShell(const std::string& command) {
  CliResult result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) {
    result.output.append(buffer.data(), n);
  }
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

std::string Temp(const std::string& name) {
  return ::testing::TempDir() + "/" + std::to_string(getpid()) + "_stdin_" + name;
}

// The report without the fields that name where the trace came from.
nlohmann::json ReadReport(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(ss.str());
  j.erase("trace");
  return j;
}

const std::string kArgs =
    " --model llama-3.1-8b --engine llama-3.1-8b --max-requests 120 --seed 2 --no-wall-time "
    "--no-progress";

TEST(StdinTraceTest, PlainGzipAndZstdPipedIntoReplayMatchTheFile) {
  const std::string trace = std::string(PREFIXSIM_SOURCE_DIR) + "/traces/sample_chat.jsonl";
  const std::string from_file = Temp("file.json");
  CliResult r = RunCli("replay --trace " + trace + kArgs + " --json " + from_file);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json expected = ReadReport(from_file);
  ASSERT_GT(expected.size(), 0u);

  const std::string gz = Temp("trace.gz");
  const std::string zst = Temp("trace.zst");
  ASSERT_EQ(RunShell("gzip -c " + trace + " > " + gz).exit_code, 0);
  ASSERT_EQ(RunShell("zstd -q -f -c " + trace + " > " + zst).exit_code, 0);
  for (const std::string& source : {trace, gz, zst}) {
    SCOPED_TRACE(source);
    const std::string json = Temp("piped.json");
    std::remove(json.c_str());
    r = RunShell("cat " + source + " | " + PREFIXSIM_BINARY + " replay --trace -" + kArgs +
                 " --json " + json);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(ReadReport(json), expected);
  }
}

TEST(StdinTraceTest, BrokenCompressedInputOnStdinIsAnError) {
  const std::string trace = std::string(PREFIXSIM_SOURCE_DIR) + "/traces/sample_chat.jsonl";
  CliResult r = RunShell("gzip -c " + trace + " | head -c 2000 | " + PREFIXSIM_BINARY +
                         " replay --trace -" + kArgs);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("corrupt gzip data"), std::string::npos) << r.output;
}

std::vector<std::string> Lines(const std::string& path) {
  std::vector<std::string> lines;
  auto reader = LineReader::Open(path);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return lines;
  std::string_view line;
  while (true) {
    auto more = (*reader)->Next(&line);
    EXPECT_TRUE(more.ok()) << more.status();
    if (!more.ok() || !*more) break;
    lines.emplace_back(line);
  }
  return lines;
}

TEST(StdinTraceTest, ConcatenatedGzipMembersAreOneStream) {
  const std::string a = Temp("a.txt");
  const std::string b = Temp("b.txt");
  std::ofstream(a) << "one\ntwo\n";
  std::ofstream(b) << "three\n";
  const std::string both = Temp("both.gz");
  ASSERT_EQ(RunShell("gzip -c " + a + " > " + both + " && gzip -c " + b + " >> " + both).exit_code,
            0);
  EXPECT_EQ(Lines(both), (std::vector<std::string>{"one", "two", "three"}));
}

}  // namespace
}  // namespace prefixsim
