// Registry<T>: registration order, lookups, and the error for an unknown name.
#include "sim/util/registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "prefixsim/policy.h"
#include "sim/cost/cost_model.h"
#include "sim/fleet/router.h"
#include "sim/spec/acceptance_model.h"
#include "sim/trace/record_parser.h"

namespace prefixsim {
namespace {

using ::testing::ElementsAre;

Registry<int> Numbers() {
  Registry<int> r("number");
  r.Add("two", 2).Add("one", 1).Add("three", 3);
  return r;
}

TEST(RegistryTest, KeepsRegistrationOrder) {
  const Registry<int> r = Numbers();
  EXPECT_THAT(r.Names(), ElementsAre("two", "one", "three"));
  std::vector<int> values;
  for (const auto& entry : r) values.push_back(entry.value);
  EXPECT_THAT(values, ElementsAre(2, 1, 3));
  EXPECT_EQ(r.size(), 3u);
}

TEST(RegistryTest, FindsByName) {
  const Registry<int> r = Numbers();
  ASSERT_NE(r.Find("one"), nullptr);
  EXPECT_EQ(*r.Find("one"), 1);
  EXPECT_EQ(r.Find("four"), nullptr);
  EXPECT_TRUE(r.Contains("three"));
  EXPECT_FALSE(r.Contains("Three "));
  EXPECT_EQ(**r.Lookup("two"), 2);
}

TEST(RegistryTest, UnknownNameListsTheRegisteredOnesAndSuggests) {
  const Registry<int> r = Numbers();
  absl::StatusOr<const int*> v = r.Lookup("thre");
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(std::string(v.status().message()),
            "unknown number 'thre'; did you mean 'three'? (registered: two, one, three)");
  EXPECT_EQ(r.UnknownNameMessage("zzzzzzzz"),
            "unknown number 'zzzzzzzz' (registered: two, one, three)");
}

// Each registry of the simulator names each entry once.
TEST(RegistryTest, TheSimulatorsRegistriesHaveUniqueNames) {
  for (const std::vector<std::string>& names :
       {RegisteredPolicyNames(), RegisteredCostModels(), RegisteredAcceptanceModels(),
        RegisteredTraceFormats(), fleet::RegisteredRouters()}) {
    EXPECT_FALSE(names.empty());
    EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
  }
}

TEST(RegistryTest, UnknownRouterErrorNamesTheRegisteredRouters) {
  auto router = fleet::NewRouter("kv_awar", fleet::RouterConfig{});
  ASSERT_FALSE(router.ok());
  EXPECT_EQ(router.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(router.status().message()),
              ::testing::StartsWith("unknown router 'kv_awar'; did you mean 'kv_aware'"));
  EXPECT_THAT(std::string(router.status().message()),
              ::testing::HasSubstr("(registered: round_robin, random, least_loaded, session, "
                                   "kv_aware, kv_aware_unaligned)"));
}

}  // namespace
}  // namespace prefixsim
