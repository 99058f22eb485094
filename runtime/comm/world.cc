#include "comm/world.h"

#include <cerrno>
#include <climits>
#include <cstdlib>

namespace dtc::comm {
namespace {

struct Launcher {
  const char* name;
  const char* rank;
  const char* size;
  const char* localRank;  // optional: 0 when unset
  const char* localSize;  // optional: processes on this node, unknown (0) when unset
};

constexpr Launcher kLaunchers[] = {
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    // MPICH's (and Intel MPI's) Hydra launcher: mpiexec sets the PMI ranks.
    {"MPICH", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    // Slurm sets a plain count per node only when the job asked for one (--ntasks-per-node).
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
};

StatusOr<int> parse(const char* name, const char* text) {
  errno = 0;
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (errno || end == text || *end || v < 0 || v > INT_MAX)
    return Status::InvalidInput(std::string(name) + "='" + text +
                                "' is not a non-negative integer");
  return static_cast<int>(v);
}

}  // namespace

StatusOr<World> detectWorld(const EnvLookup& env) {
  for (const Launcher& l : kLaunchers) {
    const char* rank = env(l.rank);
    const char* size = env(l.size);
    if (!rank && !size) continue;
    if (!rank || !size)
      return Status::InvalidInput(std::string(l.name) + " sets " + (rank ? l.rank : l.size) +
                                  " but not " + (rank ? l.size : l.rank));
    World w;
    w.source = l.name;
    DTC_ASSIGN_OR_RETURN(w.rank, parse(l.rank, rank));
    DTC_ASSIGN_OR_RETURN(w.size, parse(l.size, size));
    if (const char* local = env(l.localRank)) {
      DTC_ASSIGN_OR_RETURN(w.localRank, parse(l.localRank, local));
    }
    if (w.size < 1 || w.rank >= w.size)
      return Status::InvalidInput(std::string(l.rank) + "=" + rank + " is not below " + l.size +
                                  "=" + size);
    if (w.localRank > w.rank)
      return Status::InvalidInput(std::string(l.localRank) + " exceeds " + l.rank);
    if (const char* local = env(l.localSize)) {
      DTC_ASSIGN_OR_RETURN(w.localSize, parse(l.localSize, local));
      if (w.localSize < 1 || w.localSize > w.size || w.localRank >= w.localSize)
        return Status::InvalidInput(std::string(l.localSize) + "=" + local +
                                    " does not fit the job (" + l.size + "=" + size + ", " +
                                    l.localRank + "=" + std::to_string(w.localRank) + ")");
    }
    return w;
  }
  World single;
  single.localSize = 1;
  single.source = "single process";
  return single;
}

StatusOr<World> detectWorld() {
  return detectWorld([](const char* name) { return std::getenv(name); });
}

}  // namespace dtc::comm
