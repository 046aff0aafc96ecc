#include "sim/kv/computed_record.h"

#include <algorithm>
#include <utility>

namespace prefixsim::kv {

namespace {
// Fingerprints are uniformly mixed: the low bits place them.
constexpr uint64_t kInitialSlots = 1024;
}  // namespace

bool ComputedRecord::Set::Contains(uint64_t f) const {
  if (size_ == 0) return false;
  for (uint64_t i = f & mask_;; i = (i + 1) & mask_) {
    if (slots_[i] == f) return true;
    if (slots_[i] == 0) return false;
  }
}

void ComputedRecord::Set::Prefetch(uint64_t f) const {
  if (slots_.size() > 0) __builtin_prefetch(&slots_[f & mask_]);
}

void ComputedRecord::Set::Insert(uint64_t f) {
  if (static_cast<uint64_t>(size_ + 1) * 8 > slots_.size() * 7) Grow();
  for (uint64_t i = f & mask_;; i = (i + 1) & mask_) {
    if (slots_[i] == f) return;
    if (slots_[i] == 0) {
      slots_[i] = f;
      ++size_;
      return;
    }
  }
}

void ComputedRecord::Set::Erase(uint64_t f) {
  if (size_ == 0) return;
  uint64_t i = f & mask_;
  while (slots_[i] != f) {
    if (slots_[i] == 0) return;
    i = (i + 1) & mask_;
  }
  // Backward shift: move later entries of the run into the hole unless their home lies
  // cyclically in (hole, entry].
  for (uint64_t j = (i + 1) & mask_; slots_[j] != 0; j = (j + 1) & mask_) {
    const uint64_t home = slots_[j] & mask_;
    const bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
    if (!stays) {
      slots_[i] = slots_[j];
      i = j;
    }
  }
  slots_[i] = 0;
  --size_;
}

void ComputedRecord::Set::Grow() {
  BigArray<uint64_t> old(std::max<uint64_t>(kInitialSlots, slots_.size() * 2), uint64_t{0});
  std::swap(old, slots_);
  mask_ = slots_.size() - 1;
  size_ = 0;
  for (size_t i = 0; i < old.size(); ++i) {
    if (old[i] != 0) Insert(old[i]);
  }
}

void ComputedRecord::Flush() const {
  constexpr size_t kAhead = 8;
  const size_t n = pending_.size();
  for (size_t k = 0; k < n; ++k) {
    if (k + kAhead < n) {
      current_.Prefetch(pending_[k + kAhead]);
      if (bound_ > 0) previous_.Prefetch(pending_[k + kAhead]);
    }
    const uint64_t f = pending_[k];
    if (bound_ > 0) {
      // The newest copy lives in the current generation: the older one would be counted as
      // forgotten with its generation while still known.
      previous_.Erase(f);
      if (current_.size() >= bound_ / 2 && !current_.Contains(f)) {
        forgotten_ += previous_.size();
        previous_ = std::move(current_);
        current_ = Set();
      }
    }
    current_.Insert(f);
  }
  pending_.clear();
}

bool ComputedRecord::Contains(const HashPair& h) const {
  if (!pending_.empty()) Flush();
  const uint64_t f = Fingerprint(h);
  return current_.Contains(f) || previous_.Contains(f);
}

int64_t ComputedRecord::size() const {
  if (!pending_.empty()) Flush();
  return current_.size() + previous_.size();
}

}  // namespace prefixsim::kv
