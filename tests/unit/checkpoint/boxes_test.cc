#include "checkpoint/boxes.h"

#include <gtest/gtest.h>

#include <numeric>

namespace dtc::checkpoint {
namespace {

DimCut cut(int64_t parts, int64_t index, int64_t blocks = 1) {
  DimCut c;
  c.parts = parts;
  c.index = index;
  c.blocks = blocks;
  return c;
}

TEST(Boxes, PlainCutIsOnePiece) {
  auto pieces = piecesOf({8, 6}, {cut(2, 1), cut(3, 2)});
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_EQ(pieces[0].global.offsets, (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(pieces[0].global.sizes, (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(pieces[0].localOffsets, (std::vector<int64_t>{0, 0}));
}

// A fused q/k/v weight [3C, C] cut "3xtp": the device holds its block of each chunk.
TEST(Boxes, ChunkedCutIsOnePiecePerChunk) {
  auto pieces = piecesOf({12, 2}, {cut(2, 1, 3), cut(1, 0)});
  ASSERT_EQ(pieces.size(), 3u);
  for (int64_t k = 0; k < 3; ++k) {
    EXPECT_EQ(pieces[k].global.offsets, (std::vector<int64_t>{4 * k + 2, 0}));
    EXPECT_EQ(pieces[k].global.sizes, (std::vector<int64_t>{2, 2}));
    EXPECT_EQ(pieces[k].localOffsets, (std::vector<int64_t>{2 * k, 0}));
  }
}

TEST(Boxes, ScalarIsOneEmptyBox) {
  auto pieces = piecesOf({}, {});
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_EQ(pieces[0].global.elements(), 1);
  Box common;
  EXPECT_TRUE(intersect(pieces[0].global, wholeBox({}), common));
}

TEST(Boxes, Intersect) {
  Box a{{0, 2}, {4, 4}}, b{{2, 5}, {4, 4}}, out;
  ASSERT_TRUE(intersect(a, b, out));
  EXPECT_EQ(out.offsets, (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(out.sizes, (std::vector<int64_t>{2, 1}));
  EXPECT_FALSE(intersect(a, Box{{4, 0}, {1, 1}}, out));  // touching is not meeting
  EXPECT_EQ(boxText(out), "[2:4,5:6]");
}

// Reassembling a tensor from every device's local block (chunked rows, plain columns) through
// copyRegion gives the tensor back, and extracting it gives each block.
TEST(Boxes, CopyRegionRoundTripsEveryDevicesBlock) {
  const std::vector<int64_t> shape{12, 6};
  std::vector<float> whole(72);
  std::iota(whole.begin(), whole.end(), 0.0f);
  std::vector<float> rebuilt(72, -1.0f);
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t c = 0; c < 3; ++c) {
      std::vector<DimCut> cuts{cut(2, r, 3), cut(3, c)};
      std::vector<float> local(12), expected(12);
      extractShard(reinterpret_cast<const uint8_t*>(whole.data()), shape, 4, cuts,
                   reinterpret_cast<uint8_t*>(expected.data()));
      const std::vector<int64_t> localShape{6, 2};
      for (const Piece& p : piecesOf(shape, cuts)) {
        Placed local_{
            localShape,
            {p.global.offsets[0] - p.localOffsets[0], p.global.offsets[1] - p.localOffsets[1]}};
        copyRegion(reinterpret_cast<const uint8_t*>(whole.data()), Placed{shape, {0, 0}},
                   reinterpret_cast<uint8_t*>(local.data()), local_, p.global, 4);
        copyRegion(reinterpret_cast<const uint8_t*>(local.data()), local_,
                   reinterpret_cast<uint8_t*>(rebuilt.data()), Placed{shape, {0, 0}}, p.global, 4);
      }
      EXPECT_EQ(local, expected) << "device " << r << "," << c;
    }
  EXPECT_EQ(rebuilt, whole);
}

// A region of one saved box copied into another box's array (resharding's inner step).
TEST(Boxes, CopyRegionBetweenOverlappingBoxes) {
  // Saved rows 0..3 of a [4, 4] tensor whose values are 10·row + col; wanted: columns 2..3.
  std::vector<float> saved(16);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) saved[i * 4 + j] = 10.0f * i + j;
  Box want{{0, 2}, {4, 2}}, region;
  ASSERT_TRUE(intersect(want, Box{{0, 0}, {4, 4}}, region));
  std::vector<float> out(8, -1);
  copyRegion(reinterpret_cast<const uint8_t*>(saved.data()), Placed{{4, 4}, {0, 0}},
             reinterpret_cast<uint8_t*>(out.data()), Placed{{4, 2}, {0, 2}}, region, 4);
  EXPECT_EQ(out, (std::vector<float>{2, 3, 12, 13, 22, 23, 32, 33}));
}

}  // namespace
}  // namespace dtc::checkpoint
