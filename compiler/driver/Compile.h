// The dtc pipeline: model file -> graph dialect -> training step -> memory plan -> plan bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/LLVM.h"

#include "flatbuffers/ModelFile.h"

namespace dtc {

struct CompileOptions {
  int64_t batchSize = 0;
  std::string optimizer = "sgd";
  double lr = 1e-3;
  double momentum = 0.0;
  double weightDecay = -1.0;  // < 0: torch.optim's default for the optimizer
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  std::vector<std::string> noDecay;  // globs over parameter names updated without weight decay
  // The learning rate of each step: constant, cosine or linear (see the plan's LrSchedule).
  std::string lrSchedule = "constant";
  int64_t warmupSteps = 0, decaySteps = 0;
  double minLr = 0.0;
  double clipGradNorm = 0.0;       // > 0: clip the global gradient norm to it
  bool reportGradNorm = false;     // the step reports the norm (always when clipping)
  std::string dumpIrDir;           // non-empty: write the IR after every pass as NN-<pass>.mlir
  std::string device = "cpu";      // the backend the plan is for: cpu or cuda
  std::string precision = "fp32";  // fp32, or bf16/fp16 contractions (mixed precision)
  double lossScale = 65536.0;      // fp16: the initial dynamic loss scale
  bool fusedAttention = false;     // causal attention as one flash-style op
  bool fuseEpilogues = false;      // bias, GELU and GELU gradient fused into linear GEMMs
  bool multiTensor = false;        // multi-tensor updates and parameter casts
  bool foldCasts = true;           // mixed precision: layout ops on 16-bit data (exact)
  // Partitioning: `mesh` ("dp=2,tp=2"; empty: a single-device plan), the size of its dp axis
  // (0: none), and user shardings ("PATTERN=SPEC;…").
  std::string mesh;
  int64_t dataParallel = 0;
  int64_t dataReplicate = 0;  // the dp_replicate axis: replicas the batch splits over, ZeRO not
  std::string shard;
  std::string megatron;           // a mesh axis: apply Megatron's GPT-2 splits over it
  bool sequenceParallel = false;  // split LayerNorm/residual regions along the sequence over tp
  bool vocabParallel = false;     // split embeddings, LM head and cross-entropy by vocabulary
  int64_t zeroStage = 0;          // 1: optimizer state sharded over dp; 2: + gradients; 3: + params
  std::string recompute = "none";  // activation recomputation: none, full or selective
  bool trial = false;              // a compile to measure (--recompute auto): no report, no trace
  bool passTiming = false;         // MLIR's report of each pass's time, on stderr
  double bucketMb = 25.0;          // all-reduce bucket size
  int64_t accumulate = 1;          // micro-batches per step (gradient accumulation)
  // Pipeline parallelism: stages along the mesh's pp axis (0: none), the micro-batches the
  // batch is cut into (also without a pipeline: accumulation over batch/M samples), the schedule,
  // model chunks per device, user cut points, and where to write the predicted timeline.
  int64_t pipelineStages = 0;
  int64_t microBatches = 1;
  std::string schedule = "1f1b";
  int64_t virtualStages = 1;
  std::string stageCuts;
  std::string scheduleTracePath;
};

// Registers the dialects dtc uses on `ctx`.
void registerDialects(mlir::MLIRContext& ctx);

// Runs the whole pipeline. Errors are emitted on ctx's diagnostic engine.
mlir::LogicalResult compileModel(mlir::MLIRContext& ctx, const ModelFile& model,
                                 const CompileOptions& options, std::vector<uint8_t>& plan);

}  // namespace dtc
