#include "sim/cuda/kernel_grid.h"

#include <cerrno>
#include <cstdlib>
#include <sstream>

namespace prefixsim::cuda {
namespace {

constexpr std::string_view kOpNames[] = {"decode", "prefill",    "mla_decode", "mla_prefill",
                                         "append", "state_step", "state_copy"};

std::string Trim(std::string_view s) {
  size_t a = 0, b = s.size();
  while (a < b && (s[a] == ' ' || s[a] == '\t' || s[a] == '\r')) ++a;
  while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\t' || s[b - 1] == '\r')) --b;
  return std::string(s.substr(a, b - a));
}

std::vector<std::string> SplitCommas(std::string_view line) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t comma = line.find(',', start);
    out.push_back(Trim(line.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

bool ToInt(const std::string& s, int64_t* v) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const long long x = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || end != s.c_str() + s.size() || x < 0) return false;
  *v = x;
  return true;
}

}  // namespace

const char* const kGridColumns[] = {
    "op",         "policies",   "kind",       "block_size", "kernel_block_size",
    "page_bytes", "num_layers", "elem_bytes", "q_heads",    "kv_heads",
    "k_dim",      "v_dim",      "window",     "chunk",      "state_bytes",
    "batch",      "q_tokens",   "context"};
const int kNumGridColumns = sizeof(kGridColumns) / sizeof(kGridColumns[0]);

std::string_view KernelOpName(KernelOp op) { return kOpNames[static_cast<int>(op)]; }

bool ParseKernelOp(std::string_view name, KernelOp* op) {
  for (size_t i = 0; i < std::size(kOpNames); ++i) {
    if (kOpNames[i] == name) {
      *op = static_cast<KernelOp>(i);
      return true;
    }
  }
  return false;
}

std::string FormatGridHeader() {
  std::string s;
  for (int i = 0; i < kNumGridColumns; ++i) {
    if (i > 0) s += ',';
    s += kGridColumns[i];
  }
  return s;
}

std::string FormatGridPoint(const GridPoint& p) {
  std::ostringstream o;
  o << KernelOpName(p.op) << ',' << p.policies << ',' << p.kind << ',' << p.block_size << ','
    << p.kernel_block_size << ',' << p.page_bytes << ',' << p.num_layers << ',' << p.elem_bytes
    << ',' << p.q_heads << ',' << p.kv_heads << ',' << p.k_dim << ',' << p.v_dim << ',' << p.window
    << ',' << p.chunk << ',' << p.state_bytes << ',' << p.batch << ',' << p.q_tokens << ','
    << p.context;
  return o.str();
}

bool ParseGridFile(std::string_view text, std::vector<GridPoint>* points,
                   std::vector<std::string>* comments, std::string* error) {
  points->clear();
  comments->clear();
  bool header_seen = false;
  int line_no = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t nl = text.find('\n', pos);
    const std::string line =
        Trim(text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos));
    pos = nl == std::string_view::npos ? text.size() + 1 : nl + 1;
    ++line_no;
    const std::string where = "grid line " + std::to_string(line_no) + ": ";
    if (line.empty()) continue;
    if (line[0] == '#') {
      comments->push_back(line);
      continue;
    }
    if (!header_seen) {
      if (line != FormatGridHeader()) {
        *error = where + "header must be " + FormatGridHeader();
        return false;
      }
      header_seen = true;
      continue;
    }
    const std::vector<std::string> f = SplitCommas(line);
    if (static_cast<int>(f.size()) != kNumGridColumns) {
      *error = where + "expected " + std::to_string(kNumGridColumns) + " fields, got " +
               std::to_string(f.size());
      return false;
    }
    GridPoint p;
    if (!ParseKernelOp(f[0], &p.op)) {
      *error = where + "unknown op '" + f[0] + "'";
      return false;
    }
    p.policies = f[1];
    p.kind = f[2];
    int64_t v[kNumGridColumns] = {};
    for (int i = 3; i < kNumGridColumns; ++i) {
      if (!ToInt(f[i], &v[i])) {
        *error = where + "field " + kGridColumns[i] + ": not an integer >= 0";
        return false;
      }
    }
    p.block_size = static_cast<int>(v[3]);
    p.kernel_block_size = static_cast<int>(v[4]);
    p.page_bytes = v[5];
    p.num_layers = static_cast<int>(v[6]);
    p.elem_bytes = static_cast<int>(v[7]);
    p.q_heads = static_cast<int>(v[8]);
    p.kv_heads = static_cast<int>(v[9]);
    p.k_dim = static_cast<int>(v[10]);
    p.v_dim = static_cast<int>(v[11]);
    p.window = v[12];
    p.chunk = v[13];
    p.state_bytes = v[14];
    p.batch = static_cast<int>(v[15]);
    p.q_tokens = static_cast<int>(v[16]);
    p.context = v[17];
    if (p.batch <= 0 || p.context <= 0 || p.q_tokens > p.context) {
      *error = where + "batch and context must be > 0 and q_tokens <= context";
      return false;
    }
    points->push_back(p);
  }
  if (!header_seen) {
    *error = "grid: no header line";
    return false;
  }
  return true;
}

}  // namespace prefixsim::cuda
