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
// KV shapes are per rank already (DESIGN §4.2). The block term is what makes block size cost
// something: the block tables of every group are walked each step.
// active_params: CostModelContext::active_params (CLI --active-params) if given, else the model's
// own (ModelSpec::active_params: presets carry it with its source), else kParamsPerLayer per
// target layer, a coarse default. Drafter layers, which run num_speculative_tokens passes, add
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
  int64_t window = 0;           // 0 = whole context
  int64_t bytes_per_token = 0;  // summed over the layers of this class
  int64_t num_layers = 0;
};

// x / d for the block counts of every sequence of every step, without a hardware divide: for a
// numerator below 2^32, (x * ceil(2^64 / d)) >> 64 is exact (Lemire, Kaser, Kurz 2019).
class BlockDivider {
 public:
  explicit BlockDivider(int64_t d)
      : d_(d), magic_(d > 1 ? ~uint64_t{0} / static_cast<uint64_t>(d) + 1 : 0) {}
  int64_t CeilDiv(int64_t x) const {
    const uint64_t num = static_cast<uint64_t>(x + d_ - 1);
    if (magic_ == 0 || num >= (uint64_t{1} << 32)) return (x + d_ - 1) / d_;
    return static_cast<int64_t>((static_cast<unsigned __int128>(magic_) * num) >> 64);
  }

 private:
  int64_t d_;
  uint64_t magic_;
};

struct BlockClass {
  int64_t block_size = 0;
  int64_t window = 0;   // 0 = whole context
  bool single = false;  // mamba: one state block
  int64_t count = 0;    // groups of this shape
};

class AnalyticCostModel : public CostModel {
 public:
  AnalyticCostModel(const GpuSpec& gpu, double active_params, int tp, std::vector<AttnClass> attn,
                    int64_t mamba_state_bytes, const std::vector<BlockClass>& blocks)
      : gpu_(gpu),
        tp_(std::max(tp, 1)),
        active_params_(active_params),
        attn_(std::move(attn)),
        mamba_state_bytes_(mamba_state_bytes) {
    for (const BlockClass& b : blocks) {
      if (b.single) {
        single_block_entries_ += b.count;
      } else {
        blocks_.push_back(b);
        dividers_.emplace_back(b.block_size);
      }
    }
  }

  std::string_view name() const override { return "analytic"; }

  // Every term of the sums below is an integer (or, for the attention pairs, a half-integer
  // times a power of two), so they are summed exactly in integers and converted once: the same
  // doubles as summing the formula's terms in floating point, for any batch whose sums stay
  // below 2^53, at a fraction of the cost (this runs for every sequence of every step).
  int64_t StepTimeNs(absl::Span<const SeqWork> batch) const override {
    int64_t tokens = 0, kv_bytes = 0, block_entries = 0;
    __int128 attn_pair_layers2 = 0;  // Σ 2 · pairs · num_layers
    for (const SeqWork& s : batch) {
      const int64_t n = s.new_tokens;
      tokens += n;
      for (const AttnClass& a : attn_) {
        const int64_t v = a.window > 0 ? std::min(s.context_tokens, a.window) : s.context_tokens;
        // Query i attends to about (visible - n + i) keys: n * (visible - n/2) pairs, at least n.
        const int64_t pairs2 = n * std::max<int64_t>(2 * v - std::min(n, v), 2);
        attn_pair_layers2 += static_cast<__int128>(pairs2) * a.num_layers;
        kv_bytes += a.bytes_per_token * v;
      }
      for (size_t i = 0; i < blocks_.size(); ++i) {
        const BlockClass& b = blocks_[i];
        const int64_t visible =
            b.window > 0 ? std::min(s.context_tokens, b.window) : s.context_tokens;
        block_entries += b.count * dividers_[i].CeilDiv(visible);
      }
    }
    const int64_t batch_size = static_cast<int64_t>(batch.size());
    kv_bytes += batch_size * 2 * mamba_state_bytes_;
    block_entries += batch_size * single_block_entries_;
    const double attn_flops = static_cast<double>(attn_pair_layers2) * (kAttnFlopsPerPair / 2);
    const double flops = 2.0 * active_params_ * static_cast<double>(tokens) / tp_ + attn_flops;
    const double bytes =
        kWeightBytesPerParam * active_params_ / tp_ + static_cast<double>(kv_bytes);
    const double t = std::max(flops / (gpu_.peak_flops * kComputeEfficiency),
                              bytes / (gpu_.hbm_bytes_per_s * kBandwidthEfficiency)) +
                     kStepOverheadS + kPerBlockOverheadS * static_cast<double>(block_entries);
    return std::max<int64_t>(1, static_cast<int64_t>(std::llround(t * 1e9)));
  }

 private:
  GpuSpec gpu_;
  int tp_;
  double active_params_;
  std::vector<AttnClass> attn_;
  int64_t mamba_state_bytes_;
  std::vector<BlockClass> blocks_;  // the per-context ones (single ones are counted below)
  std::vector<BlockDivider> dividers_;
  int64_t single_block_entries_ = 0;  // per sequence: one state block per mamba group
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
  int64_t mamba_bytes = 0;
  for (const LayerSpec& layer : context.model->layers) {
    if (layer.drafter && !spec) continue;
    (layer.drafter ? drafter_params : params) +=
        kParamsPerLayer * layer.count * (layer.drafter ? k : 1);
    if (layer.kind == LayerKind::kMamba) {
      mamba_bytes += layer.state_bytes * layer.count;
      continue;
    }
    int64_t window = 0;
    if (layer.kind == LayerKind::kSlidingWindow) window = layer.sliding_window;
    if (layer.kind == LayerKind::kChunkedLocal) window = layer.attention_chunk_size;
    AttnClass& a = attn[window];
    a.window = window;
    a.bytes_per_token += layer.BytesPerToken() * layer.count;
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
                                             std::move(attn_v), mamba_bytes, blocks_v);
}

}  // namespace prefixsim
