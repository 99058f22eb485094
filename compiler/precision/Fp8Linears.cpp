// dtc-fp8-linears: the chosen linear layers' three GEMMs on FP8 operands (see Passes.td).
#include <map>
#include <optional>
#include <tuple>

#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/GlobPattern.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "Locations.h"
#include "Passes.h"
#include "graph/IR/GraphDialect.h"
#include "graph/IR/GraphOps.h"
#include "graph/IR/TypeUtils.h"
#include "planfile/function_names.h"
#include "support/float8.h"

namespace dtc {
#define GEN_PASS_DEF_FP8LINEARS
#include "Passes.h.inc"
}  // namespace dtc

using namespace mlir;

namespace dtc {
namespace {

struct Quantized {
  Value q, scaleInv, qt, amax;
};

// A linear layer y [..., N] = x [..., K] · op(W) and its two gradient GEMMs where @grad has
// them: graph.linear (W [N, K]), or graph.matmul on a 2-D x with W [N, K] (transposed) or [K, N].
struct Contraction {
  Operation* forward = nullptr;
  Value x, w;
  bool weightKMajor = true;         // W is [N, K]
  Operation* gradInput = nullptr;   // dx = dy · op(W)ᵀ
  Operation* gradWeight = nullptr;  // dW, W's shape
  Value dy;
};

// FP8 GEMMs want K and N multiples of 16 (cuBLASLt's FP8 kernels, torchao's filter).
bool fp8Sized(Value w) {
  ArrayRef<int64_t> s = graph::shapeOf(w);
  return s.size() == 2 && s[0] % 16 == 0 && s[1] % 16 == 0;
}

// The op among `candidates` reading `dy` (any dy when null, if only one reads one).
Operation* pick(ArrayRef<std::pair<Operation*, Value>> candidates, Value& dy) {
  if (dy) {
    for (auto [op, d] : candidates)
      if (d == dy) return op;
    return nullptr;
  }
  if (candidates.size() != 1) return nullptr;
  dy = candidates[0].second;
  return candidates[0].first;
}

std::optional<Contraction> contractionOf(Operation* op) {
  Contraction c;
  c.forward = op;
  // Gradient GEMMs follow their forward; each candidate with the dy it reads.
  SmallVector<std::pair<Operation*, Value>> inputGrads, weightGrads;
  auto after = [&](Operation* user) { return user != op && op->isBeforeInBlock(user); };
  if (auto linear = dyn_cast<graph::LinearOp>(op)) {
    c.x = linear.getX();
    c.w = linear.getWeight();
    if (graph::shapeOf(c.x).size() < 2 || !fp8Sized(c.w)) return std::nullopt;
    for (Operation* user : c.w.getUsers())
      if (auto g = dyn_cast<graph::LinearGradInputOp>(user); g && g.getWeight() == c.w && after(g))
        inputGrads.push_back({g, g.getDy()});
    for (Operation* user : c.x.getUsers())
      if (auto g = dyn_cast<graph::LinearGradWeightOp>(user); g && g.getX() == c.x && after(g))
        weightGrads.push_back({g, g.getDy()});
  } else if (auto matmul = dyn_cast<graph::MatmulOp>(op)) {
    if (matmul.getTransposeLhs() || graph::shapeOf(matmul.getLhs()).size() != 2 ||
        !fp8Sized(matmul.getRhs()))
      return std::nullopt;
    c.x = matmul.getLhs();
    c.w = matmul.getRhs();
    c.weightKMajor = matmul.getTransposeRhs();
    // MatmulOp's gradient rule: dx = matmul(dy, W, false, !tW); dW = tW ? matmul(dy, x, true,
    // false) : matmul(x, dy, true, false).
    for (Operation* user : c.w.getUsers())
      if (auto g = dyn_cast<graph::MatmulOp>(user); g && after(g) && g.getRhs() == c.w &&
                                                    !g.getTransposeLhs() &&
                                                    g.getTransposeRhs() == !c.weightKMajor)
        inputGrads.push_back({g, g.getLhs()});
    for (Operation* user : c.x.getUsers())
      if (auto g = dyn_cast<graph::MatmulOp>(user);
          g && after(g) && g.getTransposeLhs() && !g.getTransposeRhs()) {
        if (c.weightKMajor && g.getRhs() == c.x) weightGrads.push_back({g, g.getLhs()});
        if (!c.weightKMajor && g.getLhs() == c.x) weightGrads.push_back({g, g.getRhs()});
      }
  } else {
    return std::nullopt;
  }
  c.gradInput = pick(inputGrads, c.dy);
  c.gradWeight = pick(weightGrads, c.dy);
  return c;
}

// Delayed scaling's state for one quantized tensor: its amax history (an argument of the
// training step, updated by it), the amax read from it, and the amaxes the step records.
struct History {
  BlockArgument arg;
  Value amax;
  SmallVector<Value> seen;
};

class Rewriter {
 public:
  // `historyLength` > 0: delayed scaling in `function`, the training step.
  Rewriter(func::FuncOp function, int64_t historyLength)
      : b_(function.getContext()), function_(function), historyLength_(historyLength) {}

  // `v` quantized to `format` once per value (with the transposed copy when `transposed`), just
  // before `before`: its amax, then its codes; under delayed scaling, on its history's amax and
  // recording its own. Casts of one value to one type (mixed precision casts an input once per
  // layer that reads it) count as one value. `role` names the history: the layer's "input",
  // "weight" or "grad_output".
  Quantized quantize(Value v, Type format, bool transposed, Operation* before, StringRef role) {
    Value source = v;
    if (auto cast = v.getDefiningOp<graph::CastOp>()) source = cast.getX();
    const Key key{source.getAsOpaquePointer(), v.getType().getAsOpaquePointer(),
                  format.getAsOpaquePointer()};
    auto it = quantized_.find(key);
    // One made later in the block (for a GEMM found earlier) cannot serve here.
    if (it != quantized_.end() && !it->second.q.getDefiningOp()->isBeforeInBlock(before))
      it = quantized_.end();
    if (it != quantized_.end() && (it->second.qt || !transposed)) return it->second;
    b_.setInsertionPoint(before);
    Location loc = before->getLoc();
    ArrayRef<int64_t> shape = graph::shapeOf(v);
    auto f32 = RankedTensorType::get({1}, b_.getF32Type());
    Type q = RankedTensorType::get(shape, format);
    SmallVector<Type> qT;
    if (transposed)
      qT.push_back(RankedTensorType::get(graph::Fp8QuantizeOp::transposedShape(shape), format));
    Quantized r;
    if (historyLength_ > 0) {
      History& h = historyOf(fp8AmaxHistoryName(locationName(loc), role.str()), format);
      auto op = graph::Fp8QuantizeRecordedOp::create(b_, loc, q, f32, f32, qT, v, h.amax);
      h.seen.push_back(op.getSeen());
      r = {op.getQ(), op.getScaleInv(), transposed ? op.getQT()[0] : Value(), h.amax};
    } else {
      Value amax = it != quantized_.end() ? it->second.amax : Value();
      if (!amax) amax = graph::Fp8AmaxOp::create(b_, loc, f32, v);
      auto op = graph::Fp8QuantizeOp::create(b_, loc, q, f32, qT, v, amax);
      r = {op.getQ(), op.getScaleInv(), transposed ? op.getQT()[0] : Value(), amax};
    }
    quantized_[key] = r;
    return r;
  }

  // Each history's new value, pushed by the step's recorded amaxes, returned as its update.
  void finishHistories() {
    if (histories_.empty()) return;
    auto ret = cast<func::ReturnOp>(function_.getBody().front().getTerminator());
    b_.setInsertionPoint(ret);
    SmallVector<Value> results(ret.getOperands());
    for (auto& [name, h] : histories_) {
      Value pushed =
          graph::Fp8HistoryPushOp::create(b_, ret.getLoc(), h.arg.getType(), h.arg, h.seen);
      const unsigned index = function_.getNumResults();
      function_.insertResult(
          index, pushed.getType(),
          b_.getDictionaryAttr(b_.getNamedAttr(attr::kUpdates, b_.getStringAttr(name))));
      results.push_back(pushed);
    }
    ret->setOperands(results);
  }

  // a [M..., K...] · b [N..., K...]ᵀ scaled, as `like` (its result [M..., N...]), replacing it.
  void gemm(Operation* like, Value a, Value aScale, Value b, Value bScale) {
    b_.setInsertionPoint(like);
    Type type = like->getResult(0).getType();
    const int64_t contracted =
        (graph::rankOf(a) + graph::rankOf(b) - graph::rankOf(like->getResult(0))) / 2;
    Value out = graph::Fp8GemmOp::create(b_, like->getLoc(), type, a, b, aScale, bScale,
                                         b_.getI64IntegerAttr(contracted));
    like->getResult(0).replaceAllUsesWith(out);
    like->erase();
  }

 private:
  // The history `name`, a new argument of the step (after its parameters and state) the first
  // time, with its amax read at the step's start.
  History& historyOf(const std::string& name, Type format) {
    auto it = histories_.find(name);
    if (it != histories_.end()) return it->second;
    unsigned index = 0;
    for (unsigned i = 0; i < function_.getNumArguments(); ++i)
      if (function_.getArgAttr(i, attr::kParam) || function_.getArgAttr(i, attr::kState))
        index = i + 1;
    auto type = RankedTensorType::get({historyLength_}, b_.getF32Type());
    (void)function_.insertArgument(
        index, type, b_.getDictionaryAttr(b_.getNamedAttr(attr::kState, b_.getStringAttr(name))),
        function_.getLoc());
    History h;
    h.arg = function_.getArgument(index);
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToStart(&function_.getBody().front());
    const float fmax = isa<Float8E4M3FNType>(format) ? kE4M3Max : kE5M2Max;
    h.amax = graph::Fp8HistoryAmaxOp::create(b_, function_.getLoc(),
                                             RankedTensorType::get({1}, b_.getF32Type()), h.arg,
                                             b_.getF32FloatAttr(fmax));
    return histories_.emplace(name, std::move(h)).first->second;
  }

  using Key = std::tuple<const void*, const void*, const void*>;  // source, its type, format
  OpBuilder b_;
  func::FuncOp function_;
  int64_t historyLength_;
  std::map<Key, Quantized> quantized_;
  std::map<std::string, History> histories_;
};

struct Fp8LinearsPass : impl::Fp8LinearsBase<Fp8LinearsPass> {
  using Fp8LinearsBase::Fp8LinearsBase;

  void runOnOperation() override {
    if (scaling != "dynamic" && scaling != "delayed") {
      getOperation().emitError("fp8 scaling must be dynamic or delayed, got '") << scaling << "'";
      return signalPassFailure();
    }
    SmallVector<llvm::GlobPattern> patterns;
    SmallVector<StringRef> globs;
    StringRef(skip).split(globs, ',', -1, /*KeepEmpty=*/false);
    for (StringRef glob : globs) {
      auto pattern = llvm::GlobPattern::create(glob.trim());
      if (!pattern) {
        getOperation().emitError("--fp8-skip: '") << glob << "' is not a glob";
        return signalPassFailure();
      }
      patterns.push_back(std::move(*pattern));
    }
    SmallVector<bool> matched(patterns.size(), false);
    auto skipped = [&](Operation* op) {
      const std::string name = locationName(op->getLoc());
      bool any = false;
      for (auto [i, p] : llvm::enumerate(patterns))
        if (p.match(name)) any = matched[i] = true;
      return any;
    };
    MLIRContext* ctx = &getContext();
    Type e4m3 = Float8E4M3FNType::get(ctx), e5m2 = Float8E5M2Type::get(ctx);
    for (auto function : getOperation().getOps<func::FuncOp>()) {
      SmallVector<Contraction> contractions;
      function.walk([&](Operation* op) {
        if (!isa<graph::LinearOp, graph::MatmulOp>(op) || skipped(op)) return;
        if (std::optional<Contraction> c = contractionOf(op)) contractions.push_back(*c);
      });
      // A gradient matmul looks like a forward one: those another contraction claims are its.
      llvm::SmallPtrSet<Operation*, 16> gradients;
      for (const Contraction& c : contractions)
        for (Operation* g : {c.gradInput, c.gradWeight})
          if (g) gradients.insert(g);
      llvm::erase_if(contractions,
                     [&](const Contraction& c) { return gradients.count(c.forward); });
      // A gradient two forwards could claim (one weight read twice) goes to the first; the
      // other's is left to be found on its own below.
      llvm::SmallPtrSet<Operation*, 16> claimed;
      for (Contraction& c : contractions)
        for (Operation** g : {&c.gradInput, &c.gradWeight})
          if (*g && !claimed.insert(*g).second) *g = nullptr;
      const bool delayed = scaling == "delayed" && function.getName() == fn::kTrainStep;
      Rewriter rewrite(function, delayed ? int64_t(history) : 0);
      for (const Contraction& c : contractions) {
        // W is read K-major by the forward and N-major by the input gradient: a [K, N] W's
        // forward reads its transposed copy, a [N, K] W's input gradient does.
        const bool wTransposed = !c.weightKMajor || c.gradInput != nullptr;
        Quantized qx = rewrite.quantize(c.x, e4m3, c.gradWeight != nullptr, c.forward, "input");
        Quantized qw = rewrite.quantize(c.w, e4m3, wTransposed, c.forward, "weight");
        Value wForward = c.weightKMajor ? qw.q : qw.qt, wBackward = c.weightKMajor ? qw.qt : qw.q;
        rewrite.gemm(c.forward, qx.q, qx.scaleInv, wForward, qw.scaleInv);
        if (!c.gradInput && !c.gradWeight) continue;
        Operation* first = !c.gradInput ? c.gradWeight
                           : c.gradWeight && c.gradWeight->isBeforeInBlock(c.gradInput)
                               ? c.gradWeight
                               : c.gradInput;
        Quantized qdy = rewrite.quantize(c.dy, e5m2, c.gradWeight != nullptr, first, "grad_output");
        if (c.gradInput) rewrite.gemm(c.gradInput, qdy.q, qdy.scaleInv, wBackward, qw.scaleInv);
        if (!c.gradWeight) continue;
        if (c.weightKMajor)  // dW [N, K] = dyᵀ · x
          rewrite.gemm(c.gradWeight, qdy.qt, qdy.scaleInv, qx.qt, qx.scaleInv);
        else  // dW [K, N] = xᵀ · dy
          rewrite.gemm(c.gradWeight, qx.qt, qx.scaleInv, qdy.qt, qdy.scaleInv);
      }
      // Gradients whose forward GEMM reads another value (full recomputation recomputes a
      // layer's input for its gradients, not its output, so no forward reads that copy) or sits
      // in another function: each on its own.
      SmallVector<Operation*> unpaired;
      function.walk([&](Operation* op) {
        if (isa<graph::LinearGradInputOp, graph::LinearGradWeightOp>(op) && !skipped(op) &&
            fp8Sized(isa<graph::LinearGradInputOp>(op) ? op->getOperand(1) : op->getResult(0)))
          unpaired.push_back(op);
      });
      for (Operation* op : unpaired) {
        if (auto g = dyn_cast<graph::LinearGradInputOp>(op)) {  // dx = dy · W
          Quantized qdy = rewrite.quantize(g.getDy(), e5m2, false, op, "grad_output");
          Quantized qw = rewrite.quantize(g.getWeight(), e4m3, true, op, "weight");
          rewrite.gemm(op, qdy.q, qdy.scaleInv, qw.qt, qw.scaleInv);
          continue;
        }
        auto g = cast<graph::LinearGradWeightOp>(op);  // dW = dyᵀ · x
        if (graph::rankOf(g.getX()) < 2) continue;
        Quantized qdy = rewrite.quantize(g.getDy(), e5m2, true, op, "grad_output");
        Quantized qx = rewrite.quantize(g.getX(), e4m3, true, op, "input");
        rewrite.gemm(op, qdy.qt, qdy.scaleInv, qx.qt, qx.scaleInv);
      }
      rewrite.finishHistories();
      // The casts that only fed what was rewritten (one layer's copy of an input another's
      // quantization now serves) go.
      SmallVector<Operation*> dead;
      function.walk([&](graph::CastOp cast) {
        if (isOpTriviallyDead(cast)) dead.push_back(cast);
      });
      for (Operation* op : dead) op->erase();
    }
    for (auto [glob, hit] : llvm::zip(globs, matched))
      if (strictSkip && !hit) {
        getOperation().emitError("--fp8-skip: '") << glob.trim() << "' matches no linear layer";
        return signalPassFailure();
      }
  }
};

}  // namespace
}  // namespace dtc
