// The SWA kernel-block selector under both policies (docs/semantics.md §5.1, §5.2).
#include "prefixsim/policy.h"

#include <gtest/gtest.h>

#include "prefixsim/engine_config.h"

namespace prefixsim {
namespace {

AttentionBackend Backend(std::vector<KernelBlockSize> sizes) {
  return AttentionBackend{"TEST", std::move(sizes), 16};
}
const KernelBlockSize Int(int v) { return {v, false}; }
const KernelBlockSize MultipleOf(int v) { return {v, true}; }

int Old(const AttentionBackend& b, int64_t per_token, std::optional<int64_t> shared, int primary) {
  return FindPolicy("old")->SlidingWindowBlockSize(b, per_token, shared, primary);
}
int New(const AttentionBackend& b, int64_t per_token, std::optional<int64_t> shared, int primary) {
  return FindPolicy("new")->SlidingWindowBlockSize(b, per_token, shared, primary);
}

TEST(PolicyRegistryTest, OldAndNewAreRegistered) {
  ASSERT_NE(FindPolicy("old"), nullptr);
  ASSERT_NE(FindPolicy("new"), nullptr);
  EXPECT_EQ(FindPolicy("nope"), nullptr);
  EXPECT_EQ(RegisteredPolicyNames().front(), "old");
}

// §5.1: without a shared page the SWA layer is born at the smallest kernel block.
TEST(OldPolicyTest, IntOnlyTakesSmallest) {
  EXPECT_EQ(Old(Backend({Int(16), Int(32), Int(64)}), 1024, std::nullopt, 1536), 16);
}
TEST(OldPolicyTest, MultipleOfOnlyTakesBase) {
  EXPECT_EQ(Old(Backend({MultipleOf(16)}), 1024, std::nullopt, 1536), 16);
}
TEST(OldPolicyTest, MixedIgnoresMultipleOfWhenIntsExist) {
  EXPECT_EQ(Old(Backend({Int(64), MultipleOf(16)}), 1024, std::nullopt, 1536), 64);
}
TEST(OldPolicyTest, SharedPageTakesLargestFitting) {
  // 32 * 1024 fits a 40,000-byte shared page, 64 * 1024 does not.
  EXPECT_EQ(Old(Backend({Int(16), Int(32), Int(64)}), 1024, 40000, 1536), 32);
}
TEST(OldPolicyTest, BudgetThatFitsNothingFallsBackToSmallest) {
  EXPECT_EQ(Old(Backend({Int(16), Int(32)}), 1024, 1000, 1536), 16);
}

// §5.2: the page budget is per_token × P; MultipleOf expands to the largest aligned block.
TEST(NewPolicyTest, MultipleOfTakesPrimary) {
  EXPECT_EQ(New(Backend({MultipleOf(16)}), 1024, std::nullopt, 1536), 1536);
}
TEST(NewPolicyTest, MultipleOfRoundsDownWhenBaseDoesNotDividePrimary) {
  // P = 1650: floor(1650 / 16) * 16 = 1648, not a divisor of P (docs/semantics.md §5.2 fixture).
  EXPECT_EQ(New(Backend({MultipleOf(16)}), 1024, std::nullopt, 1650), 1648);
}
TEST(NewPolicyTest, IntOnlyTakesLargestWithinBudget) {
  EXPECT_EQ(New(Backend({Int(16), Int(32), Int(64)}), 1024, std::nullopt, 1536), 64);
  EXPECT_EQ(New(Backend({Int(16), Int(32), Int(64)}), 1024, std::nullopt, 48), 32);
}
TEST(NewPolicyTest, MixedDeclarations) {
  EXPECT_EQ(New(Backend({Int(64), MultipleOf(16)}), 1024, std::nullopt, 1536), 1536);
  EXPECT_EQ(New(Backend({Int(64), MultipleOf(16)}), 1024, std::nullopt, 1650), 1648);
}
TEST(NewPolicyTest, BudgetThatFitsNothingFallsBackToSmallest) {
  // P = 8 gives a budget of 8 tokens; every candidate (16, 32 and MultipleOf(16) -> 16) is larger.
  EXPECT_EQ(New(Backend({Int(32), MultipleOf(16)}), 1024, std::nullopt, 8), 16);
  EXPECT_EQ(New(Backend({Int(16), Int(32)}), 1024, std::nullopt, 8), 16);
}
TEST(NewDivisorOfPolicyTest, KeepsPrimaryElseFallsBackToOld) {
  const BlockSizePolicy* p = FindPolicy("new_divisor_of");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->SlidingWindowBlockSize(Backend({MultipleOf(16)}), 1024, std::nullopt, 1536), 1536);
  // FlashInfer: new would pick 64 (not P), so the old smallest block 16 comes back.
  EXPECT_EQ(
      p->SlidingWindowBlockSize(Backend({Int(16), Int(32), Int(64)}), 1024, std::nullopt, 1536),
      16);
}

TEST(NewPolicyTest, SharedPageBehaviourUnchanged) {
  EXPECT_EQ(New(Backend({Int(16), Int(32), Int(64)}), 1024, 40000, 1536), 32);
}

}  // namespace
}  // namespace prefixsim
