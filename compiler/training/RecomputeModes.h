// The --recompute setting as the passes that act on it read it, and the backward it acts on.
#pragma once

#include <optional>
#include <string>

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"
#include "mlir/IR/BuiltinOps.h"

#include "pipeline_parallel/Pipeline.h"

namespace dtc {

// One setting (none, full or selective) for every device, or one per pipeline device: stage s's
// chunks all take entry s.
class RecomputeModes {
 public:
  // `text` as --recompute spells it; an error on `module` names what is wrong.
  static mlir::FailureOr<RecomputeModes> parse(mlir::ModuleOp module, llvm::StringRef text);

  // The setting of the device that runs `op` (the first setting where it has no stage mark).
  const std::string& of(mlir::Operation* op) const;
  bool allNone() const;

 private:
  llvm::SmallVector<std::string> modes_;
  std::optional<pipeline::PipelineConfig> pipeline_;
};

// A function body's backward: each loss seed and what follows from it, and what recomputation
// copied there.
llvm::DenseSet<mlir::Operation*> backwardOps(mlir::Block& body);

}  // namespace dtc
