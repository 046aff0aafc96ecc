// Trace reader throughput: records/s (items_per_second) and uncompressed MB/s (bytes_per_second)
// on the real traces, plain and compressed.
#include <benchmark/benchmark.h>
#include <zlib.h>
#include <zstd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "prefixsim/trace.h"

namespace prefixsim {
namespace {

std::string RealTrace(const std::string& name) {
  return std::string(PREFIXSIM_REAL_TRACES_DIR) + "/" + name;
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Compressed copies live in the temp dir, never in the repository.
std::string CompressedCopy(const std::string& name, bool zstd) {
  std::string path = (std::filesystem::temp_directory_path() /
                      ("prefixsim_bench_" + name + (zstd ? ".zst" : ".gz")))
                         .string();
  if (std::filesystem::exists(path)) return path;
  std::string content = ReadBytes(RealTrace(name));
  if (zstd) {
    std::string out(ZSTD_compressBound(content.size()), '\0');
    out.resize(ZSTD_compress(out.data(), out.size(), content.data(), content.size(), 3));
    std::ofstream(path, std::ios::binary) << out;
  } else {
    gzFile file = gzopen(path.c_str(), "wb6");
    gzwrite(file, content.data(), static_cast<unsigned>(content.size()));
    gzclose(file);
  }
  return path;
}

void ReadWholeTrace(benchmark::State& state, const std::string& path) {
  int64_t records = 0, bytes = 0;
  Request request;
  for (auto _ : state) {
    auto reader = OpenTrace(path);
    if (!reader.ok()) {
      state.SkipWithError(std::string(reader.status().message()).c_str());
      return;
    }
    while (true) {
      auto more = (*reader)->Next(&request);
      if (!more.ok()) {
        state.SkipWithError(std::string(more.status().message()).c_str());
        return;
      }
      if (!*more) break;
      benchmark::DoNotOptimize(request.prompt.data());
    }
    records += (*reader)->stats().records;
    bytes += (*reader)->stats().bytes;
  }
  state.SetItemsProcessed(records);
  state.SetBytesProcessed(bytes);
}

void BM_MooncakeConversation(benchmark::State& state) {
  ReadWholeTrace(state, RealTrace("mooncake_conversation_trace.jsonl"));
}
void BM_MooncakeConversationGzip(benchmark::State& state) {
  ReadWholeTrace(state, CompressedCopy("mooncake_conversation_trace.jsonl", false));
}
void BM_MooncakeConversationZstd(benchmark::State& state) {
  ReadWholeTrace(state, CompressedCopy("mooncake_conversation_trace.jsonl", true));
}
void BM_ShareGptTokenIds(benchmark::State& state) {
  ReadWholeTrace(state, RealTrace("sharegpt_llama31_300_tokens.jsonl"));
}
void BM_AzureLengthsCsv(benchmark::State& state) {
  ReadWholeTrace(state, RealTrace("azure2023_conv_lengths.csv"));
}

BENCHMARK(BM_MooncakeConversation)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MooncakeConversationGzip)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MooncakeConversationZstd)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ShareGptTokenIds)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AzureLengthsCsv)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace prefixsim
