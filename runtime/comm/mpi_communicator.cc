// The MPI backend. Counts are chunked below INT_MAX (MPI takes int counts).
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
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
    // Sends still in flight must finish before their buffers and the communicator go.
    (void)completeSends();
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

  Status send(const void* data, int64_t bytes, int peer, int tag) override {
    DTC_RETURN_IF_ERROR(checkPeer(peer, tag, bytes, "send"));
    reap();
    Pending p;
    p.buffer = takeBuffer(bytes);
    if (bytes) std::memcpy(p.buffer.data(), data, static_cast<size_t>(bytes));
    // A message over INT_MAX bytes goes in chunks; MPI keeps messages with one source, tag and
    // communicator in order, so the receiver's chunks line up.
    for (int64_t at = 0; at == 0 || at < bytes; at += kMaxBytes) {
      MPI_Request request;
      Status s = check(MPI_Isend(p.buffer.data() + at, static_cast<int>(std::min(kMaxBytes, bytes - at)),
                                 MPI_BYTE, peer, tag, comm_, &request),
                       "MPI_Isend");
      if (!s.ok()) {
        // The chunks already started still read the buffer.
        pending_.push_back(std::move(p));
        return s;
      }
      p.requests.push_back(request);
    }
    pending_.push_back(std::move(p));
    return Status::Ok();
  }

  Status recv(void* data, int64_t bytes, int peer, int tag) override {
    DTC_RETURN_IF_ERROR(checkPeer(peer, tag, bytes, "recv"));
    uint8_t* out = static_cast<uint8_t*>(data);
    for (int64_t at = 0; at == 0 || at < bytes; at += kMaxBytes) {
      const int want = static_cast<int>(std::min(kMaxBytes, bytes - at));
      MPI_Status status;
      DTC_RETURN_IF_ERROR(check(MPI_Recv(out + at, want, MPI_BYTE, peer, tag, comm_, &status),
                                "MPI_Recv"));
      int got = 0;
      MPI_Get_count(&status, MPI_BYTE, &got);
      if (got != want)
        return Status::Internal("MPI_Recv from rank " + std::to_string(peer) + " (tag " +
                                std::to_string(tag) + ") got " + std::to_string(got) +
                                " bytes, expected " + std::to_string(want));
    }
    return Status::Ok();
  }

  Status completeSends() override {
    Status first = Status::Ok();
    for (Pending& p : pending_) {
      Status s = check(MPI_Waitall(static_cast<int>(p.requests.size()), p.requests.data(),
                                   MPI_STATUSES_IGNORE),
                       "MPI_Waitall (sends)");
      if (first.ok()) first = s;
      recycle(std::move(p.buffer));
    }
    pending_.clear();
    return first;
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

  Status checkPeer(int peer, int tag, int64_t bytes, const char* what) const {
    if (peer < 0 || peer >= size_ || tag < 0 || tag > kMaxTag || bytes < 0)
      return Status::Internal(std::string(what) + " to/from rank " + std::to_string(peer) +
                              " with tag " + std::to_string(tag) + " in a group of " +
                              std::to_string(size_));
    return Status::Ok();
  }

  // A send in flight: its copy of the payload and one request per chunk.
  struct Pending {
    std::vector<uint8_t> buffer;
    std::vector<MPI_Request> requests;
  };

  // Frees the buffers of sends that have finished (MPI_Testall also lets MPI progress them).
  void reap() {
    for (size_t i = 0; i < pending_.size();) {
      int done = 0;
      Pending& p = pending_[i];
      if (MPI_Testall(static_cast<int>(p.requests.size()), p.requests.data(), &done,
                      MPI_STATUSES_IGNORE) == MPI_SUCCESS && done) {
        recycle(std::move(p.buffer));
        pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
  }

  // Staging buffers are kept for reuse: a pipeline sends the same sizes every step.
  std::vector<uint8_t> takeBuffer(int64_t bytes) {
    size_t best = spare_.size();
    for (size_t i = 0; i < spare_.size(); ++i)
      if (spare_[i].capacity() >= static_cast<size_t>(bytes) &&
          (best == spare_.size() || spare_[i].capacity() < spare_[best].capacity()))
        best = i;
    std::vector<uint8_t> buffer;
    if (best != spare_.size()) {
      buffer = std::move(spare_[best]);
      spare_.erase(spare_.begin() + static_cast<std::ptrdiff_t>(best));
    }
    buffer.resize(static_cast<size_t>(bytes));
    return buffer;
  }
  void recycle(std::vector<uint8_t> buffer) {
    if (spare_.size() < kMaxSpare) spare_.push_back(std::move(buffer));
  }

  static constexpr int64_t kMaxBytes = INT_MAX;
  static constexpr size_t kMaxSpare = 64;

  MPI_Comm comm_;
  bool ownsMpi_;
  int rank_ = 0, size_ = 1;
  std::vector<Pending> pending_;
  std::vector<std::vector<uint8_t>> spare_;
};

}  // namespace

StatusOr<std::unique_ptr<Communicator>> createMpiWorld() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) DTC_RETURN_IF_ERROR(check(MPI_Init(nullptr, nullptr), "MPI_Init"));
  return std::unique_ptr<Communicator>(new MpiCommunicator(MPI_COMM_WORLD, !initialized));
}

}  // namespace dtc::comm
