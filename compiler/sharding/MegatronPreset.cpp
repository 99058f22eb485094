#include "MegatronPreset.h"

#include "llvm/Support/GlobPattern.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "graph/IR/GraphDialect.h"
#include "graph/IR/GraphOps.h"
#include "plan/function_names.h"

using namespace mlir;

namespace dtc {
namespace {

// The parameter name `v` is, if it is a parameter argument.
std::string paramName(Value v) {
  auto arg = dyn_cast<BlockArgument>(v);
  if (!arg) return "";
  auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
  if (!func) return "";
  auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), attr::kParam);
  return name ? name.str() : "";
}

// A glob matching exactly `name`.
std::string literal(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (std::string("*?[]{}\\").find(c) != std::string::npos) out += '\\';
    out += c;
  }
  return out;
}

struct Layer {
  std::string weight, bias;  // bias may be empty
  Value out;                 // after the bias add
};

// A linear layer and its bias add, when its only user adds a 1-D parameter.
Layer layerOf(graph::LinearOp linear) {
  Layer l{paramName(linear.getWeight()), "", linear.getY()};
  if (!linear.getY().hasOneUse()) return l;
  if (auto add = dyn_cast<graph::AddOp>(*linear.getY().getUsers().begin())) {
    Value other = add.getLhs() == linear.getY() ? add.getRhs() : add.getLhs();
    const std::string bias = paramName(other);
    if (!bias.empty() && cast<RankedTensorType>(other.getType()).getRank() == 1) {
      l.bias = bias;
      l.out = add.getResult();
    }
  }
  return l;
}

// Whether some user of `v` is an Op (the training step's backward reads forward values too).
template <typename Op>
bool readBy(Value v) {
  return llvm::any_of(v.getUsers(), [](Operation* user) { return isa<Op>(user); });
}

// Attention's output merged back to [.., C]: reshape ← transpose ← (batch_matmul | attention).
bool afterAttention(Value x) {
  auto reshape = x.getDefiningOp<graph::ReshapeOp>();
  auto transpose = reshape ? reshape.getX().getDefiningOp<graph::TransposeOp>() : nullptr;
  Operation* source = transpose ? transpose.getX().getDefiningOp() : nullptr;
  return source && isa<graph::BatchMatmulOp, graph::CausalAttentionOp>(source);
}

std::vector<std::string> byStructure(ModuleOp module, const std::string& t) {
  std::vector<std::string> specs;
  int qkv = 0, attnProj = 0, fc = 0, mlpProj = 0;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.getSymName() != fn::kTrainStep) continue;
    func.walk([&](graph::LinearOp linear) {
      const Layer l = layerOf(linear);
      if (l.weight.empty()) return;
      if (auto split =
              l.out.hasOneUse() ? dyn_cast<graph::SplitOp>(*l.out.getUsers().begin()) : nullptr;
          split && split.getParts() == 3 &&
          static_cast<int64_t>(split.getAxis()) ==
              cast<RankedTensorType>(l.out.getType()).getRank() - 1) {
        specs.push_back(literal(l.weight) + "=3x" + t + ",-");
        if (!l.bias.empty()) specs.push_back(literal(l.bias) + "=3x" + t);
        ++qkv;
      } else if (readBy<graph::GeluOp>(l.out)) {
        specs.push_back(literal(l.weight) + "=" + t + ",-");
        if (!l.bias.empty()) specs.push_back(literal(l.bias) + "=" + t);
        ++fc;
      } else if (linear.getX().getDefiningOp<graph::GeluOp>()) {
        specs.push_back(literal(l.weight) + "=-," + t);
        ++mlpProj;
      } else if (afterAttention(linear.getX())) {
        specs.push_back(literal(l.weight) + "=-," + t);
        ++attnProj;
      }
    });
  }
  // A block is all four layers; a model with none of them is not GPT-2-shaped.
  if (qkv == 0 || qkv != attnProj || qkv != fc || qkv != mlpProj) return {};
  return specs;
}

}  // namespace

std::vector<std::string> megatronSpecs(ModuleOp module, const std::string& t) {
  bool named = false;
  auto glob = llvm::GlobPattern::create("*.attn.c_attn.weight");
  for (auto func : module.getOps<func::FuncOp>())
    for (BlockArgument arg : func.getArguments()) named = named || glob->match(paramName(arg));
  if (named)
    return {"*.attn.c_attn.weight=3x" + t + ",-",
            "*.attn.c_attn.bias=3x" + t,
            "*.attn.c_proj.weight=-," + t,
            "*.mlp.c_fc.weight=" + t + ",-",
            "*.mlp.c_fc.bias=" + t,
            "*.mlp.c_proj.weight=-," + t};
  return byStructure(module, t);
}

}  // namespace dtc
