// Which process this is among how many: read from the launcher's environment, as users'
// launchers set it (Open MPI's mpirun, Slurm's srun, PyTorch's torchrun).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "support/status.h"

namespace dtc::comm {

struct World {
  int rank = 0;        // this process, in [0, size)
  int size = 1;        // processes in the job
  int localRank = 0;   // this process among those on its node (picks the GPU)
  int localSize = 0;   // processes on this node; 0 when the launcher does not say
  std::string source;  // which launcher's variables were used ("single process" if none)
};

// Looks up an environment variable; nullptr when unset. Injected so tests need not touch the
// process environment.
using EnvLookup = std::function<const char*(const char*)>;

// Reads, in order of precedence, Open MPI (OMPI_COMM_WORLD_RANK/_SIZE/_LOCAL_RANK/_LOCAL_SIZE),
// MPICH (PMI_RANK/PMI_SIZE/MPI_LOCALRANKID/MPI_LOCALNRANKS), Slurm
// (SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID/SLURM_NTASKS_PER_NODE) and torchrun
// (RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE); none means one process. A launcher whose variables
// are partial, malformed or out of range is an InvalidInput error naming the variable.
StatusOr<World> detectWorld(const EnvLookup& env);
StatusOr<World> detectWorld();  // from the process environment

}  // namespace dtc::comm
