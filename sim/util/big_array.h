// A fixed-size array for the block pool's per-block records and its prefix index: the tables
// that every allocation, eviction and publish touches at a random place. Past a few MiB they
// are backed by transparent huge pages where the kernel offers them (madvise mode), so those
// random accesses stop missing the TLB and the table costs a few page faults instead of one per
// 4 KiB. Past 64 KiB they are mapped and populated in one call (the fill touches every page;
// a table whose initial record is all zero bytes, like the prefix index's, needs no fill).
// Elsewhere (no THP, small tables) it is plain memory; the contents are the same.
#ifndef PREFIXSIM_SIM_UTIL_BIG_ARRAY_H_
#define PREFIXSIM_SIM_UTIL_BIG_ARRAY_H_

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace prefixsim {
namespace kv {

template <typename T>
class BigArray {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>,
                "BigArray holds plain records");

 public:
  BigArray() = default;
  BigArray(size_t n, const T& value) : size_(n) {
    const size_t bytes = n * sizeof(T);
    if (bytes >= kMapThreshold) {
      // The fill below writes every page: map them all in one call, not one fault per page (a
      // fleet builds dozens of these tables, and a fault is dear in a VM).
      const bool huge = bytes >= kHugeThreshold;
      // Over-map by one huge page so the table can start on a 2 MiB boundary: only aligned
      // 2 MiB ranges can be huge pages.
      map_bytes_ = huge ? bytes + kHugePage : bytes;
      void* p = mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | (huge ? 0 : MAP_POPULATE), -1, 0);
      if (p != MAP_FAILED) {
        map_ = p;
        uintptr_t start = reinterpret_cast<uintptr_t>(p);
        if (huge) start = (start + kHugePage - 1) & ~uintptr_t{kHugePage - 1};
        data_ = reinterpret_cast<T*>(start);
        if (huge) {
          // Advice only: failure leaves 4 KiB pages, and an old kernel faults them in the fill.
          madvise(data_, bytes, MADV_HUGEPAGE);
#ifdef MADV_POPULATE_WRITE
          madvise(data_, bytes, MADV_POPULATE_WRITE);
#endif
        }
      } else {
        map_bytes_ = 0;
      }
    }
    if (data_ == nullptr) {
      data_ = static_cast<T*>(::operator new(bytes > 0 ? bytes : 1));
    } else if (AllZeroBytes(value)) {
      return;  // fresh anonymous memory reads as zeros already: no pass over the table
    }
    std::uninitialized_fill_n(data_, n, value);
  }
  // `n` records left unwritten: pages are mapped when first written, so memory follows what the
  // owner uses (a block pool's records of blocks never allocated cost nothing). The owner writes
  // a record before reading it.
  struct Unwritten {};
  BigArray(size_t n, Unwritten) : size_(n) {
    const size_t bytes = n * sizeof(T);
    if (bytes >= kMapThreshold) {
      void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p != MAP_FAILED) {
        map_ = p;
        map_bytes_ = bytes;
        data_ = static_cast<T*>(p);
        return;
      }
    }
    data_ = static_cast<T*>(::operator new(bytes > 0 ? bytes : 1));
  }
  BigArray(const BigArray&) = delete;
  BigArray& operator=(const BigArray&) = delete;
  BigArray(BigArray&& o) noexcept { Swap(o); }
  BigArray& operator=(BigArray&& o) noexcept {
    BigArray tmp(std::move(o));
    Swap(tmp);
    return *this;
  }
  ~BigArray() {
    if (map_ != nullptr) {
      munmap(map_, map_bytes_);
    } else if (data_ != nullptr) {
      ::operator delete(data_);
    }
  }

  size_t size() const { return size_; }
  T* data() { return data_; }
  const T* data() const { return data_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }

 private:
  static constexpr size_t kHugePage = size_t{2} << 20;
  static constexpr size_t kHugeThreshold = size_t{4} << 20;
  static constexpr size_t kMapThreshold = size_t{64} << 10;

  static bool AllZeroBytes(const T& value) {
    const unsigned char* bytes = reinterpret_cast<const unsigned char*>(&value);
    for (size_t i = 0; i < sizeof(T); ++i) {
      if (bytes[i] != 0) return false;
    }
    return true;
  }

  void Swap(BigArray& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(map_, o.map_);
    std::swap(map_bytes_, o.map_bytes_);
  }

  T* data_ = nullptr;
  size_t size_ = 0;
  void* map_ = nullptr;  // the mapping data_ lies in, when mmap'ed
  size_t map_bytes_ = 0;
};

}  // namespace kv
}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_UTIL_BIG_ARRAY_H_
