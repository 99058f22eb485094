// A Loop an export writes for what it traced as a Python loop over a known tensor (torch's
// repeat_interleave of a rotary table, say): run when compiling, its body evaluated on
// constants, iteration by iteration, as ONNX's Loop defines it.
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <map>

#include "onnx/Translator.h"

namespace dtc::onnx_import {
namespace {

// More iterations than any shape subgraph needs: a malformed model's trip count must not run
// the compiler for ever.
constexpr int64_t kMaxIterations = int64_t{1} << 20;

// The shape of `c` as ONNX's Shape returns it (start and end attributes applied).
Constant shapeOf(const onnx::NodeProto& n, const Constant& c) {
  const int64_t rank = static_cast<int64_t>(c.shape.size());
  int64_t start = intAttribute(n, "start", 0), end = intAttribute(n, "end", rank);
  start = std::clamp<int64_t>(start < 0 ? start + rank : start, 0, rank);
  end = std::clamp<int64_t>(end < 0 ? end + rank : end, 0, rank);
  return Constant::ofInts(onnx::TensorProto::INT64, {std::max<int64_t>(0, end - start)},
                          Shape(c.shape.begin() + start, c.shape.begin() + std::max(start, end)));
}

}  // namespace

llvm::Expected<std::optional<std::vector<Constant>>> Translator::foldLoop(
    int i, const std::vector<const Value*>& in) {
  const onnx::NodeProto& n = node(i);
  const onnx::AttributeProto* bodyAttribute = findAttribute(n, "body");
  if (!bodyAttribute || !bodyAttribute->has_g()) return nodeError(i, "a Loop without its body");
  const onnx::GraphProto& body = bodyAttribute->g();
  const int carried = static_cast<int>(in.size()) - 2;
  if (carried < 0 || body.input_size() != carried + 2 || body.output_size() < carried + 1)
    return nodeError(i, "its body's inputs and outputs do not match the loop's");
  const Constant* trips = in[0] ? &*in[0]->constant : nullptr;
  const Constant* condition = in[1] ? &*in[1]->constant : nullptr;
  if (!trips && !condition)
    return nodeError(i, "a Loop without a trip count or a condition never ends");
  const int64_t count = trips ? trips->integer(0) : kMaxIterations;
  if (count > kMaxIterations)
    return nodeError(i, "a trip count of " + std::to_string(count) + " is more than dtc runs");
  std::vector<Constant> state;
  for (int k = 0; k < carried; ++k) state.push_back(*in[k + 2]->constant);
  const int scans = body.output_size() - 1 - carried;
  std::vector<std::vector<Constant>> scanned(static_cast<size_t>(scans));
  bool running = !condition || condition->integer(0) != 0;
  for (int64_t iteration = 0; iteration < count && running; ++iteration) {
    // The body's scope: its inputs, its nodes' outputs, then the graph's constants.
    std::map<std::string, Constant> scope;
    scope[body.input(0).name()] = Constant::ofInts(onnx::TensorProto::INT64, {}, {iteration});
    scope[body.input(1).name()] =
        Constant::ofInts(onnx::TensorProto::BOOL, {}, {running ? int64_t{1} : int64_t{0}});
    for (int k = 0; k < carried; ++k) scope[body.input(k + 2).name()] = state[k];
    auto lookup = [&](const std::string& name) -> const Constant* {
      if (auto it = scope.find(name); it != scope.end()) return &it->second;
      const Value* v = value(name);
      return v && v->kind == ValueKind::kConst ? &*v->constant : nullptr;
    };
    for (const onnx::NodeProto& b : body.node()) {
      if (b.op_type() == "Constant") {
        llvm::Expected<Constant> c = constantOf(b);
        if (!c) return nodeError(i, "its body: " + llvm::toString(c.takeError()));
        scope[b.output(0)] = std::move(*c);
        continue;
      }
      std::vector<const Constant*> inputs;
      for (const std::string& name : b.input()) {
        if (name.empty()) {
          inputs.push_back(nullptr);
          continue;
        }
        const Constant* c = lookup(name);
        if (!c) return std::optional<std::vector<Constant>>();  // a computed value: not folded
        inputs.push_back(c);
      }
      if ((b.op_type() == "Shape" || b.op_type() == "Size") && !inputs.empty() && inputs[0]) {
        scope[b.output(0)] = b.op_type() == "Shape"
                                 ? shapeOf(b, *inputs[0])
                                 : Constant::ofInts(onnx::TensorProto::INT64, {},
                                                    {static_cast<int64_t>(inputs[0]->size())});
        continue;
      }
      std::string problem;
      std::optional<std::vector<Constant>> out = evaluate(b, inputs, problem);
      if (!problem.empty()) return nodeError(i, "its body's " + b.op_type() + ": " + problem);
      if (!out) return std::optional<std::vector<Constant>>();  // an op not folded
      for (size_t k = 0; k < out->size() && k < static_cast<size_t>(b.output_size()); ++k)
        scope[b.output(static_cast<int>(k))] = std::move((*out)[k]);
    }
    auto result = [&](int k) -> const Constant* { return lookup(body.output(k).name()); };
    for (int k = 0; k < body.output_size(); ++k)
      if (!result(k)) return nodeError(i, "its body does not define " + body.output(k).name());
    running = result(0)->integer(0) != 0;
    for (int k = 0; k < carried; ++k) state[k] = *result(k + 1);
    for (int k = 0; k < scans; ++k) scanned[k].push_back(*result(1 + carried + k));
  }
  if (running && !trips)
    return nodeError(
        i, "its condition stays true past " + std::to_string(kMaxIterations) + " iterations");
  std::vector<Constant> outputs = std::move(state);
  // Scan outputs: each iteration's value stacked along a new first dimension.
  for (std::vector<Constant>& values : scanned) {
    if (values.empty()) return nodeError(i, "a scan output of no iterations");
    Constant stacked;
    stacked.type = values[0].type;
    stacked.shape = values[0].shape;
    stacked.shape.insert(stacked.shape.begin(), static_cast<int64_t>(values.size()));
    for (const Constant& v : values) {
      if (v.shape != values[0].shape) return nodeError(i, "scan outputs of different shapes");
      stacked.reals.insert(stacked.reals.end(), v.reals.begin(), v.reals.end());
      stacked.ints.insert(stacked.ints.end(), v.ints.begin(), v.ints.end());
    }
    std::string problem;
    if (tooLarge(stacked.shape, problem)) return nodeError(i, problem);
    outputs.push_back(std::move(stacked));
  }
  return std::optional<std::vector<Constant>>(std::move(outputs));
}

}  // namespace dtc::onnx_import
