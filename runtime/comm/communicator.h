// Collectives among the processes of one group (a mesh axis, or the whole job). In place where
// the operation allows; every call is collective over the group unless it says otherwise, and
// every failure is a Status, never an abort.
#pragma once

#include <cstdint>
#include <memory>

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
  // Point to point (not collective): blocks until the peer's matching call.
  virtual Status send(const float* data, int64_t n, int peer) = 0;
  virtual Status recv(float* data, int64_t n, int peer) = 0;
  // Ends every process of the job with `code` (MPI_Abort): a rank that fails while the others
  // wait in a collective must not leave them hanging.
  [[noreturn]] virtual void abortJob(int code) = 0;
  // The group of ranks that pass the same `color`, ordered by `key` (MPI_Comm_split).
  virtual StatusOr<std::unique_ptr<Communicator>> split(int color, int key) = 0;
};

// One process: every collective is the identity (or a copy).
std::unique_ptr<Communicator> createSingleProcess();

// The whole job through MPI (MPI_Init on first use, MPI_Finalize when the returned world is
// destroyed).
StatusOr<std::unique_ptr<Communicator>> createMpiWorld();

}  // namespace dtc::comm
