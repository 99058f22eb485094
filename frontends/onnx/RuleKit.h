// The pieces the ONNX op rules share: the rules of each group of ops (ElementwiseRules.cpp,
// LayoutRules.cpp, NetworkRules.cpp) and the helpers they read nodes with. OpRules.cpp puts the
// rules into the table the translator looks ops up in.
#pragma once

#include <optional>

#include <string>
#include <vector>

#include "onnx/Translator.h"

namespace dtc::onnx_import::rules {

constexpr int32_t kFloat = onnx::TensorProto::FLOAT;
constexpr int32_t kInt64 = onnx::TensorProto::INT64;
using Error = llvm::Error;
template <typename T>
using Expected = llvm::Expected<T>;

inline const std::string& out(Translator& t, int i, int k = 0) { return t.node(i).output(k); }

// The dtc name of input `k`, which must be computed, data or a parameter.
inline std::string operand(Translator& t, int i, int k) { return t.input(i, k)->name; }

inline int64_t rankOf(const Value& v) { return static_cast<int64_t>(v.shape.size()); }

inline bool normalise(int64_t& axis, int64_t rank) {
  if (axis < -rank || axis >= rank) return false;
  if (axis < 0) axis += rank;
  return true;
}

inline std::vector<int64_t> intsOf(const Constant& c) {
  std::vector<int64_t> v;
  for (uint64_t k = 0; k < c.size(); ++k) v.push_back(c.integer(k));
  return v;
}

// Inputs `from`.. must be known at compile time (shapes, axes, sizes).
inline Error requireConstant(Translator& t, int i, int k, const std::string& what) {
  if (t.input(i, k) && !t.constant(i, k))
    return t.nodeError(i, what + " must be known when compiling (it depends on the data)");
  return Error::success();
}

// Float inputs only: dtc's ops compute on float32 (int64 only as labels and ids).
inline Error requireFloat(Translator& t, int i, std::initializer_list<int> inputs) {
  for (int k : inputs)
    if (const Value* v = t.input(i, k); v && v->type != kFloat)
      return t.nodeError(i, "input " + std::to_string(k) + " is " + elementTypeName(v->type) +
                                "; dtc computes this op on float32");
  return Error::success();
}

// The broadcast of the inputs' shapes (inputs `from`..), for ops whose output has it.
Error defineBroadcast(Translator& t, int i, int from, int32_t type);

// ---- element-wise and contractions (ElementwiseRules.cpp)
OpRule unaryRule(const std::string& dtcOp);
OpRule passThrough();
OpRule dropoutRule();
OpRule binaryRule(const std::string& dtcOp);
OpRule negRule();
OpRule divRule();
OpRule powRule();
OpRule matmulRule();
OpRule gemmRule();
OpRule clampRule();

// ---- integer arithmetic on the data, held in float32 (IntegerRules.cpp)
// Whether node `i` reads an integer the step computes or the data holds.
bool integerOnData(Translator& t, int i);
// Equal, Not, Add, Sub, Mul, Cast and CumSum of such integers.
OpRule integerRule();
// `rule` for float inputs, integerRule() where an input is an integer the step computes (or,
// unless `emulatedOnly`, integer data).
OpRule orOnIntegers(OpRule rule, bool emulatedOnly);
// Gather(table, ids) of ids the step computes: one-hot rows times the table.
Error gatherByComputedIds(Translator& t, int i, const std::string& table);

// ---- layout (LayoutRules.cpp)
OpRule reshapeRule();
OpRule transposeRule();
OpRule splitRule();
OpRule concatRule();
OpRule sliceRule();
OpRule padRule();
OpRule tileRule();
// Softmax or LogSoftmax (`dtcOp`) over any axis.
OpRule softmaxRule(const std::string& dtcOp);

// ---- embeddings, normalisation, losses, convolutional networks (NetworkRules.cpp)
OpRule gatherRule();
// How a loss over positions is reduced (ONNX's `reduction`).
enum class Reduction { kMean, kSum, kNone };
// A per-position loss of `logits` [.., C] and `labels` [..]: dtc's softmax cross-entropy, or
// NLL of log-probabilities (`dtcOp` NLLLoss), with optional class `weights` [C] (NLL only).
struct LossInputs {
  std::string logits, labels, weights;
  Reduction reduction = Reduction::kMean;
  std::optional<int64_t> ignore;  // positions labelled it count for nothing
  int64_t positions = 0;
};
// Emits the loss into `output`: each position's loss (kNone), their sum, or their mean, weighted
// by the weights of the positions' classes (ignored positions left out).
void emitCrossEntropy(Translator& t, int i, const LossInputs& in, const std::string& output,
                      const std::string& dtcOp = "SoftmaxCrossEntropy");
OpRule layerNormRule();
OpRule crossEntropyRule(const std::string& dtcOp);
OpRule convRule();
OpRule batchNormRule();
OpRule maxPoolRule();
OpRule averagePoolRule();
OpRule globalAveragePoolRule();
OpRule reduceRule(bool mean);

// ---- broadcasts and masks (MaskRules.cpp)
OpRule expandRule();
OpRule whereRule();
OpRule triluRule();

}  // namespace dtc::onnx_import::rules
