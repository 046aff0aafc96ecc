// A registry of named entries (block-size policies, cost models, acceptance models, trace
// formats, routers): each is registered once by name, in the order that listings and format
// detection follow; a lookup of an unknown name gets an error that lists the registered names and
// suggests the closest.
#ifndef PREFIXSIM_SIM_UTIL_REGISTRY_H_
#define PREFIXSIM_SIM_UTIL_REGISTRY_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sim/util/did_you_mean.h"

namespace prefixsim {

template <typename T>
class Registry {
 public:
  struct Entry {
    std::string name;
    T value;
  };

  // `kind` names what the entries are in errors: "router", "cost model".
  explicit Registry(std::string kind) : kind_(std::move(kind)) {}

  // Registers `value` under `name`, after those registered before. Names must be unique (a
  // second entry of a name would never be found; tests/util/registry_test.cc checks them).
  Registry& Add(std::string name, T value) {
    entries_.push_back(Entry{std::move(name), std::move(value)});
    return *this;
  }

  // nullptr when `name` is not registered.
  const T* Find(std::string_view name) const {
    for (const Entry& e : entries_) {
      if (e.name == name) return &e.value;
    }
    return nullptr;
  }
  bool Contains(std::string_view name) const { return Find(name) != nullptr; }

  // The entry registered under `name`; NotFound with UnknownNameMessage otherwise.
  absl::StatusOr<const T*> Lookup(std::string_view name) const {
    if (const T* value = Find(name)) return value;
    return absl::NotFoundError(UnknownNameMessage(name));
  }

  // "unknown <kind> 'name'; did you mean 'x'? (registered: a, b)", for callers that add context
  // or report another status code.
  std::string UnknownNameMessage(std::string_view name) const {
    const std::vector<std::string> names = Names();
    return absl::StrCat("unknown ", kind_, " '", std::string(name), "'", DidYouMean(name, names),
                        " (registered: ", absl::StrJoin(names, ", "), ")");
  }

  // The registered names, in registration order.
  std::vector<std::string> Names() const {
    std::vector<std::string> names;
    names.reserve(entries_.size());
    for (const Entry& e : entries_) names.push_back(e.name);
    return names;
  }

  // The entries in registration order.
  typename std::vector<Entry>::const_iterator begin() const { return entries_.begin(); }
  typename std::vector<Entry>::const_iterator end() const { return entries_.end(); }
  size_t size() const { return entries_.size(); }

 private:
  std::string kind_;
  std::vector<Entry> entries_;
};

}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_UTIL_REGISTRY_H_
