// The measured step-time model (docs/cuda.md §Cost model): kernel times measured by the CUDA
// backend (prefixsim_kernel_bench's CSV, cost_model.table) per KV cache group shape, so that a
// step's cost sees each group's block size, kernel block size and padded page:
//   step = Σ_groups layers x (attention or state kernel + KV append [+ state copies])
//          + max(2 x active_params x tokens / TP / measured GEMM rate,
//                weight bytes / TP / measured copy bandwidth)
//          + kStepOverheadS
// Attention per group: the decode sequences of the batch grouped by query tokens (1, or 1 + k
// in a speculative verify), each group timed at (its size, its mean context): kernel time is
// close to linear in the context at a fixed batch, so the mean loses little. Each prefill chunk
// is timed on its own (chunk, context). Mamba groups: one state step per running sequence, and
// a state copy for every sequence whose context crosses a multiple of the group's block size in
// this step (the engine caches the state at that boundary). Times are bilinear in the grid,
// clamped below its first point and extrapolated linearly past its last (StepTimeTable).
#include "sim/cost/measured.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "sim/util/status_macros.h"

namespace prefixsim {
namespace {

constexpr double kStepOverheadS = 2e-3;  // as the analytic model: scheduling, launch, sampling
constexpr double kParamsPerLayer = 2.0e8;
constexpr double kWeightBytesPerParam = 2.0;

bool IsAttentionKind(LayerKind k) { return k != LayerKind::kMamba; }

// The shape key of a plan group for `op` (q_tokens 0 where it is an axis).
KernelShapeKey KeyFor(const std::string& op, const KvGroup& g, int q_tokens) {
  const int kbs = g.kernel_block_size > 0 ? g.kernel_block_size : g.block_size;
  return {op, std::string(LayerKindName(g.kind)), g.block_size, kbs, g.page_bytes, q_tokens};
}

// A table from scattered points (x, y) -> t; a missing combination is an error.
absl::StatusOr<StepTimeTable> BuildTable(const std::map<std::pair<double, double>, double>& pts,
                                         const std::string& what) {
  std::set<double> xs, ys;
  for (const auto& [k, t] : pts) xs.insert(k.first), ys.insert(k.second);
  StepTimeTable table;
  table.num_tokens.assign(xs.begin(), xs.end());
  table.context_tokens.assign(ys.begin(), ys.end());
  table.time_us.assign(xs.size(), std::vector<double>(ys.size(), 0.0));
  for (size_t i = 0; i < xs.size(); ++i) {
    for (size_t j = 0; j < ys.size(); ++j) {
      auto it = pts.find({table.num_tokens[i], table.context_tokens[j]});
      if (it == pts.end()) {
        return absl::InvalidArgumentError(absl::StrCat(what, ": grid point missing at (",
                                                       table.num_tokens[i], ", ",
                                                       table.context_tokens[j], ")"));
      }
      table.time_us[i][j] = it->second;
    }
  }
  return table;
}

struct GroupKernels {
  const KvGroup* group = nullptr;
  // decode tables by query tokens (sorted), prefill, append, or state step / copy.
  std::vector<std::pair<int, const StepTimeTable*>> decode;
  const StepTimeTable* prefill = nullptr;
  const StepTimeTable* append = nullptr;
  const StepTimeTable* state_step = nullptr;
  const StepTimeTable* state_copy = nullptr;
};

absl::StatusOr<GroupKernels> FindKernels(const KernelTimes& times, const KvGroup& g) {
  GroupKernels k;
  k.group = &g;
  const std::string where =
      absl::StrCat(std::string(LayerKindName(g.kind)), " group (block ", g.block_size,
                   ", kernel block ", g.kernel_block_size, ", page ", g.page_bytes, " bytes)");
  auto find = [&](const std::string& op, int q) -> absl::StatusOr<const StepTimeTable*> {
    auto it = times.tables.find(KeyFor(op, g, q));
    if (it == times.tables.end()) {
      return absl::NotFoundError(
          absl::StrCat("measured cost model: no ", op, " times for the ", where,
                       " (measure this plan's grid with kernel-bench's `emit_grid`)"));
    }
    return &it->second;
  };
  if (!IsAttentionKind(g.kind)) {
    PREFIXSIM_ASSIGN_OR_RETURN(k.state_step, find("state_step", 0));
    PREFIXSIM_ASSIGN_OR_RETURN(k.state_copy, find("state_copy", 0));
    return k;
  }
  const bool mla = g.kind == LayerKind::kMla;
  const std::string decode = mla ? "mla_decode" : "decode";
  for (const auto& [key, table] : times.tables) {
    if (std::get<0>(key) == decode && key == KeyFor(decode, g, std::get<5>(key))) {
      k.decode.emplace_back(std::get<5>(key), &table);
    }
  }
  if (k.decode.empty()) return find(decode, 1).status();
  std::sort(k.decode.begin(), k.decode.end());
  PREFIXSIM_ASSIGN_OR_RETURN(k.prefill, find(mla ? "mla_prefill" : "prefill", 0));
  PREFIXSIM_ASSIGN_OR_RETURN(k.append, find("append", 0));
  return k;
}

// Microseconds of one layer of group `k` for `batch`.
double GroupLayerUs(const GroupKernels& k, absl::Span<const SeqWork> batch) {
  const KvGroup& g = *k.group;
  if (!IsAttentionKind(g.kind)) {
    double copies = 0;
    for (const SeqWork& s : batch) {
      // Crossing a block boundary in this step: the state there is cached (copied).
      const int64_t before = s.context_tokens - s.new_tokens;
      if (g.block_size > 0 && s.context_tokens / g.block_size != before / g.block_size) ++copies;
    }
    double us = k.state_step->Interpolate(static_cast<double>(batch.size()), 0);
    if (copies > 0) us += k.state_copy->Interpolate(copies, 0);
    return us;
  }
  const int max_decode_q = k.decode.back().first;
  // Decode sequences by the grid's nearest query-token count: (count, summed context).
  std::vector<std::pair<double, double>> decode(k.decode.size(), {0.0, 0.0});
  double us = 0, rows = 0;
  for (const SeqWork& s : batch) {
    rows += static_cast<double>(s.new_tokens);
    if (s.new_tokens <= max_decode_q) {
      size_t best = 0;
      for (size_t i = 1; i < k.decode.size(); ++i) {
        if (std::abs(k.decode[i].first - s.new_tokens) <
            std::abs(k.decode[best].first - s.new_tokens)) {
          best = i;
        }
      }
      decode[best].first += 1;
      decode[best].second += static_cast<double>(s.context_tokens);
    } else {
      us += k.prefill->Interpolate(static_cast<double>(s.new_tokens),
                                   static_cast<double>(s.context_tokens - s.new_tokens));
    }
  }
  for (size_t i = 0; i < decode.size(); ++i) {
    if (decode[i].first > 0) {
      us += k.decode[i].second->Interpolate(decode[i].first, decode[i].second / decode[i].first);
    }
  }
  if (rows > 0) us += k.append->Interpolate(rows, 0);
  return us;
}

double PlanKernelUs(const std::vector<GroupKernels>& groups, absl::Span<const SeqWork> batch) {
  double us = 0;
  for (const GroupKernels& k : groups) us += k.group->num_layers * GroupLayerUs(k, batch);
  return us;
}

class MeasuredCostModel : public CostModel {
 public:
  MeasuredCostModel(KernelTimes times, KvPlan plan, double active_params, int tp)
      : times_(std::move(times)), plan_(std::move(plan)), params_(active_params), tp_(tp) {}

  absl::Status Init() {
    for (const KvGroup& g : plan_.groups) {
      auto k = FindKernels(times_, g);
      if (!k.ok()) return k.status();
      groups_.push_back(*k);
    }
    return absl::OkStatus();
  }

  std::string_view name() const override { return "measured"; }

  int64_t StepTimeNs(absl::Span<const SeqWork> batch) const override {
    double tokens = 0;
    for (const SeqWork& s : batch) tokens += static_cast<double>(s.new_tokens);
    const double flops = 2.0 * params_ * tokens / tp_;
    const double bytes = kWeightBytesPerParam * params_ / tp_;
    double dense_s = bytes / times_.copy_bytes_per_s;
    if (times_.gemm_flops_per_s > 0) dense_s = std::max(dense_s, flops / times_.gemm_flops_per_s);
    const double kernel_s = PlanKernelUs(groups_, batch) * 1e-6;
    const int64_t ns = std::max<int64_t>(
        1, static_cast<int64_t>(std::llround((kernel_s + dense_s + kStepOverheadS) * 1e9)));
    kernel_ns_ += std::llround(kernel_s * 1e9);
    return ns;
  }

  int64_t kernel_ns() const override { return kernel_ns_; }

 private:
  KernelTimes times_;
  KvPlan plan_;  // owned: groups_ point into it
  std::vector<GroupKernels> groups_;
  double params_;
  int tp_;
  // StepTimeNs is const for the engine; the sum of its kernel parts is a tally beside it.
  mutable int64_t kernel_ns_ = 0;
};

}  // namespace

absl::StatusOr<KernelTimes> ParseKernelCsv(std::string_view csv, std::string_view source_view) {
  const std::string source(source_view);
  KernelTimes times;
  std::vector<std::string> header;
  auto col = [&](std::string_view name) -> int {
    for (size_t i = 0; i < header.size(); ++i) {
      if (header[i] == name) return static_cast<int>(i);
    }
    return -1;
  };
  // Points per shape: (x, y) -> time.
  std::map<KernelShapeKey, std::map<std::pair<double, double>, double>> points;
  int line_no = 0;
  int c_op = -1, c_kind = -1, c_bs = -1, c_kbs = -1, c_page = -1, c_batch = -1, c_q = -1,
      c_ctx = -1, c_time = -1, c_ok = -1;
  for (absl::string_view line : absl::StrSplit(absl::string_view(csv.data(), csv.size()), '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    if (line[0] == '#') {
      absl::string_view body = absl::StripAsciiWhitespace(line.substr(1));
      const size_t colon = body.find(':');
      if (colon == absl::string_view::npos) continue;
      const absl::string_view key = absl::StripAsciiWhitespace(body.substr(0, colon));
      const absl::string_view value = absl::StripAsciiWhitespace(body.substr(colon + 1));
      if (key == "copy_bytes_per_s" && !absl::SimpleAtod(value, &times.copy_bytes_per_s)) {
        return absl::InvalidArgumentError(
            absl::StrCat(source, ":", line_no, ": copy_bytes_per_s: not a number"));
      }
      if (key == "gemm_flops_per_s" && !absl::SimpleAtod(value, &times.gemm_flops_per_s)) {
        return absl::InvalidArgumentError(
            absl::StrCat(source, ":", line_no, ": gemm_flops_per_s: not a number"));
      }
      if (key == "synthetic") times.synthetic = true;
      if (key == "gpu") times.gpu = std::string(value);
      continue;
    }
    std::vector<std::string> f = absl::StrSplit(line, ',');
    for (std::string& s : f) s = std::string(absl::StripAsciiWhitespace(s));
    if (header.empty()) {
      header = f;
      c_op = col("op"), c_kind = col("kind"), c_bs = col("block_size"),
      c_kbs = col("kernel_block_size"), c_page = col("page_bytes"), c_batch = col("batch"),
      c_q = col("q_tokens"), c_ctx = col("context"), c_time = col("time_us"),
      c_ok = col("check_ok");
      for (int c : {c_op, c_kind, c_bs, c_kbs, c_page, c_batch, c_q, c_ctx, c_time}) {
        if (c < 0) {
          return absl::InvalidArgumentError(absl::StrCat(
              source, ":", line_no,
              ": header needs op, kind, block_size, kernel_block_size, page_bytes, batch, "
              "q_tokens, context and time_us"));
        }
      }
      continue;
    }
    if (f.size() != header.size()) {
      return absl::InvalidArgumentError(absl::StrCat(source, ":", line_no, ": expected ",
                                                     header.size(), " fields, got ", f.size()));
    }
    if (c_ok >= 0 && f[c_ok] != "1") {
      return absl::FailedPreconditionError(absl::StrCat(
          source, ":", line_no, ": this kernel failed its check against the CPU reference"));
    }
    double v[6];
    const int cols[6] = {c_bs, c_kbs, c_page, c_batch, c_q, c_ctx};
    for (int i = 0; i < 6; ++i) {
      if (!absl::SimpleAtod(f[cols[i]], &v[i]) || v[i] < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(source, ":", line_no, ": field ", header[cols[i]], ": not a number >= 0"));
      }
    }
    double t;
    if (!absl::SimpleAtod(f[c_time], &t) || !std::isfinite(t) || t < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ":", line_no, ": field time_us: not a number >= 0"));
    }
    const std::string& op = f[c_op];
    const double batch = v[3], q = v[4], ctx = v[5];
    int key_q = 0;
    std::pair<double, double> xy;
    if (op == "decode" || op == "mla_decode") {
      key_q = static_cast<int>(q);
      xy = {batch, ctx};
    } else if (op == "prefill" || op == "mla_prefill") {
      if (batch != 1) continue;  // prefill chunks are timed one sequence at a time
      xy = {q, ctx - q};         // (chunk, prefix): the grid is rectilinear in these
    } else if (op == "append") {
      xy = {batch * q, 0};
    } else if (op == "state_step" || op == "state_copy") {
      xy = {batch, 0};
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ":", line_no, ": unknown op '", op, "'"));
    }
    const KernelShapeKey key{
        op,   f[c_kind], static_cast<int>(v[0]), static_cast<int>(v[1]), static_cast<int64_t>(v[2]),
        key_q};
    auto& pts = points[key];
    // Appends of equal row counts (8 x 4 and 32 x 1) keep the slower: a conservative cost.
    auto [it, inserted] = pts.emplace(xy, t);
    if (!inserted) {
      if (op != "append") {
        return absl::InvalidArgumentError(
            absl::StrCat(source, ":", line_no, ": duplicate point for ", op));
      }
      it->second = std::max(it->second, t);
    }
  }
  if (points.empty()) return absl::InvalidArgumentError(absl::StrCat(source, ": no data rows"));
  if (!(times.copy_bytes_per_s > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": header comment '# copy_bytes_per_s: <number > 0>' missing"));
  }
  for (const auto& [key, pts] : points) {
    auto table = BuildTable(pts, absl::StrCat(source, ": ", std::get<0>(key), " ", std::get<1>(key),
                                              " block ", std::get<2>(key)));
    if (!table.ok()) return table.status();
    times.tables.emplace(key, *std::move(table));
  }
  return times;
}

absl::StatusOr<double> KernelStepUs(const KernelTimes& times, const KvPlan& plan,
                                    absl::Span<const SeqWork> batch) {
  std::vector<GroupKernels> groups;
  for (const KvGroup& g : plan.groups) {
    auto k = FindKernels(times, g);
    if (!k.ok()) return k.status();
    groups.push_back(*k);
  }
  return PlanKernelUs(groups, batch);
}

absl::StatusOr<std::unique_ptr<CostModel>> NewMeasuredCostModel(const CostModelConfig& config,
                                                                const CostModelContext& context) {
  if (config.table_path.empty()) {
    return absl::InvalidArgumentError(
        "cost_model.table: required for the measured model (prefixsim_kernel_bench's CSV)");
  }
  if (context.model == nullptr || context.engine == nullptr || context.plan == nullptr) {
    return absl::InvalidArgumentError("measured cost model: needs model, engine and plan");
  }
  std::ifstream in(config.table_path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(config.table_path, ": cannot open kernel times"));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  auto times = ParseKernelCsv(ss.str(), config.table_path);
  if (!times.ok()) return times.status();
  // Active parameters as the analytic model takes them.
  double params = context.active_params;
  if (params <= 0) {
    const bool spec = context.engine->speculative.enabled;
    const int k = std::max(1, context.engine->speculative.num_speculative_tokens);
    double estimated = 0, drafter = 0;
    for (const LayerSpec& layer : context.model->layers) {
      if (layer.drafter && !spec) continue;
      (layer.drafter ? drafter : estimated) +=
          kParamsPerLayer * layer.count * (layer.drafter ? k : 1);
    }
    params =
        (context.model->active_params > 0 ? context.model->active_params : estimated) + drafter;
  }
  auto model = std::make_unique<MeasuredCostModel>(
      *std::move(times), *context.plan, params, std::max(1, context.engine->tensor_parallel_size));
  if (absl::Status s = model->Init(); !s.ok()) return s;
  return model;
}

}  // namespace prefixsim
