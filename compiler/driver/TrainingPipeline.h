// The training pipeline: the passes that turn an imported model into the program each device
// runs, registered as `dtc-training-pipeline` so that `dtc-opt` reproduces `dtc compile` on
// textual IR.
#pragma once

#include <string>

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace dtc {

// A real-valued option printed with every digit (MLIR prints doubles with six), so that the
// printed pipeline reproduces a compile exactly.
struct Real {
  double value = 0.0;
};
llvm::raw_ostream& operator<<(llvm::raw_ostream& os, const Real& real);

}  // namespace dtc

template <>
class llvm::cl::parser<dtc::Real> : public llvm::cl::basic_parser<dtc::Real> {
 public:
  using basic_parser::basic_parser;
  bool parse(Option& option, StringRef name, StringRef text, dtc::Real& real);
  StringRef getValueName() const override { return "number"; }
  void printOptionDiff(const Option& option, dtc::Real real, const OptionValue<dtc::Real>&,
                       size_t width) const;
};

namespace dtc {

struct TrainingPipelineOptions : mlir::PassPipelineOptions<TrainingPipelineOptions> {
  // The optimizer and its schedule (torch.optim's names and defaults).
  Option<std::string> optimizer{*this, "optimizer", llvm::cl::desc("sgd or adamw"),
                                llvm::cl::init("sgd")};
  Option<Real> lr{*this, "lr", llvm::cl::desc("learning rate (the schedule's peak)"),
                  llvm::cl::init(Real{1e-3})};
  Option<Real> momentum{*this, "momentum", llvm::cl::desc("SGD momentum"),
                        llvm::cl::init(Real{0.0})};
  Option<Real> weightDecay{*this, "weight-decay",
                           llvm::cl::desc("weight decay (< 0: torch.optim's default)"),
                           llvm::cl::init(Real{-1.0})};
  Option<Real> beta1{*this, "beta1", llvm::cl::desc("AdamW beta1"), llvm::cl::init(Real{0.9})};
  Option<Real> beta2{*this, "beta2", llvm::cl::desc("AdamW beta2"), llvm::cl::init(Real{0.999})};
  Option<Real> eps{*this, "eps", llvm::cl::desc("AdamW epsilon"), llvm::cl::init(Real{1e-8})};
  ListOption<std::string> noDecay{*this, "no-decay",
                                  llvm::cl::desc("globs over parameters updated without decay")};
  Option<std::string> lrSchedule{*this, "lr-schedule", llvm::cl::desc("constant, cosine or linear"),
                                 llvm::cl::init("constant")};
  Option<int64_t> warmupSteps{*this, "warmup-steps", llvm::cl::desc("updates of linear warmup"),
                              llvm::cl::init(0)};
  Option<int64_t> decaySteps{*this, "decay-steps",
                             llvm::cl::desc("the update at which the decay ends"),
                             llvm::cl::init(0)};
  Option<Real> minLr{*this, "min-lr", llvm::cl::desc("cosine: the rate after the decay"),
                     llvm::cl::init(Real{0.0})};
  Option<Real> clipGradNorm{*this, "clip-grad-norm",
                            llvm::cl::desc("> 0: clip the global gradient norm to it"),
                            llvm::cl::init(Real{0.0})};
  Option<bool> reportGradNorm{*this, "report-grad-norm",
                              llvm::cl::desc("the step reports the gradient norm"),
                              llvm::cl::init(false)};
  // Precision and fusions.
  Option<std::string> precision{*this, "precision", llvm::cl::desc("fp32, bf16 or fp16"),
                                llvm::cl::init("fp32")};
  Option<Real> lossScale{*this, "loss-scale", llvm::cl::desc("fp16: initial dynamic loss scale"),
                         llvm::cl::init(Real{65536.0})};
  Option<bool> fusedAttention{*this, "fused-attention",
                              llvm::cl::desc("causal attention as one flash-style op"),
                              llvm::cl::init(false)};
  Option<bool> fuseEpilogues{*this, "fuse-epilogues",
                             llvm::cl::desc("bias and GELU fused into linear GEMMs"),
                             llvm::cl::init(false)};
  Option<bool> multiTensor{*this, "multi-tensor",
                           llvm::cl::desc("multi-tensor updates and parameter casts"),
                           llvm::cl::init(false)};
  Option<bool> foldCasts{*this, "fold-casts",
                         llvm::cl::desc("mixed precision: layout ops on 16-bit data"),
                         llvm::cl::init(true)};
  // Partitioning.
  Option<std::string> mesh{*this, "mesh",
                           llvm::cl::desc("device mesh name=size[,name=size] (empty: one device)"),
                           llvm::cl::init("")};
  Option<int64_t> dataParallel{*this, "data-parallel",
                               llvm::cl::desc("size of the mesh's dp axis (0: none)"),
                               llvm::cl::init(0)};
  Option<int64_t> dataReplicate{
      *this, "data-replicate",
      llvm::cl::desc("size of the mesh's dp_replicate axis (0: none): data parallel replicas "
                     "that ZeRO does not shard over (hybrid sharding)"),
      llvm::cl::init(0)};
  Option<std::string> shard{*this, "shard", llvm::cl::desc("user shardings PATTERN=SPEC[;…]"),
                            llvm::cl::init("")};
  Option<std::string> megatron{*this, "megatron",
                               llvm::cl::desc("mesh axis for Megatron's GPT-2 splits"),
                               llvm::cl::init("")};
  Option<bool> sequenceParallel{*this, "sequence-parallel",
                                llvm::cl::desc("split LayerNorm/residual regions over tp"),
                                llvm::cl::init(false)};
  Option<bool> vocabParallel{*this, "vocab-parallel",
                             llvm::cl::desc("split embeddings, LM head and loss over tp"),
                             llvm::cl::init(false)};
  Option<int64_t> zeroStage{*this, "zero", llvm::cl::desc("ZeRO stage (0 to 3)"),
                            llvm::cl::init(0)};
  Option<std::string> recompute{*this, "recompute",
                                llvm::cl::desc("activation recomputation: none, full or selective"),
                                llvm::cl::init("none")};
  Option<Real> bucketMb{*this, "bucket-mb", llvm::cl::desc("all-reduce bucket size in MiB"),
                        llvm::cl::init(Real{25.0})};
  // Micro-batching and pipeline parallelism.
  Option<int64_t> accumulate{
      *this, "accumulate", llvm::cl::desc("micro-batches accumulated per step"), llvm::cl::init(1)};
  Option<int64_t> pipelineStages{*this, "pipeline-stages",
                                 llvm::cl::desc("stages along the pp axis (0: none)"),
                                 llvm::cl::init(0)};
  Option<int64_t> microBatches{*this, "micro-batches",
                               llvm::cl::desc("micro-batches the step's batch is cut into"),
                               llvm::cl::init(1)};
  Option<std::string> schedule{*this, "schedule", llvm::cl::desc("gpipe, 1f1b or interleaved"),
                               llvm::cl::init("1f1b")};
  Option<int64_t> virtualStages{*this, "virtual-stages", llvm::cl::desc("model chunks per device"),
                                llvm::cl::init(1)};
  Option<std::string> stageCuts{*this, "stage-cuts",
                                llvm::cl::desc("node names that start chunks 1, 2, ..."),
                                llvm::cl::init("")};
};

// Adds the training passes to `pm` in order. An impossible combination of options is reported
// through `error` (one line) and fails.
mlir::LogicalResult buildTrainingPipeline(
    mlir::OpPassManager& pm, const TrainingPipelineOptions& options,
    llvm::function_ref<mlir::LogicalResult(const llvm::Twine&)> error);

// Registers `dtc-training-pipeline` for dtc-opt.
void registerTrainingPipeline();

}  // namespace dtc
