#include "planner/CompileRequest.h"

#include <cstdlib>
#include <optional>
#include <set>
#include <string>

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"

#include "dist/IR/LayoutText.h"
#include "ops/device_kind.h"
#include "plan/plan.h"
#include "planner/MemoryFit.h"
#include "source/ModelSource.h"
#include "support/args.h"

namespace dtc {
namespace {

Status invalid(const std::string& message) { return Status::InvalidInput(message); }

}  // namespace

std::string describe(mlir::Location loc) {
  if (auto name = mlir::dyn_cast<mlir::NameLoc>(loc)) {
    std::string child = describe(name.getChildLoc());
    return (child.empty() ? "" : child + ": ") + "node '" + name.getName().str() + "'";
  }
  if (auto file = mlir::dyn_cast<mlir::FileLineColLoc>(loc)) return file.getFilename().str();
  if (auto fused = mlir::dyn_cast<mlir::FusedLoc>(loc))
    if (!fused.getLocations().empty()) return describe(fused.getLocations().front());
  return "";
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

// Whether mesh "dp=2,tp=4" has axis `axis`.
static bool namesAxisIn(llvm::StringRef mesh, llvm::StringRef axis) {
  llvm::Expected<std::vector<dist::MeshAxisText>> axes = dist::parseMeshText(mesh);
  if (!axes) {
    llvm::consumeError(axes.takeError());
    return false;
  }
  for (const dist::MeshAxisText& a : *axes)
    if (a.name == axis) return true;
  return false;
}

namespace {

// `--flag`'s value against the range its pipeline option declares (driver/PipelineOptions.def).
Status checkRange(const char* flag, const char* option, double value) {
  const OptionRange* range = pipelineOptionRange(option);
  if (!range || (value == value && range->contains(value))) return Status::Ok();
  return invalid(std::string("dtc compile: --") + flag + " must be " + range->text(value));
}

// The value the command line resolves itself before the pipeline sees an option: --recompute
// auto (the least recomputation that fits --memory).
llvm::StringRef resolvedByDriver(llvm::StringRef option) {
  return option == "recompute" ? "auto" : "";
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

namespace {

std::string shown(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}
std::string shown(int64_t v) { return std::to_string(v); }
std::string shown(const std::string& v) { return v; }
std::string shown(bool) { return ""; }

// "--zero 0|1|2|3", "--recompute none|full|selective|auto", "--lr F".
std::string flagValues(const char* name, llvm::StringRef kind) {
  if (const OptionChoices* choices = pipelineOptionChoices(name)) {
    std::string out = choices->values;  // already "a|b|c"
    if (llvm::StringRef extra = resolvedByDriver(name); !extra.empty()) out += "|" + extra.str();
    return out;
  }
  if (const OptionRange* range = pipelineOptionRange(name);
      range && range->integer && range->max - range->min <= 4) {
    std::string out;
    for (double v = range->min; v <= range->max; ++v) out += (out.empty() ? "" : "|") + shown(v);
    return out;
  }
  return kind == "Real" ? "F" : kind == "Int" ? "N" : "VALUE";
}

}  // namespace

std::string compileOptionsHelp() {
  std::string out = "Options by group (default):\n";
  const CompileOptions defaults;
  const char* group = "";  // the group's title until its first flag prints it
  auto line = [&](const char* flag, const char* name, const char* kind, const char* help,
                  const std::string& initial) {
    if (!*flag) return;
    if (*group) out += std::string("  ") + group + ":\n";
    group = "";
    constexpr size_t kColumn = 36;
    std::string head = std::string("    --") + flag + " " + flagValues(name, kind);
    head = head.size() < kColumn ? head + std::string(kColumn - head.size(), ' ')
                                 : head + "\n" + std::string(kColumn, ' ');
    out += head + help + (initial.empty() ? "" : " (" + initial + ")") + "\n";
  };
#define DTC_GROUP_BEGIN(member, Type, help) group = help;
#define DTC_OPTION(Kind, field, name, flag, initial, min, max, help) \
  line(flag, name, #Kind, help, shown(defaults.DTC_GROUP.field));
#include "driver/PipelineOptions.def"
  return out;
}

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
  for (const std::string& spec : args->all("shard")) {
    if (spec.find(';') != std::string::npos)
      return invalid("dtc compile: one PATTERN=SPEC per --shard, got '" + spec + "'");
    options.parallel.shard += (options.parallel.shard.empty() ? "" : ";") + spec;
  }
  if (args->has("mesh")) {
    // name=size[,name=size…]: dp is data parallelism (dp_replicate: replicas of it that ZeRO
    // does not shard over); other axes split what --shard says.
    options.parallel.mesh = args->str("mesh");
    llvm::Expected<std::vector<dist::MeshAxisText>> axes =
        dist::parseMeshText(options.parallel.mesh);
    if (!axes) return invalid("dtc compile: --" + llvm::toString(axes.takeError()));
    for (const dist::MeshAxisText& axis : *axes) {
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
  if (options.parallel.sequenceParallel && !namesAxisIn(options.parallel.mesh, "tp"))
    return invalid("dtc compile: --sequence-parallel needs a tp axis (--mesh tp=N)");
  // Megatron's splits come with the vocabulary split, which saves memory (the table and the
  // logits are split too); --no-vocab-parallel keeps them whole.
  options.parallel.vocabParallel =
      args->has("vocab-parallel") ||
      (!options.parallel.megatron.empty() && !args->has("no-vocab-parallel"));
  if (args->has("vocab-parallel") && args->has("no-vocab-parallel"))
    return invalid("dtc compile: --vocab-parallel and --no-vocab-parallel contradict each other");
  if (options.parallel.vocabParallel && !namesAxisIn(options.parallel.mesh, "tp"))
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

namespace {

// "dtc: m.onnx: trains 6 tensors (13002 values); keeps as buffers (not trained): scale".
void describeTraining(const ModelFile& model) {
  size_t trained = 0;
  uint64_t values = 0;
  std::vector<std::string> buffers;
  if (const auto* inits = model.model().graph()->initializers())
    for (const model::Initializer* init : *inits) {
      if (init->constant()) continue;
      if (!init->trainable()) {
        buffers.push_back(init->info()->name()->str());
        continue;
      }
      ++trained;
      uint64_t n = 1;
      if (init->info()->shape())
        for (int64_t d : *init->info()->shape()) n *= static_cast<uint64_t>(d);
      values += n;
    }
  llvm::outs() << "dtc: " << model.name() << ": trains " << trained << " tensors (" << values
               << " values)";
  if (!buffers.empty()) {
    llvm::outs() << "; keeps as buffers (not trained):";
    for (size_t i = 0; i < buffers.size() && i < 8; ++i)
      llvm::outs() << (i ? ", " : " ") << buffers[i];
    if (buffers.size() > 8) llvm::outs() << " and " << buffers.size() - 8 << " more";
  }
  llvm::outs() << "; --buffer GLOB keeps a tensor untrained\n";
}

}  // namespace

StatusOr<std::vector<uint8_t>> compilePlan(const CompileRequest& request) {
  CompileOptions options = request.options;
  std::string built;
  // Explore's copies are compiled in place: copying one would copy its initializers' data.
  std::optional<ModelFile> read;
  const ModelFile* model = request.loaded.get();
  if (!model) {
    llvm::Expected<ModelFile> file =
        readModelSource(request.model, request.onnx, request.folder, &built);
    if (!file) return Status::InvalidInput(llvm::toString(file.takeError()));
    read.emplace(std::move(*file));
    model = &*read;
  }
  // An ONNX export does not say which of its tensors are parameters: say what will train, and
  // what else its translation decided. A folder's model: what its config built, and the window
  // it trains on.
  if (!request.loaded && !options.trial && isOnnxFile(request.model)) describeTraining(*model);
  if (!built.empty() && !options.trial) {
    if (hf::isModelFolder(request.model)) {
      llvm::outs() << "dtc: " << request.model << ": " << built
                   << " (--ctx sets the training window)\n";
    } else {
      llvm::SmallVector<llvm::StringRef> lines;
      llvm::StringRef(built).split(lines, '\n');
      for (llvm::StringRef line : lines) llvm::outs() << "dtc: " << line << "\n";
    }
  }
  mlir::MLIRContext ctx(request.threaded ? mlir::MLIRContext::Threading::ENABLED
                                         : mlir::MLIRContext::Threading::DISABLED);
  std::string firstError;
  std::vector<std::string> remarks;  // what the passes chose, said after the final compile
  mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic& diag) {
    if (diag.getSeverity() == mlir::DiagnosticSeverity::Remark) remarks.push_back(diag.str());
    if (diag.getSeverity() == mlir::DiagnosticSeverity::Error && firstError.empty()) {
      std::string where = describe(diag.getLocation());
      firstError = (where.empty() ? "" : where + ": ") + diag.str();
    }
    return mlir::success();
  });
  auto compileWith = [&](const std::string& recompute) -> StatusOr<std::vector<uint8_t>> {
    options.memory.recompute = recompute;
    remarks.clear();
    std::vector<uint8_t> bytes;
    if (mlir::failed(compileModel(ctx, *model, options, bytes)))
      return Status::InvalidInput(firstError.empty() ? "compilation failed" : firstError);
    return bytes;
  };
  if (options.memory.recompute == "auto") {
    std::string chosenReport;
    options.trial = true;
    DTC_ASSIGN_OR_RETURN(std::string chosen,
                         chooseRecompute(compileWith, request.memoryBudget, chosenReport));
    llvm::outs() << chosenReport << "\n";
    options.memory.recompute = chosen;
    options.trial = false;
  }
  DTC_ASSIGN_OR_RETURN(std::vector<uint8_t> plan, compileWith(options.memory.recompute));
  if (!options.trial)
    for (const std::string& remark : remarks) llvm::outs() << "dtc: " << remark << "\n";
  if (request.memoryBudget) {
    DTC_ASSIGN_OR_RETURN(Plan loaded, Plan::fromFileBytes(plan, "the compiled plan"));
    if (Status fits = checkFits(loaded, request.memoryBudget); !fits.ok())
      return Status::InvalidInput("dtc compile: " + fits.message());
  }
  return plan;
}

}  // namespace dtc
