// dtc-clip-grad-norm: the global gradient norm in every training program, and clipping to a
// bound (see Passes.td).
#include <map>
#include <set>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include "Passes.h"
#include "dist/IR/DistOps.h"
#include "graph/IR/GraphDialect.h"
#include "graph/IR/GraphOps.h"
#include "pipeline_parallel/Pipeline.h"
#include "planfile/function_names.h"

namespace dtc {
#define GEN_PASS_DEF_CLIPGRADNORM
#include "Passes.h.inc"
}  // namespace dtc

using namespace mlir;

namespace dtc {
namespace {

bool isUpdate(Operation* op) { return graph::isOptimizerUpdate(op); }

bool isTrainingProgram(func::FuncOp func) {
  if (func.getSymName() == fn::kTrainStep) return true;
  auto of = func->getAttrOfType<StringAttr>(dist::kFunctionAttr);
  return of && of.getValue() == fn::kTrainStep;
}

// Mesh axes (indices) that split the parameter an update writes: its result's sharding.
SmallVector<int64_t> splittingAxes(Operation* update, dist::MeshAttr mesh) {
  SmallVector<int64_t> axes;
  auto shardings = update->getAttrOfType<ArrayAttr>(dist::kShardingsAttr);
  if (!mesh || !shardings || shardings.empty()) return axes;
  auto s = cast<dist::ShardingAttr>(shardings[0]);
  for (Attribute dim : s.getDims())
    for (Attribute a : cast<ArrayAttr>(dim))
      axes.push_back(mesh.axisIndex(cast<StringAttr>(a).getValue()));
  llvm::sort(axes);
  return axes;
}

ArrayAttr axisNames(Builder& b, dist::MeshAttr mesh, ArrayRef<int64_t> axes) {
  SmallVector<Attribute> names;
  for (int64_t a : axes) names.push_back(mesh.getNames()[a]);
  return b.getArrayAttr(names);
}

struct ClipGradNormPass : impl::ClipGradNormBase<ClipGradNormPass> {
  using ClipGradNormBase::ClipGradNormBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!(maxNorm >= 0)) {
      module.emitError("the gradient-norm bound must be >= 0, got ")
          << static_cast<double>(maxNorm);
      return signalPassFailure();
    }
    dist::MeshAttr mesh = module->getAttrOfType<dist::MeshAttr>(dist::kMeshAttr);
    SmallVector<func::FuncOp> programs;
    for (auto func : module.getOps<func::FuncOp>())
      if (isTrainingProgram(func)) programs.push_back(func);
    if (programs.empty()) {
      module.emitError(
          "dtc-clip-grad-norm: the module has no training step (run dtc-optimizer first)");
      return signalPassFailure();
    }
    // The axes of the one reduction, alike in every program (a pipeline's stages meet in it):
    // every axis that splits some gradient, and the pipeline axis.
    std::set<int64_t> reduced;
    for (func::FuncOp func : programs)
      func.walk([&](Operation* op) {
        if (isUpdate(op))
          for (int64_t a : splittingAxes(op, mesh)) reduced.insert(a);
      });
    int64_t pipelineAxis = -1;
    if (std::optional<pipeline::PipelineConfig> config = pipeline::getPipeline(module);
        config && config->stages > 1 && mesh) {
      pipelineAxis = mesh.axisIndex(config->axis);
      reduced.insert(pipelineAxis);
    }
    SmallVector<int64_t> over(reduced.begin(), reduced.end());
    for (func::FuncOp func : programs)
      if (failed(rewrite(func, mesh, over, pipelineAxis))) return signalPassFailure();
    module->setAttr(attr::kClipGradNorm, Builder(module.getContext()).getF64FloatAttr(maxNorm));
  }

  // `pipelineAxis`: the stages' axis (-1: none), over which every program holds parameters of
  // its own.
  LogicalResult rewrite(func::FuncOp func, dist::MeshAttr mesh, ArrayRef<int64_t> over,
                        int64_t pipelineAxis) {
    Block& body = func.getBody().front();
    SmallVector<Operation*> updates;
    for (Operation& op : body.without_terminator())
      if (isUpdate(&op)) updates.push_back(&op);

    // The norm is computed once every gradient is ready: after the last one's producer.
    Operation* last = nullptr;
    for (Operation* u : updates)
      if (Operation* def = u->getOperand(1).getDefiningOp())
        if (!last || last->isBeforeInBlock(def)) last = def;
    OpBuilder b(func.getContext());
    if (last)
      b.setInsertionPointAfter(last);
    else
      b.setInsertionPointToStart(&body);
    Location loc = func.getLoc();
    auto scalar = RankedTensorType::get({}, b.getF32Type());

    // Updates (and what reads their results) that ran before that point move after it.
    SmallVector<Operation*> moved;
    if (last) {
      llvm::DenseSet<Operation*> moving;
      for (Operation& op : body) {
        if (&op == last) break;
        bool reads = llvm::any_of(op.getOperands(), [&](Value v) {
          return v.getDefiningOp() && moving.count(v.getDefiningOp());
        });
        if (isUpdate(&op) || reads) {
          moving.insert(&op);
          moved.push_back(&op);
        }
      }
    }

    // Squared norms grouped by the axes along which their gradient is replicated but others
    // are split: such a group is counted by the first device along them.
    std::map<SmallVector<int64_t>, Value> groups;
    auto add = [&](Value sum, Value term) {
      return sum ? graph::AddOp::create(b, loc, sum, term).getResult() : term;
    };
    for (Operation* u : updates) {
      SmallVector<int64_t> split = splittingAxes(u, mesh), replicated;
      for (int64_t a : over)
        if (a != pipelineAxis && !llvm::is_contained(split, a)) replicated.push_back(a);
      Value squares = graph::SumSquaresOp::create(b, u->getLoc(), scalar, u->getOperand(1));
      groups[replicated] = add(groups[replicated], squares);
    }
    Value local;
    for (auto& [replicated, sum] : groups) {
      Value counted = sum;
      if (!replicated.empty())
        counted = dist::CountOnceOp::create(b, loc, sum, axisNames(b, mesh, replicated));
      local = add(local, counted);
    }
    if (!local) local = graph::FillOp::create(b, loc, scalar, b.getF32FloatAttr(0.0f));
    Value total = local;
    if (!over.empty())
      total = dist::AllReduceOp::create(b, loc, TypeRange{scalar}, ValueRange{local},
                                        axisNames(b, mesh, over), "sum")
                  .getResult(0);
    auto coefficient = graph::ClipCoefficientOp::create(
        b, loc, TypeRange{scalar, scalar}, total, b.getF32FloatAttr(static_cast<float>(maxNorm)));
    Operation* cursor = coefficient;
    for (Operation* op : moved) {
      op->moveAfter(cursor);
      cursor = op;
    }
    if (maxNorm > 0)
      for (Operation* u : updates) {
        b.setInsertionPoint(u);
        u->setOperand(
            1, graph::MulOp::create(b, u->getLoc(), u->getOperand(1), coefficient.getCoef()));
      }

    // The norm, reported by the step.
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    NamedAttrList metric;
    metric.set(attr::kMetric, b.getStringAttr("grad_norm"));
    if (mesh) metric.set(dist::kShardingAttr, dist::ShardingAttr::replicated(b.getContext(), 0));
    const unsigned index = func.getNumResults();
    if (failed(func.insertResult(index, coefficient.getNorm().getType(),
                                 metric.getDictionary(b.getContext()))))
      return failure();
    ret.getOperandsMutable().append(coefficient.getNorm());
    return success();
  }
};

}  // namespace
}  // namespace dtc
