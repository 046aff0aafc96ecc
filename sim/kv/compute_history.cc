#include "sim/kv/compute_history.h"

#include "prefixsim/status.h"

namespace prefixsim {
namespace kv {

ComputeHistory::ComputeHistory(int num_replicas)
    : num_replicas_(num_replicas),
      words_(static_cast<size_t>((num_replicas + 63) / 64)),
      staged_(static_cast<size_t>(num_replicas)) {
  PREFIXSIM_CHECK(num_replicas >= 1);
}

void ComputeHistory::Commit() {
  for (int replica = 0; replica < num_replicas_; ++replica) {
    std::vector<uint64_t>& staged = staged_[static_cast<size_t>(replica)].hashes;
    auto& word = words_[static_cast<size_t>(replica / 64)];
    const uint64_t bit = uint64_t{1} << (replica % 64);
    for (uint64_t hash : staged) word[hash] |= bit;
    staged.clear();
  }
}

bool ComputeHistory::ComputedBy(uint64_t hash, int replica) const {
  const auto& word = words_[static_cast<size_t>(replica / 64)];
  auto it = word.find(hash);
  return it != word.end() && (it->second >> (replica % 64) & 1) != 0;
}

ComputeHistory::Seen ComputeHistory::Find(uint64_t hash, int replica) const {
  const size_t own = static_cast<size_t>(replica / 64);
  auto it = words_[own].find(hash);
  if (it != words_[own].end()) {
    return Seen{true, (it->second >> (replica % 64) & 1) != 0};
  }
  for (size_t w = 0; w < words_.size(); ++w) {
    if (w != own && words_[w].contains(hash)) return Seen{true, false};
  }
  return Seen{};
}

int64_t ComputeHistory::size() const {
  int64_t n = 0;
  for (const auto& word : words_) n += static_cast<int64_t>(word.size());
  return n;
}

}  // namespace kv
}  // namespace prefixsim
