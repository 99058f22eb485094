// Checkpoints written while training goes on: at the step boundary each rank copies its pieces
// of the state into host memory (the snapshot) and a background thread writes them to its file;
// once every rank's file is synced (the ranks agree at a step boundary), rank 0 publishes the
// step as a synchronous write does: index last, the rename, then `latest`. A crash at any
// moment leaves the previous complete checkpoint. At most one write is in flight: the next
// snapshot waits for it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/rank_file.h"

namespace dtc::checkpoint {

class AsyncCheckpointWriter {
 public:
  // `layout` and `ex` outlive the writer. Reserves the snapshot's host memory for `rank`'s pieces
  // now, with its pages mapped (an error where there is not enough) and, on a device backend,
  // page-locked, so that no step pays for it. `besideStep`: in host memory, the writer thread
  // copies the snapshot while the next step runs (else the training threads, in the step).
  static StatusOr<std::unique_ptr<AsyncCheckpointWriter>> create(const CheckpointLayout& layout,
                                                                 Executor& ex, int rank,
                                                                 bool besideStep);
  // A write still in flight is abandoned: its thread stops between pieces and the step's
  // temporary directory stays for the next run to remove.
  ~AsyncCheckpointWriter();
  AsyncCheckpointWriter(const AsyncCheckpointWriter&) = delete;
  AsyncCheckpointWriter& operator=(const AsyncCheckpointWriter&) = delete;

  // With no write in flight: takes the snapshot of this rank's pieces of the state, each checked
  // for inf and NaN by whichever thread copies it. On a device backend the pieces are downloaded
  // now, straight from the device, and the writer thread checks them. In host memory, the
  // training threads copy them now (checked on the way: a NonFinite error names the first piece's
  // tensor holding inf or NaN, saying that `what` is not written) or, `besideStep`, the writer
  // thread copies them beside the next step, and the first step that would write the state
  // (Executor::deferStateRead) has the training threads copy what is left first. A check made
  // in the background fails the write: finish() returns that NonFinite error, and the previous
  // checkpoint stays the last. Returns the seconds training waited.
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
  AsyncCheckpointWriter(const CheckpointLayout& layout, Executor& ex, bool besideStep)
      : layout_(layout), ex_(ex), besideStep_(besideStep) {}
  // Copies piece `i` from the device into the snapshot.
  Status downloadPiece(size_t i, std::vector<uint8_t>& scratch);
  // Copies piece `i` from the host state into the snapshot on every training thread; whether
  // its values are all finite.
  bool hostPieceFinite(size_t i);
  // Claims and copies chunks of the host copy until none is left (or the write is cancelled).
  void copyChunks();
  // Returns once every chunk is copied (or the write is cancelled).
  void waitCopied();
  // Piece `i` holds inf or NaN (the first such piece is the one named).
  void noteNonFinite(size_t i);
  Status nonFiniteError(size_t i) const;
  const CheckpointLayout& layout_;
  Executor& ex_;
  const bool besideStep_;
  CheckpointRequest request_;
  std::string what_;  // the checkpoint, as errors name it
  static constexpr size_t kAllFinite = SIZE_MAX;
  std::atomic<size_t> nonFinite_{kAllFinite};  // the first piece found holding inf or NaN
  std::string planName_, mesh_;
  std::vector<WritePiece> pieces_;
  std::vector<size_t> offsets_;  // each piece's bytes in the snapshot
  uint8_t* snapshot_ = nullptr;  // mapped for bytes_
  bool pinned_ = false;
  uint64_t bytes_ = 0;
  // The host copy beside the step in chunks (of one piece each), claimed in order by whichever
  // thread is free; empty where the snapshot is copied in the step.
  struct Chunk {
    size_t piece;
    uint64_t begin, bytes;  // within the piece; a piece that is no one range of its tensor is
                            // one chunk, copied out of the whole of it
  };
  std::vector<Chunk> chunks_;
  std::vector<TensorView> locals_;              // each piece's local tensor (the host copy's)
  std::vector<std::optional<PieceRows>> rows_;  // pieceRowsInLocal of each piece
  // Where piece `i` lies in one range of its local tensor (pieceRangeInLocal): its one row.
  std::optional<uint64_t> rangeOf(size_t i) const {
    if (rows_[i] && rows_[i]->rows == 1) return rows_[i]->offset;
    return std::nullopt;
  }
  std::atomic<size_t> nextChunk_{0}, chunksCopied_{0};
  std::mutex copyMutex_;
  std::condition_variable copied_;
  std::thread thread_;
  std::atomic<bool> done_{false}, cancel_{false};
  RankReport report_;
  std::chrono::steady_clock::time_point started_;
};

}  // namespace dtc::checkpoint
