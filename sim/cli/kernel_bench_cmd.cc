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

}  // namespace

void AddKernelBenchCommand(CLI::App& app, CommandContext& ctx) {
  struct Options {
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
  auto options = std::make_shared<Options>();
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
  cmd->callback([options, &ctx] {
    cuda::GridAxes axes;
    for (absl::Status s : {ParseList(options->batches, "--batches", &axes.batches),
                           ParseList(options->contexts, "--contexts", &axes.contexts),
                           ParseList(options->chunks, "--prefill-chunks", &axes.prefill_chunks)}) {
      if (!s.ok()) {
        ctx.exit_code = ReportError("kernel-bench", s);
        return;
      }
    }
    axes.q_heads_per_kv = options->q_heads_per_kv;
    axes.mla_q_heads = options->mla_q_heads;
    auto loaded = LoadModelAndEngine(options->model_engine);
    if (!loaded.ok()) {
      ctx.exit_code = ReportError("kernel-bench", loaded.status());
      return;
    }
    std::vector<KvPlan> plans;
    for (const std::string& p : SplitCommaList(options->policies)) {
      auto plan = ResolveKvPlan(loaded->model, loaded->engine, p);
      if (!plan.ok()) {
        ctx.exit_code = ReportError("kernel-bench", plan.status());
        return;
      }
      plans.push_back(*std::move(plan));
    }
    if (plans.empty()) {
      ctx.exit_code =
          ReportError("kernel-bench", absl::InvalidArgumentError("--policies is empty"));
      return;
    }
    auto grid = cuda::BuildKernelGrid(loaded->model, loaded->engine, plans, axes);
    if (!grid.ok()) {
      ctx.exit_code = ReportError("kernel-bench", grid.status());
      return;
    }
    const std::string text = cuda::FormatGridFile(
        *grid,
        {absl::StrCat("prefixsim kernel grid: model ", options->model_engine.model, ", engine ",
                      options->model_engine.engine, ", policies ", options->policies),
         "made by `prefixsim kernel-bench --emit-grid`; read by bench/cuda "
         "(prefixsim_kernel_bench --grid)"});
    if (!options->emit_grid.empty()) {
      if (options->emit_grid == "-") {
        std::cout << text;
      } else {
        std::ofstream f(options->emit_grid, std::ios::binary);
        f << text;
        if (!f.good()) {
          ctx.exit_code =
              ReportError("kernel-bench", absl::PermissionDeniedError(absl::StrCat(
                                              options->emit_grid, ": cannot write the grid")));
          return;
        }
      }
    }
#ifdef PREFIXSIM_KERNEL_BENCH_TOOL
    constexpr bool kHaveKernels = true;
#else
    constexpr bool kHaveKernels = false;
#endif
    if (options->dry_run) {
      if (options->emit_grid != "-") {
        std::cout << "kernel-bench grid: " << grid->points.size() << " points ("
                  << (kHaveKernels ? "kernels built in this build"
                                   : "kernels not built in this build: configure with "
                                     "-DPREFIXSIM_CUDA=ON, or run bench/cuda/measure.sh on a GPU")
                  << ")\n";
        for (const std::string& n : grid->notes) std::cout << "# note: " << n << "\n";
        std::cout << cuda::FormatGridHeader() << "\n";
        for (const cuda::GridPoint& p : grid->points) {
          std::cout << cuda::FormatGridPoint(p) << "\n";
        }
      }
      ctx.exit_code = kExitOk;
      return;
    }
#ifndef PREFIXSIM_KERNEL_BENCH_TOOL
    std::cerr << "prefixsim kernel-bench: this build has no CUDA kernels (configure with "
                 "-DPREFIXSIM_CUDA=ON on a machine with nvcc, or run bench/cuda/measure.sh on a "
                 "GPU machine); --dry-run lists the grid\n";
    ctx.exit_code = kExitRuntimeFailure;
#else
    // The tool reads the grid from a file; its own exit status (1 without a GPU) is ours.
    std::string grid_path = options->emit_grid;
    if (grid_path.empty() || grid_path == "-") {
      grid_path = (std::filesystem::temp_directory_path() /
                   absl::StrCat("prefixsim_kernel_grid_", getpid(), ".txt"))
                      .string();
      std::ofstream f(grid_path, std::ios::binary);
      f << text;
    }
    const std::string budget = absl::StrCat(options->budget_s);
    const pid_t pid = fork();
    if (pid == 0) {
      execl(PREFIXSIM_KERNEL_BENCH_TOOL, PREFIXSIM_KERNEL_BENCH_TOOL, "--grid", grid_path.c_str(),
            "--out", options->out.c_str(), "--time-budget-s", budget.c_str(),
            static_cast<char*>(nullptr));
      std::cerr << "prefixsim kernel-bench: cannot run " << PREFIXSIM_KERNEL_BENCH_TOOL << "\n";
      _exit(kExitRuntimeFailure);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) < 0) {
      ctx.exit_code = kExitRuntimeFailure;
    } else {
      ctx.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : kExitRuntimeFailure;
    }
    if (grid_path != options->emit_grid) std::filesystem::remove(grid_path);
#endif
  });
}

}  // namespace prefixsim::cli
