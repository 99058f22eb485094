// dtrun: executes a dtc plan. See docs/command-line.md for the flags.
#include <cstdio>
#include <cstring>
#include <exception>

#include "comm/watchdog.h"
#include "comm/world.h"
#include "cpu/kernels/blas.h"
#include "exec/backend.h"
#include "flag_rules.h"
#include "io/files.h"
#include "perf/calibrate.h"
#include "plan/plan.h"
#include "plan/plan_format.h"
#include "support/args.h"
#include "support/runtime_options.h"
#include "train/trainer.h"

namespace {

constexpr const char kUsage[] =
    "usage: dtrun PLAN [--data DIR|TOKENS.bin|SHARDS --steps N] [--seed S] [--log FILE.jsonl]\n"
    "             [--save DIR [--format dtc|hf] [--max-shard-size SIZE] [--save-dtype T]]\n"
    "                 DIR/model.safetensors, or shards of at most SIZE and their index\n"
    "                 (default 5GB, as save_pretrained); hf: DIR/config.json (and\n"
    "                 generation_config.json) too, Hugging Face's names; T: f32, bf16 or f16\n"
    "                 (default f32; hf: the config's torch_dtype)\n"
    "             [--eval DIR|TOKENS.bin [--eval-every N] [--eval-batches K]]\n"
    "             [--threads N] [--trace FILE.json] [--tensorboard DIR]\n"
    "             [--device cpu|cuda|cpu-staged]   (default: the plan's device)\n"
    "             [--checkpoint DIR [--checkpoint-every N] [--keep K] [--checkpoint-async]]\n"
    "                 DIR/step-<N>/, DIR/latest; async: each rank copies its state to host\n"
    "                 memory at the step and writes it while training goes on\n"
    "             [--resume DIR|DIR/step-<N>]   continue a run (--steps is its total)\n"
    "             [--init FILE.safetensors|DIR]  start from these parameters (PyTorch names;\n"
    "                 a Hugging Face folder: config.json checked, sharded weights read; a\n"
    "                 --save folder)\n"
    "             [--predict DIR]  after training, the model in evaluation mode over --eval's\n"
    "                 data (else --data's), in order: DIR/<output>.npy for each output\n"
    "             [--sample N [--prompt TEXT] [--temperature T] [--top-k K] [--tokenizer DIR]]\n"
    "                 text from a language model, drawn as nanoGPT's sample.py does\n"
    "                 (temperature 0.8, top-k 200, seed --seed or 1337; --temperature 0: greedy);\n"
    "                 tokens are bytes (a vocabulary of 256), or a Hugging Face tokenizer's\n"
    "                 (DIR/tokenizer.json; --tokenizer bytes: bytes of a larger vocabulary)\n"
    "             [--collective-timeout SECONDS]  a wait for other ranks longer than this ends "
    "the\n"
    "                 job with a report naming the ranks that did not arrive (default 600)\n"
    "             [--max-skipped-steps N]  fp16 steps skipped in a row before that is an error "
    "(20)\n"
    "             [--check-numerics]  name the first op whose output is inf or NaN (slow)\n"
    "             [--profile-summary]  after training, where rank 0's step time went: by op\n"
    "                 type, by model node (layers folded), and outside the kernels\n"
    "       dtrun --calibrate -o PROFILE.json [--threads N] [--name NAME] [--device cpu|cuda]\n"
    "                 measures this machine (GEMMs, memory, a kernel's cost; under a launcher\n"
    "                 the links between processes) as a device profile for dtc inspect/explore;\n"
    "                 --device cuda measures each process's GPU with dtrun's own kernels\n"
    "       dtrun --version\n"
    "defaults: --seed 0; --threads the node's cores over its processes; --eval-every 0 (only\n"
    "after training); --eval-batches 0 (all); --checkpoint-every 0 (at the end and when\n"
    "stopped); --keep 0 (all). --data needs --steps: the run's total (0: none).\n"
    "exit codes: 0 done, 1 internal error, 2 bad input, 3 a rank stopped answering (timeout, a\n"
    "rank died), 4 non-finite loss, gradients or weights, 128+N stopped by signal N\n";

int fail(const dtc::Status& status) { return dtc::reportFailure(status); }

// Where this rank's flight recorder goes: beside the log ("run/log.jsonl" ->
// "run/log.flight-rank1.json"), or nowhere without one.
std::string flightRecorderPath(const std::string& log, int rank) {
  if (log.empty()) return "";
  const size_t slash = log.find_last_of('/');
  const size_t dot = log.find_last_of('.');
  const std::string stem = dot != std::string::npos && (slash == std::string::npos || dot > slash)
                               ? log.substr(0, dot)
                               : log;
  return stem + ".flight-rank" + std::to_string(rank) + ".json";
}

// The options and the plan from the command line.
dtc::Status parseCommandLine(int argc, char** argv, dtc::TrainOptions& options,
                             std::string& planPath) {
  auto args = dtc::Args::parse(argc, argv, 1,
                               {"data",
                                "steps",
                                "seed",
                                "log",
                                "save",
                                "eval",
                                "threads",
                                "sample",
                                "prompt",
                                "trace",
                                "device",
                                "checkpoint",
                                "checkpoint-every",
                                "keep",
                                "resume",
                                "init",
                                "eval-every",
                                "eval-batches",
                                "temperature",
                                "top-k",
                                "collective-timeout",
                                "max-skipped-steps",
                                "predict",
                                "tensorboard",
                                "format",
                                "max-shard-size",
                                "save-dtype",
                                "tokenizer"},
                               {"check-numerics", "profile-summary", "checkpoint-async"});
  if (!args.ok()) return args.status();
  if (args->positionals().size() != 1)
    return dtc::Status::InvalidInput("expected one plan file\n" + std::string(kUsage));
  planPath = args->positionals()[0];
  options.dataDir = args->str("data");
  options.evalDir = args->str("eval");
  options.logPath = args->str("log");
  options.tensorboardDir = args->str("tensorboard");
  options.saveDir = args->str("save");
  const std::string format = args->str("format", "dtc");
  if (format != "dtc" && format != "hf")
    return dtc::Status::InvalidInput("--format must be dtc or hf, got '" + format + "'");
  if (args->has("format") && !args->has("save"))
    return dtc::Status::InvalidInput("--format says how --save DIR writes the model: give --save");
  options.saveHf = format == "hf";
  auto maxShard = args->byteSize("max-shard-size", options.maxShardBytes);
  if (!maxShard.ok()) return maxShard.status();
  if (args->has("max-shard-size") && !args->has("save"))
    return dtc::Status::InvalidInput(
        "--max-shard-size says how --save DIR splits the model: give --save");
  options.maxShardBytes = *maxShard;
  options.saveDtype = args->str("save-dtype");
  if (args->has("save-dtype") && !args->has("save"))
    return dtc::Status::InvalidInput(
        "--save-dtype says how --save DIR writes the model: give --save");
  options.predictDir = args->str("predict");
  options.tracePath = args->str("trace");
  options.profileSummary = args->has("profile-summary");
  options.device = args->str("device");
  options.checkpointDir = args->str("checkpoint");
  options.resumePath = args->str("resume");
  options.initPath = args->str("init");
  auto steps = dtc::dtrun::integerFlag(*args, "steps", 0);
  auto seed = dtc::dtrun::integerFlag(*args, "seed", 0);
  auto threads = dtc::dtrun::integerFlag(*args, "threads", 0);
  auto sample = dtc::dtrun::integerFlag(*args, "sample", 0);
  auto every = dtc::dtrun::integerFlag(*args, "checkpoint-every", 0);
  auto keep = dtc::dtrun::integerFlag(*args, "keep", 0);
  auto evalEvery = dtc::dtrun::integerFlag(*args, "eval-every", 0);
  auto evalBatches = dtc::dtrun::integerFlag(*args, "eval-batches", 0);
  for (const auto* v : {&steps, &seed, &threads, &sample, &every, &keep, &evalEvery, &evalBatches})
    if (!v->ok()) return v->status();
  // Training needs a length: without one a run with data would end at once, silently.
  if (args->has("data") && !args->has("steps") && !args->has("predict"))
    return dtc::Status::InvalidInput(
        "--data needs --steps N: how many optimizer steps to train (0: none)");
  options.evalEvery = *evalEvery;
  options.evalBatches = *evalBatches;
  for (const char* flag : {"checkpoint", "resume", "init", "save", "log", "trace", "eval", "data",
                           "predict", "tensorboard"})
    if (args->has(flag) && args->str(flag).empty())
      return dtc::Status::InvalidInput(std::string("--") + flag + " needs a path");
  options.checkpointEvery = *every;
  options.checkpointAsync = args->has("checkpoint-async");
  options.keep = static_cast<int>(*keep);
  options.seedGiven = args->has("seed");
  options.steps = *steps;
  options.seed = static_cast<uint64_t>(*seed);
  options.threads = static_cast<int>(*threads);
  options.sampleTokens = *sample;
  options.prompt = args->str("prompt");
  options.tokenizer = args->str("tokenizer");
  auto temperature = dtc::dtrun::numberFlag(*args, "temperature", options.temperature);
  auto topK = dtc::dtrun::integerFlag(*args, "top-k", options.topK);
  if (!temperature.ok()) return temperature.status();
  if (!topK.ok()) return topK.status();
  if ((args->has("temperature") || args->has("top-k") || args->has("prompt") ||
       args->has("tokenizer")) &&
      *sample <= 0)
    return dtc::Status::InvalidInput(
        "--prompt, --temperature, --top-k and --tokenizer need --sample N");
  auto timeout = dtc::dtrun::numberFlag(*args, "collective-timeout",
                                        dtc::comm::kDefaultCollectiveTimeoutSeconds);
  auto maxSkipped = dtc::dtrun::integerFlag(*args, "max-skipped-steps", options.maxSkippedSteps);
  if (!timeout.ok()) return timeout.status();
  if (!maxSkipped.ok()) return maxSkipped.status();
  options.collectiveTimeout = *timeout;
  options.maxSkippedSteps = *maxSkipped;
  options.checkNumerics = args->has("check-numerics");
  options.temperature = *temperature;
  options.topK = *topK;
  if (args->has("seed")) options.sampleSeed = static_cast<uint64_t>(*seed);
  return dtc::Status::Ok();
}

// dtrun --calibrate: every process measures; rank 0 writes the profile.
int runCalibrate(int argc, char** argv, const dtc::comm::World& world) {
  auto args =
      dtc::Args::parse(argc, argv, 1, {"output", "threads", "name", "device"}, {"calibrate"});
  if (!args.ok()) return fail(args.status());
  const std::string path = args->str("output");
  if (path.empty()) return fail(dtc::Status::InvalidInput("--calibrate needs -o PROFILE.json"));
  if (dtc::Status s = dtc::io::checkOutputFile(path, "-o"); !s.ok()) return fail(s);
  auto threads = dtc::dtrun::integerFlag(*args, "threads", 1);
  if (!threads.ok()) return fail(threads.status());
  dtc::cpu::setBlasThreads(1);
  std::unique_ptr<dtc::comm::Communicator> comm;
  if (world.size == 1) {
    comm = dtc::comm::createSingleProcess();
  } else {
    auto mpi = dtc::comm::createMpiWorld();
    if (!mpi.ok()) return fail(mpi.status());
    comm = std::move(mpi).value();
  }
  // A device is measured through its backend (one per process, as a job places them).
  std::unique_ptr<dtc::Backend> device;
  const std::string deviceName = args->str("device", "cpu");
  if (deviceName != "cpu") {
    auto backend = dtc::createBackend(deviceName, world.localRank);
    if (!backend.ok()) return fail(backend.status());
    device = std::move(backend).value();
  }
  auto profile = dtc::perf::calibrate(
      *comm, {static_cast<int>(*threads), args->str("name", "calibrated"), device.get()});
  if (!profile.ok()) return fail(profile.status());
  if (comm->rank() != 0) return 0;
  const std::string text = profile->toJson().dump() + "\n";
  if (dtc::Status s = dtc::io::writeFileAtomically(path, text.data(), text.size()); !s.ok())
    return fail(s);
  std::printf("dtrun: wrote %s\n", path.c_str());
  return 0;
}

// The last resort for an exception nothing handled (a failing system call deep in a library,
// on any thread): one line, the empty folders this run made removed, exit 1.
[[noreturn]] void endOnException(const char* what) {
  std::fprintf(stderr, "dtrun: error: internal: %s\n", what);
  std::fflush(stderr);
  dtc::io::removeEmptyOutputDirectories();
  std::_Exit(1);
}

void onTerminate() {
  try {
    if (std::exception_ptr current = std::current_exception()) std::rethrow_exception(current);
  } catch (const std::exception& e) {
    endOnException(e.what());
  } catch (...) {
  }
  endOnException("the process ended on an unexpected failure");
}

int run(int argc, char** argv) {
  dtc::cpu::selectBlasKernels(argv);
  if (argc >= 2 && (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h"))) {
    std::fputs(kUsage, stdout);
    std::fputs("environment switches:\n", stdout);
    std::fputs(dtc::runtimeOptionsHelp().c_str(), stdout);
    return 0;
  }
  if (argc >= 2 && !std::strcmp(argv[1], "--version")) {
    std::printf("dtrun %s (plan format %u)\n", DTC_VERSION, dtc::kPlanVersion);
    return 0;
  }
  auto world = dtc::comm::detectWorld();
  if (!world.ok()) return fail(world.status());
  for (int k = 1; k < argc; ++k)
    if (!std::strcmp(argv[k], "--calibrate")) return runCalibrate(argc, argv, *world);
  // Whether this rank can run: its flags, its plan, the job's size. Every rank learns whether
  // all can, and whether all run the same thing, before anything else is collective.
  dtc::TrainOptions options;
  std::string planPath;
  dtc::Status ready = parseCommandLine(argc, argv, options, planPath);
  if (ready.ok()) ready = dtc::runtimeOptionsStatus().status();  // a malformed DTC_* switch
  dtc::StatusOr<dtc::Plan> plan =
      ready.ok() ? dtc::Plan::load(planPath) : dtc::StatusOr<dtc::Plan>(ready);
  if (plan.ok()) {
    // The plan says where it was compiled to run; --device overrides it.
    if (options.device.empty()) {
      const flatbuffers::String* compiledFor = plan->root().device();
      options.device = compiledFor && compiledFor->size() ? compiledFor->str() : "cpu";
    }
    ready = dtc::checkWorldSize(*plan, world->size, world->source);
  } else {
    ready = plan.status();
  }
  dtc::comm::configureWatchdog({options.collectiveTimeout > 0
                                    ? options.collectiveTimeout
                                    : dtc::comm::kDefaultCollectiveTimeoutSeconds,
                                flightRecorderPath(options.logPath, world->rank)});
  if (world->size == 1) {
    if (!ready.ok()) return fail(ready);
    dtc::Status status = dtc::train(*plan, options, dtc::comm::createSingleProcess());
    return status.ok() ? 0 : fail(status);
  }
  auto mpi = dtc::comm::createMpiWorld();
  if (!mpi.ok()) return fail(mpi.status());
  std::unique_ptr<dtc::comm::Communicator> comm = std::move(mpi).value();
  // Without MPI among them, every process fails alone; a failure that is the same on every
  // process (its flags, the job's size) is said once, by rank 0.
  if (comm->size() != world->size && !ready.ok())
    return world->rank == 0 ? fail(ready) : ready.exitCode();
  if (comm->size() != world->size)
    return fail(
        dtc::Status::InvalidInput(world->source + " started " + std::to_string(world->size) +
                                  " processes, but MPI sees " + std::to_string(comm->size()) +
                                  ": the CPU backend communicates through MPI (launch "
                                  "with mpirun or srun)"));
  const std::vector<dtc::RunField> fields =
      ready.ok() ? dtc::runFields(*plan, options) : std::vector<dtc::RunField>();
  if (dtc::Status agreed = dtc::agreeToStart(*comm, ready, fields); !agreed.ok())
    return dtc::reportAgreedFailure(*comm, agreed);
  dtc::Status status = dtc::train(*plan, options, std::move(comm));
  // On several processes train() has reported the failure (or ended the job).
  return status.ok() ? 0 : status.exitCode();
}

}  // namespace

int main(int argc, char** argv) {
  std::set_terminate(onTerminate);
  int code = 1;
  try {
    code = run(argc, argv);
  } catch (const std::exception& e) {
    endOnException(e.what());
  } catch (...) {
    endOnException("an unexpected failure");
  }
  // A run that failed leaves no empty folder it made (a --save or --checkpoint never filled).
  if (code != 0) dtc::io::removeEmptyOutputDirectories();
  return code;
}
