// dtc-fp8-linears: the chosen linear layers' three GEMMs on FP8 operands (see Passes.td).
#include <map>
#include <tuple>

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/GlobPattern.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "Locations.h"
#include "Passes.h"
#include "graph/IR/GraphOps.h"
#include "graph/IR/TypeUtils.h"

namespace dtc {
#define GEN_PASS_DEF_FP8LINEARS
#include "Passes.h.inc"
}  // namespace dtc

using namespace mlir;

namespace dtc {
namespace {

struct Quantized {
  Value q, scaleInv, qt;
};

// FP8 GEMMs want K and N multiples of 16 (cuBLASLt's FP8 kernels, torchao's filter).
bool fp8Sized(graph::LinearOp linear) {
  ArrayRef<int64_t> w = graph::shapeOf(linear.getWeight());
  return w.size() == 2 && w[0] % 16 == 0 && w[1] % 16 == 0 &&
         graph::shapeOf(linear.getX()).size() >= 2;
}

class Rewriter {
 public:
  explicit Rewriter(func::FuncOp function) : b_(function.getContext()) {}

  // `v` [..., C] as [rows, C], quantized to `format` once per value (with the transposed copy
  // when `transposed`), just before `before`. Casts of one value to one type (mixed precision
  // casts an input once per layer that reads it) count as one value.
  Quantized quantize(Value v, Type format, bool transposed, Operation* before) {
    Value source = v;
    if (auto cast = v.getDefiningOp<graph::CastOp>()) source = cast.getX();
    const Key key{source.getAsOpaquePointer(), v.getType().getAsOpaquePointer(),
                  format.getAsOpaquePointer()};
    auto it = quantized_.find(key);
    if (it != quantized_.end() && (it->second.qt || !transposed)) return it->second;
    b_.setInsertionPoint(before);
    Location loc = before->getLoc();
    ArrayRef<int64_t> shape = graph::shapeOf(v);
    const int64_t cols = shape.back(), rows = cast<RankedTensorType>(v.getType()).getNumElements() /
                                              std::max<int64_t>(cols, 1);
    Value flat = v;
    if (shape.size() != 2)
      flat = graph::ReshapeOp::create(b_, loc,
                                      RankedTensorType::get({rows, cols}, graph::elementOf(v)), v);
    SmallVector<Type> types = {RankedTensorType::get({rows, cols}, format),
                               RankedTensorType::get({1}, b_.getF32Type())};
    if (transposed) types.push_back(RankedTensorType::get({cols, rows}, format));
    auto op = graph::Fp8QuantizeOp::create(b_, loc, types, flat);
    Quantized r{op.getQ(), op.getScaleInv(), transposed ? op.getQT()[0] : Value()};
    quantized_[key] = r;
    return r;
  }

  // a [M, K] · b [N, K]ᵀ scaled, as `like` (its shape and element type), replacing it.
  void gemm(Operation* like, Value a, Value aScale, Value b, Value bScale) {
    b_.setInsertionPoint(like);
    Location loc = like->getLoc();
    auto type = cast<RankedTensorType>(like->getResult(0).getType());
    const int64_t m = graph::shapeOf(a)[0], n = graph::shapeOf(b)[0];
    Value out = graph::Fp8GemmOp::create(
        b_, loc, RankedTensorType::get({m, n}, type.getElementType()), a, b, aScale, bScale);
    if (type.getRank() != 2) out = graph::ReshapeOp::create(b_, loc, type, out);
    like->getResult(0).replaceAllUsesWith(out);
    like->erase();
  }

 private:
  using Key = std::tuple<const void*, const void*, const void*>;  // source, its type, format
  OpBuilder b_;
  std::map<Key, Quantized> quantized_;
};

struct Fp8LinearsPass : impl::Fp8LinearsBase<Fp8LinearsPass> {
  using Fp8LinearsBase::Fp8LinearsBase;

  void runOnOperation() override {
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
    auto skipped = [&](Operation* op) {
      const std::string name = locationName(op->getLoc());
      return llvm::any_of(patterns, [&](const llvm::GlobPattern& p) { return p.match(name); });
    };
    MLIRContext* ctx = &getContext();
    Type e4m3 = Float8E4M3FNType::get(ctx), e5m2 = Float8E5M2Type::get(ctx);
    for (auto function : getOperation().getOps<func::FuncOp>()) {
      SmallVector<graph::LinearOp> linears;
      function.walk([&](graph::LinearOp op) {
        if (fp8Sized(op) && !skipped(op)) linears.push_back(op);
      });
      Rewriter rewrite(function);
      for (graph::LinearOp linear : linears) {
        Value x = linear.getX(), w = linear.getWeight();
        // Its gradients: dx = dy · W and dW = dyᵀ · x, of one dy.
        graph::LinearGradInputOp gradInput;
        graph::LinearGradWeightOp gradWeight;
        for (Operation* user : w.getUsers())
          if (auto g = dyn_cast<graph::LinearGradInputOp>(user); g && g.getWeight() == w)
            gradInput = g;
        if (gradInput)
          for (Operation* user : x.getUsers())
            if (auto g = dyn_cast<graph::LinearGradWeightOp>(user);
                g && g.getX() == x && g.getDy() == gradInput.getDy())
              gradWeight = g;
        Quantized qx = rewrite.quantize(x, e4m3, static_cast<bool>(gradWeight), linear);
        Quantized qw = rewrite.quantize(w, e4m3, static_cast<bool>(gradInput), linear);
        rewrite.gemm(linear, qx.q, qx.scaleInv, qw.q, qw.scaleInv);
        if (!gradInput) continue;
        Operation* first = gradWeight && gradWeight->isBeforeInBlock(gradInput)
                               ? gradWeight.getOperation()
                               : gradInput.getOperation();
        Quantized qdy =
            rewrite.quantize(gradInput.getDy(), e5m2, static_cast<bool>(gradWeight), first);
        rewrite.gemm(gradInput, qdy.q, qdy.scaleInv, qw.qt, qw.scaleInv);
        if (gradWeight) rewrite.gemm(gradWeight, qdy.qt, qdy.scaleInv, qx.qt, qx.scaleInv);
      }
      // The casts that only fed what was rewritten (one layer's copy of an input another's
      // quantization now serves) go.
      SmallVector<Operation*> dead;
      function.walk([&](graph::CastOp cast) {
        if (isOpTriviallyDead(cast)) dead.push_back(cast);
      });
      for (Operation* op : dead) op->erase();
    }
  }
};

}  // namespace
}  // namespace dtc
