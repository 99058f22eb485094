// How each ONNX op that computes on data or parameters becomes dtc model ops: its outputs' types
// and shapes (infer, during the walk) and the ops emitted for it (emit).
#include <algorithm>
#include <map>
#include <set>

#include "onnx/RuleKit.h"

namespace dtc::onnx_import {
namespace {

using namespace rules;

OpRule takes(OpRule rule, int min, int max) {
  rule.minInputs = min;
  rule.maxInputs = max;
  return rule;
}

const std::map<std::string, OpRule>& ruleTable() {
  static const std::map<std::string, OpRule> table = {
      {"Relu", unaryRule("Relu")},
      {"Tanh", unaryRule("Tanh")},
      {"Sigmoid", unaryRule("Sigmoid")},
      {"Exp", unaryRule("Exp")},
      {"Log", unaryRule("Log")},
      {"Sqrt", unaryRule("Sqrt")},
      {"Reciprocal", unaryRule("Reciprocal")},
      {"Erf", unaryRule("Erf")},
      {"Abs", unaryRule("Abs")},
      {"Softplus", unaryRule("Softplus")},
      {"Neg", negRule()},
      {"Identity", passThrough()},
      {"Dropout", takes(dropoutRule(), 1, 3)},
      {"Cast", orOnIntegers(passThrough(), true)},
      {"Add", orOnIntegers(takes(binaryRule("Add"), 2, 2), false)},
      {"Sub", orOnIntegers(takes(binaryRule("Sub"), 2, 2), false)},
      {"Mul", orOnIntegers(takes(binaryRule("Mul"), 2, 2), false)},
      {"Equal", takes(integerRule(), 2, 2)},
      {"Not", takes(integerRule(), 1, 1)},
      {"CumSum", takes(integerRule(), 2, 2)},
      {"Div", takes(divRule(), 2, 2)},
      {"Pow", takes(powRule(), 2, 2)},
      {"MatMul", takes(matmulRule(), 2, 2)},
      {"Max", clampRule()},
      {"Min", clampRule()},
      {"Gemm", takes(gemmRule(), 2, 3)},
      {"Reshape", takes(reshapeRule(), 2, 2)},
      {"Flatten", reshapeRule()},
      {"Unsqueeze", takes(reshapeRule(), 1, 2)},
      {"Squeeze", takes(reshapeRule(), 1, 2)},
      {"Transpose", transposeRule()},
      {"Split", takes(splitRule(), 1, 2)},
      {"Concat", takes(concatRule(), 1, 1 << 20)},
      {"Slice", takes(sliceRule(), 3, 5)},
      {"Softmax", softmaxRule("Softmax")},
      {"LogSoftmax", softmaxRule("LogSoftmax")},
      {"Gather", takes(gatherRule(), 2, 2)},
      {"LayerNormalization", takes(layerNormRule(), 2, 3)},
      {"SoftmaxCrossEntropyLoss", takes(crossEntropyRule("SoftmaxCrossEntropy"), 2, 3)},
      {"NegativeLogLikelihoodLoss", takes(crossEntropyRule("NLLLoss"), 2, 3)},
      {"Conv", takes(convRule(), 2, 3)},
      {"BatchNormalization", takes(batchNormRule(), 5, 5)},
      {"MaxPool", maxPoolRule()},
      {"AveragePool", averagePoolRule()},
      {"Pad", takes(padRule(), 1, 4)},
      {"GlobalAveragePool", globalAveragePoolRule()},
      {"ReduceSum", takes(reduceRule(false), 1, 2)},
      {"ReduceMean", takes(reduceRule(true), 1, 2)},
      {"Where", takes(whereRule(), 3, 3)},
      {"Expand", takes(expandRule(), 2, 2)},
      {"Tile", tileRule()},
      {"Trilu", takes(triluRule(), 1, 2)},
  };
  return table;
}

}  // namespace

std::vector<std::string> translatedOps() {
  // Constant, Shape and Size are always known when compiling.
  std::vector<std::string> ops = {"Constant", "Shape", "Size"};
  for (const auto& [op, rule] : ruleTable()) ops.push_back(op);
  return ops;
}

const OpRule* findOpRule(const std::string& opType) {
  auto it = ruleTable().find(opType);
  return it == ruleTable().end() ? nullptr : &it->second;
}

bool differentiableInput(const std::string& op, int index) {
  static const std::set<std::string> none = {"Shape", "Size", "Equal", "Less", "Greater",
                                             "LessOrEqual", "GreaterOrEqual", "Not", "And", "Or",
                                             "Xor", "Range", "ConstantOfShape", "ArgMax", "ArgMin",
                                             "NonZero", "Sign", "Floor", "Ceil", "Round",
                                             // dtc has no gradient of these: what reaches the
                                             // loss only through them is a constant of the
                                             // export (a rotary table's frequencies), folded.
                                             "Cos", "Sin"};
  if (none.count(op)) return false;
  static const std::map<std::string, std::set<int>> notThese = {
      {"BatchNormalization", {3, 4}},
      {"Pow", {1}},
      {"Where", {0}},
      {"Dropout", {1, 2}},
      {"Clip", {1, 2}},
      {"Reshape", {1}},
      {"Expand", {1}},
      {"Slice", {1, 2, 3, 4}},
      {"Tile", {1}},
      {"Gather", {1}},
      {"Split", {1}},
      {"Unsqueeze", {1}},
      {"Squeeze", {1}},
      {"ReduceSum", {1}},
      {"ReduceMean", {1}},
      {"SoftmaxCrossEntropyLoss", {1, 2}},
      {"NegativeLogLikelihoodLoss", {1, 2}},
      {"Trilu", {1}},
      {"TopK", {1}},
      {"Pad", {1, 2, 3}}};
  auto it = notThese.find(op);
  return it == notThese.end() || !it->second.count(index);
}

}  // namespace dtc::onnx_import
