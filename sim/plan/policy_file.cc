// Policy files: a sliding-window block size chosen by a person or by `prefixsim tune`, usable
// wherever a registered policy's name is (docs/tune.md).
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "prefixsim/policy.h"
#include "sim/plan/config_fields.h"
#include "sim/plan/json_config.h"
#include "sim/util/status_macros.h"

namespace prefixsim {
namespace {

// The largest block any backend accepts; beyond it a "block size" is a typo.
constexpr int64_t kMaxSlidingWindowBlock = 1 << 20;

// Every sliding-window layer takes the same block, whatever its backend prefers; page
// unification may still scale it, as it scales any policy's choice (docs/semantics.md §6.2).
class FixedSlidingWindowPolicy : public BlockSizePolicy {
 public:
  FixedSlidingWindowPolicy(std::string name, int block_size)
      : name_(std::move(name)),
        description_(absl::StrCat("sliding-window layers take ", block_size, " tokens")),
        block_size_(block_size) {}
  std::string_view name() const override { return name_; }
  std::string_view description() const override { return description_; }
  int SlidingWindowBlockSize(const AttentionBackend&, int64_t, std::optional<int64_t>,
                             int) const override {
    return block_size_;
  }

 private:
  std::string name_;
  std::string description_;
  int block_size_;
};

}  // namespace

std::unique_ptr<BlockSizePolicy> MakeFixedSlidingWindowPolicy(std::string name, int block_size) {
  return std::make_unique<FixedSlidingWindowPolicy>(std::move(name), block_size);
}

bool IsPolicyFilePath(std::string_view name) { return absl::EndsWith(AbslView(name), ".json"); }

absl::StatusOr<std::unique_ptr<BlockSizePolicy>> LoadPolicyFile(std::string_view path) {
  PREFIXSIM_ASSIGN_OR_RETURN(const std::string text, ReadFileToString(path));
  PREFIXSIM_ASSIGN_OR_RETURN(const JsonConfig doc, JsonConfig::Parse(text, path));
  const nlohmann::json& root = doc.root();
  if (!root.is_object()) return doc.Error("", "a policy file is a JSON object");
  PREFIXSIM_RETURN_IF_ERROR(
      RejectUnknownFields(doc, root, "", {"name", "sliding_window_block_size"}));
  PREFIXSIM_ASSIGN_OR_RETURN(const std::optional<std::string> name,
                             doc.OptionalString(root, "", "name"));
  if (!name || name->empty()) return doc.Error("name", "required: the policy's name in reports");
  PREFIXSIM_ASSIGN_OR_RETURN(const int64_t block,
                             doc.RequiredInt(root, "", "sliding_window_block_size", 1));
  if (block > kMaxSlidingWindowBlock) {
    return doc.Error("sliding_window_block_size",
                     absl::StrCat("at most ", kMaxSlidingWindowBlock, " tokens"));
  }
  return MakeFixedSlidingWindowPolicy(*name, static_cast<int>(block));
}

}  // namespace prefixsim
