#include "sharding/ShardingUtils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "graph/IR/GraphDialect.h"

using namespace mlir;

namespace dtc::sharding {

FailureOr<FactorShardings> readFactors(Operation* op) {
  FactorShardings f;
  f.axes = op->getAttrOfType<ArrayAttr>(dist::kFactorsAttr);
  if (!f.axes) return failure();
  f.blocks.assign(f.axes.size(), 1);
  if (auto blocks = op->getAttrOfType<DenseI64ArrayAttr>(dist::kFactorBlocksAttr))
    f.blocks.assign(blocks.asArrayRef().begin(), blocks.asArrayRef().end());
  if (f.blocks.size() != f.axes.size()) return failure();
  return f;
}

void writeFactors(Operation* op, const FactorShardings& factors) {
  op->setAttr(dist::kFactorsAttr, factors.axes);
  if (llvm::any_of(factors.blocks, [](int64_t b) { return b != 1; }))
    op->setAttr(dist::kFactorBlocksAttr, DenseI64ArrayAttr::get(op->getContext(), factors.blocks));
  else
    op->removeAttr(dist::kFactorBlocksAttr);
}

dist::ShardingAttr project(MLIRContext* ctx, ArrayRef<int> dims, ArrayRef<int64_t> mult,
                           const FactorShardings& factors, ArrayAttr partial,
                           ArrayAttr partialMax) {
  Builder b(ctx);
  SmallVector<Attribute> out;
  SmallVector<int64_t> blocks;
  for (auto [d, f] : llvm::enumerate(dims)) {
    out.push_back(f < 0 ? b.getArrayAttr({}) : factors.axes[f]);
    // A chunked factor chunks the dimension; so does a whole one when the dimension holds it
    // several times and is cut (its chunks are the copies).
    int64_t chunks = 1;
    if (f >= 0 && !cast<ArrayAttr>(factors.axes[f]).empty()) chunks = factors.blocks[f] * mult[d];
    blocks.push_back(chunks);
  }
  return dist::ShardingAttr::get(ctx, b.getArrayAttr(out), partial ? partial : b.getArrayAttr({}),
                                 ArrayRef<int64_t>(blocks),
                                 partialMax ? partialMax : b.getArrayAttr({}));
}

// The mesh axes of `fs`, in order.
static ArrayAttr axesOf(MLIRContext* ctx, ArrayRef<int> fs, const FactorShardings& factors) {
  SmallVector<Attribute> axes;
  for (int f : fs)
    for (Attribute a : cast<ArrayAttr>(factors.axes[f])) axes.push_back(a);
  return Builder(ctx).getArrayAttr(axes);
}

ArrayAttr partialAxes(MLIRContext* ctx, const OpShardingRule& rule, unsigned result,
                      const FactorShardings& factors) {
  return axesOf(ctx, rule.summed[result], factors);
}

ArrayAttr maxAxes(MLIRContext* ctx, const OpShardingRule& rule, unsigned result,
                  const FactorShardings& factors) {
  return axesOf(ctx, rule.maxed[result], factors);
}

Mesh toMesh(dist::MeshAttr mesh) {
  Mesh m;
  for (Attribute n : mesh.getNames()) m.names.push_back(cast<StringAttr>(n).str());
  ArrayRef<int64_t> sizes = mesh.getSizes().asArrayRef();
  m.sizes.assign(sizes.begin(), sizes.end());
  return m;
}

Layout toLayout(dist::MeshAttr mesh, dist::ShardingAttr sharding) {
  Layout l;
  for (Attribute d : sharding.getDims()) {
    l.dims.emplace_back();
    for (Attribute a : cast<ArrayAttr>(d))
      l.dims.back().push_back(mesh.axisIndex(cast<StringAttr>(a).getValue()));
  }
  for (Attribute a : sharding.getPartial())
    l.partial.push_back(mesh.axisIndex(cast<StringAttr>(a).getValue()));
  for (size_t d = 0; d < l.dims.size(); ++d) l.blocks.push_back(sharding.dimBlocks(d));
  for (Attribute a : sharding.getPartialMax())
    l.partialMax.push_back(mesh.axisIndex(cast<StringAttr>(a).getValue()));
  return l;
}

std::string describe(Value value) {
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
    if (func)
      for (const char* name : {attr::kParam, attr::kData, attr::kState})
        if (auto s = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), name))
          return "tensor '" + s.str() + "'";
    return "argument " + std::to_string(arg.getArgNumber());
  }
  Operation* op = value.getDefiningOp();
  std::string where;
  if (auto name = dyn_cast<NameLoc>(op->getLoc())) where = " at '" + name.getName().str() + "'";
  return "result " + std::to_string(cast<OpResult>(value).getResultNumber()) + " of " +
         op->getName().getStringRef().str() + where;
}

}  // namespace dtc::sharding
