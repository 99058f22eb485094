#include "onnx/Constants.h"

namespace dtc::onnx_import {

std::optional<std::vector<Constant>> foldMatmul(const std::vector<const Constant*>& in,
                                                std::string& error) {
  if (in.size() != 2 || !in[0] || !in[1]) return std::nullopt;
  const Constant &a = *in[0], &b = *in[1];
  if (a.shape.empty() || b.shape.empty()) {
    error = "MatMul of a scalar";
    return std::nullopt;
  }
  // 1-D operands as [1, k] and [k, 1], their added dimension dropped from the result.
  Shape as = a.shape, bs = b.shape;
  const bool rowVector = as.size() == 1, columnVector = bs.size() == 1;
  if (rowVector) as.insert(as.begin(), 1);
  if (columnVector) bs.push_back(1);
  const int64_t n = as[as.size() - 2], k = as.back(), m = bs.back();
  if (bs[bs.size() - 2] != k) {
    error = "MatMul of " + shapeText(a.shape) + " and " + shapeText(b.shape) +
            ": inner dimensions differ";
    return std::nullopt;
  }
  const Shape aBatch(as.begin(), as.end() - 2), bBatch(bs.begin(), bs.end() - 2);
  std::optional<Shape> batch = broadcastShapes(aBatch, bBatch);
  if (!batch) {
    error = "MatMul of " + shapeText(a.shape) + " and " + shapeText(b.shape) +
            ": batch dimensions do not broadcast";
    return std::nullopt;
  }
  Shape out = *batch;
  if (!rowVector) out.push_back(n);
  if (!columnVector) out.push_back(m);
  if (tooLarge(out, error)) return std::nullopt;
  // The flat offset, in an operand of batch shape `shape`, of batch index `index` of `full`.
  auto offsetIn = [&](const Shape& shape, uint64_t index) {
    uint64_t offset = 0, stride = 1;
    for (size_t d = 0; d < batch->size(); ++d) {
      const size_t fromEnd = batch->size() - 1 - d;
      const int64_t i = static_cast<int64_t>(index % (*batch)[fromEnd]);
      index /= (*batch)[fromEnd];
      if (fromEnd + shape.size() < batch->size()) continue;  // broadcast: absent dimension
      const size_t own = fromEnd + shape.size() - batch->size();
      if (shape[own] != 1) offset += static_cast<uint64_t>(i) * stride;
      stride *= shape[own];
    }
    return offset;
  };
  const uint64_t batches = elementsOf(*batch);
  std::vector<double> values(batches * n * m, 0.0);
  for (uint64_t bi = 0; bi < batches; ++bi) {
    const uint64_t aBase = offsetIn(aBatch, bi) * n * k, bBase = offsetIn(bBatch, bi) * k * m;
    double* y = values.data() + bi * n * m;
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < m; ++c) {
        double sum = 0;
        for (int64_t j = 0; j < k; ++j)
          sum += a.real(aBase + r * k + j) * b.real(bBase + j * m + c);
        y[r * m + c] = sum;
      }
  }
  const int32_t type = a.isFloat() ? a.type : b.type;
  if (!isFloatType(type)) {
    std::vector<int64_t> ints(values.begin(), values.end());
    return std::vector<Constant>{Constant::ofInts(type, out, std::move(ints))};
  }
  return std::vector<Constant>{Constant::ofReals(type, out, std::move(values))};
}

}  // namespace dtc::onnx_import
