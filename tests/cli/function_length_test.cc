// Keeps the CLI thin: no top-level function in sim/cli/*.cc is longer than kMaxFunctionLines, a
// lambda counting toward the function it is written in. A command is its flag registration plus a
// Run function built from named steps (docs/design.md §4.1); a function that grows past the limit
// is a step waiting to be named.
//
// clang-format (Google style) puts the closing brace of a top-level function alone at column 0
// and closes a namespace with "}  // namespace ...", so a line that is exactly "}" ends a
// function. Its opening brace is found by matching braces outside comments, string and character
// literals; the function starts at the line at column 0 above that brace (its signature).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace prefixsim {
namespace {

namespace fs = std::filesystem;

constexpr int kMaxFunctionLines = 100;

struct FunctionSpan {
  int first_line = 0;  // 1-based: the signature's first line
  int last_line = 0;   // the closing "}"
  int length() const { return last_line - first_line + 1; }
};

std::vector<std::string> ReadLines(const fs::path& file) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The line (0-based) of every '{' and '}' of `lines` that is code: comments, string literals
// (raw ones included) and character literals are skipped.
struct Brace {
  int line = 0;
  bool open = false;
};

std::vector<Brace> CodeBraces(const std::vector<std::string>& lines) {
  std::vector<Brace> braces;
  bool in_block_comment = false;
  std::string raw_string_end;  // ")delim\"" while inside a raw string literal
  for (int n = 0; n < static_cast<int>(lines.size()); ++n) {
    const std::string& s = lines[n];
    for (size_t i = 0; i < s.size(); ++i) {
      if (!raw_string_end.empty()) {
        const size_t end = s.find(raw_string_end, i);
        if (end == std::string::npos) break;
        i = end + raw_string_end.size() - 1;
        raw_string_end.clear();
        continue;
      }
      if (in_block_comment) {
        const size_t end = s.find("*/", i);
        if (end == std::string::npos) break;
        i = end + 1;
        in_block_comment = false;
        continue;
      }
      const char c = s[i];
      const char next = i + 1 < s.size() ? s[i + 1] : '\0';
      if (c == '/' && next == '/') break;
      if (c == '/' && next == '*') {
        in_block_comment = true;
        ++i;
      } else if (c == 'R' && next == '"' && (i == 0 || !std::isalnum(s[i - 1]))) {
        std::string delimiter;
        size_t paren = i + 2;
        for (; paren < s.size() && s[paren] != '('; ++paren) delimiter += s[paren];
        if (paren == s.size()) break;  // not a raw string literal after all
        raw_string_end = ')';
        raw_string_end += delimiter;
        raw_string_end += '"';
        i = paren;
      } else if (c == '"' || (c == '\'' && (i == 0 || !std::isxdigit(s[i - 1])))) {
        // A quote after a hex digit is a digit separator (1'000), not a character literal.
        for (++i; i < s.size() && s[i] != c; ++i) {
          if (s[i] == '\\') ++i;
        }
      } else if (c == '{' || c == '}') {
        braces.push_back({n, c == '{'});
      }
    }
  }
  return braces;
}

std::vector<FunctionSpan> TopLevelFunctions(const std::vector<std::string>& lines) {
  std::vector<FunctionSpan> functions;
  std::vector<int> open_lines;
  for (const Brace& brace : CodeBraces(lines)) {
    if (brace.open) {
      open_lines.push_back(brace.line);
      continue;
    }
    if (open_lines.empty()) continue;
    int first = open_lines.back();
    open_lines.pop_back();
    if (lines[brace.line] != "}") continue;
    while (first > 0 && (lines[first].empty() || lines[first][0] == ' ')) --first;
    functions.push_back({first + 1, brace.line + 1});
  }
  return functions;
}

TEST(CliFunctionLengthTest, NoFunctionInSimCliIsOverTheLimit) {
  const fs::path cli = fs::path(PREFIXSIM_SOURCE_DIR) / "sim" / "cli";
  std::vector<fs::path> files;
  for (const fs::directory_entry& entry : fs::directory_iterator(cli)) {
    if (entry.path().extension() == ".cc") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty()) << cli;
  std::ostringstream too_long;
  int functions_seen = 0;
  for (const fs::path& file : files) {
    const std::vector<std::string> lines = ReadLines(file);
    for (const FunctionSpan& f : TopLevelFunctions(lines)) {
      ++functions_seen;
      if (f.length() <= kMaxFunctionLines) continue;
      too_long << "  sim/cli/" << file.filename().string() << ":" << f.first_line << ": "
               << f.length() << " lines: " << lines[f.first_line - 1] << "\n";
    }
  }
  // The scan found the functions at all (a misread file would pass vacuously).
  EXPECT_GT(functions_seen, 30);
  EXPECT_TRUE(too_long.str().empty())
      << "functions over " << kMaxFunctionLines << " lines (split them into named steps):\n"
      << too_long.str();
}

// The scanner itself, on a source whose braces hide in literals and comments.
TEST(CliFunctionLengthTest, ScannerSkipsBracesInLiteralsAndComments) {
  const std::vector<std::string> lines = {
      "namespace x {",                     // 1
      "void A() {",                        // 2
      "  const char* s = \"}\";  // }",    // 3
      "  char c = '{';",                   // 4
      "  auto f = [] { return 1'000; };",  // 5
      "  /* { */",                         // 6
      "}",                                 // 7
      "",                                  // 8
      "absl::StatusOr<int> B(int a,",      // 9
      "                      int b) {",    // 10
      "  std::string r = R\"({\")\";",     // 11
      "}",                                 // 12
      "}  // namespace x",                 // 13
  };
  const std::vector<FunctionSpan> functions = TopLevelFunctions(lines);
  ASSERT_EQ(functions.size(), 2u);
  EXPECT_EQ(functions[0].first_line, 2);
  EXPECT_EQ(functions[0].last_line, 7);
  EXPECT_EQ(functions[1].first_line, 9);
  EXPECT_EQ(functions[1].last_line, 12);
}

}  // namespace
}  // namespace prefixsim
