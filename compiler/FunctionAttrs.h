// Many argument and result attributes of one function, set at once.
//
// FunctionOpInterface::setArgAttr rebuilds the array of every argument's attribute dictionary
// on each call, and the context keeps every array it ever made: a loop over a function's
// arguments is quadratic in the model's depth (at 800 GPT layers under dp=2, 38 s and 15 GB in
// one pass). Passes that annotate many arguments collect the changes here and apply them once.
#pragma once

#include <map>

#include "mlir/IR/OperationSupport.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

namespace dtc {

class FunctionAttrEdits {
 public:
  explicit FunctionAttrEdits(mlir::FunctionOpInterface func) : func_(func) {}

  // Takes effect at apply(); reads of the function's attributes until then see the old ones.
  void setArgAttr(unsigned index, llvm::StringRef name, mlir::Attribute value) {
    args_[index].emplace_back(name, value);
  }
  void setResultAttr(unsigned index, llvm::StringRef name, mlir::Attribute value) {
    results_[index].emplace_back(name, value);
  }

  void apply() {
    mlir::MLIRContext* ctx = func_->getContext();
    if (!args_.empty()) {
      llvm::SmallVector<mlir::DictionaryAttr> all;
      for (unsigned i = 0, n = func_.getNumArguments(); i < n; ++i)
        all.push_back(edited(func_.getArgAttrDict(i), args_, i, ctx));
      func_.setAllArgAttrs(all);
    }
    if (!results_.empty()) {
      llvm::SmallVector<mlir::DictionaryAttr> all;
      for (unsigned i = 0, n = func_.getNumResults(); i < n; ++i)
        all.push_back(edited(func_.getResultAttrDict(i), results_, i, ctx));
      func_.setAllResultAttrs(all);
    }
    args_.clear();
    results_.clear();
  }

 private:
  using Edits = std::map<unsigned, llvm::SmallVector<std::pair<std::string, mlir::Attribute>>>;

  static mlir::DictionaryAttr edited(mlir::DictionaryAttr old, const Edits& edits, unsigned index,
                                     mlir::MLIRContext* ctx) {
    auto it = edits.find(index);
    if (it == edits.end()) return old ? old : mlir::DictionaryAttr::get(ctx);
    mlir::NamedAttrList list(old);
    for (const auto& [name, value] : it->second) list.set(name, value);
    return list.getDictionary(ctx);
  }

  mlir::FunctionOpInterface func_;
  Edits args_, results_;
};

}  // namespace dtc
