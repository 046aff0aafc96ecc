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

struct SweepCommandOptions {
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

// The two sbatch command lines of a grid run on Slurm: the job array, and the merge that depends
// on it.
struct SlurmJobs {
  int tasks = 0;
  std::string out_dir;  // absolute
  std::string array_line;
  std::string exe;
  std::string sbatch_args;  // "" or " <--sbatch-args>"

  std::string MergeLine(const std::string& array_job) const {
    const std::string wrap = absl::StrCat(ShellQuote(exe), " sweep merge ", ShellQuote(out_dir),
                                          "/shard-* --out ", ShellQuote(out_dir));
    return absl::StrCat("sbatch --parsable", sbatch_args, " --dependency=afterok:", array_job,
                        " --job-name=prefixsim-merge --output=",
                        ShellQuote(out_dir + "/slurm-merge-%j.out"), " --wrap ", ShellQuote(wrap));
  }
};

absl::StatusOr<SlurmJobs> MakeSlurmJobs(const SweepCommandOptions& o,
                                        const grid::Scenario& scenario) {
  SlurmJobs jobs;
  jobs.tasks = o.shards > 0 ? o.shards : static_cast<int>(scenario.points.size());
  jobs.exe = SelfExe();
  jobs.out_dir = AbsPath(o.out);
  PREFIXSIM_ASSIGN_OR_RETURN(const fs::path script, FindDataFile("scripts/slurm/sweep.sbatch"));
  const std::string extra = o.no_wall_time ? " --no-wall-time" : "";
  jobs.sbatch_args = o.sbatch_args.empty() ? "" : " " + o.sbatch_args;
  jobs.array_line =
      absl::StrCat("sbatch --parsable", jobs.sbatch_args, " --array=0-", jobs.tasks - 1,
                   " --output=", ShellQuote(jobs.out_dir + "/slurm-%A_%a.out"), " ",
                   ShellQuote(script.string()), " ", ShellQuote(jobs.exe), " ",
                   ShellQuote(AbsPath(o.grid)), " ", ShellQuote(jobs.out_dir), extra);
  return jobs;
}

// sbatch --parsable prints "jobid" or "jobid;cluster".
absl::StatusOr<std::string> SubmitJob(const std::string& sbatch_line) {
  PREFIXSIM_ASSIGN_OR_RETURN(const std::string printed, RunCapture(sbatch_line));
  std::string job = std::string(absl::StripAsciiWhitespace(printed));
  return job.substr(0, job.find(';'));
}

// --slurm: prints the jobs as a shell script, or with --submit submits them.
absl::Status RunOnSlurm(const SweepCommandOptions& o, const grid::Scenario& scenario,
                        std::ostream& out) {
  PREFIXSIM_ASSIGN_OR_RETURN(const SlurmJobs jobs, MakeSlurmJobs(o, scenario));
  if (!o.submit) {
    out << "mkdir -p " << ShellQuote(jobs.out_dir) << "\n"
        << "jobid=$(" << jobs.array_line << ")\n"
        << jobs.MergeLine("${jobid%%;*}") << "\n";
    return absl::OkStatus();
  }
  std::error_code ec;
  fs::create_directories(jobs.out_dir, ec);
  PREFIXSIM_ASSIGN_OR_RETURN(const std::string array_job, SubmitJob(jobs.array_line));
  PREFIXSIM_ASSIGN_OR_RETURN(const std::string merge_job, SubmitJob(jobs.MergeLine(array_job)));
  out << "array job " << array_job << " (" << jobs.tasks << " tasks), merge job " << merge_job
      << "\n";
  return absl::OkStatus();
}

// The closing line on stderr; out.exit_code says whether the sweep was interrupted.
void ReportSweepStats(const SweepCommandOptions& o, const grid::Scenario& scenario,
                      const grid::SweepStats& stats, CommandOutput& out) {
  if (stats.interrupt_signal != 0) {
    out.err << "sweep: PARTIAL: interrupted by " << SignalName(stats.interrupt_signal) << ": "
            << stats.run << " points run, " << stats.not_run
            << " stopped or not started (no file), " << stats.skipped
            << " already done; results in " << o.out
            << " cover the finished points; --resume runs the rest\n";
    out.exit_code = kExitInterrupted;
    return;
  }
  out.err << "sweep: " << stats.run << " points run, " << stats.skipped << " already done, "
          << scenario.points.size() << " in the grid; ";
  if (stats.overloaded > 0) {
    out.err << stats.overloaded << " of the points run OVERLOADED (results.csv's "
            << "overloaded column names them); ";
  }
  out.err << "results in " << o.out << "\n";
}

// Runs the points here, on a thread pool (the whole grid or one --shard of it).
absl::Status RunLocally(const SweepCommandOptions& o, const grid::SweepOptions& sweep,
                        const grid::Scenario& scenario, CommandOutput& out) {
  PREFIXSIM_RETURN_IF_ERROR(grid::ValidatePoints(scenario));
  InstallInterruptHandlers();
  std::ostream& err = out.err;
  const bool quiet = o.quiet;
  PREFIXSIM_ASSIGN_OR_RETURN(
      const grid::SweepStats stats,
      grid::RunSweep(scenario, sweep, InterruptFlag(),
                     [quiet, &err](const grid::Point& p, bool overloaded) {
                       if (quiet) return;
                       err << "sweep: point " << p.index << " (" << p.id << ") done"
                           << (overloaded ? ": OVERLOADED (the replay fell behind the trace; "
                                            "its hit rate reflects the queue as much as the "
                                            "policy)"
                                          : "")
                           << "\n";
                     }));
  ReportSweepStats(o, scenario, stats, out);
  return absl::OkStatus();
}

absl::Status RunSweepCommand(const SweepCommandOptions& o, CommandOutput& out) {
  if (o.grid.empty() || o.out.empty()) {
    return absl::InvalidArgumentError("--grid and --out are required (or: sweep merge)");
  }
  grid::SweepOptions sweep;
  sweep.out_dir = o.out;
  sweep.jobs = o.jobs;
  sweep.resume = o.resume;
  sweep.include_wall_time = !o.no_wall_time;
  if (!o.shard.empty()) {
    PREFIXSIM_RETURN_IF_ERROR(grid::ParseShard(o.shard, &sweep.shard, &sweep.num_shards));
  }
  PREFIXSIM_ASSIGN_OR_RETURN(const grid::Scenario scenario, grid::LoadScenario(o.grid));
  // Before any point runs (--slurm alone only prints the jobs and writes nothing).
  if (!o.slurm || o.submit) PREFIXSIM_RETURN_IF_ERROR(CheckOutputDir(o.out, "--out"));
  if (o.slurm) return RunOnSlurm(o, scenario, out.out);
  return RunLocally(o, sweep, scenario, out);
}

absl::Status RunSweepMergeCommand(const SweepCommandOptions& o) {
  PREFIXSIM_RETURN_IF_ERROR(CheckOutputDir(o.merge_out, "--out"));
  return grid::MergeSweepDirs(o.merge_dirs, o.merge_out, !o.merge_partial);
}

}  // namespace

void AddSweepCommand(CLI::App& app, CommandContext& ctx) {
  auto o = std::make_shared<SweepCommandOptions>();
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
  SetCommandRun(merge, "sweep merge", ctx,
                [o](CommandOutput&) { return RunSweepMergeCommand(*o); });
  // CLI11 runs this callback after merge's: it must leave merge's exit code alone.
  cmd->callback([o, merge, &ctx] {
    if (merge->parsed()) return;
    ctx.exit_code =
        RunCommand("sweep", [o](CommandOutput& out) { return RunSweepCommand(*o, out); });
  });
}

}  // namespace prefixsim::cli
