// Stable 64-bit mixing for content ids and sampling. Must not change between releases: content
// ids decide which blocks are shared and sampling decides which sessions are kept, so a change
// would silently change every result. (absl::Hash is seeded per process, so it is not usable.)
#ifndef PREFIXSIM_SIM_TRACE_CONTENT_IDS_H_
#define PREFIXSIM_SIM_TRACE_CONTENT_IDS_H_

#include <cstdint>
#include <string_view>

namespace prefixsim {

// splitmix64's finalizer: a bijection on 64 bits with good avalanche.
constexpr uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

constexpr uint64_t MixPair(uint64_t a, uint64_t b) {
  return Mix64(Mix64(a) ^ (b * 0x9e6c63d0676a9a99ULL) ^ (b >> 29));
}

// FNV-1a, then mixed: a stable hash of a string.
constexpr uint64_t StableStringHash(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return Mix64(h);
}

// Tags keep the content of different formats apart (hash id 7 of a Mooncake trace is not hash
// id 7 of a Bailian trace).
enum class ContentTag : uint64_t {
  kMooncake = 0x6d6f6f6e63616b65ULL,   // "mooncake"
  kBailian = 0x6261696c69616e00ULL,    // "bailian"
  kLengths = 0x6c656e6774687300ULL,    // "lengths"
  kGenerated = 0x67656e6572617465ULL,  // "generate"
};

// A virtual content id for (tag, value); never 0, which means literal tokens.
constexpr uint64_t ContentIdFor(ContentTag tag, uint64_t value) {
  uint64_t id = MixPair(static_cast<uint64_t>(tag), value);
  return id == 0 ? 1 : id;
}

}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_TRACE_CONTENT_IDS_H_
