// Where run-time files are found (sim/util/data_dir.h): $PREFIXSIM_CONFIG_DIR first, then the
// installed share/prefixsim next to the binary, then the source tree; a clear error otherwise.
#include "sim/util/data_dir.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "sim/plan/json_config.h"

namespace prefixsim {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// A fresh directory per test, and PREFIXSIM_CONFIG_DIR put back as it was.
class DataDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* env = std::getenv("PREFIXSIM_CONFIG_DIR")) saved_env_ = env;
    unsetenv("PREFIXSIM_CONFIG_DIR");
    root_ = fs::path(::testing::TempDir()) /
            ("data_dir_" + std::to_string(getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override {
    if (saved_env_) {
      setenv("PREFIXSIM_CONFIG_DIR", saved_env_->c_str(), 1);
    } else {
      unsetenv("PREFIXSIM_CONFIG_DIR");
    }
    fs::remove_all(root_);
  }
  static void Touch(const fs::path& path, const std::string& text = "{}") {
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text;
  }

  fs::path root_;
  std::optional<std::string> saved_env_;
};

TEST_F(DataDirTest, EnvironmentVariableWinsOverInstalledAndSourceTrees) {
  const fs::path env = root_ / "env";
  const fs::path exe = root_ / "prefix/bin/prefixsim";
  // The same relative path in all three roots: the source tree has llama-3.1-8b.json already.
  Touch(env / "configs/models/llama-3.1-8b.json");
  Touch(root_ / "prefix/share/prefixsim/configs/models/llama-3.1-8b.json");
  setenv("PREFIXSIM_CONFIG_DIR", env.c_str(), 1);

  const auto roots = DataDirsFor(exe);
  ASSERT_EQ(roots.size(), 3u);
  EXPECT_EQ(roots[0], env);
  EXPECT_EQ(roots[1], root_ / "prefix/share/prefixsim");
  EXPECT_EQ(roots[2], fs::path(PREFIXSIM_SOURCE_DIR));
  auto found = FindDataFileIn("configs/models/llama-3.1-8b.json", roots);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, env / "configs/models/llama-3.1-8b.json");

  // Preset names resolve through it too, for the running test binary.
  auto preset = ResolvePresetPath("llama-3.1-8b", "models");
  ASSERT_TRUE(preset.ok()) << preset.status();
  EXPECT_EQ(fs::path(*preset), env / "configs/models/llama-3.1-8b.json");
  EXPECT_THAT(PresetNames("models"), ::testing::Contains("llama-3.1-8b"));
}

TEST_F(DataDirTest, EmptyEnvironmentVariableIsIgnored) {
  setenv("PREFIXSIM_CONFIG_DIR", "", 1);
  const auto roots = DataDirsFor(root_ / "bin/prefixsim");
  ASSERT_EQ(roots.size(), 2u);
  EXPECT_EQ(roots[0], root_ / "share/prefixsim");
}

TEST_F(DataDirTest, InstalledLayoutNextToTheBinary) {
  // cmake --install: <prefix>/bin/prefixsim and <prefix>/share/prefixsim/{configs,scripts}.
  const fs::path prefix = root_ / "prefix";
  Touch(prefix / "share/prefixsim/configs/models/installed-only.json");
  Touch(prefix / "share/prefixsim/scripts/slurm/sweep.sbatch", "#!/bin/bash\n");
  const auto roots = DataDirsFor(prefix / "bin/prefixsim");

  auto model = FindDataFileIn("configs/models/installed-only.json", roots);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(*model, prefix / "share/prefixsim/configs/models/installed-only.json");
  auto script = FindDataFileIn("scripts/slurm/sweep.sbatch", roots);
  ASSERT_TRUE(script.ok()) << script.status();
  EXPECT_EQ(*script, prefix / "share/prefixsim/scripts/slurm/sweep.sbatch");
  // A file only the source tree has is still found there.
  auto source = FindDataFileIn("configs/engines/h200.json", roots);
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_EQ(*source, fs::path(PREFIXSIM_SOURCE_DIR) / "configs/engines/h200.json");
}

TEST_F(DataDirTest, NotFoundNamesEveryPlaceLookedIn) {
  const fs::path env = root_ / "env";
  fs::create_directories(env);
  setenv("PREFIXSIM_CONFIG_DIR", env.c_str(), 1);
  const auto roots = DataDirsFor(root_ / "prefix/bin/prefixsim");
  auto found = FindDataFileIn("configs/models/no-such-model.json", roots);
  ASSERT_FALSE(found.ok());
  EXPECT_EQ(found.status().code(), absl::StatusCode::kNotFound);
  const std::string message(found.status().message());
  EXPECT_THAT(message, HasSubstr("configs/models/no-such-model.json"));
  EXPECT_THAT(message, HasSubstr(env.string()));
  EXPECT_THAT(message, HasSubstr((root_ / "prefix/share/prefixsim").string()));
  EXPECT_THAT(message, HasSubstr(PREFIXSIM_SOURCE_DIR));
  EXPECT_THAT(message, HasSubstr("PREFIXSIM_CONFIG_DIR"));

  // An unknown preset name says where its configs/<kind>/ directories were.
  auto preset = ResolvePresetPath("no-such-model", "models");
  ASSERT_FALSE(preset.ok());
  EXPECT_THAT(preset.status().message(), HasSubstr("looked in " + (env / "configs").string()));
  EXPECT_THAT(preset.status().message(),
              HasSubstr((fs::path(PREFIXSIM_SOURCE_DIR) / "configs").string()));
}

}  // namespace
}  // namespace prefixsim
