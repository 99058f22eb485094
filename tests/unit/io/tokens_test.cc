#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <set>

#include "data/tokens.h"

namespace dtc::data {
namespace {

std::string tempPath(const std::string& name) {
  return ::testing::TempDir() + "/tokens_test_" + std::to_string(::getpid()) + "_" + name;
}

// A header of `header` (padded to 256 int32) followed by `tokens` uint16 ones.
void writeRaw(const std::string& path, std::vector<int32_t> header, size_t tokens) {
  header.resize(256, 0);
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(header.data()), 1024);
  std::vector<uint16_t> data(tokens, 1);
  out.write(reinterpret_cast<const char*>(data.data()), data.size() * 2);
}

TEST(Tokens, RoundTrip) {
  std::string path = tempPath("ok.bin");
  std::vector<int32_t> tokens;
  for (int i = 0; i < 100; ++i) tokens.push_back((i * 37) % 500);
  tokens.push_back(65535);  // the largest id uint16 holds must survive
  ASSERT_TRUE(writeTokenFile(path, tokens).ok());
  auto file = TokenFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  ASSERT_EQ(file->size(), 101);
  for (int64_t i = 0; i < file->size(); ++i) {
    EXPECT_EQ((*file)[i], static_cast<uint32_t>(tokens[i]));
  }
  EXPECT_EQ(file->maxTokenPlusOne(), 65536);
  // Moving keeps the mapping alive: the data pointer stays valid in the new owner.
  TokenFile moved = std::move(file).value();
  EXPECT_EQ(moved[3], 111);
  std::remove(path.c_str());
}

TEST(Tokens, WriteIsAtomicAndRejectsNegativeIds) {
  std::string path = tempPath("big.bin");
  ASSERT_TRUE(writeTokenFile(path, {1, 2, 3}).ok());
  Status bad = writeTokenFile(path, {1, -7});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.code(), StatusCode::kInvalidInput);
  EXPECT_NE(bad.message().find(path), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("-7"), std::string::npos) << bad.message();
  // The failed write left the earlier file untouched.
  auto file = TokenFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ(file->size(), 3);
  std::remove(path.c_str());
}

// Ids past uint16 (Llama 3's 128k vocabulary) are written in llm.c's Llama 3 format, magic
// 20240801, version 7, uint32 tokens, and read back as written; windows read them too.
TEST(Tokens, WideIdsInLlama3Format) {
  std::string path = tempPath("wide.bin");
  ASSERT_TRUE(writeTokenFile(path, {1, 128255, 70000, 3}).ok());
  std::ifstream in(path, std::ios::binary);
  int32_t header[3];
  in.read(reinterpret_cast<char*>(header), sizeof header);
  EXPECT_EQ(header[0], 20240801);
  EXPECT_EQ(header[1], 7);
  EXPECT_EQ(header[2], 4);
  auto file = TokenShards::open(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ(file->maxTokenPlusOne(), 128256);
  EXPECT_EQ((*file)[1], 128255u);
  std::vector<int64_t> inputs(2), targets(2);
  fillWindows(*file, {1}, 2, inputs.data(), targets.data());
  EXPECT_EQ(inputs, (std::vector<int64_t>{128255, 70000}));
  EXPECT_EQ(targets, (std::vector<int64_t>{70000, 3}));
  std::remove(path.c_str());
}

TEST(Tokens, EmptyFiles) {
  std::string path = tempPath("empty.bin");
  // A header promising no tokens is a valid (if useless) file; the caller rejects it for size.
  ASSERT_TRUE(writeTokenFile(path, {}).ok());
  auto file = TokenFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ(file->size(), 0);
  EXPECT_EQ(file->maxTokenPlusOne(), 0);
  // A zero-byte file has no header at all.
  { std::ofstream(path, std::ios::binary | std::ios::trunc); }
  auto zero = TokenFile::open(path);
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("is not an llm.c token file"), std::string::npos)
      << zero.status().message();
  std::remove(path.c_str());
}

TEST(Tokens, RejectsBadFiles) {
  std::string path = tempPath("bad.bin");
  auto expectError = [&](const std::string& text) {
    auto file = TokenFile::open(path);
    ASSERT_FALSE(file.ok()) << text;
    EXPECT_EQ(file.status().code(), StatusCode::kInvalidInput);
    const std::string message = file.status().message();
    EXPECT_NE(message.find(text), std::string::npos) << message;
    EXPECT_NE(message.find(path), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  };
  writeRaw(path, {123, 1, 10}, 10);
  expectError("is not an llm.c token file (magic 123, expected 20240520)");
  writeRaw(path, {20240520, 2, 10}, 10);
  expectError("has token format version 2; expected 1");
  writeRaw(path, {20240520, 1, 1000}, 10);
  expectError("is truncated: the header promises 1000 tokens, the file holds 10");
  writeRaw(path, {20240520, 1, -5}, 10);
  expectError("the header promises -5 tokens");
  // An odd trailing byte is not half a token.
  writeRaw(path, {20240520, 1, 11}, 10);
  std::ofstream(path, std::ios::binary | std::ios::app) << 'x';
  expectError("the header promises 11 tokens, the file holds 10");
  std::ofstream(path, std::ios::binary | std::ios::trunc) << "short";
  expectError("shorter than its 1024-byte header");
  std::remove(path.c_str());
  expectError("No such file or directory");
  path = ::testing::TempDir();
  expectError("is not a regular file");
}

TEST(Tokens, RandomBytesNeverCrash) {
  std::string path = tempPath("random.bin");
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    size_t size = rng() % 3000;
    std::string bytes(size, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    // Half the trials keep a valid magic and version so the count check gets exercised.
    if (trial % 2 && size >= 12) {
      int32_t head[3] = {20240520, 1, static_cast<int32_t>(rng() % 2000) - 10};
      std::memcpy(bytes.data(), head, sizeof head);
    }
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
    auto file = TokenFile::open(path);
    if (!file.ok()) continue;
    // Whatever opened must be readable to its end.
    ASSERT_LE(1024 + 2 * file->size(), static_cast<int64_t>(size));
    int64_t maxPlusOne = 0;
    for (int64_t i = 0; i < file->size(); ++i)
      maxPlusOne = std::max<int64_t>(maxPlusOne, (*file)[i] + 1);
    EXPECT_EQ(file->maxTokenPlusOne(), maxPlusOne);
  }
  std::remove(path.c_str());
}

TEST(Tokens, WindowOffsetsMatchThePythonReimplementation) {
  // Golden values from tests/e2e/dtc_harness.py's window_offsets(size, batch, t, seed, step).
  EXPECT_EQ(windowOffsets(1000, 4, 16, 5, 0), (std::vector<int64_t>{822, 385, 464, 456}));
  EXPECT_EQ(windowOffsets(1000, 4, 16, 5, 1), (std::vector<int64_t>{912, 210, 632, 96}));
  EXPECT_EQ(windowOffsets(100000, 6, 256, 1337, 999),
            (std::vector<int64_t>{50562, 70568, 54285, 26705, 6516, 35156}));
  // An all-ones seed and a 2^40-token file: the uint64 arithmetic must wrap as Python masks it.
  EXPECT_EQ(windowOffsets(int64_t{1} << 40, 3, 1024, ~uint64_t{0}, 7),
            (std::vector<int64_t>{752993039061, 13715566946, 401680462505}));
}

TEST(Tokens, ConsecutiveStepsDrawUnrelatedWindows) {
  // Streams of consecutive steps must not replay each other's draws shifted by one (they did
  // when the stream state was seed ^ golden·(step+1) without mixing: 31 of 32 windows repeated).
  int64_t shared = 0;
  for (int64_t step = 0; step < 200; ++step) {
    auto a = windowOffsets(1000000, 32, 64, 0, step),
         b = windowOffsets(1000000, 32, 64, 0, step + 1);
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    std::vector<int64_t> both;
    std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(both));
    shared += static_cast<int64_t>(both.size());
  }
  EXPECT_LE(shared, 2);  // ~0.2 expected by chance over 200 pairs
}

TEST(Tokens, WindowOffsetsAreDeterministicInRangeAndVary) {
  auto a = windowOffsets(5000, 32, 64, 1, 0);
  EXPECT_EQ(a, windowOffsets(5000, 32, 64, 1, 0));
  EXPECT_NE(a, windowOffsets(5000, 32, 64, 1, 1));
  EXPECT_NE(a, windowOffsets(5000, 32, 64, 2, 0));
  EXPECT_EQ(a.size(), 32u);
  EXPECT_GT(std::set<int64_t>(a.begin(), a.end()).size(), 16u);
  for (int64_t step = 0; step < 50; ++step)
    for (int64_t off : windowOffsets(20, 64, 16, 1, step)) {
      EXPECT_GE(off, 0);
      EXPECT_LT(off, 4);  // the window of T+1 tokens must fit: off + 16 < 20
    }
  // The smallest usable file, size = T + 1, has a single window.
  for (int64_t off : windowOffsets(17, 8, 16, 3, 0)) EXPECT_EQ(off, 0);
}

TEST(Tokens, FillWindowsShiftsTargetsByOne) {
  std::string path = tempPath("windows.bin");
  std::vector<int32_t> tokens;
  for (int i = 0; i < 60; ++i) tokens.push_back(1000 + i);
  ASSERT_TRUE(writeTokenFile(path, tokens).ok());
  auto file = TokenShards::open(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  const int64_t t = 4;
  std::vector<int64_t> offsets = {10, 0, 55};  // 55 + T = 59: the last token is a target
  std::vector<int64_t> inputs(offsets.size() * t), targets(offsets.size() * t);
  fillWindows(*file, offsets, t, inputs.data(), targets.data());
  for (size_t b = 0; b < offsets.size(); ++b)
    for (int64_t j = 0; j < t; ++j) {
      EXPECT_EQ(inputs[b * t + j], 1000 + offsets[b] + j);
      EXPECT_EQ(targets[b * t + j], 1000 + offsets[b] + j + 1);
    }
  EXPECT_EQ(targets.back(), 1059);
  std::remove(path.c_str());
}

// Shards read as their concatenation: every token, windows across a boundary, found in a folder
// (name order) or by a glob; a spec matching nothing, or an empty shard, is refused by name.
TEST(TokenShards, ReadAsTheirConcatenation) {
  const std::string dir = tempPath("shards");
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  // Shard k holds the next sizes[k] values of 100, 101, …; written last shard first (the folder's
  // name order, not the order of writing, is the concatenation's).
  const std::vector<int> sizes = {7, 1, 12};
  std::vector<int32_t> ordered;
  for (int i = 0; i < 20; ++i) ordered.push_back(100 + i);
  for (int k = 2, end = 20; k >= 0; end -= sizes[k], --k) {
    const std::vector<int32_t> shard(ordered.begin() + end - sizes[k], ordered.begin() + end);
    ASSERT_TRUE(writeTokenFile(dir + "/train_00000" + std::to_string(k + 1) + ".bin", shard).ok());
  }
  for (const std::string& spec : {dir, dir + "/train_*.bin"}) {
    auto shards = TokenShards::open(spec);
    ASSERT_TRUE(shards.ok()) << shards.status().message();
    ASSERT_EQ(shards->size(), 20);
    ASSERT_EQ(shards->paths().size(), 3u);
    EXPECT_EQ(shards->paths()[0], dir + "/train_000001.bin");
    std::vector<int64_t> read(20);
    shards->copy(0, 20, read.data());
    for (int i = 0; i < 20; ++i) {
      EXPECT_EQ((*shards)[i], ordered[i]);
      EXPECT_EQ(read[i], ordered[i]);
    }
    std::vector<int64_t> inputs(5), targets(5);
    fillWindows(*shards, {11}, 5, inputs.data(), targets.data());  // 11..16 spans all three
    for (int j = 0; j < 5; ++j) {
      EXPECT_EQ(inputs[j], ordered[11 + j]);
      EXPECT_EQ(targets[j], ordered[12 + j]);
    }
  }
  auto none = TokenShards::open(dir + "/valid_*.bin");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message(), dir + "/valid_*.bin matches no token file");
  ASSERT_TRUE(writeTokenFile(dir + "/train_000004.bin", {}).ok());
  auto empty = TokenShards::open(dir);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().message(), dir + "/train_000004.bin holds no tokens");
  for (int k = 1; k <= 4; ++k)
    std::remove((dir + "/train_00000" + std::to_string(k) + ".bin").c_str());
  ::rmdir(dir.c_str());
}

}  // namespace
}  // namespace dtc::data
