// `prefixsim kernel-bench`: the grid of kernel shapes a model and engine need under several
// block-size policies, and (in a CUDA build, on a GPU) their measured times (docs/cuda.md).
// The measuring is done by the standalone CUDA tool bench/cuda builds (prefixsim_kernel_bench),
// which needs nothing but the CUDA toolkit, so that it can be built on the device machine; this
// command writes its grid file and runs it.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "prefixsim/kv_plan.h"
#include "sim/cli/commands.h"
#include "sim/cli/common.h"
#include "sim/cli/exit_codes.h"
#include "sim/cuda/grid_builder.h"
#include "sim/util/status_macros.h"

namespace prefixsim::cli {
namespace {

template <typename T>
absl::Status ParseList(const std::string& text, std::string_view flag, std::vector<T>* out) {
  if (text.empty()) return absl::OkStatus();  // keep the default
  out->clear();
  for (const std::string& f : SplitCommaList(text)) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(f, &v) || v <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(std::string(flag), ": '", f, "' is not a positive integer"));
    }
    out->push_back(static_cast<T>(v));
  }
  std::sort(out->begin(), out->end());
  out->erase(std::unique(out->begin(), out->end()), out->end());
  return absl::OkStatus();
}

struct KernelBenchCommandOptions {
  ModelEngineOptions model_engine;
  std::string policies = "old,new";
  std::string batches, contexts, chunks;
  int q_heads_per_kv = 8;
  int mla_q_heads = 16;
  bool dry_run = false;
  std::string emit_grid;
  std::string out = "kernels.csv";
  double budget_s = 300;
};

#ifdef PREFIXSIM_KERNEL_BENCH_TOOL
constexpr bool kHaveKernels = true;
#else
constexpr bool kHaveKernels = false;
#endif

absl::StatusOr<cuda::GridAxes> ParseGridAxes(const KernelBenchCommandOptions& options) {
  cuda::GridAxes axes;
  PREFIXSIM_RETURN_IF_ERROR(ParseList(options.batches, "--batches", &axes.batches));
  PREFIXSIM_RETURN_IF_ERROR(ParseList(options.contexts, "--contexts", &axes.contexts));
  PREFIXSIM_RETURN_IF_ERROR(ParseList(options.chunks, "--prefill-chunks", &axes.prefill_chunks));
  axes.q_heads_per_kv = options.q_heads_per_kv;
  axes.mla_q_heads = options.mla_q_heads;
  return axes;
}

absl::StatusOr<std::vector<KvPlan>> ResolvePlans(const ModelAndEngine& loaded,
                                                 const std::string& policy_list) {
  std::vector<KvPlan> plans;
  for (const std::string& policy : SplitCommaList(policy_list)) {
    PREFIXSIM_ASSIGN_OR_RETURN(KvPlan plan, ResolveKvPlan(loaded.model, loaded.engine, policy));
    plans.push_back(std::move(plan));
  }
  if (plans.empty()) return absl::InvalidArgumentError("--policies is empty");
  return plans;
}

// --emit-grid: the grid file for bench/cuda's tool ("-" = stdout).
absl::Status EmitGrid(const std::string& path, const std::string& text, std::ostream& out) {
  if (path.empty()) return absl::OkStatus();
  if (path == "-") {
    out << text;
    return absl::OkStatus();
  }
  std::ofstream f(path, std::ios::binary);
  f << text;
  if (!f.good()) {
    return absl::PermissionDeniedError(absl::StrCat(path, ": cannot write the grid"));
  }
  return absl::OkStatus();
}

// --dry-run: the grid as a table (unless --emit-grid - has stdout for the grid file).
void PrintDryRun(const KernelBenchCommandOptions& options, const cuda::KernelGrid& grid,
                 std::ostream& out) {
  if (options.emit_grid == "-") return;
  out << "kernel-bench grid: " << grid.points.size() << " points ("
      << (kHaveKernels ? "kernels built in this build"
                       : "kernels not built in this build: configure with "
                         "-DPREFIXSIM_CUDA=ON, or run bench/cuda/measure.sh on a GPU")
      << ")\n";
  for (const std::string& n : grid.notes) out << "# note: " << n << "\n";
  out << cuda::FormatGridHeader() << "\n";
  for (const cuda::GridPoint& p : grid.points) out << cuda::FormatGridPoint(p) << "\n";
}

// Times the grid with bench/cuda's tool, which reads it from a file; the tool's own exit status
// (1 without a GPU) becomes out.exit_code.
absl::Status MeasureGrid(const KernelBenchCommandOptions& options, const std::string& grid_text,
                         CommandOutput& out) {
#ifndef PREFIXSIM_KERNEL_BENCH_TOOL
  (void)options;
  (void)grid_text;
  (void)out;
  return absl::UnimplementedError(
      "this build has no CUDA kernels (configure with -DPREFIXSIM_CUDA=ON on a machine with "
      "nvcc, or run bench/cuda/measure.sh on a GPU machine); --dry-run lists the grid");
#else
  std::string grid_path = options.emit_grid;
  if (grid_path.empty() || grid_path == "-") {
    grid_path = (std::filesystem::temp_directory_path() /
                 absl::StrCat("prefixsim_kernel_grid_", getpid(), ".txt"))
                    .string();
    std::ofstream f(grid_path, std::ios::binary);
    f << grid_text;
  }
  const std::string budget = absl::StrCat(options.budget_s);
  const pid_t pid = fork();
  if (pid == 0) {
    execl(PREFIXSIM_KERNEL_BENCH_TOOL, PREFIXSIM_KERNEL_BENCH_TOOL, "--grid", grid_path.c_str(),
          "--out", options.out.c_str(), "--time-budget-s", budget.c_str(),
          static_cast<char*>(nullptr));
    std::cerr << "prefixsim kernel-bench: cannot run " << PREFIXSIM_KERNEL_BENCH_TOOL << "\n";
    _exit(kExitRuntimeFailure);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) < 0) {
    out.exit_code = kExitRuntimeFailure;
  } else {
    out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : kExitRuntimeFailure;
  }
  if (grid_path != options.emit_grid) std::filesystem::remove(grid_path);
  return absl::OkStatus();
#endif
}

absl::Status RunKernelBenchCommand(const KernelBenchCommandOptions& options, CommandOutput& out) {
  PREFIXSIM_ASSIGN_OR_RETURN(const cuda::GridAxes axes, ParseGridAxes(options));
  PREFIXSIM_ASSIGN_OR_RETURN(const ModelAndEngine loaded, LoadModelAndEngine(options.model_engine));
  PREFIXSIM_ASSIGN_OR_RETURN(const std::vector<KvPlan> plans,
                             ResolvePlans(loaded, options.policies));
  PREFIXSIM_ASSIGN_OR_RETURN(const cuda::KernelGrid grid,
                             cuda::BuildKernelGrid(loaded.model, loaded.engine, plans, axes));
  const std::string text = cuda::FormatGridFile(
      grid, {absl::StrCat("prefixsim kernel grid: model ", options.model_engine.model, ", engine ",
                          options.model_engine.engine, ", policies ", options.policies),
             "made by `prefixsim kernel-bench --emit-grid`; read by bench/cuda "
             "(prefixsim_kernel_bench --grid)"});
  PREFIXSIM_RETURN_IF_ERROR(EmitGrid(options.emit_grid, text, out.out));
  if (options.dry_run) {
    PrintDryRun(options, grid, out.out);
    return absl::OkStatus();
  }
  return MeasureGrid(options, text, out);
}

}  // namespace

void AddKernelBenchCommand(CLI::App& app, CommandContext& ctx) {
  auto options = std::make_shared<KernelBenchCommandOptions>();
  auto* cmd = app.add_subcommand(
      "kernel-bench",
      "time the paged attention, MLA, append and state kernels of each policy's KV groups on a "
      "GPU (CUDA build); --dry-run lists the grid anywhere");
  AddModelEngineOptions(cmd, &options->model_engine);
  cmd->add_option("--policies", options->policies, "comma-separated block-size policies")
      ->capture_default_str();
  cmd->add_option("--batches", options->batches,
                  "grid: batch sizes (sequences), comma-separated (default 1,8,32,64,128)");
  cmd->add_option("--contexts", options->contexts,
                  "grid: context lengths in tokens (default 1024,4096,8192,16384,32768)");
  cmd->add_option("--prefill-chunks", options->chunks,
                  "grid: prefill chunk sizes in tokens (default 512,2048)");
  cmd->add_option("--q-heads-per-kv", options->q_heads_per_kv,
                  "query heads per KV head of GQA layers (assumed: model files give KV shapes)")
      ->capture_default_str();
  cmd->add_option("--mla-q-heads", options->mla_q_heads, "query heads of MLA layers per rank")
      ->capture_default_str();
  CLI::Option* dry_run =
      cmd->add_flag("--dry-run", options->dry_run, "print the grid and exit (no GPU needed)");
  cmd->add_option("--emit-grid", options->emit_grid,
                  "write the grid file for bench/cuda's tool here (- = stdout)");
  cmd->add_option("--out", options->out, "measured CSV (real run)")
      ->capture_default_str()
      ->excludes(dry_run);
  cmd->add_option("--time-budget-s", options->budget_s, "real run: stop timing after this long")
      ->capture_default_str()
      ->excludes(dry_run);
  SetCommandRun(cmd, "kernel-bench", ctx,
                [options](CommandOutput& out) { return RunKernelBenchCommand(*options, out); });
}

}  // namespace prefixsim::cli
