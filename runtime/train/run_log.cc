#include "train/run_log.h"

#include <cstdio>
#include <string>

namespace dtc {
namespace {

// A step's numbers as TensorBoard scalars, as the progress line reports them.
Status writeScalars(TensorBoardWriter& board, int64_t step, const StepNumbers& n,
                    const Progress& progress, double seconds) {
  DTC_RETURN_IF_ERROR(board.scalar("train/loss", step, n.loss));
  DTC_RETURN_IF_ERROR(board.scalar("train/lr", step, n.lr));
  if (n.hasGradNorm) DTC_RETURN_IF_ERROR(board.scalar("train/grad_norm", step, n.gradNorm));
  DTC_RETURN_IF_ERROR(board.scalar(std::string("train/") + progress.throughputName(), step,
                                   progress.throughput(seconds)));
  if (progress.utilisation(seconds) >= 0)
    DTC_RETURN_IF_ERROR(board.scalar("train/mfu", step, progress.utilisation(seconds)));
  return board.flush();
}

}  // namespace

StatusOr<RunLog> RunLog::open(const TrainOptions& o, bool lead, int64_t firstStep, bool logged) {
  RunLog out;
  out.lead_ = lead;
  if (!lead) return out;
  if (!o.logging.log.empty() && logged) {
    DTC_ASSIGN_OR_RETURN(out.log_, TrainingLog::open(o.logging.log, firstStep));
  }
  if (!o.logging.tensorboard.empty()) {
    DTC_ASSIGN_OR_RETURN(out.board_, TensorBoardWriter::open(o.logging.tensorboard));
  }
  return out;
}

Status RunLog::step(int64_t step, const StepNumbers& numbers, Progress& progress,
                    int64_t skippedInARow, double seconds) {
  if (!lead_) return Status::Ok();
  std::printf("%s\n", progress.line(step, numbers, skippedInARow, seconds).c_str());
  std::fflush(stdout);
  if (log_) DTC_RETURN_IF_ERROR(log_->step(step, numbers, progress.samplesPerSecond(seconds)));
  if (board_) DTC_RETURN_IF_ERROR(writeScalars(*board_, step, numbers, progress, seconds));
  return Status::Ok();
}

Status RunLog::evaluation(int64_t step, double loss) {
  if (log_) DTC_RETURN_IF_ERROR(log_->evaluation(step, loss));
  if (board_) {
    DTC_RETURN_IF_ERROR(board_->scalar("eval/loss", step, loss));
    DTC_RETURN_IF_ERROR(board_->flush());
  }
  return Status::Ok();
}

}  // namespace dtc
