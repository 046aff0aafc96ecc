// The public headers are the contract an embedder builds against (docs/embedding.md): they carry
// no macros and no pointers into the implementation or the CLI, and the guide lists each one.
// The library's own words about options name option fields, never the CLI's flags
// (sim/util/option_names.h).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace prefixsim {
namespace {

namespace fs = std::filesystem;

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<fs::path> Files(const fs::path& dir, bool recursive) {
  std::vector<fs::path> out;
  auto add = [&](const fs::directory_entry& e) {
    const std::string ext = e.path().extension().string();
    if (e.is_regular_file() && (ext == ".h" || ext == ".cc")) out.push_back(e.path());
  };
  if (recursive) {
    for (const auto& e : fs::recursive_directory_iterator(dir)) add(e);
  } else {
    for (const auto& e : fs::directory_iterator(dir)) add(e);
  }
  return out;
}

TEST(PublicApiSurfaceTest, PublicHeadersHoldNoInternals) {
  const fs::path root(PREFIXSIM_SOURCE_DIR);
  static const std::regex kDefine(R"re(^\s*#\s*define\s+(\w+))re");
  static const std::regex kSimPath(R"re(\bsim/[a-z_]+)re");
  static const std::regex kFlag(R"re((^|[\s(`"])--[a-z][a-z0-9-]+)re");
  static const std::regex kIssue(R"re(\b[Ii]ssue\s+#?\d+)re");
  int headers = 0;
  for (const fs::path& file : Files(root / "include" / "prefixsim", /*recursive=*/false)) {
    ++headers;
    const std::string rel = fs::relative(file, root).string();
    std::ifstream in(file);
    int line = 0;
    for (std::string text; std::getline(in, text);) {
      ++line;
      std::smatch m;
      if (std::regex_search(text, m, kDefine)) {
        const std::string name = m[1].str();
        EXPECT_TRUE(name.size() > 2 && name.substr(name.size() - 2) == "H_")
            << rel << ":" << line << ": a public header defines macro " << name;
      }
      EXPECT_FALSE(std::regex_search(text, kSimPath))
          << rel << ":" << line
          << ": names a source file an installed user does not have: " << text;
      EXPECT_FALSE(std::regex_search(text, kFlag))
          << rel << ":" << line << ": names a CLI flag (name the field instead): " << text;
      EXPECT_FALSE(std::regex_search(text, kIssue))
          << rel << ":" << line << ": names an issue: " << text;
    }
  }
  EXPECT_GT(headers, 10);
}

TEST(PublicApiSurfaceTest, TheEmbeddingGuideListsEveryPublicHeader) {
  const fs::path root(PREFIXSIM_SOURCE_DIR);
  const std::string guide = ReadAll(root / "docs" / "embedding.md");
  for (const fs::path& file : Files(root / "include" / "prefixsim", /*recursive=*/false)) {
    const std::string name = absl::StrCat("`", file.filename().string(), "`");
    EXPECT_NE(guide.find(name), std::string::npos)
        << "docs/embedding.md's table of public headers lacks " << name;
  }
}

// A string of the library (sim/ outside sim/cli) that spells a flag (--max-requests) tells an
// embedder about a flag it never saw: it names the field (`max_requests`) and the front ends
// spell it (sim/run/option_flags.cc, the one table that knows the flags). Comments name fields
// too, so that a reader of the library meets the names its callers set.
TEST(PublicApiSurfaceTest, LibraryMessagesNameFieldsNotFlags) {
  const fs::path root(PREFIXSIM_SOURCE_DIR);
  static const std::regex kLiteral(R"re("((?:[^"\\]|\\.)*)")re");
  static const std::regex kFlag(R"re((^|[^-\w])--[a-z][a-z0-9-]+)re");
  int checked = 0;
  for (const fs::path& file : Files(root / "sim", /*recursive=*/true)) {
    const std::string rel = fs::relative(file, root).string();
    if (rel.rfind("sim/cli/", 0) == 0 || rel.rfind("sim/run/option_flags.", 0) == 0) continue;
    ++checked;
    std::ifstream in(file);
    int line = 0;
    for (std::string text; std::getline(in, text);) {
      ++line;
      std::string code = text;
      std::string comment;
      if (const size_t at = code.find("//"); at != std::string::npos) {
        comment = code.substr(at);
        code.resize(at);
      }
      for (auto it = std::sregex_iterator(code.begin(), code.end(), kLiteral);
           it != std::sregex_iterator(); ++it) {
        const std::string literal = (*it)[1].str();
        EXPECT_FALSE(std::regex_search(literal, kFlag))
            << rel << ":" << line << ": a library string names a CLI flag: \"" << literal
            << "\" (write the option's field in backticks: sim/util/option_names.h)";
      }
      EXPECT_FALSE(std::regex_search(comment, kFlag))
          << rel << ":" << line
          << ": a library comment names a CLI flag (name the field): " << comment;
    }
  }
  EXPECT_GT(checked, 100);
}

}  // namespace
}  // namespace prefixsim
