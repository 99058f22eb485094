// Token files in llm.c's format and the windows a language model trains on.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/mapped_file.h"
#include "support/status.h"

namespace dtc::data {

// llm.c's token files: GPT-2's (magic 20240520, version 1, uint16 tokens) and Llama 3's (magic
// 20240801, version 7, uint32 tokens: vocabularies past 65536).
inline constexpr int32_t kTokenMagic = 20240520;
inline constexpr int32_t kTokenVersion = 1;
inline constexpr int32_t kWideTokenMagic = 20240801;
inline constexpr int32_t kWideTokenVersion = 7;

// A 256 × int32 little-endian header (magic, version, token count, …) followed by `count`
// tokens, uint16 or uint32 as the header says. Memory-mapped, read-only, move-only.
class TokenFile {
 public:
  // Checks the magic, the version and that the file holds the tokens its header promises.
  static StatusOr<TokenFile> open(const std::string& path);

  int64_t size() const { return count_; }
  // Unchecked, like the vector it stands in for: callers index within windows they validated.
  uint32_t operator[](int64_t i) const {
    return wide_ ? reinterpret_cast<const uint32_t*>(tokens_)[i]
                 : reinterpret_cast<const uint16_t*>(tokens_)[i];
  }
  // Copies tokens [from, from + n) into `out` as int64.
  void copy(int64_t from, int64_t n, int64_t* out) const;
  // Largest token id + 1: what the model's vocabulary must cover.
  int64_t maxTokenPlusOne() const { return maxPlusOne_; }

 private:
  io::MappedFile file_;
  const uint8_t* tokens_ = nullptr;
  bool wide_ = false;  // uint32 tokens
  int64_t count_ = 0, maxPlusOne_ = 0;
};

// Whether `spec` is a glob of token files (`*`, `?` or `[` in it) rather than a path.
bool isTokenGlob(const std::string& spec);
// Whether folder `dir` is token shards: it holds `*.bin` files and no `.npy` arrays (a folder of
// .npy arrays is the other kind of data).
bool holdsTokenShards(const std::string& dir);

// The token files `spec` names, in name order: the file itself; a directory's `*.bin` files
// (llm.c's shards, fineweb_train_000001.bin …); or the files a glob matches (`*`, `?` or `[` in
// the path). An empty match is an error naming the spec.
StatusOr<std::vector<std::string>> tokenShardPaths(const std::string& spec);

// One or more token files read as their concatenation, in name order: a corpus in shards trains
// exactly as the one file they would make (windows may run from one shard into the next, as
// they run across documents within one).
class TokenShards {
 public:
  static StatusOr<TokenShards> open(const std::string& spec);

  int64_t size() const { return starts_.empty() ? 0 : starts_.back(); }
  int64_t maxTokenPlusOne() const { return maxPlusOne_; }
  const std::vector<std::string>& paths() const { return paths_; }
  // Token `i` of the concatenation (0 <= i < size()).
  uint32_t operator[](int64_t i) const;
  // Copies tokens [from, from + n) of the concatenation into `out` as int64.
  void copy(int64_t from, int64_t n, int64_t* out) const;

 private:
  std::vector<TokenFile> files_;
  std::vector<std::string> paths_;
  std::vector<int64_t> starts_;  // starts_[k]: the first token of file k; back(): the total
  int64_t maxPlusOne_ = 0;
};

// Start offsets of step `step`'s `batch` windows, nanoGPT's torch.randint(len(data) - T,
// (batch,)) with our generator: state = streamState(seed, step),
// offset_b = splitmix64(state) % (size − T). Requires size > T. Reproduced in Python by
// tests/e2e/dtc_harness.py (window_offsets).
std::vector<int64_t> windowOffsets(int64_t size, int64_t batch, int64_t t, uint64_t seed,
                                   int64_t step);

// inputs[b, j] = tokens[off_b + j], targets[b, j] = tokens[off_b + j + 1] for j < T. Either
// may be null (a pipeline stage that reads only one of them).
void fillWindows(const TokenShards& tokens, const std::vector<int64_t>& offsets, int64_t t,
                 int64_t* inputs, int64_t* targets);

// Consecutive positions of a sequence, from `from` on: the part of each window a device reads
// when context parallelism splits the sequence (two runs per device when it is load-balanced).
struct SequenceRun {
  int64_t from = 0, count = 0;
};

// As fillWindows, each window's positions `runs` only, one after another: inputs[b, k] =
// tokens[off_b + p_k], targets[b, k] = tokens[off_b + p_k + 1] for the k-th position p_k the
// runs hold.
void fillWindowRuns(const TokenShards& tokens, const std::vector<int64_t>& offsets,
                    const std::vector<SequenceRun>& runs, int64_t* inputs, int64_t* targets);

// Writes a token file through a temporary name and a rename: GPT-2's format when every id fits
// in uint16, Llama 3's otherwise; ids must not be negative, the count must fit the header's int32.
Status writeTokenFile(const std::string& path, const std::vector<int32_t>& tokens);

}  // namespace dtc::data
