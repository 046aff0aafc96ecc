// The measured cost model (sim/cost/measured.cc) on the SYNTHETIC kernel CSV of tests/data/kernels
// (made by its make_synthetic.py from the committed grid; nothing in it was measured).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "prefixsim/kv_plan.h"
#include "sim/cost/cost_model.h"
#include "sim/cost/measured.h"
#include "tests/cli_runner.h"

namespace prefixsim {
namespace {

const std::string kCsvPath =
    std::string(PREFIXSIM_SOURCE_DIR) + "/tests/data/kernels/synthetic_kimi_old_new.csv";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// time_us of the CSV row that starts with `prefix` (op,policies,kind,...) and ends its grid
// columns with batch,q_tokens,context; read from the text, not through the parser under test.
double RowTime(const std::string& csv, const std::string& op, const std::string& kind, int block,
               int batch, int q, int64_t ctx) {
  std::istringstream in(csv);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(op + ",", 0) != 0) continue;
    std::vector<std::string> f;
    std::stringstream ls(line);
    for (std::string x; std::getline(ls, x, ',');) f.push_back(x);
    if (f[2] == kind && std::stoi(f[3]) == block && std::stoi(f[15]) == batch &&
        std::stoi(f[16]) == q && std::stoll(f[17]) == ctx) {
      return std::stod(f[20]);
    }
  }
  ADD_FAILURE() << "no row " << op << " " << kind << " " << block << " " << batch << " " << q << " "
                << ctx;
  return 0;
}

struct Kimi {
  ModelSpec model;
  EngineConfig engine;
  KvPlan old_plan, new_plan;
};

Kimi LoadKimi() {
  Kimi k;
  k.model = *LoadModel("kimi-k3-like");
  k.engine = *LoadEngine("kimi-k3-dspark");
  k.old_plan = *ResolveKvPlan(k.model, k.engine, "old");
  k.new_plan = *ResolveKvPlan(k.model, k.engine, "new");
  return k;
}

// Layers of the plan's groups of `kind`.
int Layers(const KvPlan& plan, LayerKind kind) {
  int n = 0;
  for (const KvGroup& g : plan.groups) n += g.kind == kind ? g.num_layers : 0;
  return n;
}

TEST(MeasuredCostModelTest, ParsesTheSyntheticCsvAndKnowsItIsSynthetic) {
  auto times = ParseKernelCsv(ReadAll(kCsvPath), "synthetic.csv");
  ASSERT_TRUE(times.ok()) << times.status();
  EXPECT_TRUE(times->synthetic);
  EXPECT_DOUBLE_EQ(times->copy_bytes_per_s, 4e12);
  EXPECT_DOUBLE_EQ(times->gemm_flops_per_s, 7e14);
}

TEST(MeasuredCostModelTest, ReproducesGridPointsAsThePerGroupSum) {
  const std::string csv = ReadAll(kCsvPath);
  auto times = ParseKernelCsv(csv, "synthetic.csv");
  ASSERT_TRUE(times.ok()) << times.status();
  const Kimi k = LoadKimi();
  // 32 sequences verifying 1 + 3 tokens at 8192 tokens of context: no block boundary crossed.
  const std::vector<SeqWork> batch(32, SeqWork{4, 8192});
  for (const auto* plan : {&k.old_plan, &k.new_plan}) {
    const int swa_block = plan == &k.old_plan ? 1728 : 1536;
    const double expected =
        Layers(*plan, LayerKind::kMla) * (RowTime(csv, "mla_decode", "mla", 1536, 32, 4, 8192) +
                                          RowTime(csv, "append", "mla", 1536, 32, 4, 8192)) +
        Layers(*plan, LayerKind::kSlidingWindow) *
            (RowTime(csv, "decode", "sliding_window", swa_block, 32, 4, 8192) +
             RowTime(csv, "append", "sliding_window", swa_block, 32, 4, 8192)) +
        Layers(*plan, LayerKind::kMamba) * RowTime(csv, "state_step", "mamba", 1536, 32, 1, 1);
    auto us = KernelStepUs(*times, *plan, batch);
    ASSERT_TRUE(us.ok()) << us.status();
    EXPECT_NEAR(*us, expected, 1e-6 * expected) << plan->policy;
  }
}

TEST(MeasuredCostModelTest, InterpolatesBetweenBatchesAndContexts) {
  const std::string csv = ReadAll(kCsvPath);
  auto times = ParseKernelCsv(csv, "synthetic.csv");
  ASSERT_TRUE(times.ok());
  const Kimi k = LoadKimi();
  // The sliding-window group alone.
  KvPlan swa = k.old_plan;
  std::erase_if(swa.groups, [](const KvGroup& g) { return g.kind != LayerKind::kSlidingWindow; });
  ASSERT_EQ(swa.groups.size(), 1u);
  swa.groups[0].num_layers = 1;
  auto decode = [&](int b, int64_t c) {
    return RowTime(csv, "decode", "sliding_window", 1728, b, 1, c);
  };
  auto append = [&](int rows) {
    return RowTime(csv, "append", "sliding_window", 1728, rows, 1, 8192);
  };
  // 48 sequences (between 32 and 64) at 6144 tokens (between 4096 and 8192): bilinear.
  const std::vector<SeqWork> batch(48, SeqWork{1, 6144});
  const double d =
      0.25 * (decode(32, 4096) + decode(32, 8192) + decode(64, 4096) + decode(64, 8192));
  const double a = 0.5 * (append(32) + append(64));
  auto us = KernelStepUs(*times, swa, batch);
  ASSERT_TRUE(us.ok()) << us.status();
  EXPECT_NEAR(*us, d + a, 1e-9 * (d + a));
  // Mixed contexts at one batch size use their mean (the kernels are near-linear in it).
  std::vector<SeqWork> mixed(32, SeqWork{1, 4096});
  for (int i = 0; i < 16; ++i) mixed[i].context_tokens = 12288;
  auto mixed_us = KernelStepUs(*times, swa, mixed);
  ASSERT_TRUE(mixed_us.ok());
  EXPECT_NEAR(*mixed_us, decode(32, 8192) + append(32), 1e-6);
}

TEST(MeasuredCostModelTest, PrefillChunksAndStateCopiesAtBlockBoundaries) {
  const std::string csv = ReadAll(kCsvPath);
  auto times = ParseKernelCsv(csv, "synthetic.csv");
  ASSERT_TRUE(times.ok());
  const Kimi k = LoadKimi();
  KvPlan mamba = k.new_plan;
  std::erase_if(mamba.groups, [](const KvGroup& g) { return g.kind != LayerKind::kMamba; });
  for (KvGroup& g : mamba.groups) g.num_layers = 1;
  mamba.groups.resize(1);
  // One sequence crosses 1536 (1530 -> 1540), one does not.
  const std::vector<SeqWork> batch = {{10, 1540}, {1, 100}};
  auto us = KernelStepUs(*times, mamba, batch);
  ASSERT_TRUE(us.ok());
  EXPECT_NEAR(*us,
              RowTime(csv, "state_step", "mamba", 1536, 1, 1, 1) +
                  (RowTime(csv, "state_step", "mamba", 1536, 8, 1, 1) -
                   RowTime(csv, "state_step", "mamba", 1536, 1, 1, 1)) /
                      7.0 +
                  RowTime(csv, "state_copy", "mamba", 1536, 1, 1, 1),
              1e-6);
  // A 2048-token chunk after 8192 tokens is the prefill row itself (+ its 2048-row append).
  KvPlan swa = k.new_plan;
  std::erase_if(swa.groups, [](const KvGroup& g) { return g.kind != LayerKind::kSlidingWindow; });
  swa.groups[0].num_layers = 1;
  auto prefill = KernelStepUs(*times, swa, std::vector<SeqWork>{{2048, 10240}});
  ASSERT_TRUE(prefill.ok());
  EXPECT_NEAR(*prefill,
              RowTime(csv, "prefill", "sliding_window", 1536, 1, 2048, 10240) +
                  RowTime(csv, "append", "sliding_window", 1536, 1, 2048, 8192),
              1e-6);
}

TEST(MeasuredCostModelTest, StepTimeAddsTheDensePartAtTheMeasuredRates) {
  const Kimi k = LoadKimi();
  CostModelConfig config;
  config.kind = "measured";
  config.table_path = kCsvPath;
  CostModelContext context{&k.new_plan, &k.model, &k.engine, 4e9};
  auto model = NewCostModel(config, context);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->name(), "measured");
  const std::vector<SeqWork> batch(64, SeqWork{4, 16384});
  auto times = ParseKernelCsv(ReadAll(kCsvPath), "s");
  ASSERT_TRUE(times.ok());
  const double kernel_s = *KernelStepUs(*times, k.new_plan, batch) * 1e-6;
  // 256 tokens: 2 x 4e9 x 256 / 4 FLOPs at 7e14 vs 2 x 4e9 / 4 weight bytes at 4e12.
  const double dense_s = std::max(2 * 4e9 * 256 / 4 / 7e14, 2 * 4e9 / 4 / 4e12);
  EXPECT_NEAR((*model)->StepTimeNs(batch), (kernel_s + dense_s + 2e-3) * 1e9, 2);
}

TEST(MeasuredCostModelTest, Errors) {
  const Kimi k = LoadKimi();
  std::string csv = ReadAll(kCsvPath);
  // A group whose page the CSV never measured.
  KvPlan odd = k.new_plan;
  for (KvGroup& g : odd.groups) {
    if (g.kind == LayerKind::kSlidingWindow) g.block_size = g.kernel_block_size = 1600;
  }
  auto times = ParseKernelCsv(csv, "s");
  ASSERT_TRUE(times.ok());
  auto missing = KernelStepUs(*times, odd, std::vector<SeqWork>{{1, 100}});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(std::string(missing.status().message()).find("block 1600"), std::string::npos);
  // A row whose kernel failed its check is refused.
  std::string failed = csv;
  failed.replace(failed.rfind(",1\n"), 3, ",0\n");
  auto refused = ParseKernelCsv(failed, "s");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(std::string(refused.status().message()).find("check"), std::string::npos);
  // The copy bandwidth is required.
  std::string no_copy = csv;
  no_copy.erase(no_copy.find("# copy_bytes_per_s"), no_copy.find('\n', no_copy.find("# copy_")) -
                                                        no_copy.find("# copy_bytes_per_s") + 1);
  EXPECT_FALSE(ParseKernelCsv(no_copy, "s").ok());
  // The engine file accepts the kind, and needs the table.
  CostModelConfig config;
  config.kind = "measured";
  CostModelContext context{&k.new_plan, &k.model, &k.engine, 0};
  EXPECT_FALSE(NewCostModel(config, context).ok());
}

TEST(MeasuredCostModelTest, CompareShowsTheKernelShareOfEachPolicy) {
  // kimi-k3-dspark with the measured model on the synthetic CSV.
  std::string engine =
      ReadAll(std::string(PREFIXSIM_SOURCE_DIR) + "/configs/engines/kimi-k3-dspark.json");
  const std::string analytic = R"("cost_model": {"kind": "analytic", "gpu": "h200"})";
  ASSERT_NE(engine.find(analytic), std::string::npos);
  engine.replace(engine.find(analytic), analytic.size(),
                 R"("cost_model": {"kind": "measured", "table": ")" + kCsvPath + "\"}");
  const std::string path =
      ::testing::TempDir() + "/" + std::to_string(getpid()) + "_measured_engine.json";
  {
    std::ofstream out(path);
    out << engine;
  }
  const auto r =
      prefixsim::testing::RunCli("compare --trace " + std::string(PREFIXSIM_SOURCE_DIR) +
                                 "/traces/sample_chat.jsonl --model kimi-k3-like --engine " + path +
                                 " --policies old,new --no-progress");
  std::remove(path.c_str());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const size_t at = r.output.find("kernel-time share of step time (measured cost model): old ");
  ASSERT_NE(at, std::string::npos) << r.output;
  EXPECT_NE(r.output.find("%, new ", at), std::string::npos) << r.output;
  // The analytic model prints no share.
  const auto plain = prefixsim::testing::RunCli(
      "compare --trace " + std::string(PREFIXSIM_SOURCE_DIR) +
      "/traces/sample_chat.jsonl --model kimi-k3-like --engine kimi-k3-dspark --no-progress");
  EXPECT_EQ(plain.output.find("kernel-time share"), std::string::npos);
}

}  // namespace
}  // namespace prefixsim
