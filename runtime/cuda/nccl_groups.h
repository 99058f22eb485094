// Which path each mesh group's collectives take on CUDA, and the NCCL communicators of the
// groups that take NCCL. NCCL runs on the backend's stream, on device memory, with no host
// round trip; the host-staged MPI path (cuda_collective_table.cc) serves the other groups.
//
// NCCL is the default for a group when NCCL loads on every member and every member has a GPU of
// its own: NCCL refuses a communicator in which two ranks share a GPU, which is how the tests run
// two processes on one GPU. DTC_COLLECTIVES overrides: `mpi` keeps every group host-staged,
// `nccl` takes NCCL even for shared GPUs (NCCL's own error then says why it cannot). Where NCCL
// does not load, collectives stay host-staged; with DTC_COLLECTIVES=nccl that is said once on
// stderr.
#pragma once

#include <array>
#include <map>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "nccl_library.h"

namespace dtc::cuda {

class NcclGroups {
 public:
  enum class Mode { kAuto, kMpi, kNccl };
  // Reads DTC_COLLECTIVES (an error for values other than mpi and nccl) and, unless it is mpi,
  // loads NCCL. `ordinal` and `uuid` name this rank's GPU.
  static StatusOr<std::unique_ptr<NcclGroups>> create(int ordinal,
                                                      const std::array<unsigned char, 16>& uuid);
  // Aborts the communicators: unlike ncclCommDestroy, that never waits for the other ranks, so a
  // rank that failed still reaches the job abort that releases the ranks waiting for it.
  ~NcclGroups();
  NcclGroups(const NcclGroups&) = delete;
  NcclGroups& operator=(const NcclGroups&) = delete;

  // The NCCL communicator of this rank's group over `axes` (its MPI communicator: `mpi`), or
  // nullptr when the group's collectives are host-staged. The first call for a group decides
  // and creates it, collectively over the group's MPI communicator (see nccl_groups.cc for why
  // at a group's first collective); later calls look it up.
  StatusOr<ncclComm_t> comm(const std::vector<int>& axes, comm::Communicator& mpi);
  // The library; loaded whenever comm() returned a communicator.
  const NcclApi& api() const { return *api_; }

 private:
  NcclGroups() = default;
  StatusOr<ncclComm_t> createComm(const std::vector<int>& axes, comm::Communicator& mpi);

  struct Entry {
    comm::Communicator* mpi = nullptr;
    ncclComm_t comm = nullptr;  // null: host-staged
  };
  Mode mode_ = Mode::kAuto;
  const NcclApi* api_ = nullptr;  // null: NCCL not loaded
  int ordinal_ = 0;
  std::array<unsigned char, 16> uuid_{};
  std::map<std::vector<int>, Entry> groups_;  // keyed as DeviceMesh's groups: by the axes
};

}  // namespace dtc::cuda
