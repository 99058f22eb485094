// The MPI backend. Counts are chunked below INT_MAX (MPI takes int counts). Every wait for
// other ranks goes through comm/mpi_watch.h (bounded, backing off, reported).
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

#include "comm/communicator.h"
#include "comm/mpi_watch.h"
#include "comm/watchdog.h"

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
    // The world ranks of this group, for reports and the watchdog's liveness checks.
    MPI_Group group, world;
    MPI_Comm_group(comm_, &group);
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    std::vector<int> local(static_cast<size_t>(size_));
    for (int i = 0; i < size_; ++i) local[static_cast<size_t>(i)] = i;
    worldRanks_.resize(static_cast<size_t>(size_));
    MPI_Group_translate_ranks(group, size_, local.data(), world, worldRanks_.data());
    MPI_Group_free(&group);
    MPI_Group_free(&world);
    setLabel("");
  }
  ~MpiCommunicator() override {
    // Sends still in flight must finish before their buffers and the communicator go.
    (void)completeSends();
    if (shiftComm_ != MPI_COMM_NULL) MPI_Comm_free(&shiftComm_);
    if (comm_ != MPI_COMM_WORLD) MPI_Comm_free(&comm_);
    if (ownsMpi_) {
      stopMpiWatch();
      MPI_Finalize();
    }
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
    Call call(*this, "all_gather", n * 4);
    DTC_RETURN_IF_ERROR(call.arrive());
    return check(MPI_Allgather(in, static_cast<int>(n), MPI_FLOAT, out, static_cast<int>(n),
                               MPI_FLOAT, comm_),
                 "MPI_Allgather");
  }

  Status reduceScatterSum(const float* in, int64_t n, float* out) override {
    if (n > kMaxChunk) return Status::Internal("reduceScatter of more than 2^30 floats per rank");
    Call call(*this, "reduce_scatter", n * 4 * size_);
    DTC_RETURN_IF_ERROR(call.arrive());
    return check(MPI_Reduce_scatter_block(in, out, static_cast<int>(n), MPI_FLOAT, MPI_SUM, comm_),
                 "MPI_Reduce_scatter_block");
  }

  Status allToAll(const float* in, int64_t n, float* out) override {
    if (n > kMaxChunk) return Status::Internal("allToAll of more than 2^30 floats per rank");
    Call call(*this, "all_to_all", n * 4 * size_);
    DTC_RETURN_IF_ERROR(call.arrive());
    return check(MPI_Alltoall(in, static_cast<int>(n), MPI_FLOAT, out, static_cast<int>(n),
                              MPI_FLOAT, comm_),
                 "MPI_Alltoall");
  }

  // Reports call the group "dp (ranks 0,1)", "the job (ranks 0,1,2,3)": made once, not per call.
  void setLabel(const std::string& label) override {
    groupText_ =
        (label.empty() ? std::string("the job") : label) + " (" + rankList(worldRanks_) + ")";
  }

  [[noreturn]] void abortJob(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);  // MPI_Abort does not return; this keeps [[noreturn]] honest
  }

  Status broadcast(float* data, int64_t n, int root) override {
    Call call(*this, "broadcast from rank " + std::to_string(root), n * 4);
    DTC_RETURN_IF_ERROR(call.arrive());
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
    p.peer = worldRanks_[static_cast<size_t>(peer)];
    p.buffer = takeBuffer(bytes);
    if (bytes) std::memcpy(p.buffer.data(), data, static_cast<size_t>(bytes));
    // A message over INT_MAX bytes goes in chunks; MPI keeps messages with one source, tag and
    // communicator in order, so the receiver's chunks line up.
    for (int64_t at = 0; at == 0 || at < bytes; at += kMaxBytes) {
      MPI_Request request;
      Status s =
          check(MPI_Isend(p.buffer.data() + at, static_cast<int>(std::min(kMaxBytes, bytes - at)),
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
    Call call(*this,
              "recv from rank " + std::to_string(worldRanks_[static_cast<size_t>(peer)]) +
                  " (tag " + std::to_string(tag) + ")",
              bytes,
              {worldRanks_[static_cast<size_t>(rank_)], worldRanks_[static_cast<size_t>(peer)]});
    uint8_t* out = static_cast<uint8_t*>(data);
    for (int64_t at = 0; at == 0 || at < bytes; at += kMaxBytes) {
      const int want = static_cast<int>(std::min(kMaxBytes, bytes - at));
      MPI_Request request;
      DTC_RETURN_IF_ERROR(
          check(MPI_Irecv(out + at, want, MPI_BYTE, peer, tag, comm_, &request), "MPI_Irecv"));
      MPI_Status status;
      DTC_RETURN_IF_ERROR(call.wait(&request, 1, &status));
      int got = 0;
      MPI_Get_count(&status, MPI_BYTE, &got);
      if (got != want)
        return Status::Internal("MPI_Recv from rank " + std::to_string(peer) + " (tag " +
                                std::to_string(tag) + ") got " + std::to_string(got) +
                                " bytes, expected " + std::to_string(want));
    }
    return Status::Ok();
  }

  // On a duplicate of the group's communicator, made at the first shift (every member reaches
  // it at the same call), so that no tagged transfer of send/recv can match a shift's.
  Status shift(const void* in, void* out, int64_t bytes, int to, int from) override {
    DTC_RETURN_IF_ERROR(checkPeer(to, 0, bytes, "shift"));
    DTC_RETURN_IF_ERROR(checkPeer(from, 0, bytes, "shift"));
    Call call(*this,
              "ring shift to rank " + std::to_string(worldRanks_[static_cast<size_t>(to)]) +
                  " from rank " + std::to_string(worldRanks_[static_cast<size_t>(from)]),
              bytes,
              {worldRanks_[static_cast<size_t>(rank_)], worldRanks_[static_cast<size_t>(to)],
               worldRanks_[static_cast<size_t>(from)]});
    if (shiftComm_ == MPI_COMM_NULL) {
      DTC_RETURN_IF_ERROR(check(MPI_Comm_dup(comm_, &shiftComm_), "MPI_Comm_dup"));
      MPI_Comm_set_errhandler(shiftComm_, MPI_ERRORS_RETURN);
    }
    const uint8_t* source = static_cast<const uint8_t*>(in);
    uint8_t* target = static_cast<uint8_t*>(out);
    for (int64_t at = 0; at == 0 || at < bytes; at += kMaxBytes) {
      const int count = static_cast<int>(std::min(kMaxBytes, bytes - at));
      MPI_Request requests[2];
      DTC_RETURN_IF_ERROR(check(
          MPI_Irecv(target + at, count, MPI_BYTE, from, 0, shiftComm_, &requests[0]), "MPI_Irecv"));
      Status sent = check(MPI_Isend(source + at, count, MPI_BYTE, to, 0, shiftComm_, &requests[1]),
                          "MPI_Isend");
      if (!sent.ok()) {
        MPI_Cancel(&requests[0]);
        return sent;
      }
      DTC_RETURN_IF_ERROR(call.wait(requests, 2, nullptr));
    }
    return Status::Ok();
  }

  Status completeSends() override {
    Status first = Status::Ok();
    for (Pending& p : pending_) {
      Call call(*this, "send to rank " + std::to_string(p.peer),
                static_cast<int64_t>(p.buffer.size()),
                {worldRanks_[static_cast<size_t>(rank_)], p.peer});
      Status s = call.wait(p.requests.data(), static_cast<int>(p.requests.size()), nullptr);
      if (first.ok()) first = s;
      recycle(std::move(p.buffer));
    }
    pending_.clear();
    return first;
  }

  StatusOr<std::unique_ptr<Communicator>> split(int color, int key) override {
    Call call(*this, "split", 0);
    DTC_RETURN_IF_ERROR(call.arrive());
    MPI_Comm sub;
    DTC_RETURN_IF_ERROR(check(MPI_Comm_split(comm_, color, key, &sub), "MPI_Comm_split"));
    return std::unique_ptr<Communicator>(new MpiCommunicator(sub, false));
  }

 private:
  // In place, in chunks MPI's int counts can hold.
  Status allReduce(float* data, int64_t n, MPI_Op op, const char* what) {
    Call call(*this, op == MPI_MAX ? "all_reduce(max)" : "all_reduce", n * 4);
    DTC_RETURN_IF_ERROR(call.arrive());
    for (int64_t at = 0; at < n; at += kMaxChunk)
      DTC_RETURN_IF_ERROR(
          check(MPI_Allreduce(MPI_IN_PLACE, data + at,
                              static_cast<int>(std::min(kMaxChunk, n - at)), MPI_FLOAT, op, comm_),
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

  // One communication call, recorded for the flight recorder from construction to
  // destruction; its waits are bounded by the watchdog.
  class Call {
   public:
    // `ranks`: the world ranks it needs (default: the whole group).
    Call(MpiCommunicator& comm, const std::string& op, int64_t bytes, std::vector<int> ranks = {})
        : comm_(comm) {
      const std::string& group = comm.groupText_;
      // Collectives are numbered apart from point-to-point transfers, which ranks make in
      // different numbers: the same collective then has the same text on every rank of it (how
      // a timeout's census tells who arrived).
      const bool collective = ranks.empty();
      const uint64_t number = collective ? ++comm.collectives_ : ++comm.transfers_;
      on_.call = op + (comm.size_ > 1 && collective ? " over " + group : std::string()) +
                 (collective ? ", call #" : ", transfer #") + std::to_string(number);
      on_.ranks = ranks.empty() ? comm.worldRanks_ : std::move(ranks);
      id_ = beginCollective(op, group, bytes);
      if (comm.size_ > 1) waiting_.emplace(on_);
    }
    ~Call() { finishCollective(id_); }
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;

    // Until every rank of the group has reached this call.
    Status arrive() {
      if (comm_.size_ == 1) return Status::Ok();
      MPI_Request request;
      DTC_RETURN_IF_ERROR(check(MPI_Ibarrier(comm_.comm_, &request), "MPI_Ibarrier"));
      return wait(&request, 1, nullptr);
    }
    // `statuses`: one per request, or nullptr.
    Status wait(MPI_Request* requests, int count, MPI_Status* statuses) {
      return waitAll(requests, count, on_.call, statuses);
    }

   private:
    MpiCommunicator& comm_;
    WaitFor on_;
    uint64_t id_ = 0;
    std::optional<Waiting> waiting_;  // for the watchdog, while the call lasts
  };

  // A send in flight: its copy of the payload and one request per chunk.
  struct Pending {
    int peer = 0;  // world rank
    std::vector<uint8_t> buffer;
    std::vector<MPI_Request> requests;
  };

  // Frees the buffers of sends that have finished (MPI_Testall also lets MPI progress them).
  void reap() {
    for (size_t i = 0; i < pending_.size();) {
      int done = 0;
      Pending& p = pending_[i];
      if (MPI_Testall(static_cast<int>(p.requests.size()), p.requests.data(), &done,
                      MPI_STATUSES_IGNORE) == MPI_SUCCESS &&
          done) {
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
  MPI_Comm shiftComm_ = MPI_COMM_NULL;  // shift's own matching space (see shift)
  bool ownsMpi_;
  int rank_ = 0, size_ = 1;
  std::vector<int> worldRanks_;
  std::string groupText_;
  uint64_t collectives_ = 0, transfers_ = 0;
  std::vector<Pending> pending_;
  std::vector<std::vector<uint8_t>> spare_;
};

}  // namespace

StatusOr<std::unique_ptr<Communicator>> createMpiWorld() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  // Threads: the watchdog's thread talks to other ranks' while this one waits or computes.
  int provided = MPI_THREAD_SINGLE;
  if (!initialized)
    DTC_RETURN_IF_ERROR(check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided),
                              "MPI_Init_thread"));
  else
    MPI_Query_thread(&provided);
  DTC_RETURN_IF_ERROR(startMpiWatch(provided == MPI_THREAD_MULTIPLE));
  return std::unique_ptr<Communicator>(new MpiCommunicator(MPI_COMM_WORLD, !initialized));
}

}  // namespace dtc::comm
