#include "train/training_log.h"

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

Status TrainingLog::step(int64_t step, float loss, double samplesPerSecond) {
  char line[160];
  std::snprintf(line, sizeof line, "{\"step\":%lld,\"loss\":%.9g,\"samples_per_s\":%.6g}\n",
                static_cast<long long>(step), loss, samplesPerSecond);
  out_ << line << std::flush;
  if (!out_) return Status::Internal("cannot write log file " + path_);
  return Status::Ok();
}

}  // namespace dtc
