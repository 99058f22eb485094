#include "train/training_log.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "io/files.h"
#include "io/json.h"

namespace dtc {

StatusOr<std::unique_ptr<TrainingLog>> TrainingLog::open(const std::string& path,
                                                         int64_t firstStep) {
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

namespace {

// A JSON number, or null for inf and NaN (which JSON cannot hold).
std::string number(double v, const char* format) {
  if (!std::isfinite(v)) return "null";
  char text[48];
  std::snprintf(text, sizeof text, format, v);
  return text;
}

}  // namespace

Status TrainingLog::step(int64_t step, const StepNumbers& s, double samplesPerSecond) {
  // The learning rate to the last bit: it is computed here, as PyTorch's schedulers compute it.
  std::string line = "{\"step\":" + std::to_string(step) + ",\"loss\":" + number(s.loss, "%.9g") +
                     ",\"lr\":" + number(s.lr, "%.17g");
  if (s.hasGradNorm) line += ",\"grad_norm\":" + number(s.gradNorm, "%.9g");
  if (s.skipped) line += ",\"skipped\":true";
  line += ",\"samples_per_s\":" + number(samplesPerSecond, "%.6g") + "}\n";
  return write(line);
}

Status TrainingLog::evaluation(int64_t step, double valLoss) {
  return write("{\"step\":" + std::to_string(step) + ",\"val_loss\":" + number(valLoss, "%.9g") +
               "}\n");
}

}  // namespace dtc
