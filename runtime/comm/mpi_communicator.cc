#include <cstdlib>
// The MPI backend. Counts are chunked below INT_MAX (MPI takes int counts).
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <vector>

#include "comm/communicator.h"

namespace dtc::comm {
namespace {

constexpr int64_t kMaxChunk = INT_MAX / 2;

Status check(int code, const char* what) {
  if (code == MPI_SUCCESS) return Status::Ok();
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return Status::Internal(std::string(what) + " failed: " + std::string(text, length));
}

class MpiCommunicator : public Communicator {
 public:
  MpiCommunicator(MPI_Comm comm, bool ownsMpi) : comm_(comm), ownsMpi_(ownsMpi) {
    // Errors come back as codes, turned into Status, instead of aborting the job.
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiCommunicator() override {
    if (comm_ != MPI_COMM_WORLD) MPI_Comm_free(&comm_);
    if (ownsMpi_) MPI_Finalize();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Status allReduceSum(float* data, int64_t n) override {
    return allReduce(data, n, MPI_SUM, "MPI_Allreduce");
  }

  Status allReduceMax(float* data, int64_t n) override {
    return allReduce(data, n, MPI_MAX, "MPI_Allreduce(MAX)");
  }

  Status allGather(const float* in, int64_t n, float* out) override {
    if (n > kMaxChunk) return Status::Internal("allGather of more than 2^30 floats per rank");
    return check(MPI_Allgather(in, static_cast<int>(n), MPI_FLOAT, out, static_cast<int>(n),
                               MPI_FLOAT, comm_),
                 "MPI_Allgather");
  }

  Status reduceScatterSum(const float* in, int64_t n, float* out) override {
    if (n > kMaxChunk) return Status::Internal("reduceScatter of more than 2^30 floats per rank");
    return check(MPI_Reduce_scatter_block(in, out, static_cast<int>(n), MPI_FLOAT, MPI_SUM, comm_),
                 "MPI_Reduce_scatter_block");
  }

  Status allToAll(const float* in, int64_t n, float* out) override {
    if (n > kMaxChunk) return Status::Internal("allToAll of more than 2^30 floats per rank");
    return check(MPI_Alltoall(in, static_cast<int>(n), MPI_FLOAT, out, static_cast<int>(n),
                              MPI_FLOAT, comm_),
                 "MPI_Alltoall");
  }

  [[noreturn]] void abortJob(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);  // MPI_Abort does not return; this keeps [[noreturn]] honest
  }

  Status broadcast(float* data, int64_t n, int root) override {
    for (int64_t at = 0; at < n; at += kMaxChunk)
      DTC_RETURN_IF_ERROR(check(MPI_Bcast(data + at, static_cast<int>(std::min(kMaxChunk, n - at)),
                                          MPI_FLOAT, root, comm_),
                                "MPI_Bcast"));
    return Status::Ok();
  }

  Status send(const float* data, int64_t n, int peer) override {
    for (int64_t at = 0; at < n; at += kMaxChunk)
      DTC_RETURN_IF_ERROR(check(MPI_Send(data + at, static_cast<int>(std::min(kMaxChunk, n - at)),
                                         MPI_FLOAT, peer, 0, comm_),
                                "MPI_Send"));
    return Status::Ok();
  }

  Status recv(float* data, int64_t n, int peer) override {
    for (int64_t at = 0; at < n; at += kMaxChunk)
      DTC_RETURN_IF_ERROR(check(MPI_Recv(data + at, static_cast<int>(std::min(kMaxChunk, n - at)),
                                         MPI_FLOAT, peer, 0, comm_, MPI_STATUS_IGNORE),
                                "MPI_Recv"));
    return Status::Ok();
  }

  StatusOr<std::unique_ptr<Communicator>> split(int color, int key) override {
    MPI_Comm sub;
    DTC_RETURN_IF_ERROR(check(MPI_Comm_split(comm_, color, key, &sub), "MPI_Comm_split"));
    return std::unique_ptr<Communicator>(new MpiCommunicator(sub, false));
  }

 private:
  // In place, in chunks MPI's int counts can hold.
  Status allReduce(float* data, int64_t n, MPI_Op op, const char* what) {
    for (int64_t at = 0; at < n; at += kMaxChunk)
      DTC_RETURN_IF_ERROR(check(MPI_Allreduce(MPI_IN_PLACE, data + at,
                                              static_cast<int>(std::min(kMaxChunk, n - at)),
                                              MPI_FLOAT, op, comm_),
                                what));
    return Status::Ok();
  }

  MPI_Comm comm_;
  bool ownsMpi_;
  int rank_ = 0, size_ = 1;
};

}  // namespace

StatusOr<std::unique_ptr<Communicator>> createMpiWorld() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) DTC_RETURN_IF_ERROR(check(MPI_Init(nullptr, nullptr), "MPI_Init"));
  return std::unique_ptr<Communicator>(new MpiCommunicator(MPI_COMM_WORLD, !initialized));
}

}  // namespace dtc::comm
