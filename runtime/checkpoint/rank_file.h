// The steps every checkpoint write shares, written at once (writer.h) or in the background
// (async_writer.h): each rank's pieces and its file, rank 0 gathering the ranks' reports, and the
// step published (index last, the rename, then `latest`) only once every rank's file is synced.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/layout.h"
#include "checkpoint/writer.h"
#include "comm/communicator.h"
#include "exec/executor.h"
#include "io/safetensors.h"

namespace dtc::checkpoint {

// One piece this rank writes: a slice of a state tensor, in layout order.
struct WritePiece {
  const PlannedTensor* tensor = nullptr;
  const PlannedSlice* slice = nullptr;
  size_t bytes = 0;
};
std::vector<WritePiece> piecesOf(const CheckpointLayout& layout, int rank);

// Where `piece`'s bytes lie in one range of its local tensor (of shape `local`): the range's
// first byte there; nullopt where they do not (a column block of a fused q/k/v weight).
std::optional<uint64_t> pieceRangeInLocal(const WritePiece& piece,
                                          const std::vector<int64_t>& local);
// Where `piece`'s bytes lie in its local tensor as `rows` runs of `rowBytes` each, `pitch`
// bytes apart from `offset` (a column block of a fused q/k/v weight: one row per input row);
// nullopt where they lie in no such pattern. A piece is one row exactly when it lies in one
// range (pieceRangeInLocal).
struct PieceRows {
  uint64_t offset = 0, rowBytes = 0, pitch = 0, rows = 1;
};
std::optional<PieceRows> pieceRowsInLocal(const WritePiece& piece,
                                          const std::vector<int64_t>& local);
// Copies `piece` out of its whole local tensor (`local`'s shape, `whole`'s bytes) to `to`.
void copyPieceOut(const WritePiece& piece, const std::vector<int64_t>& local, const uint8_t* whole,
                  uint8_t* to);
// `piece`'s bytes in this rank's state (the host copy): in place where they lie in one range,
// else copied out to `scratch`.
StatusOr<const uint8_t*> pieceBytes(Executor& ex, const WritePiece& piece,
                                    std::vector<uint8_t>& scratch);

// Where this rank's file puts `pieces`: its header, then each piece's first byte. A snapshot laid
// out at these offsets is the file's image, which O_DIRECT writes without a staging copy.
StatusOr<io::SafetensorsLayout> rankFileLayout(const std::vector<WritePiece>& pieces, int rank);

// What a rank tells rank 0 once its file is on disk.
struct RankReport {
  Status status;
  bool wroteFile = false;
  io::WrittenSafetensors file;
  double seconds = 0;
};

// Writes `pieces` to this rank's file in `stepTmp` and syncs it; `bytesOf(i)` gives piece i's
// bytes. `cancel`, when set, stops the write between pieces (the file is left unfinished, as a
// crash leaves it).
RankReport writeRankFile(const std::vector<WritePiece>& pieces, const std::string& stepTmp,
                         int rank, const std::function<StatusOr<const uint8_t*>(size_t)>& bytesOf,
                         const std::atomic<bool>* cancel = nullptr);

// The temporary directory a step is written to.
std::string stepTmpDirectory(const CheckpointRequest& request);

// Collective: rank 0 makes the step's temporary directory afresh; every rank learns whether it
// could.
Status prepareStep(comm::Communicator& world, const CheckpointRequest& request);

// Collective: rank 0 gathers every rank's report and, if all wrote their files, publishes the
// step; every rank learns the verdict. `start` is when the write began.
StatusOr<WrittenCheckpoint> publishStep(comm::Communicator& world, const CheckpointLayout& layout,
                                        const CheckpointRequest& request,
                                        const std::string& planName, const std::string& mesh,
                                        RankReport mine,
                                        std::chrono::steady_clock::time_point start);

}  // namespace dtc::checkpoint
