// A checkpoint directory:
//   DIR/step-<N>/index.json                 written last, by rank 0
//   DIR/step-<N>/rank-<R>.safetensors       one per rank that holds pieces to write
//   DIR/latest -> step-<N>                  switched only once step-<N> is complete and synced
// A step is written as DIR/step-<N>.tmp and renamed when complete, so any step-<N> holds a
// whole checkpoint; what a crash leaves behind ends in .tmp (or .old, a step being replaced) and
// is removed by the next run that writes to DIR.
#pragma once

#include <cstdint>
#include <string>

#include "checkpoint/index.h"
#include "support/status.h"

namespace dtc::checkpoint {

inline constexpr const char* kIndexFile = "index.json";
inline constexpr const char* kLatest = "latest";

std::string stepDirectoryName(int64_t step);
// The step of a directory named "step-<N>" (N decimal), or false.
bool parseStepDirectoryName(const std::string& name, int64_t& step);

// Removes what interrupted writes left in `dir` (step-*.tmp, step-*.old, temporary links).
Status removeLeftovers(const std::string& dir);
// A fresh run's checkpoint directory must not hold checkpoints: writing its steps there would
// replace an earlier run's. An error naming the newest and the two ways on, or Ok.
Status checkNoEarlierRun(const std::string& dir);
// Keeps the `keep` newest complete steps of `dir` (0: all) and the one `latest` names.
Status removeOldSteps(const std::string& dir, int keep);

// The step directory `path` names: a step-<N> directory itself, or a checkpoint directory,
// meaning its latest complete step (where `latest` points; without a valid `latest`, the
// highest step-<N> with an index).
StatusOr<std::string> resolveCheckpoint(const std::string& path);

// Reads and validates `stepDir`/index.json.
StatusOr<CheckpointIndex> readIndex(const std::string& stepDir);
// Checks that a file the index lists is there with the size it records: a truncated file is
// named before anything is read from it. (Each rank checks the files it reads.)
Status checkFile(const std::string& stepDir, const FileRecord& file);

}  // namespace dtc::checkpoint
