#include "driver/TrainingPipeline.h"

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "mlir/Pass/PassRegistry.h"

#include "Passes.h"
#include "support/printable.h"

using namespace mlir;

bool llvm::cl::parser<dtc::Real>::parse(Option& option, StringRef, StringRef text,
                                        dtc::Real& real) {
  if (text.getAsDouble(real.value)) return option.error("'" + text + "' is not a number");
  return false;
}

void llvm::cl::parser<dtc::Real>::printOptionDiff(const Option& option, dtc::Real real,
                                                  const OptionValue<dtc::Real>&,
                                                  size_t width) const {
  printOptionName(option, width);
  llvm::outs() << "= " << real << "\n";
}

namespace dtc {

llvm::raw_ostream& operator<<(llvm::raw_ostream& os, const Real& real) {
  // The shortest form that reads back as the same double.
  char text[32];
  for (int digits = 15; digits <= 17; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, real.value);
    if (std::strtod(text, nullptr) == real.value) break;
  }
  return os << text;
}

namespace {

// A numeric option's value, for its range check; none for the others.
std::optional<double> numeric(const Real& real) { return real.value; }
std::optional<double> numeric(int64_t value) { return static_cast<double>(value); }
std::optional<double> numeric(const std::string&) { return std::nullopt; }
std::optional<double> numeric(bool) { return std::nullopt; }
// An enumerated option's value, for its choices; none for the others.
std::optional<std::string> text(const Real&) { return std::nullopt; }
std::optional<std::string> text(int64_t) { return std::nullopt; }
std::optional<std::string> text(const std::string& value) { return value; }
std::optional<std::string> text(bool) { return std::nullopt; }

const OptionRange kRanges[] = {
#define DTC_OPTION(Kind, field, name, flag, initial, min, max, help) \
  {name, static_cast<double>(min), static_cast<double>(max), PipelineIsInt##Kind},
#include "driver/PipelineOptions.def"
};

const OptionChoices kChoices[] = {
#define DTC_CHOICES(name, values, list) {name, values, list},
#include "driver/PipelineOptions.def"
};

llvm::SmallVector<llvm::StringRef> split(const char* values) {
  llvm::SmallVector<llvm::StringRef> out;
  llvm::StringRef(values).split(out, '|');
  return out;
}

}  // namespace

const OptionRange* pipelineOptionRange(llvm::StringRef name) {
  for (const OptionRange& r : kRanges)
    if (name == r.name) return &r;
  return nullptr;
}

const OptionChoices* pipelineOptionChoices(llvm::StringRef name) {
  for (const OptionChoices& c : kChoices)
    if (name == c.name) return &c;
  return nullptr;
}

bool OptionChoices::allows(llvm::StringRef value) const {
  const llvm::SmallVector<llvm::StringRef> allowed = split(values);
  llvm::SmallVector<llvm::StringRef> items;
  if (list)
    value.split(items, ',');
  else
    items.push_back(value);
  return llvm::all_of(items, [&](llvm::StringRef v) { return llvm::is_contained(allowed, v); });
}

std::string OptionChoices::text(llvm::StringRef extra) const {
  std::vector<std::string> all = splitAlternatives(values);
  if (!extra.empty()) all.push_back(extra.str());
  return alternatives(all);
}

std::string OptionRange::text(double value) const {
  auto number = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.15g", v);
    return std::string(buf);
  };
  if (integer && max - min <= 4) {
    std::string out;
    for (double v = min; v <= max; ++v)
      out += (out.empty() ? "" : v == max ? " or " : ", ") + number(v);
    return out;
  }
  if (value > max) return "<= " + number(max);
  if (min == kAboveZero) return "> 0";
  return ">= " + number(min);
}

LogicalResult validatePipelineOptions(const TrainingPipelineOptions& options,
                                      llvm::function_ref<LogicalResult(const llvm::Twine&)> error) {
#define DTC_OPTION(Kind, field, name, flag, initial, min, max, help)                           \
  if (std::optional<double> value = numeric(Pipeline##Kind(options.field)))                    \
    if (!pipelineOptionRange(name)->contains(*value))                                          \
      return error(llvm::Twine(name) + " must be " + pipelineOptionRange(name)->text(*value)); \
  if (std::optional<std::string> value = text(Pipeline##Kind(options.field)))                  \
    if (const OptionChoices* choices = pipelineOptionChoices(name);                            \
        choices && !choices->allows(*value))                                                   \
      return error(llvm::Twine(name) + " must be " + choices->text() + ", got '" + *value + "'");
#include "driver/PipelineOptions.def"
  if (options.zeroStage != 0 && options.dataParallel == 0)
    return error("ZeRO needs a data-parallel mesh (--mesh dp=N)");
  if (options.dataReplicate > 0 && options.dataParallel == 0)
    return error("a dp_replicate axis needs a dp axis to shard over (--mesh dp_replicate=R,dp=N)");
  if (options.microBatches != 1 && options.accumulate != 1)
    return error("--microbatches and --accumulate both split the step; give one");
  if (options.contextParallel > 0 && !options.fusedAttention)
    return error("context parallelism needs fused attention (fused-attention=true)");
  if ((options.dataParallel > 0 || options.pipelineStages > 0 || options.contextParallel > 0) &&
      options.mesh.empty())
    return error(
        "data-parallel, context-parallel and pipeline-stages need a mesh naming their axes");
  return success();
}

namespace {

// The size of mesh axis `name` in "dp=2,tp=4" (1 when it has none).
int64_t axisSize(const std::string& mesh, llvm::StringRef name) {
  llvm::SmallVector<llvm::StringRef> axes;
  llvm::StringRef(mesh).split(axes, ',');
  for (llvm::StringRef axis : axes) {
    auto [key, value] = axis.split('=');
    int64_t size = 1;
    if (key.trim() == name && !value.trim().getAsInteger(10, size)) return size;
  }
  return 1;
}

// The devices among which attention's heads are split: tensor parallelism's, and under Ulysses
// context parallelism's too.
int64_t headSplitDevices(const TrainingPipelineOptions& options) {
  int64_t devices = axisSize(options.mesh, "tp");
  if (options.contextParallel > 0 && options.cpAttention == "ulysses")
    devices *= options.contextParallel;
  return devices;
}

}  // namespace

LogicalResult buildTrainingPipeline(OpPassManager& pm, const TrainingPipelineOptions& options,
                                    llvm::function_ref<LogicalResult(const llvm::Twine&)> error) {
  if (failed(validatePipelineOptions(options, error))) return failure();
  // M micro-batches are accumulated: the step sees the whole batch.
  const int64_t accumulate = options.microBatches != 1 ? options.microBatches : options.accumulate;

  pm.addPass(createFuseRotary());
  if (options.fusedAttention)
    pm.addPass(createFuseAttention(FuseAttentionOptions{headSplitDevices(options)}));
  // FP8 is bf16 mixed precision with the linear layers' GEMMs then moved to FP8.
  if (options.precision != "fp32")
    pm.addPass(createMixedPrecision(MixedPrecisionOptions{
        options.precision == "fp8" ? std::string("bf16") : std::string(options.precision)}));
  if (options.contextParallel > 0 && options.cpLoadBalance)
    pm.addPass(createSequenceOrder(SequenceOrderOptions{2 * options.contextParallel}));
  if (options.pipelineStages > 0)
    pm.addPass(createPipelineStages(
        PipelineStagesOptions{options.pipelineStages, options.virtualStages, options.microBatches,
                              options.schedule, options.stageCuts}));
  pm.addPass(createAutodiff());
  if (options.precision != "fp32") pm.addPass(createMixedPrecisionGradients());
  if (options.recompute != "none") pm.addPass(createRecompute(RecomputeOptions{options.recompute}));
  if (accumulate != 1) pm.addPass(createAccumulate(AccumulateOptions{accumulate}));
  OptimizerOptions optim;
  optim.optimizer = options.optimizer;
  optim.lr = options.lr.value;
  optim.momentum = options.momentum.value;
  optim.weightDecay = options.weightDecay.value;
  optim.beta1 = options.beta1.value;
  optim.beta2 = options.beta2.value;
  optim.eps = options.eps.value;
  optim.noDecay.assign(options.noDecay.begin(), options.noDecay.end());
  optim.lrSchedule = options.lrSchedule;
  optim.warmupSteps = options.warmupSteps;
  optim.decaySteps = options.decaySteps;
  optim.minLr = options.minLr.value;
  pm.addPass(createOptimizer(optim));
  if (options.precision == "fp16")
    pm.addPass(createLossScaling(LossScalingOptions{options.lossScale.value}));
  pm.addPass(createEvalFunction());
  if (!options.mesh.empty()) {
    pm.addPass(createUserShardings(UserShardingsOptions{
        options.mesh, options.shard, options.megatron, options.sequenceParallel ? "tp" : ""}));
    if (options.vocabParallel) pm.addPass(createVocabParallel(VocabParallelOptions{"tp"}));
    pm.addPass(createSyncBatchNorm());
    // Ahead of dp: the experts' weights and state are then annotated ones, which ZeRO splits.
    if (options.expertParallel > 0)
      pm.addPass(createExpertParallel(ExpertParallelOptions{options.expertParallel}));
    // Ahead of dp: the data inputs' sequence split is set, which dp keeps.
    if (options.contextParallel > 0)
      pm.addPass(createContextParallel(ContextParallelOptions{
          options.contextParallel, options.cpAttention, options.cpLoadBalance}));
    if (options.dataParallel > 0)
      pm.addPass(createDataParallel(
          DataParallelOptions{options.dataParallel, options.zeroStage, options.dataReplicate}));
  }
  // After the layouts are chosen (Megatron's preset and sequence parallelism read the linear
  // layers), before they propagate: the FP8 operands split as their sources do.
  if (options.precision == "fp8")
    pm.addPass(createFp8Linears(
        Fp8LinearsOptions{std::string(options.fp8Skip), options.fp8SkipGiven,
                          std::string(options.fp8Scaling), options.fp8AmaxHistory}));
  if (!options.mesh.empty()) {
    pm.addPass(createShardingPropagation());
    pm.addPass(createPartition());
    // Sequence parallelism keeps the shards of what it gathers, as Megatron's does, whatever
    // the recomputation setting; so does context parallelism's attention (each layer's keys and
    // values gathered again in backward, as a ring passes them again).
    if (options.sequenceParallel || options.contextParallel > 0)
      pm.addPass(createRecomputeGathers(RecomputeGathersOptions{"selective"}));
    else if (options.recompute != "none")
      pm.addPass(createRecomputeGathers(RecomputeGathersOptions{options.recompute}));
    if (options.contextParallel > 0 && options.cpAttention == "ring")
      pm.addPass(createRingAttention());
    if (options.contextParallel > 0 && options.cpAttention == "ulysses")
      pm.addPass(createUlyssesAttention());
    if (options.zeroStage >= 2) pm.addPass(createZero(ZeroOptions{options.zeroStage}));
    if (options.pipelineStages > 0) pm.addPass(createPipelineSchedule());
    pm.addPass(createBucketAllReduce(BucketAllReduceOptions{options.bucketMb.value}));
  }
  // On the programs devices run: the reductions follow the partitioning.
  if (options.clipGradNorm.value > 0 || options.reportGradNorm)
    pm.addPass(createClipGradNorm(ClipGradNormOptions{options.clipGradNorm.value}));
  if (options.precision != "fp32" && options.foldCasts) pm.addPass(createFoldCasts());
  if (!options.mesh.empty()) pm.addPass(createMergeCollectives());
  // Attention on the fused projection is a layout fold like the casts': exact, and off with them
  // only to compare.
  pm.addPass(createLowerToKernels(LowerToKernelsOptions{options.fuseEpilogues, options.foldCasts,
                                                        options.foldCasts, options.multiTensor}));
  pm.addPass(createPlanMemory());
  return success();
}

void registerTrainingPipeline() {
  registerPassPipeline(
      "dtc-training-pipeline",
      "Forward to training step to partitioned, memory-planned programs, as `dtc compile` runs "
      "it (its --dump-ir directory's pipeline.txt holds the options it used)",
      [](OpPassManager& pm, StringRef text,
         llvm::function_ref<LogicalResult(const llvm::Twine&)> error) {
        TrainingPipelineOptions options;
        if (failed(options.parseFromString(text))) return failure();
        return buildTrainingPipeline(pm, options, error);
      },
      [](llvm::function_ref<void(const detail::PassOptions&)> describe) {
        describe(TrainingPipelineOptions());
      });
}

}  // namespace dtc
