#include "checkpoint/directory.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <vector>

#include "io/crc32.h"
#include "io/files.h"
#include "io/safetensors.h"

namespace dtc::checkpoint {
namespace {

std::string freshDir(const std::string& name) {
  std::string dir = ::testing::TempDir() + "/ckdir_" + std::to_string(::getpid()) + "_" + name;
  EXPECT_TRUE(io::removeTree(dir).ok());
  EXPECT_TRUE(io::makeDirectories(dir).ok());
  return dir;
}

// A complete step: an index with no tensors is valid.
void writeStep(const std::string& dir, int64_t step) {
  const std::string stepDir = dir + "/" + stepDirectoryName(step);
  ASSERT_TRUE(io::makeDirectories(stepDir).ok());
  CheckpointIndex index;
  index.progress.step = step;
  index.progress.samplesPerStep = 1;
  index.progress.data = io::Json::object();
  std::string text = indexToJson(index).dump();
  ASSERT_TRUE(io::writeFileAtomically(stepDir + "/" + kIndexFile, text.data(), text.size()).ok());
}

TEST(CheckpointDirectory, StepNames) {
  int64_t step = -1;
  EXPECT_EQ(stepDirectoryName(120), "step-120");
  EXPECT_TRUE(parseStepDirectoryName("step-120", step));
  EXPECT_EQ(step, 120);
  for (const char* bad : {"step-", "step-12.tmp", "step-x", "latest", "step-1a", "steps-1"})
    EXPECT_FALSE(parseStepDirectoryName(bad, step)) << bad;
}

TEST(CheckpointDirectory, ResolvesLatestThenTheNewestCompleteStep) {
  std::string dir = freshDir("resolve");
  EXPECT_FALSE(resolveCheckpoint(dir).ok());  // nothing yet
  writeStep(dir, 4);
  writeStep(dir, 10);
  ASSERT_TRUE(io::makeDirectories(dir + "/step-12.tmp").ok());  // an interrupted write
  ASSERT_TRUE(io::makeDirectories(dir + "/step-11").ok());      // no index: incomplete
  auto found = resolveCheckpoint(dir);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(*found, dir + "/step-10");
  ASSERT_TRUE(io::replaceSymlink("step-4", dir + "/" + kLatest).ok());
  EXPECT_EQ(*resolveCheckpoint(dir), dir + "/step-4");
  EXPECT_EQ(*resolveCheckpoint(dir + "/step-10"), dir + "/step-10");
  // A dangling `latest` (its step deleted by hand) falls back to the newest complete step.
  ASSERT_TRUE(io::replaceSymlink("step-99", dir + "/" + kLatest).ok());
  EXPECT_EQ(*resolveCheckpoint(dir), dir + "/step-10");
  EXPECT_FALSE(resolveCheckpoint(dir + "/missing").ok());
}

TEST(CheckpointDirectory, LeftoversAndRetention) {
  std::string dir = freshDir("retention");
  for (int64_t s : {2, 4, 6, 8}) writeStep(dir, s);
  ASSERT_TRUE(io::replaceSymlink("step-4", dir + "/" + kLatest).ok());
  ASSERT_TRUE(io::makeDirectories(dir + "/step-10.tmp").ok());
  ASSERT_TRUE(io::makeDirectories(dir + "/step-6.old").ok());
  ASSERT_TRUE(io::writeFileAtomically(dir + "/notes.txt", "x", 1).ok());
  ASSERT_TRUE(removeLeftovers(dir).ok());
  ASSERT_TRUE(removeOldSteps(dir, 2).ok());
  auto names = io::listDirectory(dir);
  ASSERT_TRUE(names.ok());
  // The two newest, and the one `latest` names; what is not ours stays.
  EXPECT_EQ(*names,
            (std::vector<std::string>{"latest", "notes.txt", "step-4", "step-6", "step-8"}));
}

TEST(CheckpointDirectory, ReadIndexNamesATruncatedFile) {
  std::string dir = freshDir("truncated");
  const std::string stepDir = dir + "/step-1";
  ASSERT_TRUE(io::makeDirectories(stepDir).ok());
  float w[4] = {1, 2, 3, 4};
  io::WrittenSafetensors written;
  ASSERT_TRUE(io::writeSafetensors(stepDir + "/rank-00000.safetensors",
                                   {{"w", DType::kF32, {4}, w, 16}}, {}, &written)
                  .ok());
  CheckpointIndex index;
  index.progress.data = io::Json::object();
  index.progress.samplesPerStep = 1;
  index.files = {{"rank-00000.safetensors", 0, written.bytes, written.crc32}};
  index.tensors = {
      {"w", DType::kF32, {4}, "param", {{0, "w", Box{{0}, {4}}, written.tensorCrc32[0]}}}};
  std::string text = indexToJson(index).dump();
  ASSERT_TRUE(io::writeFileAtomically(stepDir + "/index.json", text.data(), text.size()).ok());
  auto read = readIndex(stepDir);
  ASSERT_TRUE(read.ok()) << read.status().message();
  ASSERT_TRUE(checkFile(stepDir, read->files[0]).ok());
  ASSERT_EQ(::truncate((stepDir + "/rank-00000.safetensors").c_str(), written.bytes - 3), 0);
  Status truncated = checkFile(stepDir, read->files[0]);
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.message().find("rank-00000.safetensors is truncated"), std::string::npos)
      << truncated.message();
  ASSERT_EQ(::unlink((stepDir + "/rank-00000.safetensors").c_str()), 0);
  EXPECT_NE(checkFile(stepDir, read->files[0]).message().find("is incomplete"), std::string::npos);
}

// The writer's checksums are zlib's CRC-32 of the file and of each tensor's bytes.
TEST(CheckpointDirectory, WriterChecksumsAreThoseOfTheBytes) {
  std::string dir = freshDir("crc");
  float a[3] = {1, 2, 3};
  int64_t b[2] = {7, 8};
  // Large enough to be checksummed beside its write, in several pieces.
  std::vector<int32_t> big((150u << 20) / 4);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<int32_t>(i * 2654435761u);
  io::WrittenSafetensors written;
  const std::string path = dir + "/f.safetensors";
  ASSERT_TRUE(
      io::writeSafetensors(
          path,
          {{"b", DType::kI64, {2}, b, 16},
           {"a", DType::kF32, {3}, a, 12},
           {"empty", DType::kF32, {0}, nullptr, 0},
           {"big", DType::kI32, {static_cast<int64_t>(big.size())}, big.data(), big.size() * 4}},
          {{"k", "v"}}, &written)
          .ok());
  auto file = io::SafetensorsFile::read(path);
  ASSERT_TRUE(file.ok());
  ASSERT_EQ(written.tensorCrc32.size(), 4u);
  EXPECT_EQ(written.tensorCrc32[0], io::crc32(0, b, 16));
  EXPECT_EQ(written.tensorCrc32[1], io::crc32(0, a, 12));
  EXPECT_EQ(written.tensorCrc32[2], 0u);
  EXPECT_EQ(written.tensorCrc32[3], io::crc32(0, big.data(), big.size() * 4));
  auto size = io::fileSize(path);
  ASSERT_TRUE(size.ok());
  EXPECT_EQ(written.bytes, *size);
  std::vector<uint8_t> bytes(*size);
  FILE* f = std::fopen(path.c_str(), "rb");
  ASSERT_EQ(std::fread(bytes.data(), 1, bytes.size(), f), bytes.size());
  std::fclose(f);
  EXPECT_EQ(written.crc32, io::crc32(0, bytes.data(), bytes.size()));
  // The pread reader sees the same tensors.
  auto reader = io::SafetensorsReader::open(path);
  ASSERT_TRUE(reader.ok());
  const io::TensorEntry* entry = reader->header().find("a");
  ASSERT_TRUE(entry);
  float back[3] = {};
  ASSERT_TRUE(reader->read(*entry, back).ok());
  EXPECT_EQ(back[2], 3.0f);
  // The checked read, in pieces on several threads, gives the bytes and their checksum.
  std::vector<int32_t> bigBack(big.size());
  int64_t bBack[2] = {};
  auto crcs = reader->readChecked({reader->header().find("big"), reader->header().find("b")},
                                  {bigBack.data(), bBack});
  ASSERT_TRUE(crcs.ok());
  EXPECT_EQ((*crcs)[0], written.tensorCrc32[3]);
  EXPECT_EQ((*crcs)[1], written.tensorCrc32[0]);
  EXPECT_EQ(bigBack, big);
  EXPECT_EQ(bBack[1], 8);
  ASSERT_TRUE(io::removeTree(dir).ok());
}

}  // namespace
}  // namespace dtc::checkpoint
