#include "planner/CompileRequest.h"

#include <cstdlib>
#include <optional>
#include <set>
#include <string>

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include "dist/IR/LayoutText.h"
#include "ops/device_kind.h"
#include "support/args.h"

namespace dtc {
namespace {

Status invalid(const std::string& message) { return Status::InvalidInput(message); }

}  // namespace

llvm::StringRef resolvedByDriver(llvm::StringRef option) {
  return option == "recompute" ? "auto" : "";
}

// Whether some PATTERN=SPEC of "a=tp,-;b=dp+tp" names mesh axis `axis` in its SPEC.
static bool namesAxis(llvm::StringRef specs, llvm::StringRef axis) {
  llvm::SmallVector<llvm::StringRef> items;
  specs.split(items, ';');
  for (llvm::StringRef item : items) {
    llvm::Expected<dist::ShardSpecText> spec = dist::parseShardSpec(item);
    if (!spec) {
      llvm::consumeError(spec.takeError());  // dtc-user-shardings reports it
      continue;
    }
    for (const dist::ShardDimText& dim : spec->dims)
      if (llvm::is_contained(dim.axes, axis)) return true;
  }
  return false;
}

// Whether the mesh has axis `axis`.
static bool namesAxisIn(const std::vector<dist::MeshAxisText>& mesh, llvm::StringRef axis) {
  return llvm::any_of(mesh, [&](const dist::MeshAxisText& a) { return a.name == axis; });
}

namespace {

// `--flag`'s value against the range its pipeline option declares (driver/PipelineOptions.def).
Status checkRange(const char* flag, const char* option, double value) {
  const OptionRange* range = pipelineOptionRange(option);
  if (!range || (value == value && range->contains(value))) return Status::Ok();
  return invalid(std::string("dtc compile: --") + flag + " must be " + range->text(value));
}

// `--flag`'s value against the values its pipeline option declares.
Status checkChoice(const char* flag, const char* option, const std::string& value) {
  const OptionChoices* choices = pipelineOptionChoices(option);
  const llvm::StringRef extra = resolvedByDriver(option);
  if (!choices || choices->allows(value) || (!extra.empty() && value == extra)) return Status::Ok();
  return invalid(std::string("dtc compile: --") + flag + " must be " + choices->text(extra) +
                 ", got '" + value + "'");
}

}  // namespace

StatusOr<CompileRequest> parseCompileArgs(int argc, char** argv) {
  // The pipeline's options with a flag of their own (driver/PipelineOptions.def), and the
  // driver's.
  std::set<std::string> valued = {"output",         "batch",  "dump-ir",     "mesh", "shard",
                                  "schedule-trace", "device", "no-decay",    "loss", "target",
                                  "memory",         "buffer", "padding-idx", "ctx"};
#define DTC_OPTION(Kind, field, name, flag, initial, min, max, help) \
  if (*flag) valued.insert(flag);
#include "driver/PipelineOptions.def"
  auto args =
      Args::parse(argc, argv, 2, valued,
                  {"log-grad-norm", "sequence-parallel", "vocab-parallel", "no-vocab-parallel",
                   "no-cp-load-balance", "fused-attention", "no-fused-attention", "fuse-epilogues",
                   "no-fuse-epilogues", "multi-tensor", "no-multi-tensor", "no-fold-casts",
                   "pass-timing", "eval-export"},
                  {"no-decay", "shard", "buffer", "padding-idx"});
  if (!args.ok()) return args.status();
  if (args->positionals().size() != 1) return invalid("dtc compile: expected one model file");
  CompileRequest request;
  request.output = args->str("output");
  CompileOptions& options = request.options;
  auto batch = args->integer("batch", 0);
  if (!batch.ok()) return batch.status();
  if (*batch <= 0) return invalid("dtc compile: --batch N (N > 0) is required");
  options.batchSize = *batch;
  // Every option its flag sets as it is: the value, within the option's range.
  auto setReal = [&](const char* flag, const char* name, double& field) -> Status {
    DTC_ASSIGN_OR_RETURN(field, args->number(flag, field));
    return checkRange(flag, name, field);
  };
  auto setInt = [&](const char* flag, const char* name, int64_t& field) -> Status {
    DTC_ASSIGN_OR_RETURN(field, args->integer(flag, field));
    return checkRange(flag, name, static_cast<double>(field));
  };
  auto setString = [&](const char* flag, const char* name, std::string& field) -> Status {
    field = args->str(flag, field);
    return checkChoice(flag, name, field);
  };
  auto setBool = [&](const char*, const char*, bool&) { return Status::Ok(); };
#define DTC_OPTION(Kind, field, name, flag, initial, min, max, help) \
  if (*flag)                                                         \
    if (Status s = set##Kind(flag, name, options.DTC_GROUP.field); !s.ok()) return s;
#include "driver/PipelineOptions.def"
  if (options.recipe.lrSchedule != "constant" && !args->has("decay-steps"))
    return invalid("dtc compile: --lr-schedule " + options.recipe.lrSchedule +
                   " needs --decay-steps D (the update where the decay ends)");
  options.recipe.reportGradNorm = args->has("log-grad-norm");
  options.recipe.noDecay = args->all("no-decay");
  options.dumpIrDir = args->str("dump-ir");
  options.passTiming = args->has("pass-timing");
  options.device = args->str("device", "cpu");
  // Flash-style attention (no [T, T] scores kept) and GEMM epilogues (bias, GELU) are on by
  // default for CUDA plans, where they save memory passes; off for the CPU, whose batched GEMMs
  // beat the attention loops at long contexts and whose kernels gain nothing from epilogues.
  for (const char* feature : {"fused-attention", "fuse-epilogues", "multi-tensor"})
    if (args->has(feature) && args->has(std::string("no-") + feature))
      return invalid(std::string("dtc compile: --") + feature + " and --no-" + feature +
                     " contradict each other");
  const DeviceKind* device = findDeviceKind(options.device);
  if (!device)
    return invalid("dtc compile: --device must be " + deviceKindNames() + ", got '" +
                   options.device + "'");
  const bool gpu = device->gpu;
  options.kernels.fusedAttention =
      args->has("fused-attention") || (gpu && !args->has("no-fused-attention"));
  options.kernels.fuseEpilogues =
      args->has("fuse-epilogues") || (gpu && !args->has("no-fuse-epilogues"));
  options.kernels.multiTensor = args->has("multi-tensor") || (gpu && !args->has("no-multi-tensor"));
  options.kernels.foldCasts = !args->has("no-fold-casts");  // exact; off only to compare
  if (args->has("loss-scale") && options.numerics.precision != "fp16")
    return invalid("dtc compile: --loss-scale is for --precision fp16 (dynamic loss scaling)");
  options.numerics.fp8SkipGiven = args->has("fp8-skip");
  for (const char* flag : {"fp8-skip", "fp8-scaling", "fp8-amax-history"})
    if (args->has(flag) && options.numerics.precision != "fp8")
      return invalid(std::string("dtc compile: --") + flag + " is for --precision fp8");
  for (const std::string& spec : args->all("shard")) {
    if (spec.find(';') != std::string::npos)
      return invalid("dtc compile: one PATTERN=SPEC per --shard, got '" + spec + "'");
    options.parallel.shard += (options.parallel.shard.empty() ? "" : ";") + spec;
  }
  std::vector<dist::MeshAxisText> mesh;  // the mesh's axes, none without --mesh
  if (args->has("mesh")) {
    // name=size[,name=size…]: dp is data parallelism (dp_replicate: replicas of it that ZeRO
    // does not shard over); other axes split what --shard says.
    options.parallel.mesh = args->str("mesh");
    llvm::Expected<std::vector<dist::MeshAxisText>> axes =
        dist::parseMeshText(options.parallel.mesh);
    if (!axes) return invalid("dtc compile: --" + llvm::toString(axes.takeError()));
    mesh = std::move(*axes);
    for (const dist::MeshAxisText& axis : mesh) {
      const llvm::StringRef name = axis.name;
      const int64_t n = axis.size;
      if (name == "dp") {
        options.parallel.dataParallel = n;
      } else if (name == "ep") {
        if (namesAxis(options.parallel.shard, name))
          return invalid(
              "dtc compile: mesh axis ep splits the experts of mixture-of-experts "
              "layers; --shard cannot split over it");
        options.parallel.expertParallel = n;
      } else if (name == "cp") {
        if (namesAxis(options.parallel.shard, name))
          return invalid(
              "dtc compile: mesh axis cp splits sequences (context parallelism); --shard cannot "
              "split over it");
        options.parallel.contextParallel = n;
      } else if (name == "dp_replicate") {
        options.parallel.dataReplicate = n;
      } else if (name == "pp") {
        if (namesAxis(options.parallel.shard, name))
          return invalid(
              "dtc compile: mesh axis pp holds pipeline stages; --shard cannot split over it");
        options.pipeline.pipelineStages = n;
      } else if (name == "tp" && !namesAxis(options.parallel.shard, name)) {
        options.parallel.megatron =
            "tp";  // Megatron's GPT-2 splits, unless the user gives their own
      } else if (!namesAxis(options.parallel.shard, name)) {
        return invalid("dtc compile: mesh axis '" + name.str() +
                       "' splits nothing: give --shard PATTERN=SPEC naming it");
      }
    }
  } else if (!options.parallel.shard.empty()) {
    return invalid("dtc compile: --shard needs --mesh");
  }
  options.parallel.sequenceParallel = args->has("sequence-parallel");
  if (options.parallel.sequenceParallel && !namesAxisIn(mesh, "tp"))
    return invalid("dtc compile: --sequence-parallel needs a tp axis (--mesh tp=N)");
  // Megatron's splits come with the vocabulary split, which saves memory (the table and the
  // logits are split too); --no-vocab-parallel keeps them whole.
  options.parallel.vocabParallel =
      args->has("vocab-parallel") ||
      (!options.parallel.megatron.empty() && !args->has("no-vocab-parallel"));
  if (args->has("vocab-parallel") && args->has("no-vocab-parallel"))
    return invalid("dtc compile: --vocab-parallel and --no-vocab-parallel contradict each other");
  if (options.parallel.vocabParallel && !namesAxisIn(mesh, "tp"))
    return invalid("dtc compile: --vocab-parallel needs a tp axis (--mesh tp=N)");
  // Context parallelism splits attention's queries: it needs the fused op (no [T, T] scores
  // anywhere), so a cp axis turns it on.
  options.parallel.cpLoadBalance = !args->has("no-cp-load-balance");
  if (options.parallel.contextParallel > 0) {
    if (args->has("no-fused-attention"))
      return invalid(
          "dtc compile: context parallelism (--mesh cp=N) needs fused attention; drop "
          "--no-fused-attention");
    options.kernels.fusedAttention = true;
  } else if (args->has("cp-attention") || args->has("no-cp-load-balance")) {
    return invalid(
        "dtc compile: --cp-attention and --no-cp-load-balance need a cp axis (--mesh cp=N)");
  }
  uint64_t& memoryBudget = request.memoryBudget;
  if (args->has("memory")) {
    const std::string text = args->str("memory");
    char* end = nullptr;
    const double gib = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !(gib > 0) || gib > 1e9)
      return invalid("dtc compile: --memory wants a positive number of GiB per rank, got '" + text +
                     "'");
    memoryBudget = static_cast<uint64_t>(gib * static_cast<double>(1ull << 30));
  }
  if (options.memory.recompute == "auto" && !memoryBudget)
    return invalid("dtc compile: --recompute auto needs --memory GiB (the budget per rank)");
  options.scheduleTracePath = args->str("schedule-trace");
  if (options.pipeline.pipelineStages == 0)
    for (const char* flag : {"schedule", "virtual-stages", "stage-cuts", "schedule-trace"})
      if (args->has(flag))
        return invalid(std::string("dtc compile: --") + flag + " needs a pipeline (--mesh pp=N)");

  // An ONNX model is translated at the batch the importer sees: one micro-batch's.
  request.onnx.batch =
      options.pipeline.microBatches > 0 && options.batchSize % options.pipeline.microBatches == 0
          ? options.batchSize / options.pipeline.microBatches
          : options.batchSize;
  request.onnx.loss = args->str("loss");
  request.onnx.target = args->str("target");
  request.onnx.acceptEvalExport = args->has("eval-export");
  request.onnx.buffers = args->all("buffer");
  if (llvm::Error e = onnx_import::parsePaddingIdx(args->all("padding-idx"), request.onnx))
    return invalid("dtc compile: " + llvm::toString(std::move(e)));
  auto ctx = args->integer("ctx", 0);
  if (!ctx.ok()) return ctx.status();
  if (args->has("ctx") && *ctx <= 0) return invalid("dtc compile: --ctx must be positive");
  request.folder.ctx = *ctx;
  request.model = args->positionals()[0];
  return request;
}

StatusOr<CompileRequest> parseCompileArgs(const std::vector<std::string>& args) {
  std::vector<std::string> owned = {"dtc", "compile"};
  owned.insert(owned.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : owned) argv.push_back(s.data());
  return parseCompileArgs(static_cast<int>(argv.size()), argv.data());
}

}  // namespace dtc
