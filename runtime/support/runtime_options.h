// The runtime's switches, read once per process from DTC_* environment variables. Every switch
// is listed here and in runtimeOptionsHelp() (dtrun --help prints it); a value a switch does not
// take is an error naming the variable, reported when dtrun starts.
//
//   DTC_CUDA_BACKEND=PATH        the CUDA plugin (default: libdtc_cuda.so beside dtrun)
//   DTC_NCCL_LIBRARY=PATH        the NCCL library to load (default: libnccl.so.2 on the path)
//   DTC_COLLECTIVES=mpi|nccl     CUDA collectives (default: NCCL where every rank has its GPU)
//   DTC_CUDA_ATTENTION=auto|cudnn|flash|gemm   causal attention's CUDA path (default auto)
//   DTC_CUDNN_LIBRARY=PATH       the cuDNN library to load (default: libcudnn.so.9 on the path)
//   DTC_CUDNN_DETERMINISTIC=0|1  cuDNN attention's deterministic backward (default 0)
//   DTC_CUDA_GRAPHS=0|1          replay each function as a CUDA graph (default 1)
//   DTC_CUDA_OVERLAP=0|1         collectives on their own stream, overlapping backward (default 1)
//   DTC_CUDA_TF32=0|1            TF32 for f32 GEMMs (default 0)
//   DTC_CUDA_LT_EPILOGUES=0|1    fused linear epilogues through cuBLASLt (default 1)
//   DTC_WATCHDOG_LIVENESS=0|1    each rank tells every rank of a host-mate that died (default 1)
//   DTC_SNAPSHOT_COPY=background|step   who copies a --checkpoint-async snapshot out of host
//                                memory: the writer thread beside the next step (default), or
//                                every training thread in the step
//   DTC_FAULT=POINT[@RANK][#N][:throw|:pause]   tests: SIGKILL (an exception; a second's
//                                pause) at the N-th arrival at a fault point
#pragma once

#include <functional>
#include <string>

#include "support/status.h"

namespace dtc {

struct RuntimeOptions {
  enum class Collectives { kAuto, kMpi, kNccl };
  enum class Attention { kAuto, kCudnn, kFlash, kGemm };
  enum class SnapshotCopy { kBackground, kStep };

  std::string cudaBackend;
  std::string ncclLibrary;
  std::string cudnnLibrary;
  bool cudnnDeterministic = false;
  Collectives collectives = Collectives::kAuto;
  Attention cudaAttention = Attention::kAuto;
  bool cudaGraphs = true;
  bool cudaOverlap = true;
  bool cudaTf32 = false;
  bool cudaLtEpilogues = true;
  bool watchdogLiveness = true;
  SnapshotCopy snapshotCopy = SnapshotCopy::kBackground;
  // A fault point to die at (empty: none), on `faultRank` (-1: any) at its `faultWhen`-th arrival.
  std::string faultPoint;
  int faultRank = -1;
  long faultWhen = 1;
  bool faultThrows = false;  // ":throw": an exception rather than SIGKILL
  bool faultPauses = false;  // ":pause": a second's sleep rather than SIGKILL
};

// Parses the switches from `lookup` (the environment's getenv; null: unset).
StatusOr<RuntimeOptions> parseRuntimeOptions(const std::function<const char*(const char*)>& lookup);

// The process's switches, parsed from the environment on first use. When a value is malformed,
// this is its error; the defaults apply until dtrun reports it.
const StatusOr<RuntimeOptions>& runtimeOptionsStatus();
const RuntimeOptions& runtimeOptions();
// Parses the environment again, for tests that change a switch between binds (what was bound
// keeps what it read). Not thread-safe: nothing may read the switches meanwhile.
void reloadRuntimeOptions();

// One line per switch: the variable, the values it takes and what it does.
std::string runtimeOptionsHelp();

}  // namespace dtc
