#include "sim/trace/json_fields.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "sim/util/status_macros.h"

namespace prefixsim {

using simdjson::dom::element;
using simdjson::dom::element_type;

absl::Status RecordError(const RecordLocation& location, std::string_view message) {
  return absl::InvalidArgumentError(
      absl::StrCat(AbslView(location.path), ":", location.line, ": ", AbslView(message)));
}

absl::Status FieldError(const RecordLocation& location, std::string_view field,
                        std::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(AbslView(location.path), ":", location.line,
                                                 ": field '", AbslView(field),
                                                 "': ", AbslView(message)));
}

absl::Status ParseJsonObject(simdjson::dom::parser& parser, std::string_view line,
                             const RecordLocation& location, simdjson::dom::object* out) {
  element document;
  // realloc_if_needed = false: the line reader guarantees the padding, so no copy is made.
  auto error = parser.parse(line.data(), line.size(), false).get(document);
  if (error) {
    return RecordError(location, absl::StrCat("malformed JSON: ", simdjson::error_message(error)));
  }
  if (document.get_object().get(*out)) {
    return RecordError(location, "malformed record: expected a JSON object");
  }
  return absl::OkStatus();
}

bool FindField(const simdjson::dom::object& object, std::string_view field, element* out) {
  if (object.at_key(field).get(*out)) return false;
  return !out->is_null();
}

namespace {

std::string IntegerRequirement(int64_t min_value) {
  if (min_value == 0) return "must be a non-negative integer";
  if (min_value == 1) return "must be a positive integer";
  return absl::StrCat("must be an integer >= ", min_value);
}

}  // namespace

absl::Status ToInteger(const element& value, std::string_view field, const RecordLocation& location,
                       int64_t min_value, int64_t* out) {
  int64_t result = 0;
  switch (value.type()) {
    case element_type::INT64:
      result = value.get_int64().value_unsafe();
      break;
    case element_type::UINT64:  // only values above INT64_MAX land here
      return FieldError(location, field, "integer out of range");
    case element_type::DOUBLE: {
      double d = value.get_double().value_unsafe();
      if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9.0e15) {
        return FieldError(location, field, IntegerRequirement(min_value));
      }
      result = static_cast<int64_t>(d);
      break;
    }
    default:
      return FieldError(location, field, IntegerRequirement(min_value));
  }
  if (result < min_value) {
    return FieldError(location, field,
                      absl::StrCat(IntegerRequirement(min_value), " (got ", result, ")"));
  }
  *out = result;
  return absl::OkStatus();
}

absl::Status RequireInteger(const simdjson::dom::object& object, std::string_view field,
                            const RecordLocation& location, int64_t min_value, int64_t* out) {
  element value;
  if (!FindField(object, field, &value)) return FieldError(location, field, "missing");
  return ToInteger(value, field, location, min_value, out);
}

absl::Status RequireTimeNs(const simdjson::dom::object& object, std::string_view field,
                           const RecordLocation& location, int64_t ns_per_unit, int64_t* out_ns) {
  element value;
  if (!FindField(object, field, &value)) return FieldError(location, field, "missing");
  constexpr std::string_view kRequirement = "must be a non-negative number";
  switch (value.type()) {
    case element_type::INT64: {
      int64_t v = value.get_int64().value_unsafe();
      if (v < 0) return FieldError(location, field, kRequirement);
      if (v > std::numeric_limits<int64_t>::max() / ns_per_unit) {
        return FieldError(location, field, "time out of range");
      }
      *out_ns = v * ns_per_unit;  // exact: no rounding through double for integer times
      return absl::OkStatus();
    }
    case element_type::UINT64:
      return FieldError(location, field, "time out of range");
    case element_type::DOUBLE: {
      double v = value.get_double().value_unsafe();
      if (!std::isfinite(v) || v < 0) return FieldError(location, field, kRequirement);
      double ns = v * static_cast<double>(ns_per_unit);
      if (ns >= 9.2e18) return FieldError(location, field, "time out of range");
      *out_ns = std::llround(ns);
      return absl::OkStatus();
    }
    default:
      return FieldError(location, field, kRequirement);
  }
}

absl::Status RequireArray(const simdjson::dom::object& object, std::string_view field,
                          const RecordLocation& location, simdjson::dom::array* out) {
  element value;
  if (!FindField(object, field, &value)) return FieldError(location, field, "missing");
  if (value.get_array().get(*out)) return FieldError(location, field, "must be an array");
  return absl::OkStatus();
}

absl::Status AppendTokenIds(const simdjson::dom::array& array, std::string_view field,
                            const RecordLocation& location, std::vector<uint32_t>* tokens) {
  tokens->reserve(tokens->size() + array.size());
  for (element token : array) {
    int64_t id = 0;
    if (token.get_int64().get(id) || id < 0 || id > std::numeric_limits<uint32_t>::max()) {
      return FieldError(location, field, "token ids must be integers in [0, 2^32)");
    }
    tokens->push_back(static_cast<uint32_t>(id));
  }
  return absl::OkStatus();
}

absl::Status ToIdString(const element& value, std::string_view field,
                        const RecordLocation& location, std::string* out) {
  std::string_view text;
  int64_t number = 0;
  if (!value.get_string().get(text)) {
    out->assign(text);
  } else if (!value.get_int64().get(number)) {
    *out = absl::StrCat(number);
  } else {
    return FieldError(location, field, "must be a string or an integer");
  }
  return absl::OkStatus();
}

}  // namespace prefixsim
