// Collectives among the processes of one group (a mesh axis, or the whole job). In place where
// the operation allows; every call is collective over the group unless it says otherwise, and
// every failure is a Status, never an abort. A wait for other ranks is bounded by the
// watchdog's timeout (comm/watchdog.h): past it, the job ends with a report.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "support/status.h"

namespace dtc::comm {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // data[0, n) = Σ over ranks of data[0, n).
  virtual Status allReduceSum(float* data, int64_t n) = 0;
  // data[0, n) = elementwise maximum over ranks of data[0, n).
  virtual Status allReduceMax(float* data, int64_t n) = 0;
  // out[r·n, (r+1)·n) = rank r's in[0, n).
  virtual Status allGather(const float* in, int64_t n, float* out) = 0;
  // out[0, n) = Σ over ranks of their in[rank·n, (rank+1)·n).
  virtual Status reduceScatterSum(const float* in, int64_t n, float* out) = 0;
  // out[r·n, (r+1)·n) = rank r's in[rank·n, (rank+1)·n): block j of `in` goes to rank j.
  virtual Status allToAll(const float* in, int64_t n, float* out) = 0;
  // Every rank's data[0, n) = root's.
  virtual Status broadcast(float* data, int64_t n, int root) = 0;
  // Every member sends in[0, bytes) to member `to` and receives out[0, bytes) from member
  // `from` (a ring's step: to = rank + k, from = rank − k). Collective, so it is matched by call
  // order, apart from the tagged transfers below.
  virtual Status shift(const void* in, void* out, int64_t bytes, int to, int from) = 0;
  // Point to point (not collective), `bytes` of any dtype; `tag` in [0, kMaxTag] tells apart
  // transfers between the same two ranks, which may then be received in any order. `send` never
  // blocks: the bytes are copied to a buffer the communicator owns and sent in the background,
  // so two neighbours may both send before either receives (a 1F1B pipeline's steady state
  // would deadlock on blocking sends). `recv` blocks until the message has arrived.
  static constexpr int kMaxTag = 32767;  // the least tag bound MPI guarantees
  virtual Status send(const void* data, int64_t bytes, int peer, int tag) = 0;
  virtual Status recv(void* data, int64_t bytes, int peer, int tag) = 0;
  // Waits until every send so far has been delivered (or at least copied out by MPI) and frees
  // their buffers. Destroying a communicator completes them too.
  virtual Status completeSends() = 0;
  // Ends every process of the job with `code` (MPI_Abort): a rank that fails while the others
  // wait in a collective must not leave them hanging.
  [[noreturn]] virtual void abortJob(int code) = 0;
  // What reports call this group ("dp", "tp,dp"); the whole job by default.
  virtual void setLabel(const std::string& label) { (void)label; }
  // The group of ranks that pass the same `color`, ordered by `key` (MPI_Comm_split).
  virtual StatusOr<std::unique_ptr<Communicator>> split(int color, int key) = 0;
};

// Text of any length from this rank to `peer` and back (a length, then the bytes, on `tag`):
// reports and error messages that one rank gathers from others. sendText completes its sends.
Status sendText(Communicator& comm, const std::string& text, int peer, int tag);
StatusOr<std::string> recvText(Communicator& comm, int peer, int tag);

// One process: every collective is the identity (or a copy).
std::unique_ptr<Communicator> createSingleProcess();

// The whole job through MPI (MPI_Init on first use, MPI_Finalize when the returned world is
// destroyed).
StatusOr<std::unique_ptr<Communicator>> createMpiWorld();

}  // namespace dtc::comm
