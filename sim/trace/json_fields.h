// simdjson (DOM, one reused parser per reader) helpers that turn a missing or mistyped field into
// "path:line: field 'name': must be ..." errors.
#ifndef PREFIXSIM_SIM_TRACE_JSON_FIELDS_H_
#define PREFIXSIM_SIM_TRACE_JSON_FIELDS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "sim/trace/record_parser.h"
#include "simdjson.h"

namespace prefixsim {

absl::Status RecordError(const RecordLocation& location, std::string_view message);
absl::Status FieldError(const RecordLocation& location, std::string_view field,
                        std::string_view message);

// Parses one JSONL line in place (the line must be followed by kLinePadding readable bytes).
absl::Status ParseJsonObject(simdjson::dom::parser& parser, std::string_view line,
                             const RecordLocation& location, simdjson::dom::object* out);

// True if `field` is present and not null.
bool FindField(const simdjson::dom::object& object, std::string_view field,
               simdjson::dom::element* out);

// An integer >= min_value. Integral doubles (512.0) are accepted; 512.5 or "512" are not.
absl::Status ToInteger(const simdjson::dom::element& value, std::string_view field,
                       const RecordLocation& location, int64_t min_value, int64_t* out);
absl::Status RequireInteger(const simdjson::dom::object& object, std::string_view field,
                            const RecordLocation& location, int64_t min_value, int64_t* out);
// A non-negative, finite number of time units, converted to ns (ns_per_unit: 1e6 for ms).
absl::Status RequireTimeNs(const simdjson::dom::object& object, std::string_view field,
                           const RecordLocation& location, int64_t ns_per_unit, int64_t* out_ns);
absl::Status RequireArray(const simdjson::dom::object& object, std::string_view field,
                          const RecordLocation& location, simdjson::dom::array* out);
// Appends an array of token ids (each 0 <= id < 2^32) to *tokens.
absl::Status AppendTokenIds(const simdjson::dom::array& array, std::string_view field,
                            const RecordLocation& location, std::vector<uint32_t>* tokens);
// A string or an integer, as text (session ids appear as both).
absl::Status ToIdString(const simdjson::dom::element& value, std::string_view field,
                        const RecordLocation& location, std::string* out);

}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_TRACE_JSON_FIELDS_H_
