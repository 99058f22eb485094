#include "checkpoint/index.h"

#include <gtest/gtest.h>

namespace dtc::checkpoint {
namespace {

CheckpointIndex sample() {
  CheckpointIndex index;
  index.progress.step = 7;
  index.progress.seed = 3;
  index.progress.samplesPerStep = 16;
  index.progress.data = io::Json::object();
  index.progress.data.set("source", "tokens");
  index.plan = "gpt.dtp";
  index.mesh = "tp=2";
  index.files = {{"rank-00000.safetensors", 0, 100, 1}, {"rank-00001.safetensors", 1, 100, 2}};
  TensorRecord w{"w", DType::kF32, {4, 2}, "param", {}};
  w.slices = {{0, "w", Box{{0, 0}, {2, 2}}, 11}, {1, "w", Box{{2, 0}, {2, 2}}, 12}};
  TensorRecord step{
      "optimizer.step", DType::kF32, {}, "optim_state", {{0, "optimizer.step", Box{}, 13}}};
  index.tensors = {w, step};
  return index;
}

std::string text(const CheckpointIndex& index) { return indexToJson(index).dump(); }

TEST(CheckpointIndex, RoundTrips) {
  auto parsed = parseIndex(text(sample()), "index.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->progress.step, 7);
  EXPECT_EQ(parsed->progress.seed, 3u);
  EXPECT_EQ(parsed->mesh, "tp=2");
  ASSERT_EQ(parsed->tensors.size(), 2u);
  const TensorRecord* w = parsed->find("w");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->slices[1].box.offsets, (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(w->slices[1].crc32, 12u);
  EXPECT_EQ(parsed->find("optimizer.step")->shape.size(), 0u);
  EXPECT_EQ(text(*parsed), text(sample()));
}

void expectRejected(const CheckpointIndex& index, const std::string& fragment) {
  auto parsed = parseIndex(text(index), "ck/index.json");
  ASSERT_FALSE(parsed.ok()) << "accepted; expected: " << fragment;
  EXPECT_NE(parsed.status().message().find(fragment), std::string::npos)
      << parsed.status().message();
  EXPECT_EQ(parsed.status().message().rfind("ck/index.json", 0), 0u) << parsed.status().message();
}

TEST(CheckpointIndex, RejectsSlicesThatDoNotTileTheTensor) {
  CheckpointIndex gap = sample();
  gap.tensors[0].slices.pop_back();
  expectRejected(gap, "cover 4 of 8 elements");
  CheckpointIndex overlap = sample();
  overlap.tensors[0].slices[1].box.offsets = {1, 0};
  expectRejected(overlap, "overlap");
  CheckpointIndex outside = sample();
  outside.tensors[0].slices[1].box.offsets = {3, 0};
  expectRejected(outside, "outside the tensor");
  CheckpointIndex rank = sample();
  rank.tensors[0].slices[1].box = Box{{2}, {2}};
  expectRejected(rank, "outside the tensor");
}

TEST(CheckpointIndex, RejectsUnknownFilesAndEscapingNames) {
  CheckpointIndex file = sample();
  file.tensors[0].slices[1].file = 5;
  expectRejected(file, "names no listed file");
  CheckpointIndex escape = sample();
  escape.files[1].name = "../../etc/passwd";
  expectRejected(escape, "outside the checkpoint");
}

TEST(CheckpointIndex, RejectsOtherDocuments) {
  EXPECT_FALSE(parseIndex("{\"format\": \"other\"}", "x").ok());
  EXPECT_FALSE(parseIndex("[1, 2]", "x").ok());
  EXPECT_FALSE(parseIndex(text(sample()).substr(0, 40), "x").ok());
  std::string v2 = text(sample());
  v2.replace(v2.find("\"version\":1"), 11, "\"version\":2");
  auto parsed = parseIndex(v2, "x");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("version 2"), std::string::npos);
}

}  // namespace
}  // namespace dtc::checkpoint
