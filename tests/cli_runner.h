// Runs the prefixsim binary in tests and captures its output and exit code; reads the files it
// writes.
#ifndef PREFIXSIM_TESTS_CLI_RUNNER_H_
#define PREFIXSIM_TESTS_CLI_RUNNER_H_

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace prefixsim::testing {

struct CliResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// `args` is appended to the binary path as a shell command line.
inline CliResult RunCli(const std::string& args) {
  CliResult result;
  const std::string command = std::string(PREFIXSIM_BINARY) + " " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    result.output.append(buffer.data(), n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// The whole file as bytes ("" if it cannot be read).
inline std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A CSV the binary wrote (no quoted commas: the reports write none), one map per row from column
// name to cell; a short row's missing cells read "".
inline std::vector<std::map<std::string, std::string>> ReadCsvRows(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);
  std::vector<std::string> header;
  std::istringstream h(line);
  for (std::string cell; std::getline(h, cell, ',');) header.push_back(cell);
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(in, line)) {
    std::istringstream l(line);
    std::map<std::string, std::string> row;
    for (const std::string& name : header) {
      std::string cell;
      if (!std::getline(l, cell, ',')) cell.clear();
      row[name] = cell;
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

// A path in the test's temporary folder that other test processes running at the same time do
// not use: <TempDir>/<pid>_<name>.
inline std::string TempOutputPath(const std::string& name) {
  return ::testing::TempDir() + "/" + std::to_string(getpid()) + "_" + name;
}

// One replay of a sample trace in a parameterised test; `name` names the case and its outputs.
struct SampleReplayCase {
  const char* name;
  const char* trace;  // under traces/
  const char* args;
};

inline std::string SampleReplayCaseName(const ::testing::TestParamInfo<SampleReplayCase>& info) {
  return info.param.name;
}

// The command line of a deterministic, byte-comparable replay of a committed sample trace
// (traces/<trace>): fixed seed, no wall time, no progress lines; `args` picks model, engine,
// policy and outputs.
inline std::string SampleReplayArgs(const std::string& trace, const std::string& args, int seed) {
  return "replay --trace " + std::string(PREFIXSIM_SOURCE_DIR) + "/traces/" + trace + " " + args +
         " --seed " + std::to_string(seed) + " --no-wall-time --no-progress";
}

}  // namespace prefixsim::testing

#endif  // PREFIXSIM_TESTS_CLI_RUNNER_H_
