// dtc: the compiler driver. Subcommands: zoo (write a built-in model), compile (model -> plan),
// inspect (summarise a plan). Errors: one line on stderr, exit 2 for bad input.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/MLIRContext.h"

#include "driver/Compile.h"
#include "flatbuffers/ModelFile.h"
#include "flatbuffers/ModelImporter.h"
#include "flatbuffers/model_version.h"
#include "memory_fit.h"
#include "onnx/ModelSource.h"
#include "onnx/OnnxImport.h"
#include "plan/plan.h"
#include "plan/plan_format.h"
#include "plan/summary.h"
#include "support/args.h"
#include "zoo/Zoo.h"

namespace {

// Each subcommand's usage, with its defaults; `dtc SUBCOMMAND --help` prints one, `dtc --help`
// all of them.
#define DTC_ZOO_USAGE                                                                             \
  "  dtc zoo mlp [--input N] [--hidden A,B,...] [--classes N] [--seed S] -o MODEL.dtm\n"          \
  "  dtc zoo gpt [--vocab V] [--ctx T] [--layers L] [--heads H] [--embd C] [--seed S] -o M.dtm\n" \
  "  dtc zoo convnet [--classes N] [--seed S] -o MODEL.dtm\n"                                     \
  "      writes a built-in model in the FlatBuffers model format (docs/model-format.md):\n"       \
  "      mlp --input 784 --hidden 256,128 --classes 10; gpt --vocab 256 --ctx 64 --layers 2\n"    \
  "      --heads 4 --embd 64; convnet --classes 10 (28x28 images); --seed 0\n"

#define DTC_COMPILE_USAGE                                                                       \
  "  dtc compile MODEL.dtm|MODEL.onnx -o PLAN.dtp --batch N [--optimizer sgd|adamw] [--lr F]\n" \
  "              [--loss NAME | --loss cross-entropy|mse --target INPUT]   (ONNX models)\n"     \
  "              [--momentum F] [--weight-decay F] [--beta1 F] [--beta2 F] [--eps F]\n"         \
  "              [--no-decay GLOB]... [--lr-schedule constant|cosine|linear\n"                  \
  "              [--warmup-steps W] [--decay-steps D] [--min-lr F]]\n"                          \
  "              [--clip-grad-norm F] [--log-grad-norm]\n"                                      \
  "              [--mesh dp=N[,tp=M]] [--shard PATTERN=SPEC]... [--zero 0|1|2|3]\n"             \
  "              [--sequence-parallel] [--[no-]vocab-parallel] [--bucket-mb F]\n"               \
  "              [--recompute none|full|selective|auto] [--memory GiB]\n"                       \
  "              [--accumulate K] [--mesh ...,pp=P --microbatches M\n"                          \
  "              [--schedule gpipe|1f1b|interleaved] [--virtual-stages V]\n"                    \
  "              [--stage-cuts NODE,...] [--schedule-trace FILE.json]]\n"                       \
  "              [--device cpu|cuda] [--precision fp32|bf16|fp16 [--loss-scale F]]\n"           \
  "              [--[no-]fused-attention] [--[no-]fuse-epilogues] [--no-fold-casts]\n"          \
  "              [--dump-ir DIR]\n"                                                             \
  "\n"                                                                                          \
  "An ONNX model (torch.onnx.export, opsets 13-17) is recognised by content and translated;\n"  \
  "its loss is its one scalar output, --loss NAME, or for a forward-only export --loss\n"       \
  "cross-entropy|mse against --target INPUT, a data input that --loss adds.\n"                  \
  "Optimizer defaults are torch.optim's: --lr 0.001; SGD momentum 0 and weight decay 0;\n"      \
  "AdamW betas (0.9, 0.999), eps 1e-8 and weight decay 0.01. --no-decay takes globs over\n"     \
  "parameter names ('*.bias', '*ln_*') whose updates apply no weight decay. The learning\n"     \
  "rate of update s (0-based): constant lr; cosine: lr*(s+1)/W during warmup, then down to\n"   \
  "--min-lr at update D along half a cosine; linear: lr*s/W, then lr*(D-s)/(D-W) down to 0.\n"  \
  "--clip-grad-norm F scales the gradients as torch.nn.utils.clip_grad_norm_(params, F);\n"     \
  "the step then reports the global gradient norm (--log-grad-norm: without clipping).\n"       \
  "Partitioning: --zero 0, --bucket-mb 25, --accumulate 1, --microbatches 1, --schedule\n"      \
  "1f1b, --virtual-stages 1; --precision fp32 (fp16: --loss-scale 65536, GradScaler's).\n"
#define DTC_IMPORT_USAGE                                                                       \
  "  dtc import MODEL.onnx -o MODEL.dtm [--batch N] [--loss NAME | --loss cross-entropy|mse\n" \
  "             --target INPUT]\n"                                                             \
  "      an ONNX export as a dtc model file that compiles at any batch (shapes folded at\n"    \
  "      --batch, default 2, and one more to find the batch's dimensions)\n"
#define DTC_INSPECT_USAGE                                                                        \
  "  dtc inspect PLAN.dtp [--json]\n"                                                            \
  "      what a plan holds: mesh, optimizer, schedule, memory, functions and their ops, state\n" \
  "      tensors; --json for programs\n"

#define DTC_OPS_USAGE                                                                     \
  "  dtc ops [--onnx]\n"                                                                  \
  "      the model op types dtc imports, one per line, with the attributes each takes;\n" \
  "      --onnx: the ONNX op types it translates on their own\n"

constexpr const char kUsage[] =
    "usage:\n" DTC_ZOO_USAGE DTC_COMPILE_USAGE "\n" DTC_IMPORT_USAGE DTC_INSPECT_USAGE DTC_OPS_USAGE
    "  dtc --version\n";

// `dtc SUBCOMMAND ... --help`: that subcommand's usage.
const char* subcommandUsage(const std::string& command) {
  if (command == "zoo") return "usage:\n" DTC_ZOO_USAGE;
  if (command == "compile") return "usage:\n" DTC_COMPILE_USAGE;
  if (command == "inspect") return "usage:\n" DTC_INSPECT_USAGE;
  if (command == "import") return "usage:\n" DTC_IMPORT_USAGE;
  if (command == "ops") return "usage:\n" DTC_OPS_USAGE;
  return nullptr;
}

int fail(const std::string& message, int code = 2) {
  std::fprintf(stderr, "dtc: error: %s\n", message.c_str());
  return code;
}

int fail(const dtc::Status& status) { return fail(status.message(), status.exitCode()); }

// "model.dtm: node 'fc0'" for importer locations, the file alone for file locations.
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

int writeModel(const dtc::Args& args, const std::vector<uint8_t>& bytes) {
  if (llvm::Error e = dtc::writeFileAtomically(args.str("output"), bytes.data(), bytes.size()))
    return fail(llvm::toString(std::move(e)));
  return 0;
}

int runZooMlp(int argc, char** argv) {
  auto args = dtc::Args::parse(argc, argv, 3, {"input", "hidden", "classes", "seed", "output"}, {});
  if (!args.ok()) return fail(args.status());
  dtc::zoo::MlpOptions options;
  auto input = args->integer("input", options.input);
  auto classes = args->integer("classes", options.classes);
  auto seed = args->integer("seed", 0);
  auto hidden = args->integers("hidden", options.hidden);
  for (const dtc::Status& s : {input.status(), classes.status(), seed.status(), hidden.status()})
    if (!s.ok()) return fail(s);
  if (*input <= 0 || *classes <= 0) return fail("--input and --classes must be positive");
  for (int64_t h : *hidden)
    if (h <= 0) return fail("--hidden sizes must be positive");
  if (!args->has("output")) return fail("dtc zoo: missing -o MODEL.dtm");
  options.input = *input;
  options.classes = *classes;
  options.hidden = *hidden;
  options.seed = static_cast<uint64_t>(*seed);
  return writeModel(*args, dtc::zoo::buildMlp(options));
}

int runZooGpt(int argc, char** argv) {
  auto args = dtc::Args::parse(argc, argv, 3,
                               {"vocab", "ctx", "layers", "heads", "embd", "seed", "output"}, {});
  if (!args.ok()) return fail(args.status());
  dtc::zoo::GptOptions o;
  for (auto [flag, field] : {std::pair{"vocab", &o.vocab},
                             {"ctx", &o.ctx},
                             {"layers", &o.layers},
                             {"heads", &o.heads},
                             {"embd", &o.embd}}) {
    auto v = args->integer(flag, *field);
    if (!v.ok()) return fail(v.status());
    *field = *v;
  }
  auto seed = args->integer("seed", 0);
  if (!seed.ok()) return fail(seed.status());
  o.seed = static_cast<uint64_t>(*seed);
  if (std::string error = dtc::zoo::validateGpt(o); !error.empty()) return fail(error);
  if (!args->has("output")) return fail("dtc zoo: missing -o MODEL.dtm");
  return writeModel(*args, dtc::zoo::buildGpt(o));
}

int runZooConvNet(int argc, char** argv) {
  auto args = dtc::Args::parse(argc, argv, 3, {"classes", "seed", "output"}, {});
  if (!args.ok()) return fail(args.status());
  dtc::zoo::ConvNetOptions o;
  auto classes = args->integer("classes", o.classes);
  auto seed = args->integer("seed", 0);
  for (const dtc::Status& s : {classes.status(), seed.status()})
    if (!s.ok()) return fail(s);
  if (*classes <= 0) return fail("--classes must be positive");
  if (!args->has("output")) return fail("dtc zoo: missing -o MODEL.dtm");
  o.classes = *classes;
  o.seed = static_cast<uint64_t>(*seed);
  return writeModel(*args, dtc::zoo::buildConvNet(o));
}

int runZoo(int argc, char** argv) {
  std::string model = argc >= 3 ? argv[2] : "";
  if (model == "mlp") return runZooMlp(argc, argv);
  if (model == "gpt") return runZooGpt(argc, argv);
  if (model == "convnet") return runZooConvNet(argc, argv);
  return fail("dtc zoo: unknown model '" + model + "' (available: mlp, gpt, convnet)");
}

// Whether some PATTERN=SPEC of "a=tp,-;b=dp+tp" names mesh axis `axis` in its SPEC.
bool namesAxis(llvm::StringRef specs, llvm::StringRef axis) {
  llvm::SmallVector<llvm::StringRef> items, tokens;
  specs.split(items, ';');
  for (llvm::StringRef item : items) {
    tokens.clear();
    item.split('=').second.split(tokens, ',');
    for (llvm::StringRef dim : tokens) {
      dim = dim.trim();
      // "3xtp": chunks, then the axes.
      size_t digits = dim.find_first_not_of("0123456789");
      if (digits != 0 && digits != llvm::StringRef::npos && dim[digits] == 'x')
        dim = dim.drop_front(digits + 1);
      llvm::SmallVector<llvm::StringRef> axes;
      dim.split(axes, '+');
      for (llvm::StringRef a : axes)
        if (a.trim() == axis) return true;
    }
  }
  return false;
}

// Whether mesh "dp=2,tp=4" has axis `axis`.
bool namesAxisIn(llvm::StringRef mesh, llvm::StringRef axis) {
  llvm::SmallVector<llvm::StringRef> axes;
  mesh.split(axes, ',');
  for (llvm::StringRef a : axes)
    if (a.split('=').first == axis) return true;
  return false;
}

int runCompile(int argc, char** argv) {
  auto args = dtc::Args::parse(argc, argv, 2, {"output",       "batch",          "optimizer",
                                               "lr",           "momentum",       "weight-decay",
                                               "beta1",        "beta2",          "eps",
                                               "dump-ir",      "mesh",           "zero",
                                               "bucket-mb",    "accumulate",     "shard",
                                               "microbatches", "schedule",       "virtual-stages",
                                               "stage-cuts",   "schedule-trace", "device",
                                               "precision",    "loss-scale",     "no-decay",
                                               "lr-schedule",  "warmup-steps",   "decay-steps",
                                               "min-lr",       "clip-grad-norm", "loss",
                                               "target",       "recompute",      "memory"},
                               {"log-grad-norm", "sequence-parallel", "vocab-parallel",
                                "no-vocab-parallel", "fused-attention", "no-fused-attention",
                                "fuse-epilogues", "no-fuse-epilogues", "no-fold-casts"},
                               {"no-decay", "shard"});
  if (!args.ok()) return fail(args.status());
  if (args->positionals().size() != 1) return fail("dtc compile: expected one model file");
  if (!args->has("output")) return fail("dtc compile: missing -o PLAN.dtp");
  dtc::CompileOptions options;
  auto batch = args->integer("batch", 0);
  if (!batch.ok()) return fail(batch.status());
  if (*batch <= 0) return fail("dtc compile: --batch N (N > 0) is required");
  options.batchSize = *batch;
  options.optimizer = args->str("optimizer", "sgd");
  for (auto [flag, field] : {std::pair{"lr", &options.lr},
                             {"momentum", &options.momentum},
                             {"weight-decay", &options.weightDecay},
                             {"beta1", &options.beta1},
                             {"beta2", &options.beta2},
                             {"eps", &options.eps},
                             {"min-lr", &options.minLr},
                             {"clip-grad-norm", &options.clipGradNorm}}) {
    auto v = args->number(flag, *field);
    if (!v.ok()) return fail(v.status());
    *field = *v;
  }
  for (auto [flag, field] :
       {std::pair{"warmup-steps", &options.warmupSteps}, {"decay-steps", &options.decaySteps}}) {
    auto v = args->integer(flag, *field);
    if (!v.ok()) return fail(v.status());
    *field = *v;
  }
  options.lrSchedule = args->str("lr-schedule", "constant");
  if (options.lrSchedule != "constant" && options.lrSchedule != "cosine" &&
      options.lrSchedule != "linear")
    return fail("dtc compile: --lr-schedule must be constant, cosine or linear, got '" +
                options.lrSchedule + "'");
  if (options.lrSchedule != "constant" && !args->has("decay-steps"))
    return fail("dtc compile: --lr-schedule " + options.lrSchedule +
                " needs --decay-steps D (the update where the decay ends)");
  if (!(options.clipGradNorm >= 0)) return fail("dtc compile: --clip-grad-norm must be >= 0");
  options.reportGradNorm = args->has("log-grad-norm");
  options.noDecay = args->all("no-decay");
  options.dumpIrDir = args->str("dump-ir");
  options.device = args->str("device", "cpu");
  options.precision = args->str("precision", "fp32");
  // Flash-style attention (no [T, T] scores kept) and GEMM epilogues (bias, GELU) are on by
  // default for CUDA plans, where they save memory passes; off for the CPU, whose batched GEMMs
  // beat the attention loops at long contexts and whose kernels gain nothing from epilogues.
  for (const char* feature : {"fused-attention", "fuse-epilogues"})
    if (args->has(feature) && args->has(std::string("no-") + feature))
      return fail(std::string("dtc compile: --") + feature + " and --no-" + feature +
                  " contradict each other");
  const bool gpu = options.device == "cuda";
  options.fusedAttention =
      args->has("fused-attention") || (gpu && !args->has("no-fused-attention"));
  options.fuseEpilogues = args->has("fuse-epilogues") || (gpu && !args->has("no-fuse-epilogues"));
  options.foldCasts = !args->has("no-fold-casts");  // exact; off only to compare
  if (options.precision != "fp32" && options.precision != "bf16" && options.precision != "fp16")
    return fail("dtc compile: --precision must be fp32, bf16 or fp16, got '" + options.precision +
                "'");
  auto lossScale = args->number("loss-scale", options.lossScale);
  if (!lossScale.ok()) return fail(lossScale.status());
  if (!(*lossScale > 0)) return fail("dtc compile: --loss-scale must be > 0");
  if (args->has("loss-scale") && options.precision != "fp16")
    return fail("dtc compile: --loss-scale is for --precision fp16 (dynamic loss scaling)");
  options.lossScale = *lossScale;
  if (options.device != "cpu" && options.device != "cuda")
    return fail("dtc compile: --device must be cpu or cuda, got '" + options.device + "'");
  for (const std::string& spec : args->all("shard")) {
    if (spec.find(';') != std::string::npos)
      return fail("dtc compile: one PATTERN=SPEC per --shard, got '" + spec + "'");
    options.shard += (options.shard.empty() ? "" : ";") + spec;
  }
  if (args->has("mesh")) {
    // name=size[,name=size…]: dp is data parallelism (dp_replicate: replicas of it that ZeRO
    // does not shard over); other axes split what --shard says.
    options.mesh = args->str("mesh");
    llvm::SmallVector<llvm::StringRef> axes;
    llvm::StringRef(options.mesh).split(axes, ',');
    for (llvm::StringRef axis : axes) {
      auto [name, size] = axis.split('=');
      int64_t n = 0;
      if (name.empty() || size.getAsInteger(10, n) || n < 1)
        return fail("dtc compile: --mesh wants name=size[,name=size], got '" + options.mesh + "'");
      if (name == "dp") {
        options.dataParallel = n;
      } else if (name == "dp_replicate") {
        options.dataReplicate = n;
      } else if (name == "pp") {
        if (namesAxis(options.shard, name))
          return fail(
              "dtc compile: mesh axis pp holds pipeline stages; --shard cannot split over it");
        options.pipelineStages = n;
      } else if (name == "tp" && !namesAxis(options.shard, name)) {
        options.megatron = "tp";  // Megatron's GPT-2 splits, unless the user gives their own
      } else if (!namesAxis(options.shard, name)) {
        return fail("dtc compile: mesh axis '" + name.str() +
                    "' splits nothing: give --shard PATTERN=SPEC naming it");
      }
    }
  } else if (!options.shard.empty()) {
    return fail("dtc compile: --shard needs --mesh");
  }
  options.sequenceParallel = args->has("sequence-parallel");
  if (options.sequenceParallel && !namesAxisIn(options.mesh, "tp"))
    return fail("dtc compile: --sequence-parallel needs a tp axis (--mesh tp=N)");
  // Megatron's splits come with the vocabulary split, which saves memory (the table and the
  // logits are split too); --no-vocab-parallel keeps them whole.
  options.vocabParallel =
      args->has("vocab-parallel") || (!options.megatron.empty() && !args->has("no-vocab-parallel"));
  if (args->has("vocab-parallel") && args->has("no-vocab-parallel"))
    return fail("dtc compile: --vocab-parallel and --no-vocab-parallel contradict each other");
  if (options.vocabParallel && !namesAxisIn(options.mesh, "tp"))
    return fail("dtc compile: --vocab-parallel needs a tp axis (--mesh tp=N)");
  auto zero = args->integer("zero", 0);
  if (!zero.ok()) return fail(zero.status());
  if (*zero < 0 || *zero > 3) return fail("dtc compile: --zero must be 0, 1, 2 or 3");
  options.zeroStage = *zero;
  options.recompute = args->str("recompute", "none");
  if (options.recompute != "none" && options.recompute != "full" &&
      options.recompute != "selective" && options.recompute != "auto")
    return fail("dtc compile: --recompute must be none, full, selective or auto, got '" +
                options.recompute + "'");
  uint64_t memoryBudget = 0;  // bytes per rank; 0: no budget
  if (args->has("memory")) {
    const std::string text = args->str("memory");
    char* end = nullptr;
    const double gib = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !(gib > 0) || gib > 1e9)
      return fail("dtc compile: --memory wants a positive number of GiB per rank, got '" + text +
                  "'");
    memoryBudget = static_cast<uint64_t>(gib * static_cast<double>(1ull << 30));
  }
  if (options.recompute == "auto" && !memoryBudget)
    return fail("dtc compile: --recompute auto needs --memory GiB (the budget per rank)");
  auto bucket = args->number("bucket-mb", options.bucketMb);
  if (!bucket.ok()) return fail(bucket.status());
  if (*bucket < 0) return fail("dtc compile: --bucket-mb must be >= 0");
  options.bucketMb = *bucket;
  auto accumulate = args->integer("accumulate", 1);
  if (!accumulate.ok()) return fail(accumulate.status());
  if (*accumulate < 1) return fail("dtc compile: --accumulate must be >= 1");
  options.accumulate = *accumulate;
  auto micro = args->integer("microbatches", 1);
  if (!micro.ok()) return fail(micro.status());
  if (*micro < 1) return fail("dtc compile: --microbatches must be >= 1");
  options.microBatches = *micro;
  auto virtualStages = args->integer("virtual-stages", 1);
  if (!virtualStages.ok()) return fail(virtualStages.status());
  options.virtualStages = *virtualStages;
  options.schedule = args->str("schedule", "1f1b");
  options.stageCuts = args->str("stage-cuts");
  options.scheduleTracePath = args->str("schedule-trace");
  if (options.pipelineStages == 0)
    for (const char* flag : {"schedule", "virtual-stages", "stage-cuts", "schedule-trace"})
      if (args->has(flag))
        return fail(std::string("dtc compile: --") + flag + " needs a pipeline (--mesh pp=N)");

  // An ONNX model is translated at the batch the importer sees: one micro-batch's.
  dtc::onnx_import::TranslateOptions onnx;
  onnx.batch = options.microBatches > 0 && options.batchSize % options.microBatches == 0
                   ? options.batchSize / options.microBatches
                   : options.batchSize;
  onnx.loss = args->str("loss");
  onnx.target = args->str("target");
  auto model = dtc::readModelSource(args->positionals()[0], onnx);
  if (!model) return fail(llvm::toString(model.takeError()));

  mlir::MLIRContext ctx;
  std::string firstError;
  mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic& diag) {
    if (diag.getSeverity() == mlir::DiagnosticSeverity::Error && firstError.empty()) {
      std::string where = describe(diag.getLocation());
      firstError = (where.empty() ? "" : where + ": ") + diag.str();
    }
    return mlir::success();
  });
  auto compileWith = [&](const std::string& recompute) -> dtc::StatusOr<std::vector<uint8_t>> {
    options.recompute = recompute;
    std::vector<uint8_t> bytes;
    if (mlir::failed(dtc::compileModel(ctx, *model, options, bytes)))
      return dtc::Status::InvalidInput(firstError.empty() ? "compilation failed" : firstError);
    return bytes;
  };
  if (options.recompute == "auto") {
    std::string report;
    options.trial = true;
    auto chosen = dtc::chooseRecompute(compileWith, memoryBudget, report);
    if (!chosen.ok()) return fail(chosen.status());
    llvm::outs() << report << "\n";
    options.recompute = *chosen;
    options.trial = false;
  }
  auto plan = compileWith(options.recompute);
  if (!plan.ok()) return fail(plan.status());
  if (memoryBudget) {
    auto loaded = dtc::Plan::fromFileBytes(*plan, "the compiled plan");
    if (!loaded.ok()) return fail(loaded.status());
    if (dtc::Status fits = dtc::checkFits(*loaded, memoryBudget); !fits.ok())
      return fail("dtc compile: " + fits.message());
  }
  if (llvm::Error e = dtc::writeFileAtomically(args->str("output"), plan->data(), plan->size()))
    return fail(llvm::toString(std::move(e)));
  return 0;
}

int runImport(int argc, char** argv) {
  auto args = dtc::Args::parse(argc, argv, 2, {"output", "batch", "loss", "target"}, {});
  if (!args.ok()) return fail(args.status());
  if (args->positionals().size() != 1) return fail("dtc import: expected one ONNX file");
  if (!args->has("output")) return fail("dtc import: missing -o MODEL.dtm");
  const std::string& path = args->positionals()[0];
  if (!dtc::isOnnxFile(path))
    return fail(path + " is not an ONNX file (it is a dtc model already, or unreadable)");
  auto batch = args->integer("batch", 0);
  if (!batch.ok()) return fail(batch.status());
  if (*batch < 0) return fail("dtc import: --batch must be positive");
  dtc::onnx_import::TranslateOptions options;
  options.batch = *batch;
  options.loss = args->str("loss");
  options.target = args->str("target");
  auto model = dtc::onnx_import::OnnxModel::read(path);
  if (!model) return fail(llvm::toString(model.takeError()));
  auto bytes = dtc::onnx_import::importOnnx(*model, options);
  if (!bytes) return fail(llvm::toString(bytes.takeError()));
  return writeModel(*args, *bytes);
}

int runInspect(int argc, char** argv) {
  auto args = dtc::Args::parse(argc, argv, 2, {}, {"json"});
  if (!args.ok()) return fail(args.status());
  if (args->positionals().size() != 1) return fail("dtc inspect: expected one plan file");
  auto plan = dtc::Plan::load(args->positionals()[0]);
  if (!plan.ok()) return fail(plan.status());
  std::string text =
      args->has("json") ? dtc::summarizePlanJson(*plan) : dtc::summarizePlanText(*plan);
  std::fputs(text.c_str(), stdout);
  return 0;
}

int runOps(int argc, char** argv) {
  auto args = dtc::Args::parse(argc, argv, 2, {}, {"onnx"});
  if (!args.ok()) return fail(args.status());
  if (!args->positionals().empty()) return fail("dtc ops: takes no arguments but --onnx");
  if (args->has("onnx")) {
    for (const std::string& op : dtc::onnx_import::translatedOps()) std::puts(op.c_str());
    return 0;
  }
  for (const dtc::ImportableOp& op : dtc::importableOps()) {
    std::string line = op.type;
    for (const std::string& attribute : op.attributes) line += " " + attribute;
    std::puts(line.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!std::strcmp(argv[1], "--version")) {
    std::printf("dtc %s (model format %u, plan format %u)\n", DTC_VERSION, dtc::kModelVersion,
                dtc::kPlanVersion);
    return 0;
  }
  std::string command = argv[1];
  for (int i = 2; i < argc; ++i)
    if (const char* usage = subcommandUsage(command);
        usage && (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h"))) {
      std::fputs(usage, stdout);
      return 0;
    }
  if (command == "zoo") return runZoo(argc, argv);
  if (command == "compile") return runCompile(argc, argv);
  if (command == "inspect") return runInspect(argc, argv);
  if (command == "import") return runImport(argc, argv);
  if (command == "ops") return runOps(argc, argv);
  return fail("unknown command '" + command + "'\n" + kUsage);
}
