// When communicators are created. Creating one is collective over its group, so every member
// must create it at the same point of its program. A step binder cannot do it: binders see one
// step, not the plan, and in a pipeline plan each stage binds only its own functions, so a
// group spanning stages would be created at different points of different binding orders
// (and a deadlock). Instead a group's communicator is created when the group's first
// collective runs, right before it, by every member: exactly where each member already blocks
// in that collective on the host-staged path. So the creation adds one blocking collective on a
// group just before a collective on the same group, which deadlocks only where the plan's own
// collectives would; plans of every kind (data, tensor, pipeline parallel) run as they do on
// MPI. It costs the first step the creation time (NCCL's bootstrap, well under a second).
//
// The decision per group (NCCL or host-staged) is made by all members together from what each
// contributes (NCCL loaded and wanted, DTC_COLLECTIVES=nccl, its GPU's UUID), so they can never
// take different paths. Small values cross MPI as floats holding one byte each: exact whatever
// the MPI implementation does with float bit patterns.
#include "nccl_groups.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>

#include "cuda_check.h"
#include "support/runtime_options.h"

namespace dtc::cuda {
namespace {

std::string axesName(const std::vector<int>& axes) {
  std::string s = "[";
  for (size_t i = 0; i < axes.size(); ++i) s += (i ? "," : "") + std::to_string(axes[i]);
  return s + "]";
}

// One member's contribution: [NCCL loaded and not refused, NCCL requested, 16 UUID bytes].
constexpr int kVote = 18;

}  // namespace

StatusOr<std::unique_ptr<NcclGroups>> NcclGroups::create(
    int ordinal, const std::array<unsigned char, 16>& uuid) {
  std::unique_ptr<NcclGroups> g(new NcclGroups());
  g->ordinal_ = ordinal;
  g->uuid_ = uuid;
  DTC_RETURN_IF_ERROR(runtimeOptionsStatus().status());
  const RuntimeOptions::Collectives mode = runtimeOptions().collectives;
  if (mode == RuntimeOptions::Collectives::kMpi) {
    g->mode_ = Mode::kMpi;
    return g;
  }
  if (mode == RuntimeOptions::Collectives::kNccl) g->mode_ = Mode::kNccl;
  StatusOr<const NcclApi*> api = loadNccl();
  if (api.ok()) {
    g->api_ = *api;
  } else if (g->mode_ == Mode::kNccl) {
    // Said once per process (tests create many backends), and only when NCCL was asked for: by
    // default its absence is the ordinary case of a machine without NCCL.
    static bool warned = false;
    if (!warned) {
      std::fprintf(stderr,
                   "dtc: DTC_COLLECTIVES=nccl, but %s; collectives stay host-staged through MPI\n",
                   api.status().message().c_str());
      warned = true;
    }
  }
  return g;
}

NcclGroups::~NcclGroups() {
  for (auto& entry : groups_)
    if (entry.second.comm) (void)api_->commAbort(entry.second.comm);
}

StatusOr<ncclComm_t> NcclGroups::comm(const std::vector<int>& axes, comm::Communicator& mpi) {
  auto it = groups_.find(axes);
  if (it != groups_.end()) {
    if (it->second.mpi != &mpi)
      return Status::Internal("the CUDA backend's collectives over mesh axes " + axesName(axes) +
                              " met a second device mesh (one backend serves one mesh)");
    return it->second.comm;
  }
  const int n = mpi.size();
  std::vector<float> mine(kVote, 0.0f), all(static_cast<size_t>(kVote) * n);
  mine[0] = api_ && mode_ != Mode::kMpi ? 1.0f : 0.0f;
  mine[1] = mode_ == Mode::kNccl ? 1.0f : 0.0f;
  for (int i = 0; i < 16; ++i) mine[2 + i] = uuid_[i];
  DTC_RETURN_IF_ERROR(mpi.allGather(mine.data(), kVote, all.data()));
  bool everyone = true, requested = false, shared = false;
  std::set<std::vector<float>> gpus;
  for (int r = 0; r < n; ++r) {
    const float* v = all.data() + static_cast<size_t>(r) * kVote;
    everyone = everyone && v[0] != 0;
    requested = requested || v[1] != 0;
    shared = !gpus.insert(std::vector<float>(v + 2, v + kVote)).second || shared;
  }
  Entry entry{&mpi, nullptr};
  if (everyone && (requested || !shared)) {
    DTC_ASSIGN_OR_RETURN(entry.comm, createComm(axes, mpi));
  }
  groups_[axes] = entry;
  return entry.comm;
}

StatusOr<ncclComm_t> NcclGroups::createComm(const std::vector<int>& axes, comm::Communicator& mpi) {
  const std::string what = "creating the NCCL communicator of mesh axes " + axesName(axes) + " (" +
                           std::to_string(mpi.size()) + " ranks)";
  // Member 0 makes the id and sends it with a flag saying whether that worked, so a failure there
  // is an error on every member rather than a hang.
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  std::vector<float> wire(1 + NCCL_UNIQUE_ID_BYTES, 0.0f);
  Status made = Status::Ok();
  if (mpi.rank() == 0) {
    made = ncclStatus(*api_, api_->getUniqueId(&id), what + ": ncclGetUniqueId");
    wire[0] = made.ok() ? 1.0f : 0.0f;
    for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; ++i)
      wire[1 + i] = static_cast<unsigned char>(id.internal[i]);
  }
  DTC_RETURN_IF_ERROR(mpi.broadcast(wire.data(), static_cast<int64_t>(wire.size()), 0));
  if (!made.ok()) return made;
  if (wire[0] == 0)
    return Status::Internal(what + ": member 0 of the group could not make an NCCL id");
  for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; ++i)
    id.internal[i] = static_cast<char>(static_cast<unsigned char>(wire[1 + i]));
  // NCCL binds the communicator to the calling thread's current GPU.
  DTC_RETURN_IF_ERROR(
      cudaStatus(cudaSetDevice(ordinal_), what + ": selecting GPU " + std::to_string(ordinal_)));
  ncclComm_t comm = nullptr;
  Status init = ncclStatus(*api_, api_->commInitRank(&comm, mpi.size(), id, mpi.rank()), what);
  if (!init.ok())
    return Status::Internal(init.message() + "; DTC_COLLECTIVES=mpi keeps collectives host-staged");
  return comm;
}

}  // namespace dtc::cuda
