// `prefixsim sweep`: runs every point of a scenario grid (docs/scenarios.md), locally on a thread
// pool, as one shard of a Slurm job array, or prints/submits the Slurm jobs; `sweep merge`
// merges shard outputs.
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sim/cli/commands.h"
#include "sim/cli/common.h"
#include "sim/cli/exit_codes.h"
#include "sim/cli/interrupt.h"
#include "sim/grid/grid.h"
#include "sim/grid/merge.h"
#include "sim/grid/sweep.h"
#include "sim/report/report.h"
#include "sim/util/atomic_file.h"
#include "sim/util/data_dir.h"
#include "sim/util/status_macros.h"

namespace prefixsim::cli {
namespace {

namespace fs = std::filesystem;

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char ch : s) {
    if (ch == '\'') {
      out += "'\\''";
    } else {
      out += ch;
    }
  }
  return out + "'";
}

std::string AbsPath(const std::string& p) { return fs::absolute(p).lexically_normal().string(); }

std::string SelfExe() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("prefixsim") : p.string();
}

// Runs `command` and returns its stdout, or an error with its exit status.
absl::StatusOr<std::string> RunCapture(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return absl::InternalError("cannot run: " + command);
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int status = pclose(pipe);
  if (status != 0) {
    return absl::InternalError(absl::StrCat("command failed (status ", status, "): ", command));
  }
  return out;
}

}  // namespace

void AddSweepCommand(CLI::App& app, CommandContext& ctx) {
  struct Options {
    std::string grid;
    std::string out;
    int jobs = 0;
    std::string shard;
    bool resume = false;
    bool no_wall_time = false;
    bool quiet = false;
    bool slurm = false;
    bool submit = false;
    int shards = 0;
    std::string sbatch_args;
    std::vector<std::string> merge_dirs;
    std::string merge_out;
    bool merge_partial = false;
  };
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "sweep",
      "run every point of a scenario grid (docs/scenarios.md): one JSON summary per point in "
      "DIR/points/, merged DIR/results.csv and DIR/results.json");
  cmd->add_option("--grid,-g", o->grid, "scenario file (JSON)");
  cmd->add_option("--out,-o", o->out, "output directory");
  CLI::Option* jobs =
      cmd->add_option("--jobs,-j", o->jobs, "points run in parallel (default: cores)")
          ->check(NonNegativeNumber());
  CLI::Option* shard =
      cmd->add_option("--shard", o->shard, "run only the points with index = I mod N (I/N)");
  cmd->add_flag("--resume", o->resume, "keep the points already written in DIR, run the rest");
  cmd->add_flag("--no-wall-time", o->no_wall_time,
                "omit wall_time_s so that equal sweeps are byte-identical");
  cmd->add_flag("--quiet,-q", o->quiet, "no line per finished point on stderr");
  // The array's tasks shard the grid and run a task's points on its CPUs
  // (scripts/slurm/sweep.sbatch), so --shard and --jobs would do nothing there; the Slurm options
  // do nothing without --slurm (and --submit alone would run the grid here, not on the cluster).
  CLI::Option* slurm =
      cmd->add_flag(
             "--slurm", o->slurm,
             "print the sbatch lines that run the grid as a job array plus a dependent merge")
          ->excludes(shard)
          ->excludes(jobs);
  CLI::Option* submit =
      cmd->add_flag("--submit", o->submit, "with --slurm: submit them (sbatch --parsable)");
  submit->needs(slurm);
  cmd->add_option("--shards", o->shards, "with --slurm: array tasks (default: one per point)")
      ->check(PositiveNumber())
      ->needs(slurm);
  cmd->add_option("--sbatch-args", o->sbatch_args,
                  "with --slurm: extra sbatch options for both jobs (e.g. \"-p short\")")
      ->needs(slurm);
  cmd->footer("Scenario keys (base, axes): " + absl::StrJoin(grid::KnownKeys(), ", ") +
              "\nFormat: docs/scenarios.md");
  auto* merge = cmd->add_subcommand(
      "merge", "merge the outputs of sweep shards into one output, as if run at once");
  merge->add_option("dirs", o->merge_dirs, "shard output directories")->required();
  merge->add_option("--out,-o", o->merge_out, "merged output directory")->required();
  merge->add_flag("--allow-partial", o->merge_partial, "merge even if points are missing");
  merge->callback([o, &ctx] {
    absl::Status s = CheckOutputDir(o->merge_out, "--out");
    if (s.ok()) s = grid::MergeSweepDirs(o->merge_dirs, o->merge_out, !o->merge_partial);
    ctx.exit_code = s.ok() ? kExitOk : ReportError("sweep merge", s);
  });
  cmd->callback([o, merge, &ctx] {
    if (merge->parsed()) return;
    if (o->grid.empty() || o->out.empty()) {
      ctx.exit_code = ReportError(
          "sweep", absl::InvalidArgumentError("--grid and --out are required (or: sweep merge)"));
      return;
    }
    grid::SweepOptions so;
    so.out_dir = o->out;
    so.jobs = o->jobs;
    so.resume = o->resume;
    so.include_wall_time = !o->no_wall_time;
    if (!o->shard.empty()) {
      absl::Status s = grid::ParseShard(o->shard, &so.shard, &so.num_shards);
      if (!s.ok()) {
        ctx.exit_code = ReportError("sweep", s);
        return;
      }
    }
    auto scenario = grid::LoadScenario(o->grid);
    if (!scenario.ok()) {
      ctx.exit_code = ReportError("sweep", scenario.status());
      return;
    }
    // Before any point runs (--slurm alone only prints the jobs and writes nothing).
    if (!o->slurm || o->submit) {
      if (absl::Status s = CheckOutputDir(o->out, "--out"); !s.ok()) {
        ctx.exit_code = ReportError("sweep", s);
        return;
      }
    }
    if (o->slurm) {
      const int n = o->shards > 0 ? o->shards : static_cast<int>(scenario->points.size());
      const std::string exe = SelfExe();
      const std::string out = AbsPath(o->out);
      auto found = FindDataFile("scripts/slurm/sweep.sbatch");
      if (!found.ok()) {
        ctx.exit_code = ReportError("sweep", found.status());
        return;
      }
      const std::string script = found->string();
      const std::string extra = o->no_wall_time ? " --no-wall-time" : "";
      const std::string sb = o->sbatch_args.empty() ? "" : " " + o->sbatch_args;
      const std::string array_line = absl::StrCat(
          "sbatch --parsable", sb, " --array=0-", n - 1,
          " --output=", ShellQuote(out + "/slurm-%A_%a.out"), " ", ShellQuote(script), " ",
          ShellQuote(exe), " ", ShellQuote(AbsPath(o->grid)), " ", ShellQuote(out), extra);
      auto merge_line = [&](const std::string& job) {
        const std::string wrap = absl::StrCat(ShellQuote(exe), " sweep merge ", ShellQuote(out),
                                              "/shard-* --out ", ShellQuote(out));
        return absl::StrCat("sbatch --parsable", sb, " --dependency=afterok:", job,
                            " --job-name=prefixsim-merge --output=",
                            ShellQuote(out + "/slurm-merge-%j.out"), " --wrap ", ShellQuote(wrap));
      };
      if (!o->submit) {
        std::cout << "mkdir -p " << ShellQuote(out) << "\n"
                  << "jobid=$(" << array_line << ")\n"
                  << merge_line("${jobid%%;*}") << "\n";
        ctx.exit_code = kExitOk;
        return;
      }
      std::error_code ec;
      fs::create_directories(out, ec);
      auto array_out = RunCapture(array_line);
      if (!array_out.ok()) {
        ctx.exit_code = ReportError("sweep", array_out.status());
        return;
      }
      std::string job = std::string(absl::StripAsciiWhitespace(*array_out));
      job = job.substr(0, job.find(';'));
      auto merge_out = RunCapture(merge_line(job));
      if (!merge_out.ok()) {
        ctx.exit_code = ReportError("sweep", merge_out.status());
        return;
      }
      std::string merge_job = std::string(absl::StripAsciiWhitespace(*merge_out));
      merge_job = merge_job.substr(0, merge_job.find(';'));
      std::cout << "array job " << job << " (" << n << " tasks), merge job " << merge_job << "\n";
      ctx.exit_code = kExitOk;
      return;
    }
    if (absl::Status valid = grid::ValidatePoints(*scenario); !valid.ok()) {
      ctx.exit_code = ReportError("sweep", valid);
      return;
    }
    InstallInterruptHandlers();
    const bool quiet = o->quiet;
    auto stats = grid::RunSweep(
        *scenario, so, InterruptFlag(), [quiet](const grid::Point& p, bool overloaded) {
          if (quiet) return;
          std::cerr << "sweep: point " << p.index << " (" << p.id << ") done"
                    << (overloaded ? ": OVERLOADED (the replay fell behind the trace; its hit "
                                     "rate reflects the queue as much as the policy)"
                                   : "")
                    << "\n";
        });
    if (!stats.ok()) {
      ctx.exit_code = ReportError("sweep", stats.status());
      return;
    }
    if (stats->interrupt_signal != 0) {
      std::cerr << "sweep: PARTIAL: interrupted by " << SignalName(stats->interrupt_signal) << ": "
                << stats->run << " points run, " << stats->not_run
                << " stopped or not started (no file), " << stats->skipped
                << " already done; results in " << o->out
                << " cover the finished points; --resume runs the rest\n";
      ctx.exit_code = kExitInterrupted;
      return;
    }
    std::cerr << "sweep: " << stats->run << " points run, " << stats->skipped << " already done, "
              << scenario->points.size() << " in the grid; ";
    if (stats->overloaded > 0) {
      std::cerr << stats->overloaded << " of the points run OVERLOADED (results.csv's "
                << "overloaded column names them); ";
    }
    std::cerr << "results in " << o->out << "\n";
    ctx.exit_code = kExitOk;
  });
}

}  // namespace prefixsim::cli
