// Dialect attributes that are not op operands: the training contracts passes hand each other on
// modules, functions, function arguments and results, and ops (`graph.param`, `dist.stage`,
// `plan.offsets`, ...). Each dialect declares its own in a .def file, one line per attribute:
//
//   DTC_DIALECT_ATTR(kConstant, "dialect.name", AttrClass, Places)
//
// From that line come the name constant the passes use and the dialect's verifier entry: an
// attribute of the dialect that is not declared, sits where it may not, or holds the wrong kind of
// value is a verifier error naming it.
#pragma once

#include <string>

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Operation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

namespace dtc {

// Where an attribute may appear (a bit set).
namespace attr_place {
enum : unsigned {
  OnModule = 1u << 0,    // the builtin.module
  OnFunction = 1u << 1,  // a func.func itself
  OnArgument = 1u << 2,  // a function argument
  OnResult = 1u << 3,    // a function result
  OnOp = 1u << 4,        // an op inside a function
};
}  // namespace attr_place

struct DeclaredAttribute {
  llvm::StringLiteral name;
  unsigned places;
  bool (*holds)(mlir::Attribute);
  llvm::StringLiteral kind;  // the attribute class, for the error
};

// Declares the table `table` from a .def file's DTC_DIALECT_ATTR lines.
#define DTC_DECLARED_ATTRIBUTE_ENTRY(constant, name, Kind, places) \
  ::dtc::DeclaredAttribute{name, places,                           \
                           +[](::mlir::Attribute a) { return ::mlir::isa<Kind>(a); }, #Kind},

// "a module", "argument 2", ...: where an attribute sits, for errors.
inline std::string placeName(unsigned place, int index) {
  switch (place) {
    case attr_place::OnModule: return "the module";
    case attr_place::OnFunction: return "a function";
    case attr_place::OnArgument: return "argument " + std::to_string(index);
    case attr_place::OnResult: return "result " + std::to_string(index);
    default: return "an op";
  }
}

// Where `attr`, found on `owner` itself, sits: the module, a function, or an op.
inline unsigned placeOf(mlir::Operation* owner) {
  if (mlir::isa<mlir::ModuleOp>(owner)) return attr_place::OnModule;
  if (mlir::isa<mlir::FunctionOpInterface>(owner)) return attr_place::OnFunction;
  return attr_place::OnOp;
}

// Checks `attr` (of the dialect whose declarations are `table`) at `place` on `owner`; `index`
// is the argument's or result's number.
inline mlir::LogicalResult verifyDeclaredAttribute(llvm::ArrayRef<DeclaredAttribute> table,
                                                   mlir::Operation* owner, unsigned place,
                                                   mlir::NamedAttribute attr, int index = -1) {
  llvm::StringRef name = attr.getName().getValue();
  for (const DeclaredAttribute& declared : table) {
    if (declared.name != name) continue;
    if (!(declared.places & place))
      return owner->emitOpError("carries '")
             << name << "' on " << placeName(place, index) << ", where it does not belong";
    if (!declared.holds(attr.getValue()))
      return owner->emitOpError("carries '") << name << "' on " << placeName(place, index) << " as "
                                             << attr.getValue() << "; it must be " << declared.kind;
    return mlir::success();
  }
  return owner->emitOpError("carries '")
         << name << "' on " << placeName(place, index) << ", which its dialect does not declare";
}

}  // namespace dtc

// Defines `Dialect`'s three verifier hooks (ODS: hasOperationAttrVerify, hasRegionArgAttrVerify,
// hasRegionResultAttrVerify) over its declared attributes `table`.
#define DTC_VERIFY_DECLARED_ATTRIBUTES(Dialect, table)                                            \
  ::mlir::LogicalResult Dialect::verifyOperationAttribute(::mlir::Operation* op,                  \
                                                          ::mlir::NamedAttribute attr) {          \
    return ::dtc::verifyDeclaredAttribute(table, op, ::dtc::placeOf(op), attr);                   \
  }                                                                                               \
  ::mlir::LogicalResult Dialect::verifyRegionArgAttribute(                                        \
      ::mlir::Operation* op, unsigned, unsigned index, ::mlir::NamedAttribute attr) {             \
    return ::dtc::verifyDeclaredAttribute(table, op, ::dtc::attr_place::OnArgument, attr, index); \
  }                                                                                               \
  ::mlir::LogicalResult Dialect::verifyRegionResultAttribute(                                     \
      ::mlir::Operation* op, unsigned, unsigned index, ::mlir::NamedAttribute attr) {             \
    return ::dtc::verifyDeclaredAttribute(table, op, ::dtc::attr_place::OnResult, attr, index);   \
  }
