#include "train/checkpoint_manager.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "checkpoint/writer.h"
#include "comm/watchdog.h"
#include "support/runtime_options.h"
#include "train/numerics.h"

namespace dtc {
namespace {

// What a checkpoint of `step` records besides the state.
checkpoint::CheckpointRequest checkpointRequest(const RunState& run, const TrainOptions& o,
                                                int64_t step) {
  checkpoint::CheckpointRequest request;
  request.dir = o.checkpoint.dir;
  request.keep = o.checkpoint.keep;
  request.progress.step = step;
  request.progress.seed = run.seed;
  request.progress.samplesPerStep = run.samplesPerStep;
  // A run that trained no step (resumed at its end) still records its stream's position.
  request.progress.data = run.train ? run.train->position(step) : io::Json::object();
  return request;
}

// Rank 0's line for a published checkpoint.
void printWritten(const checkpoint::WrittenCheckpoint& w, bool background) {
  std::printf(
      "checkpoint: %s (%.3f GB in %d file%s, %s%.2f s: %.2f GB/s; slowest rank %.3f GB in %.2f "
      "s)\n",
      w.dir.c_str(), w.bytes / 1e9, w.files, w.files == 1 ? "" : "s",
      background ? "written in the background over " : "", w.seconds,
      w.bytes / 1e9 / std::max(w.seconds, 1e-9), w.slowestBytes / 1e9, w.slowestSeconds);
}

}  // namespace

CheckpointManager::CheckpointManager(const TrainOptions& o, RunState& run, comm::DeviceMesh& mesh,
                                     AgreedFailure& agreed, int64_t lastWritten)
    : o_(o), run_(run), mesh_(mesh), agreed_(agreed), last_(lastWritten), lead_(mesh.rank() == 0) {}

Status CheckpointManager::open() {
  if (o_.checkpoint.dir.empty() || !o_.checkpoint.async) return Status::Ok();
  StatusOr<std::unique_ptr<checkpoint::AsyncCheckpointWriter>> writer =
      checkpoint::AsyncCheckpointWriter::create(
          run_.layout, *run_.ex, mesh_.rank(),
          runtimeOptions().snapshotCopy == RuntimeOptions::SnapshotCopy::kBackground);
  DTC_RETURN_IF_ERROR(agree(mesh_.world(), writer.status(), agreed_));
  run_.async = std::move(writer).value();
  return Status::Ok();
}

Status CheckpointManager::finishWrite(bool waiting) {
  if (!run_.async || !run_.async->inFlight()) return Status::Ok();
  const int64_t step = run_.async->step();
  if (waiting && lead_ && !run_.async->locallyDone())
    std::printf("checkpoint: waiting for the write of step %lld, still in flight\n",
                (long long)step);
  comm::setPhase("publishing the checkpoint of step " + std::to_string(step));
  StatusOr<checkpoint::WrittenCheckpoint> written = run_.async->finish(mesh_.world());
  agreed_.agreed = !written.ok();
  DTC_RETURN_IF_ERROR(written.status());
  last_ = step;
  if (lead_) printWritten(*written, true);
  return Status::Ok();
}

Status CheckpointManager::writeAt(int64_t step, bool background) {
  DTC_RETURN_IF_ERROR(finishWrite(true));
  if (o_.checkpoint.dir.empty() || step == last_) return Status::Ok();
  comm::setPhase("checkpoint at step " + std::to_string(step));
  const std::string what = "checkpoint step-" + std::to_string(step);
  if (background && run_.async) {
    // The snapshot checks what it copies: the state is read once.
    StatusOr<double> snapshot = run_.async->takeSnapshot(what);
    DTC_RETURN_IF_ERROR(agree(mesh_.world(), snapshot.status(), agreed_));
    Status started = run_.async->startWrite(mesh_.world(), checkpointRequest(run_, o_, step));
    agreed_.agreed = !started.ok();
    DTC_RETURN_IF_ERROR(started);
    if (lead_)
      std::printf(
          "checkpoint: step %lld: training waited %.3f s for its snapshot, written in the "
          "background\n",
          (long long)step, *snapshot);
    return Status::Ok();
  }
  DTC_RETURN_IF_ERROR(checkFiniteState(*run_.ex, mesh_.world(), what, agreed_));
  StatusOr<checkpoint::WrittenCheckpoint> written = checkpoint::writeCheckpoint(
      *run_.ex, mesh_.world(), run_.layout, checkpointRequest(run_, o_, step));
  // Every rank has the writer's verdict: a failure ends the job in order.
  agreed_.agreed = !written.ok();
  DTC_RETURN_IF_ERROR(written.status());
  last_ = step;
  if (lead_) printWritten(*written, false);
  return Status::Ok();
}

bool CheckpointManager::writing() const {
  return run_.async && run_.async->inFlight() && !run_.async->locallyDone();
}

uint64_t CheckpointManager::hostBytes() const { return run_.async ? run_.async->hostBytes() : 0; }

}  // namespace dtc
