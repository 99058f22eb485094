// dtrun: executes a dtc plan. See docs/command-line.md for the flags.
#include <cstdio>
#include <cstring>
#include <exception>

#include "comm/watchdog.h"
#include "comm/world.h"
#include "cpu/kernels/blas.h"
#include "exec/backend.h"
#include "io/files.h"
#include "perf/calibrate.h"
#include "planfile/plan.h"
#include "planfile/plan_format.h"
#include "support/args.h"
#include "support/runtime_options.h"
#include "train/trainer.h"

namespace {

// The usage: the training command's flags as train/train_flags.def declares them, then the
// other commands and the exit codes.
std::string usage() {
  return "usage: " + dtc::trainSynopsis(96, 13, 7) +
         "\n"
         "       dtrun --calibrate -o PROFILE.json [--threads N] [--name NAME] [--device "
         "cpu|cuda]\n"
         "                 measures this machine (GEMMs, memory, a kernel's cost; under a "
         "launcher\n"
         "                 the links between processes) as a device profile for dtc "
         "inspect/explore;\n"
         "                 --device cuda measures each process's GPU with dtrun's own kernels\n"
         "       dtrun --version\n"
         "flags by group (default):\n" +
         dtc::trainFlagsHelp() +
         "exit codes: 0 done, 1 internal error, 2 bad input, 3 a rank stopped answering (timeout, "
         "a\n"
         "rank died), 4 non-finite loss, gradients or weights, 128+N stopped by signal N\n";
}

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
  std::vector<std::string> positionals;
  DTC_RETURN_IF_ERROR(dtc::parseTrainFlags(argc, argv, 1, options, positionals));
  if (positionals.size() != 1)
    return dtc::Status::InvalidInput("expected one plan file\n" + usage());
  planPath = positionals[0];
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
  auto threads = dtc::integerFlag(*args, "threads", 1);
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
    std::fputs(usage().c_str(), stdout);
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
    if (options.runtime.device.empty()) {
      const flatbuffers::String* compiledFor = plan->root().device();
      options.runtime.device = compiledFor && compiledFor->size() ? compiledFor->str() : "cpu";
    }
    ready = dtc::checkWorldSize(*plan, world->size, world->source);
  } else {
    ready = plan.status();
  }
  dtc::comm::configureWatchdog(
      {options.runtime.collectiveTimeout, flightRecorderPath(options.logging.log, world->rank)});
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
