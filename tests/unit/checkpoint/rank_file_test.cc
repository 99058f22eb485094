#include "checkpoint/rank_file.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <optional>
#include <vector>

namespace dtc::checkpoint {
namespace {

// Every (offset, size) a dimension of `extent` allows.
std::vector<std::pair<int64_t, int64_t>> spans(int64_t extent) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int64_t o = 0; o < extent; ++o)
    for (int64_t n = 1; o + n <= extent; ++n) out.push_back({o, n});
  return out;
}

// Every box of a local tensor of shape {3, 4, 5}, placed at an offset in a larger whole tensor:
// the piece is said to be one range of the local tensor exactly when its elements' row-major
// indices there are consecutive, and that range holds what copyPieceOut copies.
TEST(PieceRange, OneRangeExactlyWhenTheElementsAreConsecutive) {
  const std::vector<int64_t> local = {3, 4, 5};
  std::vector<float> whole(60);
  std::iota(whole.begin(), whole.end(), 0.0f);  // each element holds its own index
  PlannedTensor tensor;
  tensor.dtype = DType::kF32;
  tensor.shape = {30, 4, 50};
  int ranges = 0, others = 0;
  for (auto [o0, n0] : spans(3))
    for (auto [o1, n1] : spans(4))
      for (auto [o2, n2] : spans(5)) {
        PlannedSlice slice;
        slice.localOffsets = {o0, o1, o2};
        slice.box = Box{{10 + o0, o1, 20 + o2}, {n0, n1, n2}};
        const WritePiece piece{&tensor, &slice, static_cast<size_t>(n0 * n1 * n2 * 4)};
        std::vector<float> copied(static_cast<size_t>(n0 * n1 * n2));
        copyPieceOut(piece, local, reinterpret_cast<const uint8_t*>(whole.data()),
                     reinterpret_cast<uint8_t*>(copied.data()));
        bool consecutive = true;
        for (size_t i = 1; i < copied.size(); ++i) consecutive &= copied[i] == copied[i - 1] + 1;
        const std::optional<uint64_t> at = pieceRangeInLocal(piece, local);
        ASSERT_EQ(at.has_value(), consecutive)
            << o0 << ":" << n0 << "," << o1 << ":" << n1 << "," << o2 << ":" << n2;
        if (!at) {
          ++others;
          continue;
        }
        ++ranges;
        EXPECT_EQ(*at, static_cast<uint64_t>(copied[0]) * 4);
        EXPECT_EQ(std::memcmp(reinterpret_cast<const uint8_t*>(whole.data()) + *at, copied.data(),
                              piece.bytes),
                  0);
      }
  EXPECT_GT(ranges, 0);
  EXPECT_GT(others, 0);
}

TEST(PieceRange, ScalarIsItsOwnRange) {
  PlannedTensor tensor;
  tensor.dtype = DType::kBF16;
  PlannedSlice slice;
  const WritePiece piece{&tensor, &slice, 2};
  EXPECT_EQ(pieceRangeInLocal(piece, {}), std::optional<uint64_t>(0));
}

}  // namespace
}  // namespace dtc::checkpoint
