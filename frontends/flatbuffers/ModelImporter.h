// Builds the graph dialect's forward function from a model file.
#pragma once

#include <cstdint>
#include <string>

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include "flatbuffers/ModelFile.h"

namespace dtc {

struct ImportOptions {
  // Replaces the batch dimension (-1) of graph inputs. 0: the model must not have one.
  int64_t batchSize = 0;
};

// Imports `file` as a module holding `func.func @forward(params..., inputs...) -> (loss, outputs...)`.
// Arguments carry `graph.param`/`graph.trainable` or `graph.data`, results `graph.output`; every
// op's location names the model node it came from. On failure, errors have been emitted on the
// context's diagnostic engine and the result is null.
mlir::OwningOpRef<mlir::ModuleOp> importModel(mlir::MLIRContext& ctx, const ModelFile& file,
                                              const ImportOptions& options);

// Attribute names shared by the importer and the passes.
namespace attr {
inline constexpr const char kParam[] = "graph.param";          // arg: initializer name
inline constexpr const char kTrainable[] = "graph.trainable";  // arg: unit attr
inline constexpr const char kData[] = "graph.data";            // arg: graph input name
inline constexpr const char kOutput[] = "graph.output";        // result: output name
inline constexpr const char kUpdates[] = "graph.updates";      // result: new value of a buffer/state
inline constexpr const char kLoss[] = "graph.loss";            // module: loss output name
inline constexpr const char kPredictions[] = "graph.predictions";
inline constexpr const char kTargets[] = "graph.targets";
inline constexpr const char kBatchSize[] = "graph.batch_size";
inline constexpr const char kBatchDim[] = "graph.batch_dim";    // data arg: the sample dimension
inline constexpr const char kMicroBatch[] = "graph.micro_batch";  // data arg: which micro-batch
inline constexpr const char kMicroBatches[] = "graph.micro_batches";  // module: per step
}  // namespace attr

}  // namespace dtc
