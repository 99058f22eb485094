#include "checkpoint/writer.h"

#include "checkpoint/rank_file.h"
#include "planfile/communication.h"

namespace dtc::checkpoint {

StatusOr<WrittenCheckpoint> writeCheckpoint(Executor& ex, comm::Communicator& world,
                                            const CheckpointLayout& layout,
                                            const CheckpointRequest& request) {
  const auto start = std::chrono::steady_clock::now();
  DTC_RETURN_IF_ERROR(prepareStep(world, request));
  const std::vector<WritePiece> pieces = piecesOf(layout, world.rank());
  std::vector<uint8_t> scratch;
  RankReport mine = writeRankFile(pieces, stepTmpDirectory(request), world.rank(),
                                  [&](size_t i) { return pieceBytes(ex, pieces[i], scratch); });
  return publishStep(world, layout, request, ex.plan().name(), meshText(ex.plan()), std::move(mine),
                     start);
}

}  // namespace dtc::checkpoint
