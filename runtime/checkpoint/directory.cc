#include "checkpoint/directory.h"

#include <algorithm>
#include <vector>

#include "io/files.h"

namespace dtc::checkpoint {
namespace {

constexpr uint64_t kMaxIndexBytes = 1ull << 30;

bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Complete step directories of `dir`, newest first.
StatusOr<std::vector<std::pair<int64_t, std::string>>> completeSteps(const std::string& dir) {
  DTC_ASSIGN_OR_RETURN(std::vector<std::string> names, io::listDirectory(dir));
  std::vector<std::pair<int64_t, std::string>> steps;
  for (const std::string& name : names) {
    int64_t step;
    if (parseStepDirectoryName(name, step) &&
        io::isRegularFile(dir + "/" + name + "/" + kIndexFile))
      steps.push_back({step, name});
  }
  std::sort(steps.rbegin(), steps.rend());
  return steps;
}

// The step directory name `latest` points to, or "" when it is missing or names no complete
// step.
std::string latestTarget(const std::string& dir) {
  StatusOr<std::string> target = io::readSymlink(dir + "/" + kLatest);
  int64_t step;
  if (!target.ok() || !parseStepDirectoryName(*target, step) ||
      !io::isRegularFile(dir + "/" + *target + "/" + kIndexFile))
    return "";
  return *target;
}

}  // namespace

std::string stepDirectoryName(int64_t step) { return "step-" + std::to_string(step); }

bool parseStepDirectoryName(const std::string& name, int64_t& step) {
  if (name.size() <= 5 || name.compare(0, 5, "step-") != 0 || name.size() > 5 + 18) return false;
  step = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
    step = step * 10 + (name[i] - '0');
  }
  return true;
}

Status removeLeftovers(const std::string& dir) {
  DTC_ASSIGN_OR_RETURN(std::vector<std::string> names, io::listDirectory(dir));
  for (const std::string& name : names) {
    const bool interruptedStep =
        name.compare(0, 5, "step-") == 0 && (endsWith(name, ".tmp") || endsWith(name, ".old"));
    const bool temporaryLink =
        name.compare(0, std::string(kLatest).size() + 5, std::string(kLatest) + ".tmp.") == 0;
    if (interruptedStep || temporaryLink) DTC_RETURN_IF_ERROR(io::removeTree(dir + "/" + name));
  }
  return Status::Ok();
}

Status checkNoEarlierRun(const std::string& dir) {
  if (!io::isDirectory(dir)) return Status::Ok();
  DTC_ASSIGN_OR_RETURN(auto steps, completeSteps(dir));
  if (steps.empty()) return Status::Ok();
  return Status::InvalidInput(
      "--checkpoint " + dir +
      " holds an earlier run's checkpoints (the newest: " + steps.front().second +
      "): continue it with --resume " + dir + ", or give this run a new folder");
}

Status removeOldSteps(const std::string& dir, int keep) {
  if (keep <= 0) return Status::Ok();
  DTC_ASSIGN_OR_RETURN(auto steps, completeSteps(dir));
  const std::string latest = latestTarget(dir);
  for (size_t i = static_cast<size_t>(keep); i < steps.size(); ++i)
    if (steps[i].second != latest) DTC_RETURN_IF_ERROR(io::removeTree(dir + "/" + steps[i].second));
  return Status::Ok();
}

StatusOr<std::string> resolveCheckpoint(const std::string& path) {
  if (!io::isDirectory(path))
    return Status::InvalidInput("--resume " + path + ": no such directory");
  if (io::pathExists(path + "/" + kIndexFile)) return path;
  std::string latest = latestTarget(path);
  if (!latest.empty()) return path + "/" + latest;
  DTC_ASSIGN_OR_RETURN(auto steps, completeSteps(path));
  if (steps.empty())
    return Status::InvalidInput("--resume " + path + ": no checkpoint there (no " + kIndexFile +
                                ", no complete step-<N> folder)");
  return path + "/" + steps.front().second;
}

StatusOr<CheckpointIndex> readIndex(const std::string& stepDir) {
  const std::string path = stepDir + "/" + kIndexFile;
  DTC_ASSIGN_OR_RETURN(std::string text, io::readSmallFile(path, kMaxIndexBytes));
  return parseIndex(text, path);
}

Status checkFile(const std::string& stepDir, const FileRecord& file) {
  const std::string path = stepDir + "/" + file.name;
  StatusOr<uint64_t> bytes = io::fileSize(path);
  if (!bytes.ok())
    return Status::InvalidInput("checkpoint " + stepDir +
                                " is incomplete: " + bytes.status().message());
  if (*bytes != file.bytes)
    return Status::InvalidInput(path + " is truncated or damaged: " + std::to_string(*bytes) +
                                " bytes, the index says " + std::to_string(file.bytes));
  return Status::Ok();
}

}  // namespace dtc::checkpoint
