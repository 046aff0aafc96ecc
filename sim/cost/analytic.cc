// The analytic (roofline) step-time model, the default. One step costs
//   max(FLOPs / (peak_flops * kComputeEfficiency), bytes / (bandwidth * kBandwidthEfficiency))
//   + kStepOverheadS + kPerBlockOverheadS * (block-table entries touched)
// per GPU, where
//   FLOPs = 2 * active_params * batch_tokens / TP
//           + Σ_seq Σ_attention layers kAttnFlopsPerPair * new * (visible context)
//   bytes = 2 * active_params / TP (bf16 weights, read once per step)
//           + Σ_seq Σ_attention layers KV bytes per token * visible context
//           + Σ_seq Σ_mamba layers 2 * state_bytes (read and write)
// The visible context of a sliding-window (chunked-local) layer is capped at its window (chunk).
// KV shapes are per rank already (docs/design.md §4.2). The block term is what makes block size
// cost something: the block tables of every group are walked each step. active_params:
// CostModelContext::active_params if given, else the model's own
// (ModelSpec::active_params: presets carry it with its source), else kParamsPerLayer per target
// layer, a coarse default. Drafter layers, which run num_speculative_tokens passes, add
// kParamsPerLayer each per pass, only with speculation.
#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sim/cost/cost_model.h"

namespace prefixsim {
namespace {

constexpr double kParamsPerLayer = 2.0e8;  // ≈ 12 · 4096²: a dense 4K-wide transformer layer
constexpr double kAttnFlopsPerPair = 4.0 * 4096;  // QK and PV, 4096 query dims, 2 FLOP/MAC
constexpr double kComputeEfficiency = 0.5;
constexpr double kBandwidthEfficiency = 0.7;
constexpr double kStepOverheadS = 2e-3;       // scheduling, launch, sampling
constexpr double kPerBlockOverheadS = 20e-9;  // per block-table entry per step
constexpr double kWeightBytesPerParam = 2.0;  // bf16

struct AttnClass {
  int64_t window = 0;          // 0 = whole context
  double bytes_per_token = 0;  // summed over the layers of this class
  double num_layers = 0;
};

struct BlockClass {
  int64_t block_size = 0;
  int64_t window = 0;   // 0 = whole context
  bool single = false;  // mamba: one state block
  double count = 0;     // groups of this shape
};

class AnalyticCostModel : public CostModel {
 public:
  AnalyticCostModel(const GpuSpec& gpu, double active_params, int tp, std::vector<AttnClass> attn,
                    double mamba_state_bytes, std::vector<BlockClass> blocks)
      : gpu_(gpu),
        tp_(std::max(tp, 1)),
        active_params_(active_params),
        attn_(std::move(attn)),
        mamba_state_bytes_(mamba_state_bytes),
        blocks_(std::move(blocks)) {}

  std::string_view name() const override { return "analytic"; }

  int64_t StepTimeNs(absl::Span<const SeqWork> batch) const override {
    double tokens = 0, attn_flops = 0, kv_bytes = 0, block_entries = 0;
    for (const SeqWork& s : batch) {
      const double n = static_cast<double>(s.new_tokens);
      tokens += n;
      for (const AttnClass& a : attn_) {
        const int64_t visible =
            a.window > 0 ? std::min(s.context_tokens, a.window) : s.context_tokens;
        const double v = static_cast<double>(visible);
        // Query i attends to about (visible - n + i) keys: n * (visible - n/2) pairs.
        const double pairs = n * std::max(v - 0.5 * std::min(n, v), 1.0);
        attn_flops += kAttnFlopsPerPair * pairs * a.num_layers;
        kv_bytes += a.bytes_per_token * v;
      }
      kv_bytes += 2.0 * mamba_state_bytes_;
      for (const BlockClass& b : blocks_) {
        if (b.single) {
          block_entries += b.count;
          continue;
        }
        const int64_t visible =
            b.window > 0 ? std::min(s.context_tokens, b.window) : s.context_tokens;
        block_entries += b.count * static_cast<double>((visible + b.block_size - 1) / b.block_size);
      }
    }
    const double flops = 2.0 * active_params_ * tokens / tp_ + attn_flops;
    const double bytes = kWeightBytesPerParam * active_params_ / tp_ + kv_bytes;
    const double t = std::max(flops / (gpu_.peak_flops * kComputeEfficiency),
                              bytes / (gpu_.hbm_bytes_per_s * kBandwidthEfficiency)) +
                     kStepOverheadS + kPerBlockOverheadS * block_entries;
    return std::max<int64_t>(1, static_cast<int64_t>(std::llround(t * 1e9)));
  }

 private:
  GpuSpec gpu_;
  int tp_;
  double active_params_;
  std::vector<AttnClass> attn_;
  double mamba_state_bytes_;
  std::vector<BlockClass> blocks_;
};

}  // namespace

absl::StatusOr<GpuSpec> LookupGpu(std::string_view name) {
  // Dense bf16 tensor-core peak and HBM bandwidth from the vendor data sheets (SXM parts).
  if (name == "h100") return GpuSpec{"h100", 989e12, 3.35e12};
  if (name == "h200") return GpuSpec{"h200", 989e12, 4.8e12};
  return absl::NotFoundError(absl::StrCat("cost_model.gpu: unknown GPU \"", std::string(name),
                                          "\"; presets: ", absl::StrJoin(GpuPresetNames(), ", ")));
}

std::vector<std::string> GpuPresetNames() { return {"h100", "h200"}; }

absl::StatusOr<std::unique_ptr<CostModel>> NewAnalyticCostModel(const CostModelConfig& config,
                                                                const CostModelContext& context) {
  absl::StatusOr<GpuSpec> gpu = LookupGpu(config.gpu);
  if (!gpu.ok()) return gpu.status();
  if (context.model == nullptr || context.engine == nullptr || context.plan == nullptr) {
    return absl::InvalidArgumentError("analytic cost model: needs model, engine and plan");
  }
  const bool spec = context.engine->speculative.enabled;
  const int k = std::max(1, context.engine->speculative.num_speculative_tokens);
  double params = 0;                  // estimated from the layer count
  double drafter_params = 0;          // drafter passes per step
  std::map<int64_t, AttnClass> attn;  // by window
  double mamba_bytes = 0;
  for (const LayerSpec& layer : context.model->layers) {
    if (layer.drafter && !spec) continue;
    (layer.drafter ? drafter_params : params) +=
        kParamsPerLayer * layer.count * (layer.drafter ? k : 1);
    if (layer.kind == LayerKind::kMamba) {
      mamba_bytes += static_cast<double>(layer.state_bytes) * layer.count;
      continue;
    }
    int64_t window = 0;
    if (layer.kind == LayerKind::kSlidingWindow) window = layer.sliding_window;
    if (layer.kind == LayerKind::kChunkedLocal) window = layer.attention_chunk_size;
    AttnClass& a = attn[window];
    a.window = window;
    a.bytes_per_token += static_cast<double>(layer.BytesPerToken()) * layer.count;
    a.num_layers += layer.count;
  }
  if (context.active_params > 0) {
    params = context.active_params;
  } else {
    if (context.model->active_params > 0) params = context.model->active_params;
    params += drafter_params;
  }
  std::map<std::tuple<int64_t, int64_t, bool>, BlockClass> blocks;
  for (const KvGroup& g : context.plan->groups) {
    const bool single = g.kind == LayerKind::kMamba;
    int64_t window = 0;
    if (g.kind == LayerKind::kSlidingWindow) window = g.sliding_window + g.block_size;
    if (g.kind == LayerKind::kChunkedLocal) window = g.attention_chunk_size + g.block_size;
    BlockClass& b = blocks[{g.block_size, window, single}];
    b.block_size = std::max(1, g.block_size);
    b.window = window;
    b.single = single;
    b.count += 1;
  }
  std::vector<AttnClass> attn_v;
  for (auto& [w, a] : attn) attn_v.push_back(a);
  std::vector<BlockClass> blocks_v;
  for (auto& [key, b] : blocks) blocks_v.push_back(b);
  return std::make_unique<AnalyticCostModel>(*gpu, params, context.engine->tensor_parallel_size,
                                             std::move(attn_v), mamba_bytes, std::move(blocks_v));
}

}  // namespace prefixsim
