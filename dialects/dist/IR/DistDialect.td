#ifndef DTC_DIST_DIALECT_TD
#define DTC_DIST_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def Dist_Dialect : Dialect {
  let name = "dist";
  let cppNamespace = "::dtc::dist";
  let summary = "Device meshes, tensor shardings and collectives";
  let description = [{
    A module runs on one device mesh (`dist.mesh` module attribute: named axes with sizes,
    row-major rank order). Before partitioning, values carry `#dist.sharding` annotations on
    global shapes; `dist.reshard` states a required sharding. The partitioner rewrites ops to
    per-device local shapes and inserts the collectives of this dialect, which operate on the
    local tensors of every device of a group (the devices that differ only in `axes`).
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let extraClassDeclaration = [{
    void registerAttributes();  // DistAttrs.cpp, where the storage classes are defined
  }];
}

class Dist_Op<string mnemonic, list<Trait> traits = []> : Op<Dist_Dialect, mnemonic, traits>;
class Dist_Attr<string name, string attrMnemonic> : AttrDef<Dist_Dialect, name> {
  let mnemonic = attrMnemonic;
}

#endif // DTC_DIST_DIALECT_TD
