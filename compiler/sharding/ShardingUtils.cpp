#include "sharding/ShardingUtils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "flatbuffers/ModelImporter.h"

using namespace mlir;

namespace dtc::sharding {

dist::ShardingAttr project(MLIRContext* ctx, ArrayRef<int> dims, ArrayAttr factorAxes,
                           ArrayAttr partial) {
  Builder b(ctx);
  SmallVector<Attribute> out;
  for (int f : dims) out.push_back(f < 0 ? b.getArrayAttr({}) : factorAxes[f]);
  return dist::ShardingAttr::get(ctx, b.getArrayAttr(out), partial ? partial : b.getArrayAttr({}));
}

ArrayAttr partialAxes(MLIRContext* ctx, const OpShardingRule& rule, unsigned result,
                      ArrayAttr factorAxes) {
  SmallVector<Attribute> axes;
  for (int f : rule.summed[result])
    for (Attribute a : cast<ArrayAttr>(factorAxes[f])) axes.push_back(a);
  return Builder(ctx).getArrayAttr(axes);
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
  return l;
}

std::string describe(Value value) {
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
    if (func)
      for (const char* name : {attr::kParam, attr::kData, "graph.state"})
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
