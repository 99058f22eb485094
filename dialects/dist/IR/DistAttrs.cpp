// MeshAttr and ShardingAttr: syntax, verification and shape arithmetic.
#include "dist/IR/DistOps.h"

#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/TypeSwitch.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectImplementation.h"

using namespace mlir;
using namespace dtc::dist;

#define GET_ATTRDEF_CLASSES
#include "dist/IR/DistAttrs.cpp.inc"

void DistDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dist/IR/DistAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// MeshAttr: #dist.mesh<dp = 2, tp = 4>
//===----------------------------------------------------------------------===//

Attribute MeshAttr::parse(AsmParser& parser, Type) {
  SmallVector<Attribute> names;
  SmallVector<int64_t> sizes;
  auto parseAxis = [&]() -> ParseResult {
    std::string name;
    int64_t size;
    if (parser.parseKeywordOrString(&name) || parser.parseEqual() || parser.parseInteger(size))
      return failure();
    names.push_back(parser.getBuilder().getStringAttr(name));
    sizes.push_back(size);
    return success();
  };
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::LessGreater, parseAxis)) return {};
  return parser.getChecked<MeshAttr>(parser.getContext(), parser.getBuilder().getArrayAttr(names),
                                     parser.getBuilder().getDenseI64ArrayAttr(sizes));
}

void MeshAttr::print(AsmPrinter& printer) const {
  printer << "<";
  for (size_t i = 0; i < rank(); ++i)
    printer << (i ? ", " : "") << cast<StringAttr>(getNames()[i]).getValue() << " = "
            << getSizes()[i];
  printer << ">";
}

LogicalResult MeshAttr::verify(function_ref<InFlightDiagnostic()> emitError, ArrayAttr names,
                               DenseI64ArrayAttr sizes) {
  if (names.size() != static_cast<size_t>(sizes.size()))
    return emitError() << "mesh: names and sizes differ in count";
  llvm::SmallSet<StringRef, 4> seen;
  for (auto [name, size] : llvm::zip(names, sizes.asArrayRef())) {
    auto str = dyn_cast<StringAttr>(name);
    if (!str || str.getValue().empty()) return emitError() << "mesh: axis names must be strings";
    if (!seen.insert(str.getValue()).second)
      return emitError() << "mesh: axis '" << str.getValue() << "' named twice";
    if (size < 1) return emitError() << "mesh: axis '" << str.getValue() << "' has size " << size;
  }
  return success();
}

int MeshAttr::axisIndex(StringRef name) const {
  for (auto [i, n] : llvm::enumerate(getNames()))
    if (cast<StringAttr>(n).getValue() == name) return static_cast<int>(i);
  return -1;
}

int64_t MeshAttr::axisSize(StringRef name) const {
  int i = axisIndex(name);
  return i < 0 ? 0 : getSizes()[i];
}

int64_t MeshAttr::groupSize(ArrayAttr axes) const {
  int64_t n = 1;
  for (Attribute a : axes) n *= axisSize(cast<StringAttr>(a).getValue());
  return n;
}

int64_t MeshAttr::numDevices() const {
  int64_t n = 1;
  for (int64_t s : getSizes().asArrayRef()) n *= s;
  return n;
}

MeshAttr dtc::dist::getMesh(Operation* op) {
  Operation* module = op;
  while (module && !isa<ModuleOp>(module)) module = module->getParentOp();
  return module ? module->getAttrOfType<MeshAttr>(kMeshAttr) : MeshAttr();
}

//===----------------------------------------------------------------------===//
// ShardingAttr: #dist.sharding<[{dp}, {}], sum = {tp}>
//===----------------------------------------------------------------------===//

static ParseResult parseAxisSet(AsmParser& parser, SmallVectorImpl<Attribute>& axes) {
  return parser.parseCommaSeparatedList(AsmParser::Delimiter::Braces, [&]() -> ParseResult {
    std::string name;
    if (parser.parseKeywordOrString(&name)) return failure();
    axes.push_back(parser.getBuilder().getStringAttr(name));
    return success();
  });
}

static void printAxisSet(AsmPrinter& printer, ArrayAttr axes) {
  printer << "{";
  for (auto [i, a] : llvm::enumerate(axes))
    printer << (i ? ", " : "") << cast<StringAttr>(a).getValue();
  printer << "}";
}

Attribute ShardingAttr::parse(AsmParser& parser, Type) {
  Builder& b = parser.getBuilder();
  SmallVector<Attribute> dims, partial, partialMax;
  SmallVector<int64_t> blocks;
  if (parser.parseLess()) return {};
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&]() -> ParseResult {
        // `3x{tp}`: three chunks, each cut over tp.
        int64_t count = 1;
        OptionalParseResult n = parser.parseOptionalInteger(count);
        if (n.has_value() && (failed(*n) || parser.parseKeyword("x"))) return failure();
        SmallVector<Attribute> axes;
        if (parseAxisSet(parser, axes)) return failure();
        dims.push_back(b.getArrayAttr(axes));
        blocks.push_back(count);
        return success();
      }))
    return {};
  while (succeeded(parser.parseOptionalComma())) {
    StringRef kind;
    if (parser.parseKeyword(&kind) || (kind != "sum" && kind != "max") || parser.parseEqual() ||
        parseAxisSet(parser, kind == "sum" ? partial : partialMax)) {
      parser.emitError(parser.getCurrentLocation(), "expected `sum = {axes}` or `max = {axes}`");
      return {};
    }
  }
  if (parser.parseGreater()) return {};
  bool trivial = llvm::all_of(blocks, [](int64_t v) { return v == 1; });
  return parser.getChecked<ShardingAttr>(
      parser.getContext(), b.getArrayAttr(dims), b.getArrayAttr(partial),
      b.getDenseI64ArrayAttr(trivial ? ArrayRef<int64_t>() : ArrayRef<int64_t>(blocks)),
      b.getArrayAttr(partialMax));
}

void ShardingAttr::print(AsmPrinter& printer) const {
  printer << "<[";
  for (auto [i, d] : llvm::enumerate(getDims())) {
    if (i) printer << ", ";
    if (dimBlocks(i) != 1) printer << dimBlocks(i) << "x";
    printAxisSet(printer, cast<ArrayAttr>(d));
  }
  printer << "]";
  if (!getPartial().empty()) {
    printer << ", sum = ";
    printAxisSet(printer, getPartial());
  }
  if (!getPartialMax().empty()) {
    printer << ", max = ";
    printAxisSet(printer, getPartialMax());
  }
  printer << ">";
}

LogicalResult ShardingAttr::verify(function_ref<InFlightDiagnostic()> emitError, ArrayAttr dims,
                                   ArrayAttr partial, DenseI64ArrayAttr blocks,
                                   ArrayAttr partialMax) {
  if (!blocks.empty() && blocks.size() != static_cast<int64_t>(dims.size()))
    return emitError() << "sharding: blocks for " << blocks.size() << " of " << dims.size()
                       << " dimensions";
  for (int64_t b : blocks.asArrayRef())
    if (b < 1) return emitError() << "sharding: " << b << " blocks";
  llvm::SmallSet<StringRef, 4> seen;
  auto use = [&](Attribute a) -> LogicalResult {
    auto s = dyn_cast<StringAttr>(a);
    if (!s) return emitError() << "sharding: axes must be names";
    if (!seen.insert(s.getValue()).second)
      return emitError() << "sharding: mesh axis '" << s.getValue() << "' used twice";
    return success();
  };
  for (Attribute d : dims) {
    auto axes = dyn_cast<ArrayAttr>(d);
    if (!axes) return emitError() << "sharding: each dimension needs a list of axes";
    for (Attribute a : axes)
      if (failed(use(a))) return failure();
  }
  for (Attribute a : partial)
    if (failed(use(a))) return failure();
  for (Attribute a : partialMax)
    if (failed(use(a))) return failure();
  if (!partial.empty() && !partialMax.empty())
    return emitError() << "sharding: a value awaits a sum or a maximum, not both";
  return success();
}

ShardingAttr ShardingAttr::replicated(MLIRContext* ctx, int64_t rank) {
  Builder b(ctx);
  SmallVector<Attribute> dims(rank, b.getArrayAttr({}));
  return ShardingAttr::get(ctx, b.getArrayAttr(dims), b.getArrayAttr({}));
}

bool ShardingAttr::isFullyReplicated() const {
  if (isPartial()) return false;
  for (Attribute d : getDims())
    if (!cast<ArrayAttr>(d).empty()) return false;
  return true;
}

std::optional<std::string> ShardingAttr::check(MeshAttr mesh, ArrayRef<int64_t> shape) const {
  if (getDims().size() != shape.size())
    return "sharding has " + std::to_string(getDims().size()) + " dimensions, the tensor " +
           std::to_string(shape.size());
  auto known = [&](Attribute a) -> std::optional<std::string> {
    StringRef name = cast<StringAttr>(a).getValue();
    if (mesh.axisIndex(name) < 0) return "mesh has no axis '" + name.str() + "'";
    return std::nullopt;
  };
  for (auto [d, size] : llvm::enumerate(shape)) {
    ArrayAttr axes = dimAxes(d);
    for (Attribute a : axes)
      if (auto err = known(a)) return err;
    int64_t parts = mesh.groupSize(axes) * dimBlocks(d);
    if (size % parts != 0) {
      std::string names;
      for (Attribute a : axes) names += (names.empty() ? "" : ",") + cast<StringAttr>(a).str();
      if (dimBlocks(d) != 1)
        return "dimension " + std::to_string(d) + " of size " + std::to_string(size) +
               " does not divide into " + std::to_string(dimBlocks(d)) +
               " chunks over mesh axes {" + names + "} (" + std::to_string(parts / dimBlocks(d)) +
               " devices)";
      return "dimension " + std::to_string(d) + " of size " + std::to_string(size) +
             " does not divide over mesh axes {" + names + "} (" + std::to_string(parts) +
             " devices)";
    }
  }
  for (Attribute a : getPartial())
    if (auto err = known(a)) return err;
  for (Attribute a : getPartialMax())
    if (auto err = known(a)) return err;
  return std::nullopt;
}

SmallVector<int64_t> ShardingAttr::localShape(MeshAttr mesh, ArrayRef<int64_t> shape) const {
  SmallVector<int64_t> local(shape);
  for (size_t d = 0; d < local.size() && d < getDims().size(); ++d)
    local[d] /= mesh.groupSize(dimAxes(d));
  return local;
}
