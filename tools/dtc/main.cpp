// dtc: the compiler driver. Subcommands: zoo (write a built-in model), compile (model -> plan),
// inspect (summarise a plan). Errors: one line on stderr, exit 2 for bad input.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/MLIRContext.h"

#include "driver/Compile.h"
#include "hf/HfFolder.h"
#include "io/files.h"
#include "model/ModelFile.h"
#include "model/ModelImporter.h"
#include "model/model_version.h"
#include "onnx/OnnxImport.h"
#include "ops/device_kind.h"
#include "perf/step_time.h"
#include "planfile/function_names.h"
#include "planfile/plan.h"
#include "planfile/plan_format.h"
#include "planfile/summary.h"
#include "planner/AutoMesh.h"
#include "planner/CompileRequest.h"
#include "planner/Explore.h"
#include "source/ModelSource.h"
#include "support/args.h"
#include "zoo/ZooCommand.h"

namespace {

// Each subcommand's usage, with its defaults; `dtc SUBCOMMAND --help` prints one, `dtc --help`
// all of them.
#define DTC_ZOO_USAGE                                                                              \
  "  dtc zoo mlp [--input N] [--hidden A,B,...] [--classes N] [--seed S] -o MODEL.dtm\n"           \
  "  dtc zoo gpt [--vocab V] [--ctx T] [--layers L] [--heads H] [--embd C] [--seed S]\n"           \
  "            [--layout nanogpt|hf] [--experts E [--top-k K] [--capacity-factor F]\n"             \
  "            [--moe-every N] [--no-normalize-top-k] [--aux-loss-weight A]\n"                     \
  "            [--z-loss-weight Z] [--router-score softmax|sigmoid]] -o M.dtm\n"                   \
  "  dtc zoo llama [--vocab V] [--ctx T] [--layers L] [--heads H] [--kv-heads K] [--embd C]\n"     \
  "              [--ffn F] [--rope-theta R] [--rms-eps E] [--tie-embeddings] [--seed S]\n"         \
  "              [--experts E ... as gpt's] -o M.dtm\n"                                            \
  "  dtc zoo convnet [--classes N] [--seed S] -o MODEL.dtm\n"                                      \
  "  dtc zoo --from HF_DIR [--ctx T] [--seed S] -o MODEL.dtm\n"                                    \
  "      writes a built-in model in the FlatBuffers model format (docs/model-format.md):\n"        \
  "      mlp --input 784 --hidden 256,128 --classes 10; gpt --vocab 256 --ctx 64 --layers 2\n"     \
  "      --heads 4 --embd 64; llama as transformers' LlamaForCausalLM, --vocab 256 --ctx 64\n"     \
  "      --layers 2 --heads 4 --kv-heads H --embd 64 --ffn 176 (2/3 of 4C, to 16s) --rope-theta\n" \
  "      10000 --rms-eps 1e-6, head untied; convnet --classes 10 (28x28 images); --seed 0;\n"      \
  "      gpt/llama --experts: mixture-of-experts MLPs (GELU; llama: SwiGLU of --ffn, as\n"         \
  "      Mixtral's) in blocks 0, N, 2N... (--moe-every 1), top-2\n"                                \
  "      renormalised, capacity factor 1.25, aux-loss weight 0.01, z-loss weight 0.001\n"

#define DTC_COMPILE_USAGE                                                                        \
  "  dtc compile MODEL.dtm|MODEL.onnx|HF_DIR -o PLAN.dtp --batch N [--ctx T] [OPTION...]\n"      \
  "              [--loss NAME | --loss cross-entropy|mse --target INPUT] [--eval-export]\n"      \
  "              [--buffer GLOB]...   (ONNX: tensors kept, not trained)\n"                       \
  "              [--padding-idx TABLE=ROW|none]...   (ONNX: nn.Embedding's padding_idx,\n"       \
  "              dropped by the exporter: that row never trains; by default a table's one\n"     \
  "              zero row; none: no such row)\n"                                                 \
  "              [--no-decay GLOB]... [--log-grad-norm]\n"                                       \
  "              [--mesh [dp_replicate=R,]dp=N[,cp=C][,tp=M][,pp=P] | --mesh auto --devices N\n" \
  "              [--profile P]] [--no-cp-load-balance] [--shard PATTERN=SPEC]...\n"              \
  "              [--sequence-parallel] [--[no-]vocab-parallel] [--memory GiB]\n"                 \
  "              [--schedule-trace FILE.json] [--device cpu|cuda]\n"                             \
  "              [--[no-]fused-attention] [--[no-]fuse-epilogues] [--[no-]multi-tensor]\n"       \
  "              [--no-fold-casts] [--dump-ir DIR] [--pass-timing]\n"                            \
  "              OPTION: one of the options by group below, each listed once with its default\n" \
  "\n"                                                                                           \
  "A Hugging Face folder (config.json: llama, mistral, qwen2, mixtral, gpt2) builds the model\n" \
  "its config describes; --ctx T trains it on windows of T tokens (default and most: its\n"      \
  "max_position_embeddings); dtrun --init HF_DIR then reads its weights.\n"                      \
  "An ONNX model (torch.onnx.export, opsets 13-17) is recognised by content and translated;\n"   \
  "its loss is its one scalar output, --loss NAME, or for a forward-only export --loss\n"        \
  "cross-entropy|mse against --target INPUT, a data input that --loss adds. An export in\n"      \
  "evaluation mode (BatchNorm folded or on running statistics) is refused; --eval-export\n"      \
  "trains the folded form as exported.\n"                                                        \
  "Optimizer defaults are torch.optim's: --lr 0.001; SGD momentum 0 and weight decay 0;\n"       \
  "AdamW betas (0.9, 0.999), eps 1e-8 and weight decay 0.01. --no-decay takes globs over\n"      \
  "parameter names ('*.bias', '*ln_*') whose updates apply no weight decay. The learning\n"      \
  "rate of update s (0-based): constant lr; cosine: lr*(s+1)/W during warmup, then down to\n"    \
  "--min-lr at update D along half a cosine; linear: lr*s/W, then lr*(D-s)/(D-W) down to 0.\n"   \
  "--clip-grad-norm F scales the gradients as torch.nn.utils.clip_grad_norm_(params, F);\n"      \
  "the step then reports the global gradient norm (--log-grad-norm: without clipping).\n"
#define DTC_IMPORT_USAGE                                                                           \
  "  dtc import MODEL.onnx -o MODEL.dtm [--batch N] [--loss NAME | --loss cross-entropy|mse\n"     \
  "             --target INPUT] [--eval-export] [--buffer GLOB]... [--padding-idx TABLE=ROW]...\n" \
  "      an ONNX export as a dtc model file that compiles at any batch (shapes folded at\n"        \
  "      --batch, default 2, and one more to find the batch's dimensions)\n"
#define DTC_EXPLORE_USAGE                                                                          \
  "  dtc explore MODEL --devices N --batch B [--memory GiB] [--profile cpu|a100-80g|h100-80g|\n"   \
  "              h100-measured|h200|FILE.json] [--gpus-per-node K] [--top K] [--json]\n"           \
  "              [--plot FILE.svg]\n"                                                              \
  "              [--exhaustive] [--exact | --estimate | --screen] [--try 'LAYOUT FLAGS' ...]\n"    \
  "              [other dtc compile flags: optimizer, precision, ...]\n"                           \
  "      every dp x tp x pp layout of N devices with ZeRO, sequence parallelism, micro-batches,\n" \
  "      schedules and recomputation, built by the compiler, ranked by predicted step time on\n"   \
  "      the profile, with memory per rank (budget: --memory or the profile's device) and why\n"   \
  "      the others cannot run; dtc compile ... --mesh auto --devices N compiles the pick.\n"      \
  "      A deep model's candidates are screened when compiling all of them whole would be\n"       \
  "      slow: estimated from three-layer copies, those within 25% of the fastest compiled\n"      \
  "      whole; beyond 2048 layer micro-batches in one candidate, only estimated (--screen,\n"     \
  "      --estimate, --exact: always screen, estimate, compile whole). --try prices a layout\n"    \
  "      you give (e.g. --try '--mesh pp=8,dp=4,tp=8 --microbatches 64 --recompute full')\n"       \
  "      beside the rest and says where it ranks\n"
#define DTC_INSPECT_USAGE                                                                        \
  "  dtc inspect PLAN.dtp [--json] [--profile cpu|a100-80g|h100-80g|h100-measured|h200|\n"       \
  "              FILE.json]\n"                                                                   \
  "      what a plan holds: mesh, optimizer, schedule, memory, functions and their ops, state\n" \
  "      tensors, and its predicted step time on a device profile (default: cpu for CPU\n"       \
  "      plans, h100-80g for CUDA ones; FILE from dtrun --calibrate); --json for programs\n"

#define DTC_OPS_USAGE                                                                     \
  "  dtc ops [--onnx]\n"                                                                  \
  "      the model op types dtc imports, one per line, with the attributes each takes;\n" \
  "      --onnx: the ONNX op types it translates on their own\n"

// dtc compile's usage, then its options as the options model declares them.
std::string compileUsage() { return DTC_COMPILE_USAGE + dtc::compileOptionsHelp(); }

std::string usage() {
  return "usage:\n" DTC_ZOO_USAGE + compileUsage() +
         "\n" DTC_IMPORT_USAGE DTC_EXPLORE_USAGE DTC_INSPECT_USAGE DTC_OPS_USAGE
         "  dtc --version\n";
}

// `dtc SUBCOMMAND ... --help`: that subcommand's usage ("" for no such subcommand).
std::string subcommandUsage(const std::string& command) {
  if (command == "zoo") return "usage:\n" DTC_ZOO_USAGE;
  if (command == "compile") return "usage:\n" + compileUsage();
  if (command == "inspect") return "usage:\n" DTC_INSPECT_USAGE;
  if (command == "explore") return "usage:\n" DTC_EXPLORE_USAGE;
  if (command == "import") return "usage:\n" DTC_IMPORT_USAGE;
  if (command == "ops") return "usage:\n" DTC_OPS_USAGE;
  return "";
}

int fail(const std::string& message, int code = 2) {
  std::fprintf(stderr, "dtc: error: %s\n", message.c_str());
  return code;
}

int fail(const dtc::Status& status) { return fail(status.message(), status.exitCode()); }

int writeModel(const std::string& path, const std::vector<uint8_t>& bytes) {
  if (llvm::Error e = dtc::writeFileAtomically(path, bytes.data(), bytes.size()))
    return fail(llvm::toString(std::move(e)));
  return 0;
}

// `dtc zoo --from DIR [--ctx T] [--seed S] -o MODEL.dtm`: the model a Hugging Face folder's
// config describes, as a model file.
int runZooFromFolder(int argc, char** argv) {
  auto args = dtc::Args::parse(argc, argv, 2, {"from", "ctx", "seed", "output"}, {});
  if (!args.ok()) return fail(args.status());
  if (!args->positionals().empty()) return fail("dtc zoo --from DIR: takes no model name");
  if (!args->has("output")) return fail("dtc zoo: missing -o MODEL.dtm");
  auto ctx = args->integer("ctx", 0);
  auto seed = args->integer("seed", 0);
  if (!ctx.ok()) return fail(ctx.status());
  if (!seed.ok()) return fail(seed.status());
  if (args->has("ctx") && *ctx <= 0) return fail("dtc zoo: --ctx must be positive");
  auto model = dtc::hf::buildFolderModel(args->str("from"), {*ctx, static_cast<uint64_t>(*seed)});
  if (!model.ok()) return fail(model.status());
  std::printf("dtc: %s: %s\n", args->str("from").c_str(), model->summary.c_str());
  return writeModel(args->str("output"), model->bytes);
}

int runZoo(int argc, char** argv) {
  if (argc >= 3 && (!std::strcmp(argv[2], "--from") || !std::strncmp(argv[2], "--from=", 7)))
    return runZooFromFolder(argc, argv);
  auto model = dtc::zoo::zooModelFromArgs(argc, argv);
  if (!model.ok()) return fail(model.status());
  return writeModel(model->output, model->bytes);
}

int runCompile(int argc, char** argv) {
  auto args = dtc::resolveAutoMesh(std::vector<std::string>(argv + 2, argv + argc));
  if (!args.ok()) return fail(args.status());
  auto request = dtc::parseCompileArgs(*args);
  if (!request.ok()) return fail(request.status());
  if (request->output.empty()) return fail("dtc compile: missing -o PLAN.dtp");
  if (dtc::Status s = dtc::io::checkOutputFile(request->output, "-o"); !s.ok()) return fail(s);
  auto plan = dtc::compilePlan(*request);
  if (!plan.ok()) return fail(plan.status());
  if (llvm::Error e = dtc::writeFileAtomically(request->output, plan->data(), plan->size()))
    return fail(llvm::toString(std::move(e)));
  return 0;
}

int runImport(int argc, char** argv) {
  auto args = dtc::Args::parse(argc, argv, 2,
                               {"output", "batch", "loss", "target", "buffer", "padding-idx"},
                               {"eval-export"}, {"buffer", "padding-idx"});
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
  options.acceptEvalExport = args->has("eval-export");
  options.buffers = args->all("buffer");
  if (llvm::Error e = dtc::onnx_import::parsePaddingIdx(args->all("padding-idx"), options))
    return fail("dtc import: " + llvm::toString(std::move(e)));
  auto model = dtc::onnx_import::OnnxModel::read(path);
  if (!model) return fail(llvm::toString(model.takeError()));
  auto bytes = dtc::onnx_import::importOnnx(*model, options);
  if (!bytes) return fail(llvm::toString(bytes.takeError()));
  return writeModel(args->str("output"), *bytes);
}

int runInspect(int argc, char** argv) {
  auto args = dtc::Args::parse(argc, argv, 2, {"profile"}, {"json"});
  if (!args.ok()) return fail(args.status());
  if (args->positionals().size() != 1) return fail("dtc inspect: expected one plan file");
  auto plan = dtc::Plan::load(args->positionals()[0]);
  if (!plan.ok()) return fail(plan.status());
  const dtc::DeviceKind* device =
      dtc::findDeviceKind(plan->root().device() ? plan->root().device()->str() : "cpu");
  auto profile = dtc::perf::loadProfile(args->has("profile") ? args->str("profile")
                                        : device             ? device->defaultProfile
                                                             : "cpu");
  if (!profile.ok()) return fail(profile.status());
  // Plans without a training step (evaluation only) have no step to predict.
  std::optional<dtc::perf::StepPrediction> prediction;
  if (plan->function(dtc::fn::kTrainStep)) {
    auto predicted = dtc::perf::predictStep(*plan, *profile);
    if (!predicted.ok()) return fail(predicted.status());
    prediction = *predicted;
  }
  std::string text;
  if (args->has("json")) {
    text = dtc::summarizePlanJson(*plan);
    const size_t close = text.rfind('}');
    if (prediction && close != std::string::npos)
      text.insert(close, ",\"prediction\":" + dtc::perf::predictionJson(*prediction, *profile));
  } else {
    text = dtc::summarizePlanText(*plan);
    if (prediction) text += dtc::perf::predictionText(*prediction, *profile);
  }
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
    std::fputs(usage().c_str(), argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!std::strcmp(argv[1], "--version")) {
    std::printf("dtc %s (model format %u, plan format %u)\n", DTC_VERSION, dtc::kModelVersion,
                dtc::kPlanVersion);
    return 0;
  }
  std::string command = argv[1];
  for (int i = 2; i < argc; ++i)
    if (const std::string text = subcommandUsage(command);
        !text.empty() && (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h"))) {
      std::fputs(text.c_str(), stdout);
      return 0;
    }
  if (command == "zoo") return runZoo(argc, argv);
  if (command == "compile") return runCompile(argc, argv);
  if (command == "inspect") return runInspect(argc, argv);
  if (command == "explore") return dtc::runExplore(argc, argv);
  if (command == "import") return runImport(argc, argv);
  if (command == "ops") return runOps(argc, argv);
  return fail("unknown command '" + command + "'\n" + usage());
}
