// The layers of docs/design.md §2, checked on the source: each folder of sim/ includes only the
// layers the table below allows, and the public headers include nothing internal. The build
// refuses sim/cli and CLI11 in the core library already (CMakeLists.txt, library_view); this
// test holds every other arrow of the graph, and that tests/ mirrors sim/.
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace prefixsim {
namespace {

namespace fs = std::filesystem;

// Layer -> the layers it may include besides itself (docs/design.md §2, the table there).
const std::map<std::string, std::set<std::string>>& AllowedLayers() {
  static const auto* kAllowed = new std::map<std::string, std::set<std::string>>{
      {"util", {}},
      {"plan", {"util"}},
      {"trace", {"util"}},
      {"kv", {"util"}},
      {"events", {"util", "kv"}},
      {"spec", {"util", "plan"}},
      {"cost", {"util", "plan"}},
      {"cuda", {"util", "plan"}},
      {"sched", {"util", "plan", "kv", "spec", "cost"}},
      {"engine", {"util", "plan", "trace", "kv", "spec", "cost", "sched"}},
      {"fleet", {"util", "plan", "trace", "kv", "spec", "cost", "sched", "engine"}},
      {"report", {"util", "plan", "trace", "kv", "spec", "cost", "sched", "engine", "fleet"}},
      {"analyze", {"util", "plan", "trace", "kv", "spec", "cost", "sched", "engine", "fleet"}},
      {"run",
       {"util", "plan", "trace", "kv", "spec", "cost", "sched", "engine", "fleet", "report",
        "analyze", "events"}},
      {"grid",
       {"util", "plan", "trace", "kv", "spec", "cost", "sched", "engine", "fleet", "report",
        "analyze", "run", "events"}},
      {"cli",
       {"util", "plan", "trace", "kv", "spec", "cost", "sched", "engine", "fleet", "report",
        "analyze", "run", "grid", "cuda", "events"}},
  };
  return *kAllowed;
}

struct Include {
  std::string file;  // relative to the repository
  int line = 0;
  std::string target;  // what is between the quotes or brackets
};

std::vector<Include> Includes(const fs::path& root, const fs::path& file) {
  static const std::regex kInclude(R"re(^\s*#\s*include\s*["<]([^">]+)[">])re");
  std::vector<Include> out;
  std::ifstream in(file);
  std::string text;
  int line = 0;
  while (std::getline(in, text)) {
    ++line;
    std::smatch m;
    if (std::regex_search(text, m, kInclude)) {
      out.push_back({fs::relative(file, root).string(), line, m[1].str()});
    }
  }
  return out;
}

// The sources under `dir` (recursively): .h, .cc, .cu, .cuh.
std::vector<fs::path> Sources(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string ext = e.path().extension().string();
    if (e.is_regular_file() && (ext == ".h" || ext == ".cc" || ext == ".cu" || ext == ".cuh")) {
      files.push_back(e.path());
    }
  }
  return files;
}

// "sim/<layer>/..." -> layer; anything else -> "".
std::string LayerOf(const std::string& include) {
  if (include.rfind("sim/", 0) != 0) return "";
  const size_t end = include.find('/', 4);
  return end == std::string::npos ? "" : include.substr(4, end - 4);
}

TEST(LayeringTest, EveryLayerIsInTheTable) {
  const fs::path sim = fs::path(PREFIXSIM_SOURCE_DIR) / "sim";
  for (const auto& e : fs::directory_iterator(sim)) {
    if (!e.is_directory()) continue;
    const std::string layer = e.path().filename().string();
    EXPECT_TRUE(AllowedLayers().contains(layer))
        << "sim/" << layer << "/ is not in the layer table (tests/docs/layering_test.cc and "
        << "docs/design.md §2): say what it may include";
  }
}

// tests/ mirrors sim/: a test lives in tests/<layer>/, <layer> being the sim/ folder of the code
// it mainly tests, so that a layer's tests are found under its name. These folders hold no
// layer's tests.
const std::set<std::string>& NonLayerTestFolders() {
  static const auto* kFolders = new std::set<std::string>{
      "data",      // inputs the tests read
      "docs",      // checks of the documentation and of the source tree (this file)
      "fuzz",      // libFuzzer targets, their corpora and the regressions they found
      "golden",    // golden end-to-end outputs
      "mutation",  // the mutants of scripts/mutate.py
      "python",    // the Python module's tests (python/, beside sim/)
      "slurm",     // the real-Slurm round trip
      "soak",      // the million-request soak
  };
  return *kFolders;
}

TEST(LayeringTest, TestFoldersMirrorTheLayers) {
  const fs::path root(PREFIXSIM_SOURCE_DIR);
  int folders = 0;
  for (const auto& e : fs::directory_iterator(root / "tests")) {
    const std::string name = e.path().filename().string();
    if (!e.is_directory()) {
      EXPECT_FALSE(name.ends_with("_test.cc"))
          << "tests/" << name << " is in no layer's folder: move it to tests/<layer>/, the sim/ "
          << "folder of the code it tests";
      continue;
    }
    ++folders;
    EXPECT_TRUE(fs::is_directory(root / "sim" / name) || NonLayerTestFolders().contains(name))
        << "tests/" << name << "/ is neither a folder of sim/ nor one of the folders that hold no "
        << "layer's tests (NonLayerTestFolders in tests/docs/layering_test.cc): move its tests to "
        << "tests/<layer>/, the sim/ folder of the code they test";
  }
  EXPECT_GT(folders, 10);  // the walk found the folders
}

TEST(LayeringTest, LayersIncludeOnlyTheLayersBelowThem) {
  const fs::path root(PREFIXSIM_SOURCE_DIR);
  int checked = 0;
  for (const auto& [layer, allowed] : AllowedLayers()) {
    const fs::path dir = root / "sim" / layer;
    if (!fs::is_directory(dir)) continue;
    for (const fs::path& file : Sources(dir)) {
      for (const Include& inc : Includes(root, file)) {
        const std::string target = LayerOf(inc.target);
        if (target.empty()) continue;
        ++checked;
        EXPECT_TRUE(target == layer || allowed.contains(target))
            << inc.file << ":" << inc.line << ": sim/" << layer << " includes " << inc.target
            << " (sim/" << target << " is not below sim/" << layer << ", docs/design.md §2)";
        if (layer != "cli") {
          EXPECT_NE(inc.target.rfind("CLI/", 0), 0u)
              << inc.file << ":" << inc.line << ": CLI11 outside sim/cli";
        }
      }
    }
  }
  EXPECT_GT(checked, 100);  // the walk found the sources
}

TEST(LayeringTest, PublicHeadersIncludeNothingInternal) {
  const fs::path root(PREFIXSIM_SOURCE_DIR);
  int headers = 0;
  for (const fs::path& file : Sources(root / "include" / "prefixsim")) {
    ++headers;
    for (const Include& inc : Includes(root, file)) {
      EXPECT_NE(inc.target.rfind("sim/", 0), 0u)
          << inc.file << ":" << inc.line << ": a public header includes " << inc.target;
      EXPECT_NE(inc.target.rfind("CLI/", 0), 0u)
          << inc.file << ":" << inc.line << ": a public header includes " << inc.target;
      EXPECT_NE(inc.target.rfind("nlohmann/", 0), 0u)
          << inc.file << ":" << inc.line << ": a public header includes " << inc.target;
    }
  }
  EXPECT_GT(headers, 5);
}

// The library reports through Status, results and callbacks; only the CLI and programs of their
// own (a file with a main) print. Aborting on a broken invariant (PREFIXSIM_CHECK) is not
// printing.
TEST(LayeringTest, TheLibraryPrintsNothing) {
  const fs::path root(PREFIXSIM_SOURCE_DIR);
  static const std::regex kPrint(
      R"re(\b(printf|fprintf|puts|fputs|perror)\s*\(|std::(cout|cerr|clog)\b)re");
  static const std::regex kMain(R"re(^\s*int\s+main\s*\()re");
  int checked = 0;
  for (const fs::path& file : Sources(root / "sim")) {
    const std::string rel = fs::relative(file, root).string();
    // The CLI prints; PREFIXSIM_CHECK's abort of a broken invariant is not printing.
    if (rel.rfind("sim/cli/", 0) == 0 || rel == "sim/util/status_macros.h") continue;
    std::ifstream in(file);
    std::vector<std::string> lines;
    bool has_main = false;
    for (std::string l; std::getline(in, l);) {
      has_main = has_main || std::regex_search(l, kMain);
      lines.push_back(l);
    }
    if (has_main) continue;
    ++checked;
    for (size_t i = 0; i < lines.size(); ++i) {
      const std::string code = lines[i].substr(0, lines[i].find("//"));
      EXPECT_FALSE(std::regex_search(code, kPrint)) << rel << ":" << i + 1 << ": " << lines[i];
    }
  }
  EXPECT_GT(checked, 100);
}

}  // namespace
}  // namespace prefixsim
