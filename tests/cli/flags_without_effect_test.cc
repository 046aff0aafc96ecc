// A flag that the rest of the command line leaves without effect is never silently dropped: where
// it only makes sense beside another flag (a publisher's settings without the publisher, a Slurm
// option without --slurm) the command is refused with exit 2 before anything runs, naming both
// flags; where the engine's fleet decides (a router weight on a router that weighs nothing, an SLO
// on a fleet of a given size) the run goes on, with a warning, and its report is the one without
// the flag.
#include <gtest/gtest.h>

#include <ostream>
#include <string>

#include "tests/cli_runner.h"

namespace prefixsim {
namespace {

using ::prefixsim::testing::ReadFile;
using ::prefixsim::testing::RunCli;
using ::prefixsim::testing::TempOutputPath;

const std::string kChat = std::string(PREFIXSIM_SOURCE_DIR) + "/traces/sample_chat.jsonl";
const std::string kReplay = "replay --trace " + kChat +
                            " --model kimi-k3-like --engine kimi-k3-dspark --no-progress "
                            "--no-wall-time";

struct RefusedCase {
  const char* name;
  std::string args;
  const char* message;  // what CLI11 or the command prints
};

void PrintTo(const RefusedCase& c, std::ostream* os) { *os << c.args; }

class RefusedFlagTest : public ::testing::TestWithParam<RefusedCase> {};

TEST_P(RefusedFlagTest, ExitsTwoNamingTheFlags) {
  const RefusedCase& c = GetParam();
  const auto r = RunCli(c.args);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(c.message), std::string::npos) << r.output;
}

const std::string kGrid = std::string(PREFIXSIM_SOURCE_DIR) + "/tests/data/grid/small.json";
const std::string kSweep = "sweep --grid " + kGrid + " --out " + TempOutputPath("sweep_refused");

INSTANTIATE_TEST_SUITE_P(
    Commands, RefusedFlagTest,
    ::testing::Values(
        // vLLM's ZMQ publisher's settings (docs/kv-events.md) without --kv-events-zmq.
        RefusedCase{"Topic", kReplay + " --kv-events-topic kv",
                    "--kv-events-topic requires --kv-events-zmq"},
        RefusedCase{"Replay", kReplay + " --kv-events-replay tcp://127.0.0.1:1",
                    "--kv-events-replay requires --kv-events-zmq"},
        RefusedCase{"WaitSubscribers", kReplay + " --kv-events-wait-subscribers 1",
                    "--kv-events-wait-subscribers requires --kv-events-zmq"},
        RefusedCase{"WaitTimeout", kReplay + " --kv-events-wait-timeout 5",
                    "--kv-events-wait-timeout requires --kv-events-zmq"},
        RefusedCase{"Linger", kReplay + " --kv-events-linger 1",
                    "--kv-events-linger requires --kv-events-zmq"},
        RefusedCase{"Realtime", kReplay + " --realtime", "--realtime requires --kv-events-zmq"},
        RefusedCase{"Speedup", kReplay + " --speedup 2", "--speedup requires --realtime"},
        RefusedCase{"EventsFormat", kReplay + " --kv-events-format jsonl",
                    "--kv-events-format requires --kv-events"},
        RefusedCase{"CompareEventsFormat",
                    "compare --trace " + kChat +
                        " --model kimi-k3-like --engine kimi-k3-dspark --kv-events-format jsonl",
                    "--kv-events-format requires --kv-events"},
        // Contradictions: which one wins would be a guess.
        RefusedCase{"NoSpecWithDraftTokens", kReplay + " --no-spec --num-speculative-tokens 3",
                    "excludes --no-spec"},
        RefusedCase{"NoSpecWithMethod", kReplay + " --no-spec --speculative-method mtp",
                    "excludes --no-spec"},
        RefusedCase{"MissCausesBoundWithout",
                    kReplay + " --no-miss-causes --miss-causes-memory-mb 8",
                    "--no-miss-causes excludes --miss-causes-memory-mb"},
        // --submit alone would run the whole grid here, not on the cluster.
        RefusedCase{"Submit", kSweep + " --submit", "--submit requires --slurm"},
        RefusedCase{"Shards", kSweep + " --shards 2", "--shards requires --slurm"},
        RefusedCase{"SbatchArgs", kSweep + " --sbatch-args=-pshort",
                    "--sbatch-args requires --slurm"},
        // The array's tasks shard the grid and size their jobs themselves.
        RefusedCase{"SlurmShard", kSweep + " --slurm --shard 0/2", "excludes --slurm"},
        RefusedCase{"SlurmJobs", kSweep + " --slurm --jobs 2", "excludes --slurm"},
        RefusedCase{"RegressUpdateFormat",
                    "regress --suite " + kGrid + " --baseline " + TempOutputPath("baseline.json") +
                        " --update --format junit",
                    "--update excludes --format"},
        RefusedCase{"RegressUpdateOutput",
                    "regress --suite " + kGrid + " --baseline " + TempOutputPath("baseline.json") +
                        " --update --output " + TempOutputPath("report.txt"),
                    "--update excludes --output"},
        RefusedCase{"AnalyzeSeedWithoutSample", "analyze --trace " + kChat + " --seed 3",
                    "--seed requires --session-sample"},
        RefusedCase{"AnalyzeNoCurveCapacities",
                    "analyze --trace " + kChat + " --no-capacity-curve --capacity-blocks 64",
                    "excludes --no-capacity-curve"},
        RefusedCase{"KernelBenchDryRunOut",
                    "kernel-bench --model kimi-k3-like --engine kimi-k3-dspark --dry-run --out " +
                        TempOutputPath("kernels.csv"),
                    "--dry-run excludes --out"},
        RefusedCase{"KernelBenchDryRunBudget",
                    "kernel-bench --model kimi-k3-like --engine kimi-k3-dspark --dry-run "
                    "--time-budget-s 5",
                    "--dry-run excludes --time-budget-s"},
        RefusedCase{
            "GenTraceTokensBlockTokens",
            "gen-trace --out " + TempOutputPath("gen.jsonl") + " --format tokens --block-tokens 64",
            "--block-tokens sets the tokens per hash id of --format mooncake"}),
    [](const ::testing::TestParamInfo<RefusedCase>& info) { return std::string(info.param.name); });

// The fleet decides whether these flags are read: the run goes on, says the flag did nothing,
// and reports exactly what it reports without it.
struct IgnoredCase {
  const char* name;
  const char* fleet;  // the fleet's flags
  const char* flag;
  const char* warning;
};

void PrintTo(const IgnoredCase& c, std::ostream* os) { *os << c.fleet << " " << c.flag; }

class IgnoredFleetFlagTest : public ::testing::TestWithParam<IgnoredCase> {};

TEST_P(IgnoredFleetFlagTest, WarnsAndReportsTheRunWithoutIt) {
  const IgnoredCase& c = GetParam();
  const std::string name = c.name;
  const std::string without = TempOutputPath(name + "_without.json");
  const std::string with = TempOutputPath(name + "_with.json");
  const auto a = RunCli(kReplay + " " + c.fleet + " --json " + without);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_EQ(a.output.find(c.warning), std::string::npos) << a.output;
  const auto b = RunCli(kReplay + " " + c.fleet + " " + c.flag + " --json " + with);
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_NE(b.output.find(c.warning), std::string::npos) << b.output;
  EXPECT_EQ(ReadFile(with), ReadFile(without));
}

INSTANTIATE_TEST_SUITE_P(
    Fleets, IgnoredFleetFlagTest,
    ::testing::Values(
        IgnoredCase{"WeightOnRoundRobin", "--replicas 2 --router round_robin", "--overlap-weight 4",
                    "--overlap-weight does nothing with router round_robin (read by kv_aware, "
                    "kv_aware_unaligned)"},
        IgnoredCase{"WeightOnOneReplica", "", "--overlap-weight 4",
                    "--overlap-weight routes nothing on one replica"},
        IgnoredCase{"SloOnAGivenFleet", "--replicas 2 --router kv_aware", "--ttft-slo-ms 100",
                    "--ttft-slo-ms sizes --replicas auto and does nothing on a fleet of a given "
                    "size (2 replicas)"}),
    [](const ::testing::TestParamInfo<IgnoredCase>& info) { return std::string(info.param.name); });

// Where the fleet reads them, the same flags change the run and draw no warning.
TEST(FleetFlagTest, AWeightOnAKvAwareFleetIsReadWithoutAWarning) {
  const std::string light = TempOutputPath("weight_light.json");
  const std::string heavy = TempOutputPath("weight_heavy.json");
  const std::string fleet = kReplay + " --replicas 2 --router kv_aware";
  const auto a = RunCli(fleet + " --overlap-weight 0 --json " + light);
  const auto b = RunCli(fleet + " --overlap-weight 100 --json " + heavy);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_EQ(a.output.find("warning"), std::string::npos) << a.output;
  EXPECT_EQ(b.output.find("warning"), std::string::npos) << b.output;
  EXPECT_NE(ReadFile(light), ReadFile(heavy));
}

}  // namespace
}  // namespace prefixsim
