// Multi-tensor cases of kernels_test: one parameter group of tensors of mixed sizes, updated in
// place as the memory planner makes them, and parameters cast to 16 bits, in one launch and
// (more tensors than one launch's descriptors hold) in several.
#include "harness.h"

namespace dtc::gputest {
namespace {

// multi_tensor_adamw on `sizes`, each tensor's outputs aliasing its inputs when `inPlace`.
Case multiTensorAdamw(const std::string& label, const std::vector<int64_t>& sizes, bool inPlace) {
  Case c{label,
         "multi_tensor_adamw",
         {floatAttr("beta1", 0.9), floatAttr("beta2", 0.95), floatAttr("eps", 1e-8),
          floatAttr("weight_decay", 0.1)},
         {},
         {}};
  for (size_t t = 0; t < sizes.size(); ++t) {
    const Shape shape{sizes[t]};
    const int first = static_cast<int>(4 * t);
    c.inputs.insert(c.inputs.end(), {f32(shape), f32(shape), f32(shape), f32(shape, 0, 1)});
    for (int alias : {first, first + 2, first + 3})
      c.outputs.push_back(out(shape, inPlace ? alias : -1));
  }
  c.inputs.push_back(given({}, {3.0f}));
  c.inputs.push_back(given({}, {6e-4f}));
  return c;
}

// multi_tensor_cast of f32 tensors of `sizes` to `to`, bit for bit as cast.
Case multiTensorCast(const std::string& label, const std::vector<int64_t>& sizes, DType to) {
  Case c{label, "multi_tensor_cast", {}, {}, {}};
  for (int64_t n : sizes) {
    c.inputs.push_back(f32({n}, -70000, 70000));  // f16's overflow to inf included
    c.outputs.push_back(outAs(to, {n}));
  }
  c.bitwise = true;
  return c;
}

}  // namespace

std::vector<Case> multiTensorCases() {
  std::vector<int64_t> many;
  for (int t = 0; t < 101; ++t) many.push_back(1 + (t * 977) % 5003);
  std::vector<int64_t> casts;
  for (int t = 0; t < 300; ++t) casts.push_back(1 + (t * 613) % 3001);
  return {
      multiTensorAdamw("multi_tensor_adamw 3 tensors", {33 * 45, 1, 70001}, false),
      multiTensorAdamw("multi_tensor_adamw in place", {768, 2304 * 7, 5}, true),
      multiTensorAdamw("multi_tensor_adamw 101 tensors, 3 launches", many, true),
      multiTensorCast("multi_tensor_cast bf16", {2304 * 768, 768, 3}, DType::kBF16),
      multiTensorCast("multi_tensor_cast f16", {1001, 77}, DType::kF16),
      multiTensorCast("multi_tensor_cast 300 tensors, 3 launches", casts, DType::kBF16),
  };
}

// Steps both backends must refuse at bind time, with the same message.
std::vector<Case> multiTensorMalformedCases() {
  Case shapes = multiTensorAdamw("bad multi_tensor_adamw shapes", {4, 5}, false);
  shapes.inputs[5] = f32({6});
  Case arity = multiTensorAdamw("bad multi_tensor_adamw arity", {4, 5}, false);
  arity.outputs.pop_back();
  Case mixed = multiTensorCast("bad multi_tensor_cast types", {4, 5}, DType::kBF16);
  mixed.outputs[1] = outAs(DType::kF16, {5});
  Case pairs = multiTensorCast("bad multi_tensor_cast pairs", {4, 5}, DType::kBF16);
  pairs.outputs.pop_back();
  return {shapes, arity, mixed, pairs};
}

}  // namespace dtc::gputest
