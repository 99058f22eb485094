#include "train/training_log.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "io/files.h"
#include "io/json.h"

namespace dtc {

StatusOr<std::unique_ptr<TrainingLog>> TrainingLog::open(const std::string& path, int64_t firstStep) {
  auto log = std::make_unique<TrainingLog>();
  log->path_ = path;
  if (firstStep > 1 && io::isRegularFile(path)) {
    // Keep the lines of the steps before this run's first, up to the first line that is not
    // one (a line cut short by the crash).
    std::ifstream in(path);
    std::string kept, line;
    while (std::getline(in, line)) {
      auto entry = io::parseJson(line);
      const io::Json* step = entry.ok() ? entry->find("step") : nullptr;
      if (!step || !step->isInteger() || step->asInt() >= firstStep) break;
      kept += line + "\n";
    }
    DTC_RETURN_IF_ERROR(io::writeFileAtomically(path, kept.data(), kept.size()));
    log->out_.open(path, std::ios::app);
  } else {
    log->out_.open(path, std::ios::trunc);
  }
  if (!log->out_) return Status::InvalidInput("cannot write log file " + path);
  return log;
}

Status TrainingLog::write(const std::string& line) {
  out_ << line << std::flush;
  if (!out_) return Status::Internal("cannot write log file " + path_);
  return Status::Ok();
}

Status TrainingLog::step(int64_t step, float loss, double lr, double gradNorm, double samplesPerSecond) {
  char line[256];
  // The learning rate to the last bit: it is computed here, as PyTorch's schedulers compute it.
  int n = std::snprintf(line, sizeof line, "{\"step\":%lld,\"loss\":%.9g,\"lr\":%.17g",
                        static_cast<long long>(step), loss, lr);
  if (!std::isnan(gradNorm)) n += std::snprintf(line + n, sizeof line - n, ",\"grad_norm\":%.9g", gradNorm);
  std::snprintf(line + n, sizeof line - n, ",\"samples_per_s\":%.6g}\n", samplesPerSecond);
  return write(line);
}

Status TrainingLog::evaluation(int64_t step, double valLoss) {
  char line[128];
  std::snprintf(line, sizeof line, "{\"step\":%lld,\"val_loss\":%.9g}\n", static_cast<long long>(step), valLoss);
  return write(line);
}

}  // namespace dtc
