// Checkpoints written while training goes on: at the step boundary each rank copies its pieces
// of the state into host memory (the snapshot) and a background thread writes them to its file;
// once every rank's file is synced (the ranks agree at a step boundary), rank 0 publishes the
// step as a synchronous write does: index last, the rename, then `latest`. A crash at any
// moment leaves the previous complete checkpoint. At most one write is in flight: the next
// snapshot waits for it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/rank_file.h"

namespace dtc::checkpoint {

class AsyncCheckpointWriter {
 public:
  // `layout` and `ex` outlive the writer. Reserves the snapshot's host memory for `rank`'s pieces
  // now, with its pages mapped (an error where there is not enough) and, on a device backend,
  // page-locked, so that no step pays for it.
  static StatusOr<std::unique_ptr<AsyncCheckpointWriter>> create(const CheckpointLayout& layout,
                                                                 Executor& ex, int rank);
  // A write still in flight is abandoned: its thread stops between pieces and the step's
  // temporary directory stays for the next run to remove.
  ~AsyncCheckpointWriter();
  AsyncCheckpointWriter(const AsyncCheckpointWriter&) = delete;
  AsyncCheckpointWriter& operator=(const AsyncCheckpointWriter&) = delete;

  // With no write in flight: copies this rank's pieces of the state into the snapshot (on a
  // device backend straight from the device: no pullState) and checks them on the way; a
  // NonFinite error names the first piece's tensor holding inf or NaN, saying that `what` is not
  // written. This copy is the stall training sees. Returns its seconds.
  StatusOr<double> takeSnapshot(const std::string& what);
  // Collective, once every rank's snapshot is taken: prepares the step's directory and starts
  // writing the snapshot in the background.
  Status startWrite(comm::Communicator& world, const CheckpointRequest& request);
  bool inFlight() const { return thread_.joinable(); }
  // This rank's file is written (or failed): finishing would not wait for it.
  bool locallyDone() const { return done_.load(); }
  // Collective, with a write in flight: waits for this rank's file, then rank 0 publishes the
  // step; every rank learns the verdict.
  StatusOr<WrittenCheckpoint> finish(comm::Communicator& world);
  // The step in flight.
  int64_t step() const { return request_.progress.step; }
  // The snapshot's host memory.
  uint64_t hostBytes() const { return bytes_; }

 private:
  AsyncCheckpointWriter(const CheckpointLayout& layout, Executor& ex) : layout_(layout), ex_(ex) {}
  // Copies piece `i` into the snapshot; whether its values are all finite.
  StatusOr<bool> copyPiece(size_t i, std::vector<uint8_t>& scratch);
  const CheckpointLayout& layout_;
  Executor& ex_;
  CheckpointRequest request_;
  std::string planName_, mesh_;
  std::vector<WritePiece> pieces_;
  std::vector<size_t> offsets_;  // each piece's bytes in the snapshot
  uint8_t* snapshot_ = nullptr;  // mapped for bytes_
  bool pinned_ = false;
  uint64_t bytes_ = 0;
  std::thread thread_;
  std::atomic<bool> done_{false}, cancel_{false};
  RankReport report_;
  std::chrono::steady_clock::time_point started_;
};

}  // namespace dtc::checkpoint
