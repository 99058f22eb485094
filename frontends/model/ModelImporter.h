// Builds the graph dialect's forward function from a model file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include "model/ModelFile.h"

namespace dtc {

struct ImportOptions {
  // Replaces the batch dimension (-1) of graph inputs. 0: the model must not have one.
  int64_t batchSize = 0;
};

// Imports `file` as a module holding `func.func @forward(params..., inputs...) -> (loss,
// outputs...)`. Arguments carry `graph.param`/`graph.trainable` or `graph.data`, results
// `graph.output`; every op's location names the model node it came from. On failure, errors have
// been emitted on the context's diagnostic engine and the result is null.
mlir::OwningOpRef<mlir::ModuleOp> importModel(mlir::MLIRContext& ctx, const ModelFile& file,
                                              const ImportOptions& options);

// The model op types the importer reads, by name, with the attributes each takes.
struct ImportableOp {
  std::string type;
  std::vector<std::string> attributes;
};
std::vector<ImportableOp> importableOps();

}  // namespace dtc
