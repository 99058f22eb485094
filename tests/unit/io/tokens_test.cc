#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <unistd.h>

#include "data/tokens.h"

namespace dtc::data {
namespace {

std::string tempPath(const std::string& name) {
  return ::testing::TempDir() + "/tokens_test_" + std::to_string(::getpid()) + "_" + name;
}

TEST(Tokens, RoundTripAndWindows) {
  std::string path = tempPath("ok.bin");
  std::vector<int32_t> tokens;
  for (int i = 0; i < 100; ++i) tokens.push_back((i * 37) % 500);
  ASSERT_TRUE(writeTokenFile(path, tokens).ok());
  auto file = TokenFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  ASSERT_EQ(file->size(), 100);
  EXPECT_EQ(file->data()[3], 111);
  EXPECT_EQ(file->maxTokenPlusOne(), 500);
  std::vector<int64_t> inputs(2 * 4), targets(2 * 4);
  fillWindows(*file, {10, 50}, 4, inputs.data(), targets.data());
  EXPECT_EQ(inputs[0], tokens[10]);
  EXPECT_EQ(targets[0], tokens[11]);
  EXPECT_EQ(inputs[7], tokens[53]);
  EXPECT_EQ(targets[7], tokens[54]);
  std::remove(path.c_str());
}

TEST(Tokens, WindowOffsetsMatchThePythonReimplementation) {
  // tests/e2e/dtc_harness.py: window_offsets(1000, 4, 16, 5, 0) and (…, 1).
  EXPECT_EQ(windowOffsets(1000, 4, 16, 5, 0), (std::vector<int64_t>{584, 57, 459, 490}));
  EXPECT_EQ(windowOffsets(1000, 4, 16, 5, 1), (std::vector<int64_t>{503, 773, 109, 724}));
  for (int64_t off : windowOffsets(20, 64, 16, 1, 3)) {
    EXPECT_GE(off, 0);
    EXPECT_LT(off, 4);
  }
}

TEST(Tokens, RejectsBadFiles) {
  std::string path = tempPath("bad.bin");
  auto write = [&](std::vector<int32_t> header, size_t tokens) {
    header.resize(256, 0);
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(header.data()), 1024);
    std::vector<uint16_t> data(tokens, 1);
    out.write(reinterpret_cast<const char*>(data.data()), data.size() * 2);
  };
  auto expectError = [&](const std::string& text) {
    auto file = TokenFile::open(path);
    ASSERT_FALSE(file.ok()) << text;
    EXPECT_NE(file.status().message().find(text), std::string::npos) << file.status().message();
  };
  write({123, 1, 10}, 10);
  expectError("is not an llm.c token file (magic 123, expected 20240520)");
  write({20240520, 2, 10}, 10);
  expectError("has token format version 2; expected 1");
  write({20240520, 1, 1000}, 10);
  expectError("is truncated: the header promises 1000 tokens, the file holds 10");
  std::ofstream(path, std::ios::binary) << "short";
  expectError("shorter than its 1024-byte header");
  std::remove(path.c_str());
  expectError("No such file or directory");
  EXPECT_FALSE(writeTokenFile(path, {70000}).ok());
}

}  // namespace
}  // namespace dtc::data
