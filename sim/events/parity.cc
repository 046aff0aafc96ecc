#include "sim/events/parity.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "prefixsim/status.h"
#include "sim/events/cached_blocks.h"

namespace prefixsim::events {
namespace {

constexpr std::string_view kQueries = "vllm:prefix_cache_queries";
constexpr std::string_view kHits = "vllm:prefix_cache_hits";

bool IsMetricNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':';
}

// Prometheus' sample values: a float, or +Inf/-Inf/NaN.
bool ParseSampleValue(std::string_view s, double* out) {
  if (s == "+Inf" || s == "Inf") {
    *out = HUGE_VAL;
    return true;
  }
  if (s == "-Inf") {
    *out = -HUGE_VAL;
    return true;
  }
  if (s == "NaN") {
    *out = NAN;
    return true;
  }
  return !s.empty() && absl::SimpleAtod(std::string(s), out);
}

std::string_view TrimWhitespace(std::string_view s) {
  const size_t first = s.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t\r") - first + 1);
}

using Key = CachedBlocks::Key;

std::map<int64_t, std::vector<const EventBatch*>> ByRank(const std::vector<EventBatch>& batches) {
  std::map<int64_t, std::vector<const EventBatch*>> out;
  for (const EventBatch& b : batches) out[b.data_parallel_rank.value_or(0)].push_back(&b);
  return out;
}

// The keys a batch changes on its side: those it stores or removes, and with AllBlocksCleared
// every key the side holds (read before the batch is applied).
void TouchedKeys(const EventBatch& b, const CachedBlocks& side, std::vector<Key>* keys) {
  for (const KvEvent& e : b.events) {
    if (const auto* s = std::get_if<BlockStored>(&e)) {
      for (ExternalBlockHash h : s->block_hashes) keys->push_back({s->group_idx.value_or(0), h});
    } else if (const auto* r = std::get_if<BlockRemoved>(&e)) {
      for (ExternalBlockHash h : r->block_hashes) keys->push_back({r->group_idx.value_or(0), h});
    } else {
      for (const auto& [k, n] : side.blocks()) keys->push_back(k);
    }
  }
}

int64_t CountOf(const CachedBlocks& c, const Key& k) {
  const auto it = c.blocks().find(k);
  return it == c.blocks().end() ? 0 : it->second;
}

void Count(const EventBatch& b, std::map<int64_t, GroupDivergence>& groups, bool simulated,
           std::set<Key>& stored) {
  for (const KvEvent& e : b.events) {
    if (const auto* s = std::get_if<BlockStored>(&e)) {
      GroupDivergence& g = groups[s->group_idx.value_or(0)];
      (simulated ? g.stored_sim : g.stored_measured) +=
          static_cast<int64_t>(s->block_hashes.size());
      for (ExternalBlockHash h : s->block_hashes) stored.insert({s->group_idx.value_or(0), h});
    } else if (const auto* r = std::get_if<BlockRemoved>(&e)) {
      GroupDivergence& g = groups[r->group_idx.value_or(0)];
      (simulated ? g.removed_sim : g.removed_measured) +=
          static_cast<int64_t>(r->block_hashes.size());
    }
  }
}

}  // namespace

absl::StatusOr<std::map<std::string, double>> ParsePromText(std::string_view contents,
                                                            std::string_view name) {
  std::map<std::string, double> out;
  int64_t line_no = 0;
  size_t start = 0;
  while (start < contents.size()) {
    size_t end = contents.find('\n', start);
    if (end == std::string_view::npos) end = contents.size();
    const std::string raw(contents.substr(start, end - start));
    const std::string_view line = TrimWhitespace(raw);
    start = end + 1;
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    auto error = [&](std::string_view what) {
      return absl::InvalidArgumentError(
          absl::StrCat(std::string(name), ": line ", line_no, ": ", std::string(what)));
    };
    size_t i = 0;
    while (i < line.size() && IsMetricNameChar(line[i])) ++i;
    if (i == 0) return error("expected a metric name");
    std::string metric(line.substr(0, i));
    if (i < line.size() && line[i] == '{') {
      // Labels: skip to the closing brace, minding quoted values (which may hold '}' or '\"').
      bool quoted = false;
      ++i;
      for (; i < line.size(); ++i) {
        if (quoted && line[i] == '\\') {
          ++i;
        } else if (line[i] == '"') {
          quoted = !quoted;
        } else if (!quoted && line[i] == '}') {
          break;
        }
      }
      if (i >= line.size()) return error("unterminated label set");
      ++i;
    }
    const std::string_view rest = TrimWhitespace(line.substr(i));
    const std::string_view value_text = rest.substr(0, rest.find_first_of(" \t"));
    double value = 0;
    if (value_text.empty())
      return error(absl::StrCat("sample of ", std::string(metric), " has no value"));
    if (!ParseSampleValue(value_text, &value)) {
      return error(absl::StrCat("sample of ", std::string(metric), ": \"", std::string(value_text),
                                "\" is not a number"));
    }
    if (metric.size() > 6 && metric.compare(metric.size() - 6, 6, "_total") == 0) {
      metric.resize(metric.size() - 6);
    }
    out[metric] += value;
  }
  return out;
}

absl::StatusOr<MeasuredHitRate> MeasuredFromScrapes(const std::map<std::string, double>& before,
                                                    std::string_view before_name,
                                                    const std::map<std::string, double>& after,
                                                    std::string_view after_name) {
  auto get = [](const std::map<std::string, double>& m, std::string_view metric,
                std::string_view file) -> absl::StatusOr<double> {
    auto it = m.find(std::string(metric));
    if (it == m.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(std::string(file), ": no ", std::string(metric),
                       " counter (is this vLLM's /metrics with prefix caching on?)"));
    }
    return it->second;
  };
  MeasuredHitRate out;
  PREFIXSIM_ASSIGN_OR_RETURN(const double q0, get(before, kQueries, before_name));
  PREFIXSIM_ASSIGN_OR_RETURN(const double h0, get(before, kHits, before_name));
  PREFIXSIM_ASSIGN_OR_RETURN(const double q1, get(after, kQueries, after_name));
  PREFIXSIM_ASSIGN_OR_RETURN(const double h1, get(after, kHits, after_name));
  if (q1 < q0 || h1 < h0) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(after_name), ": the counters are lower than in ",
                     std::string(before_name), " (engine restarted, or the files swapped?)"));
  }
  out.queries = q1 - q0;
  out.hits = h1 - h0;
  return out;
}

// The two caches are compared by their difference, kept as the batches come: the keys whose
// counts differ, and how many per group. A step costs the keys its batches touch, not the
// caches' size.
absl::StatusOr<EventDivergence> CompareEventHistories(const std::vector<EventBatch>& simulated,
                                                      const std::vector<EventBatch>& measured) {
  EventDivergence out;
  const auto sim_ranks = ByRank(simulated), measured_ranks = ByRank(measured);
  std::set<int64_t> ranks;
  for (const auto& [r, _] : sim_ranks) ranks.insert(r);
  for (const auto& [r, _] : measured_ranks) ranks.insert(r);
  std::vector<Key> touched;
  for (int64_t rank : ranks) {
    static const std::vector<const EventBatch*> kNone;
    const auto& a = sim_ranks.count(rank) ? sim_ranks.at(rank) : kNone;
    const auto& b = measured_ranks.count(rank) ? measured_ranks.at(rank) : kNone;
    CachedBlocks sim_cache, measured_cache;
    std::map<int64_t, GroupDivergence> groups;
    std::set<Key> stored_sim, stored_measured;
    std::set<Key> differing;                // keys whose counts differ between the sides
    std::map<int64_t, int64_t> mismatched;  // group -> its keys in `differing`
    bool diverged = false;                  // this rank's first divergence is recorded
    const size_t steps = std::max(a.size(), b.size());
    for (size_t step = 0; step < steps; ++step) {
      touched.clear();
      if (step < a.size()) {
        TouchedKeys(*a[step], sim_cache, &touched);
        Count(*a[step], groups, true, stored_sim);
        absl::Status s = sim_cache.Apply(*a[step]);
        if (!s.ok()) {
          return absl::FailedPreconditionError(
              absl::StrCat("simulated events, replica ", rank, " step ", step, ": ", s.message()));
        }
      }
      if (step < b.size()) {
        TouchedKeys(*b[step], measured_cache, &touched);
        Count(*b[step], groups, false, stored_measured);
        absl::Status s = measured_cache.Apply(*b[step]);
        if (!s.ok()) {
          return absl::FailedPreconditionError(
              absl::StrCat("measured events, replica ", rank, " step ", step, ": ", s.message()));
        }
      }
      for (const Key& k : touched) {
        if (CountOf(sim_cache, k) != CountOf(measured_cache, k)) {
          if (differing.insert(k).second) ++mismatched[k.first];
        } else if (differing.erase(k) > 0) {
          --mismatched[k.first];
        }
      }
      bool all_agree = true;
      for (auto& [group, g] : groups) {
        if (mismatched[group] == 0) {
          ++g.steps_agreeing;
          continue;
        }
        all_agree = false;
        // The earliest step over all replicas; on a tie the lower replica (ranks go in order),
        // then the lower group (groups go in order).
        if (!diverged && (!out.first_divergent_step.has_value() ||
                          static_cast<int64_t>(step) < *out.first_divergent_step)) {
          out.first_divergent_step = static_cast<int64_t>(step);
          out.first_divergent_rank = rank;
          out.first_divergent_group = group;
        }
        diverged = true;
      }
      if (out.replicas_at_step.size() <= step) {
        out.replicas_at_step.resize(step + 1, 0);
        out.agreeing_at_step.resize(step + 1, 0);
      }
      ++out.replicas_at_step[step];
      if (all_agree) {
        ++out.steps_agreeing;
        ++out.agreeing_at_step[step];
      }
    }
    out.steps += static_cast<int64_t>(steps);
    for (auto& [group, g] : groups) {
      g.rank = rank;
      g.group = group;
      for (const Key& k : stored_sim) {
        if (k.first == group && !stored_measured.count(k)) ++g.stored_sim_only;
      }
      for (const Key& k : stored_measured) {
        if (k.first == group && !stored_sim.count(k)) ++g.stored_measured_only;
      }
      out.groups.push_back(g);
    }
  }
  return out;
}

}  // namespace prefixsim::events
