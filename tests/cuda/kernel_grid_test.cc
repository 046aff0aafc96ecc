// The kernel grid (sim/cuda/kernel_grid.h, grid_builder.h) and `prefixsim kernel-bench`.
#include "sim/cuda/kernel_grid.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "prefixsim/kv_plan.h"
#include "sim/cuda/grid_builder.h"
#include "tests/cli_runner.h"

namespace prefixsim::cuda {
namespace {

using ::prefixsim::testing::ReadFile;
using ::prefixsim::testing::RunCli;

struct Kimi {
  ModelSpec model;
  EngineConfig engine;
  std::vector<KvPlan> plans;
};

Kimi LoadKimi() {
  Kimi k;
  auto model = LoadModel("kimi-k3-like");
  auto engine = LoadEngine("kimi-k3-dspark");
  EXPECT_TRUE(model.ok() && engine.ok());
  k.model = *model;
  k.engine = *engine;
  for (const char* policy : {"old", "new"}) {
    auto plan = ResolveKvPlan(k.model, k.engine, policy);
    EXPECT_TRUE(plan.ok()) << plan.status();
    k.plans.push_back(*plan);
  }
  return k;
}

TEST(KernelGridTest, FormatAndParseRoundTrip) {
  GridPoint p;
  p.op = KernelOp::kPrefill;
  p.policies = "old+new";
  p.kind = "sliding_window";
  p.block_size = 1728;
  p.kernel_block_size = 1728;
  p.page_bytes = 1769472;
  p.num_layers = 5;
  p.elem_bytes = 1;
  p.q_heads = 32;
  p.kv_heads = 4;
  p.k_dim = p.v_dim = 128;
  p.window = 4096;
  p.batch = 1;
  p.q_tokens = 512;
  p.context = 8192;
  const std::string text = "# c\n" + FormatGridHeader() + "\n" + FormatGridPoint(p) + "\n";
  std::vector<GridPoint> points;
  std::vector<std::string> comments;
  std::string error;
  ASSERT_TRUE(ParseGridFile(text, &points, &comments, &error)) << error;
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(FormatGridPoint(points[0]), FormatGridPoint(p));
  EXPECT_EQ(comments, std::vector<std::string>{"# c"});
}

TEST(KernelGridTest, ParseNamesTheBadLine) {
  std::vector<GridPoint> points;
  std::vector<std::string> comments;
  std::string error;
  EXPECT_FALSE(ParseGridFile("op,batch\n", &points, &comments, &error));
  EXPECT_NE(error.find("header"), std::string::npos);
  const std::string head = FormatGridHeader() + "\n";
  EXPECT_FALSE(ParseGridFile(head + "decode,new,mla,1,1,1,1,2,1,1,1,1,0,0,0,1,1\n", &points,
                             &comments, &error));
  EXPECT_NE(error.find("line 2"), std::string::npos) << error;
  EXPECT_FALSE(ParseGridFile(head + "warp,new,mla,1,1,1,1,2,1,1,1,1,0,0,0,1,1,1\n", &points,
                             &comments, &error));
  EXPECT_NE(error.find("unknown op"), std::string::npos);
  EXPECT_FALSE(ParseGridFile(head + "decode,new,mla,1,1,1,1,2,1,1,1,1,0,0,0,1,5,4\n", &points,
                             &comments, &error));
  EXPECT_NE(error.find("q_tokens"), std::string::npos);
}

TEST(KernelGridTest, KimiOldAndNewHaveTheirSlidingWindowPagesAndShareMla) {
  const Kimi k = LoadKimi();
  GridAxes axes;
  auto grid = BuildKernelGrid(k.model, k.engine, k.plans, axes);
  ASSERT_TRUE(grid.ok()) << grid.status();
  std::set<std::string> shapes;
  bool swa_1728_old = false, swa_1536_new = false, mla_shared = false, state = false;
  for (const GridPoint& p : grid->points) {
    if (p.kind == "sliding_window" && p.op == KernelOp::kDecode) {
      EXPECT_EQ(p.page_bytes, 1769472);
      EXPECT_EQ(p.elem_bytes, 1);  // the drafter's fp8 KV
      EXPECT_EQ(p.window, 4096);
      EXPECT_EQ(p.kv_heads, 4);
      EXPECT_EQ(p.q_heads, 32);
      swa_1728_old |= p.block_size == 1728 && p.policies == "old";
      swa_1536_new |= p.block_size == 1536 && p.policies == "new";
    }
    if (p.kind == "mla" && p.op == KernelOp::kMlaDecode) {
      EXPECT_EQ(p.k_dim, 576);
      EXPECT_EQ(p.v_dim, 512);
      EXPECT_EQ(p.kernel_block_size, 64);
      EXPECT_EQ(p.num_layers, 24);  // summed over the plan's MLA groups
      mla_shared |= p.policies == "old+new" && p.block_size == 1536;
    }
    state |= p.op == KernelOp::kStateStep && p.state_bytes == 1740800;
  }
  EXPECT_TRUE(swa_1728_old);
  EXPECT_TRUE(swa_1536_new);
  EXPECT_TRUE(mla_shared);
  EXPECT_TRUE(state);
  // Speculative widths 0 and 3: decode points with 1 and 4 query tokens.
  std::set<int> q;
  for (const GridPoint& p : grid->points) {
    if (p.op == KernelOp::kDecode) q.insert(p.q_tokens);
  }
  EXPECT_EQ(q, (std::set<int>{1, 4}));
}

TEST(KernelGridTest, CommittedGridIsWhatTheCommandEmits) {
  // bench/cuda/grid_kimi_old_new.txt is what the device run measures; it must not drift from the
  // plans.
  const std::filesystem::path out =
      std::filesystem::temp_directory_path() / ("kernel_grid_" + std::to_string(getpid()));
  const auto r = RunCli(
      "kernel-bench --model kimi-k3-like --engine kimi-k3-dspark --policies "
      "old,new --emit-grid " +
      out.string() + " --dry-run");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::string emitted = ReadFile(out);
  std::filesystem::remove(out);
  std::string committed =
      ReadFile(std::string(PREFIXSIM_SOURCE_DIR) + "/bench/cuda/grid_kimi_old_new.txt");
  // The engine's path differs between checkouts: compare from the first non-comment line.
  auto body = [](const std::string& s) { return s.substr(s.find("\nop,") + 1); };
  ASSERT_NE(committed.find("\nop,"), std::string::npos);
  EXPECT_EQ(body(emitted), body(committed))
      << "regenerate: ./build/prefixsim kernel-bench --model kimi-k3-like --engine kimi-k3-dspark "
         "--policies old,new --emit-grid bench/cuda/grid_kimi_old_new.txt --dry-run, then "
         "tests/data/kernels/make_synthetic.py (its header says how)";
}

TEST(KernelBenchCliTest, DryRunListsTheGridAndARealRunWithoutAGpuFails) {
  auto dry = RunCli("kernel-bench --model kimi-k3-like --engine kimi-k3-dspark --dry-run");
  EXPECT_EQ(dry.exit_code, 0) << dry.output;
  EXPECT_NE(dry.output.find("decode,old,sliding_window,1728,1728,1769472"), std::string::npos);
  EXPECT_NE(dry.output.find("decode,new,sliding_window,1536,1536,1769472"), std::string::npos);
  EXPECT_NE(dry.output.find("mla_decode,old+new,mla,1536,64,1769472"), std::string::npos);
  // Real run: no kernels in this build, or (CUDA build) no device on the CI machines.
  const std::filesystem::path csv =
      std::filesystem::temp_directory_path() / ("kernels_" + std::to_string(getpid()) + ".csv");
  auto real =
      RunCli("kernel-bench --model kimi-k3-like --engine kimi-k3-dspark --out " + csv.string());
  if (real.output.find("device:") != std::string::npos) {
    GTEST_SKIP() << "a GPU is present: the real run is the device script's business";
  }
  EXPECT_EQ(real.exit_code, 1) << real.output;
  EXPECT_NE(real.output.find("CUDA"), std::string::npos) << real.output;
  std::filesystem::remove(csv);
}

TEST(KernelBenchCliTest, BadAxisIsRejected) {
  auto r = RunCli(
      "kernel-bench --model kimi-k3-like --engine kimi-k3-dspark --batches 8,x "
      "--dry-run");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--batches"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace prefixsim::cuda
