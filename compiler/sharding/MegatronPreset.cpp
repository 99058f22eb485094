#include "MegatronPreset.h"

#include <set>

#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/GlobPattern.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "graph/IR/GraphDialect.h"
#include "graph/IR/GraphOps.h"
#include "planfile/function_names.h"

using namespace mlir;

namespace dtc {
namespace {

// Mixed precision puts casts around every product (the weights and inputs to the compute type,
// the result back): the structure is read through them.
Value beforeCasts(Value v) {
  while (auto cast = v.getDefiningOp<graph::CastOp>()) v = cast.getX();
  return v;
}
Value afterCasts(Value v) {
  while (v.hasOneUse())
    if (auto cast = dyn_cast<graph::CastOp>(*v.getUsers().begin()))
      v = cast.getResult();
    else
      break;
  return v;
}

// The parameter name `v` is, if it is a parameter argument or a cast of one.
std::string paramName(Value v) {
  v = beforeCasts(v);
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
  Layer l{paramName(linear.getWeight()), "", afterCasts(linear.getY())};
  if (!l.out.hasOneUse()) return l;
  if (auto add = dyn_cast<graph::AddOp>(*l.out.getUsers().begin())) {
    Value other = add.getLhs() == l.out ? add.getRhs() : add.getLhs();
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
  auto reshape = beforeCasts(x).getDefiningOp<graph::ReshapeOp>();
  auto transpose = reshape ? reshape.getX().getDefiningOp<graph::TransposeOp>() : nullptr;
  Operation* source = transpose ? beforeCasts(transpose.getX()).getDefiningOp() : nullptr;
  return source && isa<graph::BatchMatmulOp, graph::CausalAttentionOp>(source);
}

// Whether `v`'s GELU feeds a linear layer: an MLP's first layer (BERT's masked-LM head also
// takes a GELU, but into a LayerNorm: it stays whole).
bool geluIntoLinear(Value v) {
  return llvm::any_of(v.getUsers(), [](Operation* user) {
    auto gelu = dyn_cast<graph::GeluOp>(user);
    if (!gelu) return false;
    const Value out = afterCasts(gelu->getResult(0));
    return llvm::any_of(out.getUsers(), [&](Operation* reader) {
      auto linear = dyn_cast<graph::LinearOp>(reader);
      return linear && linear.getX() == out;
    });
  });
}

// The heads `v` ([.., heads·D]) is reshaped into ([.., heads, D]) by some user; 0 if none.
int64_t headsOf(Value v) {
  auto type = cast<RankedTensorType>(v.getType());
  for (Operation* user : v.getUsers()) {
    auto reshape = dyn_cast<graph::ReshapeOp>(user);
    if (!reshape) continue;
    auto out = cast<RankedTensorType>(reshape.getType()).getShape();
    if (static_cast<int64_t>(out.size()) == type.getRank() + 1 && out[out.size() - 2] > 1 &&
        out[out.size() - 2] * out.back() == type.getShape().back())
      return out[out.size() - 2];
  }
  return 0;
}

// Whether `v` is SiLU's output: the op, or x·sigmoid(x) as an ONNX export spells it.
bool isSilu(Value v) {
  if (v.getDefiningOp<graph::SiluOp>()) return true;
  auto mul = v.getDefiningOp<graph::MulOp>();
  if (!mul) return false;
  for (auto [x, s] : {std::pair{mul.getLhs(), mul.getRhs()}, {mul.getRhs(), mul.getLhs()}})
    if (auto sigmoid = s.getDefiningOp<graph::SigmoidOp>(); sigmoid && sigmoid.getX() == x)
      return true;
  return false;
}

// Whether SiLU is taken of `v` (SwiGLU's gate projection): a swiglu's gate, or silu(v).
bool siluOf(Value v) {
  return llvm::any_of(v.getUsers(), [&](Operation* user) {
    if (auto swiglu = dyn_cast<graph::SwigluOp>(user)) return swiglu.getGate() == v;
    return user->getNumResults() == 1 && isSilu(user->getResult(0)) &&
           (isa<graph::SiluOp>(user) || llvm::is_contained(user->getOperands(), v));
  });
}

// Whether `v` is multiplied by a SiLU's output (SwiGLU's up projection).
bool gatedBySilu(Value v) {
  return llvm::any_of(v.getUsers(), [&](Operation* user) {
    if (auto swiglu = dyn_cast<graph::SwigluOp>(user)) return swiglu.getUp() == v;
    auto mul = dyn_cast<graph::MulOp>(user);
    if (!mul || isSilu(mul.getResult())) return false;
    return isSilu(mul.getLhs() == v ? mul.getRhs() : mul.getLhs());
  });
}

// SwiGLU's product silu(gate)·up, which its down projection reads.
bool swigluProduct(Value x) {
  if (x.getDefiningOp<graph::SwigluOp>()) return true;
  auto mul = x.getDefiningOp<graph::MulOp>();
  return mul && !isSilu(x) && (isSilu(mul.getLhs()) || isSilu(mul.getRhs()));
}

// A mixture of experts' split, as a dense MLP's in each expert: the GEMMs reading the dispatched
// tokens split by output columns (their weights [E, in, out] by the last dimension, biases
// [E, out] with them), the GEMM after the activation by input rows; the router stays whole.
// Returns the number of layers found: dispatches of distinct places in the model (a dispatch
// recomputation repeats has its forward's location); the experts' weights go into `seen`.
int expertSplits(func::FuncOp func, const std::string& t, std::vector<std::string>& specs,
                 std::set<std::string>& seen) {
  llvm::DenseSet<Location> layers;
  func.walk([&](graph::MoeDispatchOp dispatch) {
    layers.insert(dispatch.getLoc());
    for (Operation* reshape : dispatch.getBuffer().getUsers()) {
      if (!isa<graph::ReshapeOp>(reshape)) continue;
      const Value rows = afterCasts(reshape->getResult(0));
      for (Operation* user : rows.getUsers()) {
        auto first = dyn_cast<graph::BatchMatmulOp>(user);
        // The forward GEMM (the backward's weight gradient reads the rows too, transposed).
        const std::string w = first ? paramName(first.getRhs()) : "";
        if (w.empty() || first.getLhs() != rows || first.getTransposeLhs() ||
            !seen.insert(w).second)
          continue;
        specs.push_back(literal(w) + "=-,-," + t);
        const Value out = afterCasts(first.getResult());
        for (Operation* reader : out.getUsers()) {
          // GELU's bias [E, 1, F] (reshaped from [E, F]), added before the activation.
          if (auto add = dyn_cast<graph::AddOp>(reader)) {
            Value bias = add.getLhs() == out ? add.getRhs() : add.getLhs();
            if (auto r = beforeCasts(bias).getDefiningOp<graph::ReshapeOp>())
              if (const std::string name = paramName(r.getX()); !name.empty())
                specs.push_back(literal(name) + "=-," + t);
          }
        }
      }
    }
  });
  // The GEMMs reading an activation: the experts' output projections.
  func.walk([&](graph::BatchMatmulOp bmm) {
    const std::string w = paramName(bmm.getRhs());
    auto arg = dyn_cast<BlockArgument>(beforeCasts(bmm.getRhs()));
    if (w.empty() || !arg || !func.getArgAttr(arg.getArgNumber(), attr::kExpert) || seen.count(w))
      return;
    const Value x = beforeCasts(bmm.getLhs());
    if ((x.getDefiningOp<graph::GeluOp>() || swigluProduct(x)) && seen.insert(w).second)
      specs.push_back(literal(w) + "=-," + t + ",-");
  });
  return static_cast<int>(layers.size());
}

// Megatron's splits found by structure: GPT-2's block (one projection split into q, k and v, a
// GELU MLP) or a Llama-family block (q, k and v projections each reshaped into heads, a SwiGLU
// MLP). Projections into heads split by output rows when their heads divide over `tp` devices;
// fewer key/value heads than that stay whole on every device (each device slices the heads its
// queries need). The projections after attention and after the MLP's product split by input
// columns.
std::vector<std::string> byStructure(ModuleOp module, const std::string& t, int64_t tp,
                                     std::string* chosen) {
  std::vector<std::string> specs;
  int qkv = 0, headProjections = 0, attnProj = 0, fc = 0, gate = 0, up = 0, mlpProj = 0;
  int wholeHeads = 0;  // projections into fewer heads than devices: kept whole
  int experts = 0;     // mixtures of experts, each expert's MLP split
  auto column = [&](const Layer& l, const char* chunks = "") {
    specs.push_back(literal(l.weight) + "=" + chunks + t + ",-");
    if (!l.bias.empty()) specs.push_back(literal(l.bias) + "=" + chunks + t);
  };
  // Each weight is read by its first product, the forward's: recomputation (--recompute full)
  // runs a block's forward again for its backward, whose copies are not counted twice.
  std::set<std::string> seen;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.getSymName() != fn::kTrainStep) continue;
    experts += expertSplits(func, t, specs, seen);
    func.walk([&](graph::LinearOp linear) {
      const Layer l = layerOf(linear);
      if (l.weight.empty() || !seen.insert(l.weight).second) return;
      if (auto split =
              l.out.hasOneUse() ? dyn_cast<graph::SplitOp>(*l.out.getUsers().begin()) : nullptr;
          split && split.getParts() == 3 &&
          static_cast<int64_t>(split.getAxis()) ==
              cast<RankedTensorType>(l.out.getType()).getRank() - 1) {
        column(l, "3x");
        ++qkv;
      } else if (geluIntoLinear(l.out)) {
        column(l);
        ++fc;
      } else if (siluOf(l.out)) {
        column(l);
        ++gate;
      } else if (gatedBySilu(l.out)) {
        column(l);
        ++up;
      } else if (const Value x = beforeCasts(linear.getX());
                 x.getDefiningOp<graph::GeluOp>() || swigluProduct(x)) {
        specs.push_back(literal(l.weight) + "=-," + t);
        ++mlpProj;
      } else if (afterAttention(linear.getX())) {
        specs.push_back(literal(l.weight) + "=-," + t);
        ++attnProj;
      } else if (const int64_t heads = headsOf(l.out)) {
        if (heads % tp == 0)
          column(l);
        else
          ++wholeHeads;
        ++headProjections;
      }
    });
  }
  // A block is all its layers; a model with none of them is not transformer-shaped.
  const int attention = qkv + headProjections / 3;
  if (attention == 0 || headProjections % 3 != 0 || attention != attnProj || gate != up ||
      fc + gate != mlpProj || attention != mlpProj + experts)
    return {};
  if (chosen) {
    *chosen =
        "found by structure: " + std::to_string(attention) + " attention block(s) (" +
        (qkv          ? "one q/k/v projection"
         : wholeHeads ? "q split by heads; k and v, fewer heads than devices, whole"
                      : "q, k and v split by heads") +
        ")" +
        (mlpProj ? ", " + std::to_string(mlpProj) + " MLP(s) (" + (gate ? "SwiGLU" : "GELU") + ")"
                 : "") +
        (experts ? ", " + std::to_string(experts) +
                       " mixture(s) of experts (each expert's MLP split, the router whole)"
                 : "") +
        ", weights [out, in]";
  }
  return specs;
}

// Whether the parameters `glob` matches are stored [in, out] (Hugging Face's Conv1D: x·W) rather
// than [out, in] (nn.Linear): some product reads one as its right operand, untransposed.
bool inputMajor(ModuleOp module, const llvm::GlobPattern& glob) {
  bool found = false;
  module.walk([&](Operation* op) {
    if (auto mm = dyn_cast<graph::MatmulOp>(op))
      found |= !mm.getTransposeRhs() && glob.match(paramName(mm.getRhs()));
    else if (auto bmm = dyn_cast<graph::BatchMatmulOp>(op))
      found |= !bmm.getTransposeRhs() && glob.match(paramName(bmm.getRhs()));
  });
  return found;
}

}  // namespace

std::vector<std::string> megatronSpecs(ModuleOp module, const std::string& t, int64_t tp,
                                       std::string* chosen) {
  auto has = [&](StringRef pattern) {
    auto glob = llvm::GlobPattern::create(pattern);
    for (auto func : module.getOps<func::FuncOp>())
      for (BlockArgument arg : func.getArguments())
        if (glob->match(paramName(arg))) return true;
    return false;
  };
  auto glob = llvm::GlobPattern::create("*.attn.c_attn.weight");
  if (!has("*.attn.c_attn.weight")) return byStructure(module, t, tp, chosen);
  // nanoGPT's names in either layout: Hugging Face's GPT-2 keeps the same names in [in, out]
  // tensors, so its column splits are the second dimension and its row splits the first.
  const bool conv1d = inputMajor(module, *glob);
  if (chosen)
    *chosen = std::string("found by GPT-2's names, weights ") +
              (conv1d ? "[in, out] (Hugging Face's Conv1D)" : "[out, in] (nn.Linear)");
  auto columns = [&](const std::string& chunks) {
    return conv1d ? "-," + chunks + t : chunks + t + ",-";
  };
  auto rows = [&] { return conv1d ? t + ",-" : "-," + t; };
  std::vector<std::string> specs = {"*.attn.c_attn.weight=" + columns("3x"),
                                    "*.attn.c_attn.bias=3x" + t, "*.attn.c_proj.weight=" + rows()};
  // Dense MLPs, and mixture-of-experts ones (every block's, or every N-th): each expert's MLP
  // split as a dense one, in the experts' stacked [E, in, out] weights; the router stays whole.
  const bool experts = has("*.mlp.experts.c_fc.weight");
  if (has("*.mlp.c_fc.weight") || !experts) {
    specs.push_back("*.mlp.c_fc.weight=" + columns(""));
    specs.push_back("*.mlp.c_fc.bias=" + t);
    specs.push_back("*.mlp.c_proj.weight=" + rows());
  }
  if (experts) {
    specs.push_back("*.mlp.experts.c_fc.weight=-,-," + t);
    specs.push_back("*.mlp.experts.c_fc.bias=-," + t);
    specs.push_back("*.mlp.experts.c_proj.weight=-," + t + ",-");
  }
  return specs;
}

}  // namespace dtc
