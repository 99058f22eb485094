#include "checkpoint/rank_file.h"

#include <gtest/gtest.h>

#include <cstdint>
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

// Every box of a local tensor of shape `local` (rank 4 at most), placed at an offset in a larger
// whole tensor.
template <typename Visit>
void everyBox(const std::vector<int64_t>& local, const Visit& visit) {
  std::vector<std::vector<std::pair<int64_t, int64_t>>> each;
  for (int64_t extent : local) each.push_back(spans(extent));
  std::vector<size_t> at(local.size(), 0);
  while (true) {
    PlannedSlice slice;
    for (size_t d = 0; d < local.size(); ++d) {
      slice.localOffsets.push_back(each[d][at[d]].first);
      slice.box.offsets.push_back(7 + each[d][at[d]].first);
      slice.box.sizes.push_back(each[d][at[d]].second);
    }
    visit(slice);
    size_t d = local.size();
    while (d-- > 0 && ++at[d] == each[d].size()) at[d] = 0;
    if (d == SIZE_MAX) return;
  }
}

// A piece is said to lie in rows exactly when its elements' row-major indices in the local tensor
// are equal runs of consecutive indices, evenly spaced; the rows read there are what
// copyPieceOut copies.
TEST(PieceRows, RowsExactlyWhenTheRunsAreEvenlySpaced) {
  for (const std::vector<int64_t>& local :
       {std::vector<int64_t>{3, 4, 5}, std::vector<int64_t>{2, 1, 3, 4}}) {
    const int64_t count = std::accumulate(local.begin(), local.end(), int64_t{1},
                                          [](int64_t a, int64_t b) { return a * b; });
    std::vector<float> whole(static_cast<size_t>(count));
    std::iota(whole.begin(), whole.end(), 0.0f);  // each element holds its own index
    PlannedTensor tensor;
    tensor.dtype = DType::kF32;
    tensor.shape = std::vector<int64_t>(local.size(), 20);
    int single = 0, several = 0, none = 0;
    everyBox(local, [&](const PlannedSlice& slice) {
      int64_t n = 1;
      for (int64_t size : slice.box.sizes) n *= size;
      const WritePiece piece{&tensor, &slice, static_cast<size_t>(n * 4)};
      std::vector<float> copied(static_cast<size_t>(n));
      copyPieceOut(piece, local, reinterpret_cast<const uint8_t*>(whole.data()),
                   reinterpret_cast<uint8_t*>(copied.data()));
      size_t run = 1;
      while (run < copied.size() && copied[run] == copied[run - 1] + 1) ++run;
      const float pitch = run < copied.size() ? copied[run] - copied[0] : 0;
      bool even = copied.size() % run == 0;
      for (size_t i = 0; even && i < copied.size(); ++i)
        even = copied[i] ==
               copied[0] + static_cast<float>(i / run) * pitch + static_cast<float>(i % run);
      const std::optional<PieceRows> rows = pieceRowsInLocal(piece, local);
      ASSERT_EQ(rows.has_value(), even) << ::testing::PrintToString(slice.localOffsets) << " "
                                        << ::testing::PrintToString(slice.box.sizes);
      if (!rows) {
        ++none;
        return;
      }
      ++(rows->rows == 1 ? single : several);
      EXPECT_EQ(rows->rows, copied.size() / run);
      EXPECT_EQ(rows->rowBytes, run * 4);
      EXPECT_EQ(rows->offset, static_cast<uint64_t>(copied[0]) * 4);
      std::vector<float> read;
      for (uint64_t r = 0; r < rows->rows; ++r) {
        const float* from = whole.data() + (rows->offset + r * rows->pitch) / 4;
        read.insert(read.end(), from, from + rows->rowBytes / 4);
      }
      EXPECT_EQ(read, copied);
    });
    EXPECT_GT(single, 0);
    EXPECT_GT(several, 0);
    EXPECT_GT(none, 0);
  }
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
