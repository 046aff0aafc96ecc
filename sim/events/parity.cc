#include "sim/events/parity.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sim/events/cached_blocks.h"
#include "sim/util/status_macros.h"

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

// Moves *i from the '{' opening a label set past its closing '}', minding quoted values (which
// may hold '}' or '\"'); false when the set is not closed.
bool SkipLabelSet(std::string_view line, size_t* i) {
  bool quoted = false;
  for (size_t k = *i + 1; k < line.size(); ++k) {
    if (quoted && line[k] == '\\') {
      ++k;
    } else if (line[k] == '"') {
      quoted = !quoted;
    } else if (!quoted && line[k] == '}') {
      *i = k + 1;
      return true;
    }
  }
  return false;
}

// A label set's pairs sorted, so that {a="1",b="2"} and {b="2",a="1"} are one series.
std::string SortedLabels(std::string_view inside) {
  std::vector<std::string> pairs;
  std::string current;
  bool quoted = false;
  for (size_t k = 0; k < inside.size(); ++k) {
    const char c = inside[k];
    if (quoted && c == '\\' && k + 1 < inside.size()) {
      current += c;
      current += inside[++k];
      continue;
    }
    if (c == '"') quoted = !quoted;
    if (!quoted && c == ',') {
      if (!TrimWhitespace(current).empty()) pairs.emplace_back(TrimWhitespace(current));
      current.clear();
      continue;
    }
    current += c;
  }
  if (!TrimWhitespace(current).empty()) pairs.emplace_back(TrimWhitespace(current));
  std::sort(pairs.begin(), pairs.end());
  std::string out;
  for (const std::string& p : pairs) absl::StrAppend(&out, out.empty() ? "" : ",", p);
  return out;
}

std::string SeriesName(std::string_view metric, std::string_view labels) {
  return labels.empty() ? std::string(metric)
                        : absl::StrCat(std::string(metric), "{", std::string(labels), "}");
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

std::optional<double> PromScrape::Sum(std::string_view metric) const {
  const auto it = series.find(std::string(metric));
  if (it == series.end()) return std::nullopt;
  double sum = 0;
  for (const auto& [labels, sample] : it->second) sum += sample.value;
  return sum;
}

absl::StatusOr<PromScrape> ParsePromText(std::string_view contents, std::string_view name) {
  PromScrape out;
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
    std::string labels;
    if (i < line.size() && line[i] == '{') {
      const size_t open = i;
      if (!SkipLabelSet(line, &i)) return error("unterminated label set");
      labels = SortedLabels(line.substr(open + 1, i - open - 2));
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
    const auto [it, inserted] = out.series[metric].try_emplace(labels, PromSample{value, line_no});
    if (!inserted) {
      return error(absl::StrCat("series ", SeriesName(metric, labels),
                                " is given twice (first at line ", it->second.line,
                                "): one scrape has one sample per series"));
    }
  }
  return out;
}

absl::StatusOr<MeasuredHitRate> MeasuredFromScrapes(const PromScrape& before,
                                                    std::string_view before_name,
                                                    const PromScrape& after,
                                                    std::string_view after_name) {
  // One counter's increase between the scrapes, series by series.
  auto increase = [&](std::string_view metric) -> absl::StatusOr<int64_t> {
    const std::string key(metric);
    for (const auto& [scrape, file] : {std::pair{&before, before_name}, {&after, after_name}}) {
      const auto it = scrape->series.find(key);
      if (it == scrape->series.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat(std::string(file), ": no ", key,
                         " counter (is this vLLM's /metrics with prefix caching on?)"));
      }
      for (const auto& [labels, sample] : it->second) {
        if (!std::isfinite(sample.value) || sample.value < 0 ||
            sample.value != std::floor(sample.value) || sample.value > 9e15) {
          return absl::InvalidArgumentError(
              absl::StrCat(std::string(file), ": line ", sample.line, ": ", SeriesName(key, labels),
                           " is ", sample.value, ": a counter of tokens is a whole number from 0"));
        }
      }
    }
    const auto& was = before.series.at(key);
    const auto& is = after.series.at(key);
    int64_t total = 0;
    for (const auto& [labels, sample] : was) {
      const auto now = is.find(labels);
      if (now == is.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat(std::string(after_name), ": no series ", SeriesName(key, labels),
                         ", which ", std::string(before_name), " has at line ", sample.line,
                         " (another server, or an engine gone between the scrapes?)"));
      }
      if (now->second.value < sample.value) {
        return absl::InvalidArgumentError(
            absl::StrCat(std::string(after_name), ": line ", now->second.line, ": ",
                         SeriesName(key, labels), " is lower than in ", std::string(before_name),
                         " (line ", sample.line, "): engine restarted, or the files swapped?"));
      }
      total += static_cast<int64_t>(now->second.value - sample.value);
    }
    // A series the first scrape lacks counted from 0: an engine that had not served yet.
    for (const auto& [labels, sample] : is) {
      if (!was.contains(labels)) total += static_cast<int64_t>(sample.value);
    }
    return total;
  };
  MeasuredHitRate out;
  PREFIXSIM_ASSIGN_OR_RETURN(out.queries, increase(kQueries));
  PREFIXSIM_ASSIGN_OR_RETURN(out.hits, increase(kHits));
  if (out.queries == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(before_name), ", ", std::string(after_name), ": ", std::string(kQueries),
        " did not move between the scrapes: no request was served between them (the same "
        "scrape twice, or the trace not sent?)"));
  }
  if (out.hits > out.queries) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(before_name), ", ", std::string(after_name), ": ", out.hits,
                     " prefix-cache hits between the scrapes but only ", out.queries,
                     " queries: the counters are not from one engine's run"));
  }
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

std::vector<std::string> ComparabilityWarnings(const std::vector<EventBatch>& simulated,
                                               const std::vector<EventBatch>& measured,
                                               const std::vector<int64_t>& group_block_sizes) {
  std::vector<std::string> out;
  if (measured.empty()) {
    out.emplace_back("the vLLM log holds no batch: nothing was compared");
    return out;
  }
  std::set<int64_t> sim_ranks, measured_ranks;
  for (const EventBatch& b : simulated) sim_ranks.insert(b.data_parallel_rank.value_or(0));
  for (const EventBatch& b : measured) measured_ranks.insert(b.data_parallel_rank.value_or(0));
  std::vector<std::string> only_measured;
  for (int64_t r : measured_ranks) {
    if (!sim_ranks.count(r)) only_measured.push_back(absl::StrCat(r));
  }
  if (!only_measured.empty()) {
    out.push_back(absl::StrCat("the vLLM log has replicas (data_parallel_rank) ",
                               absl::StrJoin(only_measured, ", "),
                               " that the simulation does not: their events are compared with "
                               "nothing (`replicas` ",
                               sim_ranks.size(), " simulated)"));
  }
  if (measured_ranks.size() != sim_ranks.size()) {
    out.push_back(absl::StrCat("the vLLM log has ", measured_ranks.size(),
                               " replicas and the simulation ", sim_ranks.size(),
                               ": replay with as many `replicas` as the engine ran"));
  }
  int64_t without_group = 0;
  std::map<std::pair<int64_t, int64_t>, int64_t> wrong_sizes;  // (group, size) -> events
  std::set<std::pair<int64_t, ExternalBlockHash>> sim_stored;
  for (const EventBatch& b : simulated) {
    for (const KvEvent& e : b.events) {
      if (const auto* s = std::get_if<BlockStored>(&e)) {
        for (ExternalBlockHash h : s->block_hashes)
          sim_stored.insert({s->group_idx.value_or(0), h});
      }
    }
  }
  int64_t measured_stored = 0, shared = 0;
  for (const EventBatch& b : measured) {
    for (const KvEvent& e : b.events) {
      if (const auto* s = std::get_if<BlockStored>(&e)) {
        const int64_t g = s->group_idx.value_or(0);
        if (!s->group_idx) ++without_group;
        if (g >= 0 && g < static_cast<int64_t>(group_block_sizes.size()) &&
            s->block_size != group_block_sizes[static_cast<size_t>(g)]) {
          ++wrong_sizes[{g, s->block_size}];
        }
        for (ExternalBlockHash h : s->block_hashes) {
          ++measured_stored;
          shared += sim_stored.count({g, h}) ? 1 : 0;
        }
      } else if (const auto* r = std::get_if<BlockRemoved>(&e)) {
        if (!r->group_idx) ++without_group;
      }
    }
  }
  if (without_group > 0) {
    out.push_back(absl::StrCat(without_group,
                               " events of the vLLM log carry no group_idx (a vLLM from before "
                               "KV cache groups): all of them are read as group 0"));
  }
  for (const auto& [key, events] : wrong_sizes) {
    out.push_back(absl::StrCat(
        "group ", key.first, "'s blocks are ", key.second, " tokens in the vLLM log (", events,
        " stores) and ", group_block_sizes[static_cast<size_t>(key.first)],
        " in the simulated plan: another policy or block size, so its hashes cannot match"));
  }
  if (measured_stored > 0 && !sim_stored.empty() && shared == 0) {
    out.push_back(absl::StrCat(
        "no block hash of the vLLM log (", measured_stored,
        " stored) is one the simulation stored: a real engine's hashes come from its own hash "
        "function and seed, which the simulation does not reproduce, so the cached sets cannot "
        "agree and the step agreement means nothing; compare the per-group stored and removed "
        "counts instead"));
  }
  return out;
}

}  // namespace prefixsim::events
