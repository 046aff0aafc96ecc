#include "sim/cuda/grid_builder.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"

namespace prefixsim::cuda {
namespace {

// The layer spec a group was formed from: same kind, drafter or not, same window.
const LayerSpec* LayerOf(const ModelSpec& model, const KvGroup& g) {
  for (const LayerSpec& l : model.layers) {
    if (l.kind != g.kind || l.drafter != g.drafter()) continue;
    if (g.kind == LayerKind::kSlidingWindow && l.sliding_window != g.sliding_window) continue;
    if (g.kind == LayerKind::kChunkedLocal && l.attention_chunk_size != g.attention_chunk_size) {
      continue;
    }
    return &l;
  }
  return nullptr;
}

using ShapeKey =
    std::tuple<std::string, int, int, int64_t, int, int, int, int, int, int64_t, int64_t, int64_t>;

ShapeKey KeyOf(const GridPoint& p) {
  return {p.kind,       p.block_size, p.kernel_block_size,
          p.page_bytes, p.elem_bytes, p.q_heads,
          p.kv_heads,   p.k_dim,      p.v_dim,
          p.window,     p.chunk,      p.state_bytes};
}

}  // namespace

absl::StatusOr<KernelGrid> BuildKernelGrid(const ModelSpec& model, const EngineConfig& engine,
                                           const std::vector<KvPlan>& plans, const GridAxes& axes) {
  if (axes.batches.empty() || axes.contexts.empty()) {
    return absl::InvalidArgumentError("kernel grid: batches and contexts must not be empty");
  }
  for (int b : axes.batches) {
    if (b <= 0) return absl::InvalidArgumentError("kernel grid: batch sizes must be > 0");
  }
  for (int64_t c : axes.contexts) {
    if (c <= 0) return absl::InvalidArgumentError("kernel grid: contexts must be > 0");
  }
  for (int c : axes.prefill_chunks) {
    if (c <= 0) return absl::InvalidArgumentError("kernel grid: prefill chunks must be > 0");
  }
  if (axes.q_heads_per_kv <= 0 || axes.mla_q_heads <= 0) {
    return absl::InvalidArgumentError("kernel grid: query heads must be > 0");
  }
  KernelGrid grid;
  grid.notes.push_back(absl::StrCat("assumed query heads per kv head (GQA): ", axes.q_heads_per_kv,
                                    "; MLA query heads per rank: ", axes.mla_q_heads));
  std::vector<int> spec_widths = {0};
  if (engine.speculative.enabled && engine.speculative.num_speculative_tokens > 0) {
    spec_widths.push_back(engine.speculative.num_speculative_tokens);
  }
  // Shapes in order of first appearance, with the policies that have them and their layers.
  std::vector<GridPoint> shapes;
  std::map<ShapeKey, size_t> index;
  for (const KvPlan& plan : plans) {
    for (const KvGroup& g : plan.groups) {
      GridPoint s;
      s.kind = std::string(LayerKindName(g.kind));
      s.block_size = g.block_size;
      s.kernel_block_size = g.kernel_block_size > 0 ? g.kernel_block_size : g.block_size;
      s.page_bytes = g.page_bytes;
      const LayerSpec* layer = LayerOf(model, g);
      if (layer == nullptr) {
        grid.notes.push_back(absl::StrCat("policy ", plan.policy, ": no layer spec for a ", s.kind,
                                          " group; skipped"));
        continue;
      }
      if (g.kind == LayerKind::kMamba) {
        s.elem_bytes = 4;
        s.state_bytes = layer->state_bytes;
      } else {
        const int eb = KvDtypeBytes(layer->kv_dtype);
        if (eb > 2) {
          grid.notes.push_back(absl::StrCat("policy ", plan.policy, ": ", s.kind,
                                            " group with a 4-byte KV dtype: the kernels read bf16 "
                                            "or fp8 only; skipped"));
          continue;
        }
        // fp16 pages are timed as bf16: same bytes, same kernel.
        s.elem_bytes = eb;
        if (g.kind == LayerKind::kMla) {
          s.kv_heads = 1;
          s.q_heads = axes.mla_q_heads;
          s.k_dim = layer->kv_lora_rank + layer->qk_rope_head_dim;
          s.v_dim = layer->kv_lora_rank;
        } else {
          s.kv_heads = layer->num_kv_heads;
          s.q_heads = layer->num_kv_heads * axes.q_heads_per_kv;
          s.k_dim = layer->head_size;
          s.v_dim = layer->head_size_v > 0 ? layer->head_size_v : layer->head_size;
          s.window = g.kind == LayerKind::kSlidingWindow ? g.sliding_window : 0;
          s.chunk = g.kind == LayerKind::kChunkedLocal ? g.attention_chunk_size : 0;
        }
      }
      auto [it, inserted] = index.emplace(KeyOf(s), shapes.size());
      if (inserted) {
        s.policies = plan.policy;
        s.num_layers = g.num_layers;
        shapes.push_back(s);
        continue;
      }
      GridPoint& known = shapes[it->second];
      // Layers are counted in the plan that first has the shape (its groups come first).
      if (known.policies == plan.policy) {
        known.num_layers += g.num_layers;
      } else if (known.policies.find(plan.policy) == std::string::npos) {
        known.policies += "+" + plan.policy;
      }
    }
  }
  const int64_t mid_context = axes.contexts[axes.contexts.size() / 2];
  for (const GridPoint& s : shapes) {
    auto add = [&](KernelOp op, int batch, int q_tokens, int64_t context) {
      GridPoint p = s;
      p.op = op;
      p.batch = batch;
      p.q_tokens = q_tokens;
      p.context = context;
      grid.points.push_back(p);
    };
    if (s.kind == "mamba") {
      for (int b : axes.batches) add(KernelOp::kStateStep, b, 1, 1);
      for (int b : axes.batches) add(KernelOp::kStateCopy, b, 1, 1);
      continue;
    }
    const bool mla = s.kind == "mla";
    for (int w : spec_widths) {
      for (int b : axes.batches) {
        for (int64_t c : axes.contexts) {
          if (c >= 1 + w) add(mla ? KernelOp::kMlaDecode : KernelOp::kDecode, b, 1 + w, c);
        }
      }
    }
    // A chunk after a prefix of 0 and of each context length: rectilinear in (chunk, prefix).
    for (int chunk : axes.prefill_chunks) {
      add(mla ? KernelOp::kMlaPrefill : KernelOp::kPrefill, 1, chunk, chunk);
      for (int64_t c : axes.contexts) {
        add(mla ? KernelOp::kMlaPrefill : KernelOp::kPrefill, 1, chunk, chunk + c);
      }
    }
    // The append writes rows wherever the context ends; its cost does not depend on the context.
    for (int w : spec_widths) {
      for (int b : axes.batches)
        add(KernelOp::kAppend, b, 1 + w, std::max<int64_t>(mid_context, 1 + w));
    }
    for (int chunk : axes.prefill_chunks) {
      add(KernelOp::kAppend, 1, chunk, std::max<int64_t>(mid_context, chunk));
    }
  }
  return grid;
}

std::string FormatGridFile(const KernelGrid& grid,
                           const std::vector<std::string>& header_comments) {
  std::string out;
  for (const std::string& c : header_comments) absl::StrAppend(&out, "# ", c, "\n");
  for (const std::string& n : grid.notes) absl::StrAppend(&out, "# note: ", n, "\n");
  absl::StrAppend(&out, FormatGridHeader(), "\n");
  for (const GridPoint& p : grid.points) absl::StrAppend(&out, FormatGridPoint(p), "\n");
  return out;
}

}  // namespace prefixsim::cuda
