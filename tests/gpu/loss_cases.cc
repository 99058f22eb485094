// The loss and its gradient in one step (softmax_cross_entropy_with_grad) against the CPU, which
// computes them as softmax_cross_entropy and softmax_cross_entropy_grad do: f32 logits, and bf16
// and f16 ones read widened with the gradient rounded once (within one unit of the type of the
// CPU's rounding of its f32 value, where the f32 values differ by a few ulps); written over the
// logits as memory planning makes it; ignore_index and count; a vocabulary of GPT-2's width.
#include "harness.h"

namespace dtc::gputest {
namespace {

constexpr DType kF32 = DType::kF32, kBF16 = DType::kBF16, kF16 = DType::kF16;

Case withGrad(const std::string& label, DType t, int64_t rows, int64_t classes,
              std::vector<Attr> attrs, bool inPlace) {
  Case c{label +
             (t == kBF16  ? " bf16"
              : t == kF16 ? " f16"
                          : "") +
             (inPlace ? " in place" : ""),
         "softmax_cross_entropy_with_grad",
         std::move(attrs),
         {t == kF32 ? f32({rows, classes}, -4, 4) : lowp(t, {rows, classes}, -4, 4),
          ids({rows}, classes), given({}, {0.75f})},
         {out({}), outAs(t, {rows, classes}, inPlace ? 0 : -1)}};
  c.tolerance = t == kBF16 ? 1e-2 : t == kF16 ? 2e-3 : 1e-5;
  return c;
}

}  // namespace

std::vector<Case> lossCases() {
  std::vector<Case> cases;
  for (DType t : {kF32, kBF16, kF16}) {
    cases.push_back(withGrad("softmax_cross_entropy_with_grad", t, 37, 10, {}, false));
    cases.push_back(withGrad("softmax_cross_entropy_with_grad", t, 37, 1001, {}, true));
    cases.push_back(withGrad("softmax_cross_entropy_with_grad ignore_index", t, 37, 10,
                             {intAttr("ignore_index", 3), intAttr("count", 64)}, false));
  }
  cases.push_back(
      withGrad("softmax_cross_entropy_with_grad GPT-2 vocabulary", kBF16, 16, 50304, {}, true));
  return cases;
}

// Steps both backends must refuse at bind time, with the same message.
std::vector<Case> lossMalformedCases() {
  Case rows = withGrad("bad softmax_cross_entropy_with_grad labels", kF32, 6, 5, {}, false);
  rows.inputs[1] = ids({5}, 5);
  Case grad = withGrad("bad softmax_cross_entropy_with_grad dlogits", kF32, 6, 5, {}, false);
  grad.outputs[1] = out({6, 4});
  return {rows, grad};
}

}  // namespace dtc::gputest
