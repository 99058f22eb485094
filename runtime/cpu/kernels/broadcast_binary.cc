// fill and element-wise binary ops with NumPy broadcasting.
#include <algorithm>
#include <cassert>

#include "cpu/kernels/kernels.h"

namespace dtc::cpu {
namespace {

// Elements per parallel chunk: below this a tensor runs inline on the caller.
constexpr int64_t kGrain = 16384;

template <BinaryOp Op>
inline float apply(float x, float y) {
  return binaryMath<Op>(x, y);
}

// Iteration space after broadcasting: the output is contiguous over `dims`; a and b are read
// at the given element strides (0 along a broadcast dimension).
struct Plan {
  std::vector<int64_t> dims, aStrides, bStrides;
};

// Strides of `shape` right-aligned to an output of rank `rank`; missing or size-1 dims get 0.
std::vector<int64_t> broadcastStrides(const Shape& shape, size_t rank) {
  assert(shape.size() <= rank);
  std::vector<int64_t> strides(rank, 0);
  int64_t stride = 1;
  for (size_t i = shape.size(), o = rank; i-- > 0;) {
    --o;
    if (shape[i] != 1) strides[o] = stride;
    stride *= shape[i];
  }
  return strides;
}

// Drops size-1 output dims and merges neighbours that both operands walk as one run, so
// [M,N]+[M,N] becomes one flat dim and [M,N]+[N] stays [M,N] with b strides [0,1].
Plan makePlan(const Shape& aShape, const Shape& bShape, const Shape& outShape) {
  const size_t rank = outShape.size();
  std::vector<int64_t> as = broadcastStrides(aShape, rank);
  std::vector<int64_t> bs = broadcastStrides(bShape, rank);
  Plan plan;  // built innermost-first, reversed at the end
  for (size_t d = rank; d-- > 0;) {
    int64_t size = outShape[d];
    if (size == 1) continue;
    if (!plan.dims.empty()) {
      int64_t inner = plan.dims.back();
      if (as[d] == plan.aStrides.back() * inner && bs[d] == plan.bStrides.back() * inner) {
        plan.dims.back() *= size;
        continue;
      }
    }
    plan.dims.push_back(size);
    plan.aStrides.push_back(as[d]);
    plan.bStrides.push_back(bs[d]);
  }
  std::reverse(plan.dims.begin(), plan.dims.end());
  std::reverse(plan.aStrides.begin(), plan.aStrides.end());
  std::reverse(plan.bStrides.begin(), plan.bStrides.end());
  return plan;
}

// One run along the innermost dim. Separate loops for the unit/zero stride cases let the
// compiler vectorise them; out may alias a or b (same index), so no __restrict.
template <BinaryOp Op>
void innerRun(const float* a, int64_t sa, const float* b, int64_t sb, float* out, int64_t len) {
  if (sa == 1 && sb == 1) {
    for (int64_t j = 0; j < len; ++j) out[j] = apply<Op>(a[j], b[j]);
  } else if (sa == 1 && sb == 0) {
    const float y = *b;
    for (int64_t j = 0; j < len; ++j) out[j] = apply<Op>(a[j], y);
  } else if (sa == 0 && sb == 1) {
    const float x = *a;
    for (int64_t j = 0; j < len; ++j) out[j] = apply<Op>(x, b[j]);
  } else {
    for (int64_t j = 0; j < len; ++j) out[j] = apply<Op>(a[j * sa], b[j * sb]);
  }
}

template <BinaryOp Op>
void runPlan(const Plan& plan, const float* a, const float* b, float* out, int64_t total,
             ThreadPool& pool) {
  const int rank = static_cast<int>(plan.dims.size());
  if (rank == 0) {  // every dim is 1: a single element
    out[0] = apply<Op>(a[0], b[0]);
    return;
  }
  const int64_t inner = plan.dims[rank - 1];
  const int64_t sa = plan.aStrides[rank - 1], sb = plan.bStrides[rank - 1];
  // Fast path: equal shapes (or a scalar operand) collapse to one flat dim.
  if (rank == 1) {
    pool.parallelFor(total, kGrain, [&](int64_t begin, int64_t end) {
      innerRun<Op>(a + begin * sa, sa, b + begin * sb, sb, out + begin, end - begin);
    });
    return;
  }
  // Fast path: contiguous a with a suffix-broadcast b ([M,N] op [N]), chunked by whole rows.
  if (rank == 2 && plan.aStrides[0] == inner && sa == 1 && plan.bStrides[0] == 0 && sb == 1) {
    const int64_t rows = plan.dims[0];
    pool.parallelFor(rows, std::max<int64_t>(1, kGrain / inner), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r)
        innerRun<Op>(a + r * inner, 1, b, 1, out + r * inner, inner);
    });
    return;
  }
  // General case: each chunk finds its start index, then walks runs of the innermost dim
  // with an odometer over the outer dims.
  pool.parallelFor(total, kGrain, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> idx(rank);
    int64_t ao = 0, bo = 0;
    for (int64_t d = rank - 1, rem = begin; d >= 0; --d) {
      idx[d] = rem % plan.dims[d];
      rem /= plan.dims[d];
      ao += idx[d] * plan.aStrides[d];
      bo += idx[d] * plan.bStrides[d];
    }
    for (int64_t i = begin; i < end;) {
      const int64_t len = std::min(inner - idx[rank - 1], end - i);
      innerRun<Op>(a + ao, sa, b + bo, sb, out + i, len);
      i += len;
      idx[rank - 1] += len;
      ao += len * sa;
      bo += len * sb;
      if (idx[rank - 1] < inner) continue;
      ao -= inner * sa;
      bo -= inner * sb;
      idx[rank - 1] = 0;
      for (int d = rank - 2; d >= 0; --d) {
        ao += plan.aStrides[d];
        bo += plan.bStrides[d];
        if (++idx[d] < plan.dims[d]) break;
        ao -= plan.dims[d] * plan.aStrides[d];
        bo -= plan.dims[d] * plan.bStrides[d];
        idx[d] = 0;
      }
    }
  });
}

}  // namespace

void fill(float* out, int64_t n, float value, ThreadPool& pool) {
  pool.parallelFor(n, kGrain,
                   [&](int64_t begin, int64_t end) { std::fill(out + begin, out + end, value); });
}

void binary(BinaryOp op, const float* a, const Shape& aShape, const float* b, const Shape& bShape,
            float* out, const Shape& outShape, ThreadPool& pool) {
  const int64_t total = numElements(outShape);
  if (total == 0) return;
  const Plan plan = makePlan(aShape, bShape, outShape);
  switch (op) {
    case BinaryOp::kAdd: return runPlan<BinaryOp::kAdd>(plan, a, b, out, total, pool);
    case BinaryOp::kSub: return runPlan<BinaryOp::kSub>(plan, a, b, out, total, pool);
    case BinaryOp::kMul: return runPlan<BinaryOp::kMul>(plan, a, b, out, total, pool);
    case BinaryOp::kDiv: return runPlan<BinaryOp::kDiv>(plan, a, b, out, total, pool);
  }
}

}  // namespace dtc::cpu
