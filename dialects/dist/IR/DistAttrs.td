#ifndef DTC_DIST_ATTRS_TD
#define DTC_DIST_ATTRS_TD

include "DistDialect.td"

def Dist_MeshAttr : Dist_Attr<"Mesh", "mesh"> {
  let summary = "A device mesh: named axes and their sizes, `#dist.mesh<dp = 2, tp = 4>`";
  let description = [{
    Devices are numbered row-major over the axes (the last axis varies fastest), as ranks of
    the job: rank = Σ coord[i] · stride[i].
  }];
  let parameters = (ins "::mlir::ArrayAttr":$names, "::mlir::DenseI64ArrayAttr":$sizes);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    // Index of axis `name`, or -1.
    int axisIndex(::llvm::StringRef name) const;
    int64_t axisSize(::llvm::StringRef name) const;
    // Number of devices in a group spanning `axes` (the product of their sizes).
    int64_t groupSize(::mlir::ArrayAttr axes) const;
    int64_t numDevices() const;
    size_t rank() const { return getSizes().size(); }
  }];
}

def Dist_ShardingAttr : Dist_Attr<"Sharding", "sharding"> {
  let summary = "How a tensor is spread over the mesh";
  let description = [{
    `#dist.sharding<[{dp}, {} ], sum = {tp}>`: per dimension, the mesh axes it is split over
    (major to minor: dimension 0 is cut into |dp| blocks, block i on the devices with dp
    coordinate i); `sum` lists the partial axes: each device of such an axis holds a summand
    and the tensor is the sum over the axis. Axes not named are replicated. An axis appears at
    most once.

    `3x{tp}` splits a dimension as 3 equal chunks, each cut over tp: a device holds its block
    of every chunk, one after another. That is how a fused query/key/value weight [3C, C] is
    split by heads (chunks q, k, v; each device keeps the rows of its heads in all three).
    `blocks` holds the chunk count per dimension (empty: 1 everywhere).

    `max = {tp}` lists axes over which the value awaits a maximum instead of a sum (each device
    holds the maximum over its part, e.g. of a vocabulary-split row).
  }];
  let parameters = (ins "::mlir::ArrayAttr":$dims, "::mlir::ArrayAttr":$partial,
                        "::mlir::DenseI64ArrayAttr":$blocks, "::mlir::ArrayAttr":$partialMax);
  let builders = [
    AttrBuilder<(ins "::mlir::ArrayAttr":$dims, "::mlir::ArrayAttr":$partial), [{
      return $_get($_ctxt, dims, partial, ::mlir::DenseI64ArrayAttr::get($_ctxt, {}),
                   ::mlir::ArrayAttr::get($_ctxt, {}));
    }]>,
    // Normalises all-ones blocks to none, so equal shardings are equal attributes.
    AttrBuilder<(ins "::mlir::ArrayAttr":$dims, "::mlir::ArrayAttr":$partial,
                     "::llvm::ArrayRef<int64_t>":$blocks,
                     CArg<"::mlir::ArrayAttr", "{}">:$partialMax), [{
      bool trivial = llvm::all_of(blocks, [](int64_t b) { return b == 1; });
      return $_get($_ctxt, dims, partial,
                   ::mlir::DenseI64ArrayAttr::get($_ctxt, trivial ? ::llvm::ArrayRef<int64_t>() : blocks),
                   partialMax ? partialMax : ::mlir::ArrayAttr::get($_ctxt, {}));
    }]>,
  ];
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    static ShardingAttr replicated(::mlir::MLIRContext* ctx, int64_t rank);
    ::mlir::ArrayAttr dimAxes(int64_t dim) const {
      return ::llvm::cast<::mlir::ArrayAttr>(getDims()[dim]);
    }
    int64_t dimBlocks(int64_t dim) const {
      return getBlocks().empty() ? 1 : getBlocks()[dim];
    }
    bool hasBlocks() const { return !getBlocks().empty(); }
    bool isPartial() const { return !getPartial().empty() || !getPartialMax().empty(); }
    bool isFullyReplicated() const;
    // Checks axes against `mesh` and divisibility against the global `shape`; nullopt if valid.
    std::optional<std::string> check(MeshAttr mesh, ::llvm::ArrayRef<int64_t> shape) const;
    // The per-device shape of a tensor of global `shape`.
    ::llvm::SmallVector<int64_t> localShape(MeshAttr mesh, ::llvm::ArrayRef<int64_t> shape) const;
  }];
}

#endif // DTC_DIST_ATTRS_TD
