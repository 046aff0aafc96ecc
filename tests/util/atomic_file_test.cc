#include "sim/util/atomic_file.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace prefixsim {
namespace {

namespace fs = std::filesystem;

fs::path FreshFolder(const std::string& name) {
  fs::path dir =
      fs::path(::testing::TempDir()) / ("atomic_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::vector<std::string> Listing(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  return names;
}

std::string Read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

TEST(AtomicFileTest, WritesTheWholeFileAndNothingElse) {
  fs::path dir = FreshFolder("ok");
  const std::string path = (dir / "out.json").string();
  ASSERT_TRUE(WriteFileAtomically(path, "{\"a\": 1}\n").ok());
  EXPECT_EQ(Read(path), "{\"a\": 1}\n");
  ASSERT_TRUE(WriteFileAtomically(path, "{}\n").ok());  // replaces, never appends
  EXPECT_EQ(Read(path), "{}\n");
  EXPECT_EQ(Listing(dir), std::vector<std::string>{"out.json"});
  fs::remove_all(dir);
}

TEST(AtomicFileTest, AFailedWriteLeavesNoFileAndNoTempFile) {
  fs::path dir = FreshFolder("fail");
  const std::string path = (dir / "report.csv").string();
  {
    auto file = AtomicFileWriter::Open(path);
    ASSERT_TRUE(file.ok());
    // Half the report is out when the run fails: the writer goes away without a Commit().
    (*file)->stream() << "policy,hit_rate\nold,0.5\n";
  }
  EXPECT_TRUE(Listing(dir).empty());
  fs::remove_all(dir);
}

TEST(AtomicFileTest, AFailedWriteKeepsTheOldFileAsItWas) {
  fs::path dir = FreshFolder("keep");
  const std::string path = (dir / "out.html").string();
  ASSERT_TRUE(WriteFileAtomically(path, "old report").ok());
  {
    auto file = AtomicFileWriter::Open(path);
    ASSERT_TRUE(file.ok());
    (*file)->stream() << "new rep";
  }
  EXPECT_EQ(Read(path), "old report");
  EXPECT_EQ(Listing(dir), std::vector<std::string>{"out.html"});
  fs::remove_all(dir);
}

TEST(AtomicFileTest, UnwritableDestinationsAreErrorsWithoutLeftovers) {
  fs::path dir = FreshFolder("bad");
  // Renaming over a folder fails after the temp file was written: it must be cleaned up.
  fs::create_directory(dir / "taken");
  absl::Status over_folder = WriteFileAtomically((dir / "taken").string(), "x");
  EXPECT_FALSE(over_folder.ok());
  EXPECT_NE(std::string(over_folder.message()).find("taken"), std::string::npos);
  EXPECT_EQ(Listing(dir), std::vector<std::string>{"taken"});
  // A missing folder: nothing can be created at all.
  absl::Status missing = WriteFileAtomically((dir / "no" / "such.json").string(), "x");
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(missing.message()).find("cannot open for writing"), std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace prefixsim
