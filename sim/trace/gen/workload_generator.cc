#include "sim/trace/gen/workload_generator.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "sim/trace/content_ids.h"

namespace prefixsim {
namespace {

constexpr double kPi = 3.14159265358979323846;

// Distributions from the raw 64-bit output of mt19937_64 (portable across standard libraries).
class Sampler {
 public:
  explicit Sampler(uint64_t seed) : rng_(seed) {}
  double Uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }  // [0, 1)
  double Exponential(double rate) { return -std::log1p(-Uniform()) / rate; }
  double Normal() {
    // Box-Muller; the second value is dropped so each call draws exactly two numbers.
    double u1 = 1.0 - Uniform();
    double u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * kPi * u2);
  }
  // Log-normal with the given median, rounded and clipped to [lo, hi]. LLM prompt and answer
  // lengths are close to log-normal in public traces (ShareGPT, Azure, Mooncake).
  int64_t LogNormal(double median, double sigma, int64_t lo, int64_t hi) {
    double v = median * std::exp(sigma * Normal());
    return std::clamp<int64_t>(std::llround(v), lo, hi);
  }
  // Number of failures before the first success, with the given mean.
  int64_t Geometric(double mean) {
    double p = 1.0 / (1.0 + mean);
    return static_cast<int64_t>(std::floor(std::log1p(-Uniform()) / std::log1p(-p)));
  }
  size_t Pick(const std::vector<double>& weights) {
    double total = std::accumulate(weights.begin(), weights.end(), 0.0);
    double x = Uniform() * total;
    for (size_t i = 0; i < weights.size(); ++i) {
      if (x < weights[i]) return i;
      x -= weights[i];
    }
    return weights.size() - 1;
  }
  bool Bernoulli(double p) { return Uniform() < p; }

 private:
  std::mt19937_64 rng_;
};

// Session (or request) start times. Bursty: a two-state Markov-modulated Poisson process, bursts
// at 3.25x the mean rate for ~20 s, lulls at 0.25x for ~60 s; the long-run mean is the rate.
class ArrivalProcess {
 public:
  ArrivalProcess(Sampler& sampler, double rate, bool bursty)
      : sampler_(sampler), rate_(rate), bursty_(bursty) {
    if (bursty_) state_end_s_ = sampler_.Exponential(1.0 / kLullMeanS);
  }
  double Next() {
    if (!bursty_) return now_s_ += sampler_.Exponential(rate_);
    while (true) {
      double state_rate = rate_ * (in_burst_ ? 3.25 : 0.25);
      double candidate = now_s_ + sampler_.Exponential(state_rate);
      if (candidate < state_end_s_) return now_s_ = candidate;
      // Memoryless: restart the clock at the state change.
      now_s_ = state_end_s_;
      in_burst_ = !in_burst_;
      state_end_s_ = now_s_ + sampler_.Exponential(1.0 / (in_burst_ ? kBurstMeanS : kLullMeanS));
    }
  }

 private:
  static constexpr double kBurstMeanS = 20;
  static constexpr double kLullMeanS = 60;
  Sampler& sampler_;
  double rate_;
  bool bursty_;
  bool in_burst_ = false;
  double now_s_ = 0;
  double state_end_s_ = 0;
};

class Generator {
 public:
  explicit Generator(const WorkloadOptions& options) : options_(options), sampler_(options.seed) {}

  std::vector<GeneratedRequest> Run() {
    if (options_.kind == "chat") Chat();
    if (options_.kind == "agentic") Agentic();
    if (options_.kind == "shared_doc") SharedDoc();
    std::stable_sort(requests_.begin(), requests_.end(),
                     [](const GeneratedRequest& a, const GeneratedRequest& b) {
                       return a.arrival_ns < b.arrival_ns;
                     });
    requests_.resize(static_cast<size_t>(options_.requests));
    return std::move(requests_);
  }

 private:
  // A fresh piece of text: tokens [0, length) of a new content stream.
  ContentSegment NewPiece(int64_t length) {
    return {ContentIdFor(ContentTag::kGenerated, MixPair(options_.seed, ++pieces_)), 0,
            static_cast<uint32_t>(length)};
  }
  static int64_t Tokens(const std::vector<ContentSegment>& segments) {
    int64_t total = 0;
    for (const auto& s : segments) total += s.length;
    return total;
  }
  bool Enough() const { return static_cast<int64_t>(requests_.size()) >= options_.requests; }
  ArrivalProcess Arrivals(double rate) {
    return ArrivalProcess(sampler_, rate, options_.arrival == "bursty");
  }
  void Emit(double arrival_s, const std::vector<ContentSegment>& prompt, ContentSegment answer,
            const std::string& session) {
    GeneratedRequest request;
    request.arrival_ns = std::llround(arrival_s * 1e9);
    request.prompt = prompt;
    request.answer = {answer};
    request.output_tokens = answer.length;
    request.session_id = session;
    requests_.push_back(std::move(request));
  }

  // Multi-turn chat: a few shared system prompts; each turn's prompt is the system prompt, the
  // whole history (earlier questions and answers) and the new question; users think between turns.
  void Chat() {
    std::vector<ContentSegment> systems;
    for (int64_t length : {600, 1500, 3000, 5000, 9000}) systems.push_back(NewPiece(length));
    const std::vector<double> system_weights = {0.35, 0.25, 0.2, 0.12, 0.08};
    constexpr double kMeanTurns = 5;
    ArrivalProcess starts = Arrivals(options_.rate_per_s / kMeanTurns);
    for (int64_t session = 0; !Enough(); ++session) {
      double t = starts.Next();
      std::vector<ContentSegment> history = {systems[sampler_.Pick(system_weights)]};
      const int64_t turns = std::min<int64_t>(1 + sampler_.Geometric(kMeanTurns - 1), 40);
      const std::string session_id = absl::StrCat("chat-", session);
      for (int64_t turn = 0; turn < turns; ++turn) {
        // Mostly short questions; sometimes a pasted document.
        int64_t question = sampler_.Bernoulli(0.12) ? sampler_.LogNormal(6000, 0.7, 500, 30000)
                                                    : sampler_.LogNormal(120, 1.0, 5, 4000);
        int64_t answer_length = sampler_.LogNormal(300, 0.9, 1, 4096);
        if (Tokens(history) + question > options_.max_prompt_tokens) break;
        history.push_back(NewPiece(question));
        ContentSegment answer = NewPiece(answer_length);
        Emit(t, history, answer, session_id);
        history.push_back(answer);
        // Generation time, then reading and typing.
        t += 0.5 + 0.025 * static_cast<double>(answer_length) +
             static_cast<double>(sampler_.LogNormal(25, 0.9, 2, 600));
      }
    }
  }

  // Agentic tool loops: a long shared prefix (system prompt + tool definitions), a task, then many
  // short turns, each a tool call (the output) followed by its result, seconds apart.
  void Agentic() {
    std::vector<ContentSegment> prefixes;
    for (int64_t length : {9000, 15000, 24000}) prefixes.push_back(NewPiece(length));
    const std::vector<double> prefix_weights = {0.5, 0.3, 0.2};
    constexpr double kMeanTurns = 12;
    ArrivalProcess starts = Arrivals(options_.rate_per_s / kMeanTurns);
    for (int64_t session = 0; !Enough(); ++session) {
      double t = starts.Next();
      std::vector<ContentSegment> history = {prefixes[sampler_.Pick(prefix_weights)],
                                             NewPiece(sampler_.LogNormal(700, 0.8, 50, 6000))};
      const int64_t turns = std::min<int64_t>(3 + sampler_.Geometric(kMeanTurns - 3), 80);
      const std::string session_id = absl::StrCat("agent-", session);
      for (int64_t turn = 0; turn < turns; ++turn) {
        int64_t call_length = sampler_.LogNormal(90, 0.6, 5, 1500);
        int64_t result_length = sampler_.LogNormal(500, 1.1, 10, 12000);
        if (Tokens(history) > options_.max_prompt_tokens) break;
        ContentSegment call = NewPiece(call_length);
        Emit(t, history, call, session_id);
        history.push_back(call);
        history.push_back(NewPiece(result_length));
        // Decoding the call, then the tool runs.
        t += 0.2 + 0.02 * static_cast<double>(call_length) +
             0.1 * static_cast<double>(sampler_.LogNormal(15, 0.9, 1, 600));
      }
    }
  }

  // Shared documents and few-shot prompts: independent single requests over a popular set of
  // documents (Zipf popularity) with one few-shot block per task.
  void SharedDoc() {
    ContentSegment system = NewPiece(400);
    std::vector<ContentSegment> few_shots;
    for (int64_t length : {1500, 2500, 3500, 5000}) few_shots.push_back(NewPiece(length));
    std::vector<ContentSegment> documents;
    std::vector<double> popularity;
    const int64_t max_document = std::max<int64_t>(1000, options_.max_prompt_tokens - 8000);
    for (int i = 0; i < 24; ++i) {
      documents.push_back(
          NewPiece(sampler_.LogNormal(9000, 0.6, 1000, std::max<int64_t>(1000, max_document))));
      popularity.push_back(1.0 / (i + 1));
    }
    ArrivalProcess arrivals = Arrivals(options_.rate_per_s);
    while (!Enough()) {
      double t = arrivals.Next();
      size_t document = sampler_.Pick(popularity);
      size_t task = sampler_.Pick({0.4, 0.3, 0.2, 0.1});
      std::vector<ContentSegment> prompt = {system, few_shots[task], documents[document],
                                            NewPiece(sampler_.LogNormal(60, 0.8, 5, 1000))};
      Emit(t, prompt, NewPiece(sampler_.LogNormal(200, 0.8, 1, 2048)), "");
    }
  }

  const WorkloadOptions& options_;
  Sampler sampler_;
  uint64_t pieces_ = 0;
  std::vector<GeneratedRequest> requests_;
};

uint32_t TokenFor(uint64_t content_id, uint64_t offset) {
  // A plausible vocabulary-sized id; equal (content, offset) gives equal tokens.
  return static_cast<uint32_t>(100 + MixPair(content_id, offset) % 100000);
}

void AppendTokens(const std::vector<ContentSegment>& segments, std::string* out, bool* first) {
  for (const ContentSegment& s : segments) {
    for (uint32_t i = 0; i < s.length; ++i) {
      if (!*first) out->append(", ");
      *first = false;
      absl::StrAppend(out, TokenFor(s.content_id, s.offset + i));
    }
  }
}

}  // namespace

std::vector<std::string> WorkloadKinds() { return {"chat", "agentic", "shared_doc"}; }

absl::StatusOr<std::vector<GeneratedRequest>> GenerateWorkload(const WorkloadOptions& options) {
  const auto kinds = WorkloadKinds();
  if (std::find(kinds.begin(), kinds.end(), options.kind) == kinds.end()) {
    return absl::InvalidArgumentError(absl::StrCat("`kind`: unknown workload '", options.kind,
                                                   "'; one of ", absl::StrJoin(kinds, ", ")));
  }
  if (options.arrival != "poisson" && options.arrival != "bursty") {
    return absl::InvalidArgumentError(absl::StrCat("`arrival`: unknown arrival process '",
                                                   options.arrival, "'; one of poisson, bursty"));
  }
  if (options.requests < 1) return absl::InvalidArgumentError("`requests` must be positive");
  if (!std::isfinite(options.rate_per_s) || options.rate_per_s <= 0) {
    return absl::InvalidArgumentError(
        "`rate_per_s` must be a positive number of requests per second");
  }
  if (options.max_prompt_tokens < 2000) {
    return absl::InvalidArgumentError("`max_prompt_tokens` must be at least 2000");
  }
  if (options.kind == "agentic" && options.max_prompt_tokens < 32000) {
    return absl::InvalidArgumentError(
        "`max_prompt_tokens` must be at least 32000 for agentic (its shared prefixes are long)");
  }
  Generator generator(options);
  return generator.Run();
}

std::string FormatMooncakeTrace(const std::vector<GeneratedRequest>& requests,
                                int64_t block_tokens) {
  std::string out;
  absl::flat_hash_map<uint64_t, uint64_t> id_of_block;  // prefix-chained block hash -> hash id
  for (const GeneratedRequest& request : requests) {
    int64_t input_length = 0;
    for (const auto& s : request.prompt) input_length += s.length;
    absl::StrAppend(&out, "{\"timestamp\": ", request.arrival_ns / 1'000'000,
                    ", \"input_length\": ", input_length,
                    ", \"output_length\": ", request.output_tokens, ", \"hash_ids\": [");
    // The hash of block b covers its tokens and, through `chain`, every block before it, so an
    // id stands for a whole prefix, as in Mooncake.
    uint64_t chain = 0;
    size_t segment = 0;
    uint32_t offset_in_segment = 0;
    for (int64_t start = 0; start < input_length; start += block_tokens) {
      int64_t remaining = std::min(block_tokens, input_length - start);
      uint64_t h = MixPair(chain, static_cast<uint64_t>(remaining));
      while (remaining > 0) {
        const ContentSegment& s = request.prompt[segment];
        uint32_t take =
            static_cast<uint32_t>(std::min<int64_t>(remaining, s.length - offset_in_segment));
        h = MixPair(h, MixPair(s.content_id, s.offset + offset_in_segment));
        h = MixPair(h, take);
        remaining -= take;
        offset_in_segment += take;
        if (offset_in_segment == s.length) {
          ++segment;
          offset_in_segment = 0;
        }
      }
      chain = h;
      auto [it, inserted] = id_of_block.try_emplace(h, id_of_block.size());
      if (start > 0) out.append(", ");
      absl::StrAppend(&out, it->second);
    }
    out.append("]}\n");
  }
  return out;
}

std::string FormatTokensTrace(const std::vector<GeneratedRequest>& requests) {
  std::string out;
  for (const GeneratedRequest& request : requests) {
    absl::StrAppend(&out, "{\"arrival_s\": ", absl::StrFormat("%.6f", request.arrival_ns * 1e-9));
    if (!request.session_id.empty()) {
      absl::StrAppend(&out, ", \"session_id\": \"", request.session_id, "\"");
    }
    out.append(", \"prompt_token_ids\": [");
    bool first = true;
    AppendTokens(request.prompt, &out, &first);
    absl::StrAppend(&out, "], \"output_length\": ", request.output_tokens,
                    ", \"output_token_ids\": [");
    first = true;
    AppendTokens(request.answer, &out, &first);
    out.append("]}\n");
  }
  return out;
}

}  // namespace prefixsim
