// The translation's state, shared by its three parts: the walk that folds what is known at
// compile time and infers every other value's type and shape (Translator.cpp), the patterns that
// fuse decomposed ops back into dtc's (Patterns.cpp), and the rules that emit each remaining ONNX
// op as dtc model ops (OpRules.cpp).
#pragma once

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/ModelBuilder.h"
#include "onnx/Constants.h"
#include "onnx/OnnxTranslator.h"

namespace dtc::onnx_import {

enum class ValueKind {
  kData,      // a graph input fed per step
  kParam,     // a float initializer the loss depends on (trainable), or a buffer
  kConst,     // known at compile time
  kComputed,  // computed by the step
};

struct Value {
  ValueKind kind = ValueKind::kComputed;
  int32_t type = onnx::TensorProto::FLOAT;
  Shape shape;
  std::optional<Constant> constant;  // kConst
  std::string name;                  // its name in the dtc graph (not kConst)
  // An integer (`type`) the step computes, held in a float32 tensor (IntegerRules.cpp).
  bool emulated = false;
};

// Nodes fused into one dtc op: emitted when the walk reaches `root`, the last of `members`.
struct Group {
  int root = -1;
  std::vector<int> members;
  std::function<llvm::Error()> emit;
};

class Translator {
 public:
  Translator(const OnnxModel& model, const TranslateOptions& options);
  llvm::Expected<std::vector<uint8_t>> run();

  // ---- for the op rules and patterns ----
  int nodeCount() const { return static_cast<int>(nodes_.size()); }
  const onnx::NodeProto& node(int i) const { return *nodes_[i]; }
  // nn.Embedding's padding_idx for the table `name` (--padding-idx, else its one zero row, which
  // a note then says), or -1.
  int64_t paddingIdx(const std::string& name) {
    if (auto it = options_.paddingIdx.find(name); it != options_.paddingIdx.end())
      return it->second;
    auto zero = zeroRow_.find(name);
    if (!options_.inferPaddingIdx || zero == zeroRow_.end()) return -1;
    const std::string note = model_.name() + ": row " + std::to_string(zero->second) + " of " +
                             name +
                             " is all zeros, as nn.Embedding's padding_idx leaves it: it is kept "
                             "untrained as PyTorch would (--padding-idx none trains it)";
    if (std::find(notes_.begin(), notes_.end(), note) == notes_.end()) notes_.push_back(note);
    return zero->second;
  }
  const std::vector<std::string>& notes() const { return notes_; }
  // The node's name for dtc (its ONNX name, else its op type and index).
  std::string nodeName(int i) const;
  // The value named `name`, or null (an optional input left out, or unknown).
  const Value* value(const std::string& name) const;
  const Value* input(int node, int index) const;
  const Constant* constant(int node, int index) const;
  // The node producing `name` (-1: an input, initializer or unknown) and the nodes reading it.
  int producer(const std::string& name) const;
  const std::vector<int>& users(const std::string& name) const;
  bool isGraphOutput(const std::string& name) const { return outputs_.count(name) > 0; }
  bool dynamic(int node) const { return dynamic_[node]; }

  // Records the type and shape of a node's output (the walk) and emits dtc nodes.
  void define(const std::string& name, int32_t type, Shape shape);
  // Makes the dtc graph name `alias` stand for an existing value (Identity, Dropout).
  void alias(const std::string& name, const std::string& of);
  // The value `name` as an integer held in float32, or as element type `type` (its tensor as
  // it is: float32 is no longer an emulated integer).
  void markEmulated(const std::string& name) { values_[name].emulated = true; }
  void defineAs(const std::string& name, int32_t type) {
    values_[name].type = type;
    if (type == onnx::TensorProto::FLOAT) values_[name].emulated = false;
  }
  void emit(int node, const std::string& opType, std::vector<std::string> inputs,
            std::vector<std::string> outputs, const std::vector<NodeAttr>& attributes = {});
  // A name no ONNX value has, derived from `base`.
  std::string fresh(const std::string& base);
  // A constant used as an operand of an emitted op: a non-trainable initializer holding its
  // values (the fallback where no pattern or attribute absorbs it).
  std::string frozenConstant(int node, const Constant& c);
  void addGroup(Group group);

  // An error about node `i`, naming it.
  llvm::Error nodeError(int i, const std::string& message) const;
  // Records node `i` as one dtc cannot run (all such nodes are listed in one error at the end).
  llvm::Error unsupported(int i, const std::string& why);
  // The node of group membership (-1: none).
  int groupOf(int node) const { return groupOf_[node]; }

  // ---- for regions found before the walk (MoeRegions.cpp) ----
  // A Constant node's value (its value, value_float(s) or value_int(s)).
  llvm::Expected<Constant> constantOf(const onnx::NodeProto& node) const;
  // The initializer named `name`, or null.
  const onnx::TensorProto* initializer(const std::string& name) const {
    auto it = initializers_.find(name);
    return it == initializers_.end() ? nullptr : it->second;
  }
  // A subgraph the walk does not infer node by node (its shapes depend on the data, as a
  // router's NonZero does): its members are skipped, but for what they fold from constants, and
  // at `root` `infer` defines the region's output; `emit` writes it as dtc ops (a Group).
  struct Region {
    int root = -1;
    std::vector<int> members;
    std::function<llvm::Error()> infer, emit;
  };
  void addRegion(Region region);

 private:
  llvm::Error readInputs();
  llvm::Error chooseLoss();
  void markDifferentiable();
  llvm::Error checkTrainingExport();
  llvm::Error readInitializers();
  llvm::Error walk();
  llvm::Error emitAll();
  llvm::Error finishLoss(std::vector<std::string>& outputs, std::string& loss,
                         std::string& predictions, std::string& targets);
  llvm::Error constantNode(int i);
  void defineConstant(const std::string& name, Constant c);
  // A Loop whose inputs are known, run with its body on constants (FoldLoop.cpp): its outputs,
  // or nullopt when its body computes what only a step could.
  llvm::Expected<std::optional<std::vector<Constant>>> foldLoop(
      int i, const std::vector<const Value*>& in);
  llvm::Error unsupportedError() const;

  const OnnxModel& model_;
  TranslateOptions options_;
  ModelBuilder builder_;
  std::vector<const onnx::NodeProto*> nodes_;
  std::vector<bool> dynamic_;
  std::map<std::string, Value> values_;
  std::map<std::string, int> producers_;
  std::map<std::string, std::vector<int>> users_;
  std::map<std::string, const onnx::TensorProto*> initializers_;
  std::map<std::string, bool> outputs_;  // graph outputs
  std::vector<std::string> outputOrder_;
  std::map<std::string, bool> differentiable_;  // values the loss depends on differentiably
  std::map<std::string, bool> buffers_;         // BatchNorm running statistics
  std::map<std::string, int64_t> zeroRow_;      // 2-D parameters' one all-zero row
  std::vector<std::string> notes_;
  std::vector<Group> groups_;
  std::vector<int> groupOf_;
  std::vector<Region> regions_;
  std::vector<int> regionOf_;  // each node's region (-1: none)
  std::string lossValue_;      // the ONNX value minimised, or the prediction (cross-entropy, mse)
  std::string unsupported_;    // every unsupported node, listed
  int unsupportedCount_ = 0;
  int freshCount_ = 0;
};

// ---- OpRules.cpp ----
struct OpRule {
  // Types and shapes of the node's outputs, from its inputs' (the walk).
  std::function<llvm::Error(Translator&, int)> infer;
  // The dtc ops computing them.
  std::function<llvm::Error(Translator&, int)> emit;
  // The inputs it takes (the first minInputs present) — checked before infer sees the node.
  int minInputs = 1, maxInputs = 1;
};
// The rule for a dynamic node of `opType`, or null when dtc cannot run it.
const OpRule* findOpRule(const std::string& opType);
// Whether gradients flow into input `index` of an `opType` node (float inputs do, except the
// ones listed there: BatchNorm's running statistics, exponents, conditions).
bool differentiableInput(const std::string& opType, int index);

// ---- MoeRegions.cpp ----
// Finds the mixture-of-experts blocks transformers' Mixtral exports (softmax router, TopK,
// per-expert SwiGLU MLPs indexed by NonZero, index_add by ScatterElements) and records each as
// a Region that becomes dtc's MixtureOfExperts op. Runs before the walk.
void findMoeRegions(Translator& t);

// ---- Patterns.cpp ----
// Finds the decomposed ops an exporter writes for LayerNorm, GELU, causal attention's masked
// softmax, linear layers (MatMul with a transposed weight, plus bias) and log-softmax + NLL, and
// records each as a Group.
void findPatterns(Translator& t);

}  // namespace dtc::onnx_import
