#include "checkpoint/async_writer.h"

#include <cstring>

#include "plan/communication.h"

namespace dtc::checkpoint {
namespace {

constexpr int64_t kCopyGrain = int64_t{4} << 20;  // bytes a thread copies at least

}  // namespace

AsyncCheckpointWriter::~AsyncCheckpointWriter() {
  cancel_ = true;
  if (thread_.joinable()) thread_.join();
}

StatusOr<double> AsyncCheckpointWriter::start(Executor& ex, comm::Communicator& world,
                                              const CheckpointRequest& request) {
  if (inFlight()) return Status::Internal("checkpoint: a write is already in flight");
  started_ = std::chrono::steady_clock::now();
  request_ = request;
  planName_ = ex.plan().name();
  mesh_ = meshText(ex.plan());
  DTC_RETURN_IF_ERROR(prepareStep(world, request_));
  pieces_ = piecesOf(layout_, world.rank());
  offsets_.clear();
  uint64_t total = 0;
  for (const WritePiece& p : pieces_) {
    offsets_.push_back(total);
    total += p.bytes;
  }
  if (total > capacity_) {
    snapshot_.reset(new uint8_t[total]);
    capacity_ = total;
  }
  // The copy is the stall training sees: the pool's threads share each piece.
  std::vector<uint8_t> scratch;
  for (size_t i = 0; i < pieces_.size(); ++i) {
    DTC_ASSIGN_OR_RETURN(const uint8_t* bytes, pieceBytes(ex, pieces_[i], scratch));
    uint8_t* to = snapshot_.get() + offsets_[i];
    ex.pool().parallelFor(
        static_cast<int64_t>(pieces_[i].bytes), kCopyGrain, [&](int64_t begin, int64_t end) {
          std::memcpy(to + begin, bytes + begin, static_cast<size_t>(end - begin));
        });
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  done_ = false;
  cancel_ = false;
  thread_ = std::thread([this, rank = world.rank()] {
    report_ = writeRankFile(
        pieces_, stepTmpDirectory(request_), rank,
        [this](size_t i) -> StatusOr<const uint8_t*> { return snapshot_.get() + offsets_[i]; },
        &cancel_);
    done_ = true;
  });
  return seconds;
}

StatusOr<WrittenCheckpoint> AsyncCheckpointWriter::finish(comm::Communicator& world) {
  if (!inFlight()) return Status::Internal("checkpoint: no write is in flight");
  thread_.join();
  return publishStep(world, layout_, request_, planName_, mesh_, std::move(report_), started_);
}

}  // namespace dtc::checkpoint
