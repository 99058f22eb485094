// dtrun: executes a dtc plan. See README.md for the flags.
#include <cstdio>
#include <cstring>

#include "comm/world.h"
#include "cpu/blas.h"
#include "train/trainer.h"
#include "plan/plan.h"
#include "support/args.h"

namespace {

constexpr const char kUsage[] =
    "usage: dtrun PLAN [--data DIR|TOKENS.bin] [--steps N] [--seed S] [--log FILE.jsonl]\n"
    "             [--save DIR] [--eval DIR|TOKENS.bin] [--threads N] [--trace FILE.json]\n"
    "             [--device cpu|cuda]\n"
    "             [--checkpoint DIR [--checkpoint-every N] [--keep K]]   DIR/step-<N>/, DIR/latest\n"
    "             [--resume DIR|DIR/step-<N>]   continue a run (--steps is its total)\n"
    "             [--init FILE.safetensors]     start from these parameters (PyTorch names)\n"
    "             [--sample N [--prompt TEXT]]   greedy text from a byte-level language model\n";

int fail(const dtc::Status& status) {
  // A run stopped by a signal is not an error of dtrun's: it says what it saved.
  const char* kind = status.code() == dtc::StatusCode::kStopped ? "" : "error: ";
  std::fprintf(stderr, "dtrun: %s%s\n", kind, status.message().c_str());
  return status.exitCode();
}

}  // namespace

int main(int argc, char** argv) {
  dtc::cpu::selectBlasKernels(argv);
  if (argc >= 2 && (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h"))) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  auto args = dtc::Args::parse(argc, argv, 1,
                               {"data", "steps", "seed", "log", "save", "eval", "threads", "sample", "prompt",
                                "trace", "device", "checkpoint", "checkpoint-every", "keep", "resume",
                                "init"}, {});
  if (!args.ok()) return fail(args.status());
  if (args->positionals().size() != 1)
    return fail(dtc::Status::InvalidInput("expected one plan file\n" + std::string(kUsage)));
  dtc::TrainOptions options;
  options.dataDir = args->str("data");
  options.evalDir = args->str("eval");
  options.logPath = args->str("log");
  options.saveDir = args->str("save");
  options.tracePath = args->str("trace");
  options.device = args->str("device");
  options.checkpointDir = args->str("checkpoint");
  options.resumePath = args->str("resume");
  options.initPath = args->str("init");
  auto steps = args->integer("steps", 0);
  auto seed = args->integer("seed", 0);
  auto threads = args->integer("threads", 0);
  auto sample = args->integer("sample", 0);
  auto every = args->integer("checkpoint-every", 0);
  auto keep = args->integer("keep", 0);
  for (const auto* v : {&steps, &seed, &threads, &sample, &every, &keep})
    if (!v->ok()) return fail(v->status());
  if (*steps < 0) return fail(dtc::Status::InvalidInput("--steps must be >= 0"));
  if (*every < 0) return fail(dtc::Status::InvalidInput("--checkpoint-every must be >= 0"));
  if (*keep < 0 || *keep > 1000000) return fail(dtc::Status::InvalidInput("--keep must be between 0 and 1000000"));
  for (const char* flag : {"checkpoint", "resume", "init", "save", "log", "trace", "eval", "data"})
    if (args->has(flag) && args->str(flag).empty())
      return fail(dtc::Status::InvalidInput(std::string("--") + flag + " needs a path"));
  options.checkpointEvery = *every;
  options.keep = static_cast<int>(*keep);
  options.seedGiven = args->has("seed");
  options.steps = *steps;
  options.seed = static_cast<uint64_t>(*seed);
  options.threads = static_cast<int>(*threads);
  options.sampleTokens = *sample;
  options.prompt = args->str("prompt");

  auto plan = dtc::Plan::load(args->positionals()[0]);
  if (!plan.ok()) return fail(plan.status());
  // The plan says where it was compiled to run; --device overrides it.
  if (options.device.empty()) {
    const flatbuffers::String* compiledFor = plan->root().device();
    options.device = compiledFor && compiledFor->size() ? compiledFor->str() : "cpu";
  }
  auto world = dtc::comm::detectWorld();
  if (!world.ok()) return fail(world.status());
  if (dtc::Status fits = dtc::checkWorldSize(*plan, world->size, world->source); !fits.ok()) {
    if (world->size == 1) return fail(fits);
    // Rank 0 says why; the others wait until it has, since the launcher tears the job down as
    // soon as one process fails.
    auto mpi = dtc::comm::createMpiWorld();
    if (world->rank == 0) fail(fits);
    std::fflush(stderr);
    if (mpi.ok()) {
      float done = 0;
      (void)(*mpi)->allReduceSum(&done, 1);
    }
    return fits.exitCode();
  }
  std::unique_ptr<dtc::comm::Communicator> comm;
  if (world->size > 1) {
    auto mpi = dtc::comm::createMpiWorld();
    if (!mpi.ok()) return fail(mpi.status());
    comm = std::move(mpi).value();
    if (comm->size() != world->size)
      return fail(dtc::Status::InvalidInput(
          world->source + " started " + std::to_string(world->size) + " processes, but MPI sees " +
          std::to_string(comm->size()) + ": the CPU backend communicates through MPI (launch "
          "with mpirun or srun)"));
  } else {
    comm = dtc::comm::createSingleProcess();
  }
  const int rank = world->rank;
  dtc::Status status = dtc::train(*plan, options, std::move(comm));
  // Failures while running on several devices end the job inside train(); what returns here
  // failed the same way on every rank, so rank 0 reports it.
  if (!status.ok()) return rank == 0 ? fail(status) : status.exitCode();
  return 0;
}
