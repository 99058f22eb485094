// A checkpoint's index (index.json, written last): every tensor's name, dtype and whole shape,
// which file holds which box of it, a CRC-32 per file and per box, the step, and where the data
// stream stands. It is the only description of the files, so it is validated in full before
// anything is read: each tensor's boxes must tile it exactly.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/boxes.h"
#include "io/json.h"
#include "support/dtype.h"
#include "support/status.h"

namespace dtc::checkpoint {

inline constexpr const char* kIndexFormat = "dtc-checkpoint";
inline constexpr int kIndexVersion = 1;

struct SliceRecord {
  int file = 0;     // index into CheckpointIndex::files
  std::string key;  // the safetensors name within that file
  Box box;          // in the whole tensor
  uint32_t crc32 = 0;
};

struct TensorRecord {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // whole
  std::string role;            // "param" or "optim_state"
  std::vector<SliceRecord> slices;
};

struct FileRecord {
  std::string name;  // relative to the step directory
  int rank = 0;      // the rank that wrote it
  uint64_t bytes = 0;
  uint32_t crc32 = 0;
};

// What a run needs besides the tensors to continue exactly where it stopped.
struct Progress {
  int64_t step = 0;            // training steps done
  uint64_t seed = 0;           // the data order's seed
  int64_t samplesPerStep = 0;  // the global batch of one step, every micro-batch
  io::Json data;               // the data stream's position, as the batch source describes it
};

struct CheckpointIndex {
  Progress progress;
  std::string plan;  // the plan's file name when it was written (for people)
  std::string mesh;  // its mesh ("dp=2,tp=2"; empty: one device)
  std::vector<FileRecord> files;
  std::vector<TensorRecord> tensors;
  const TensorRecord* find(const std::string& name) const;
};

io::Json indexToJson(const CheckpointIndex& index);
// Parses and validates an index read from `path` (named in every error).
StatusOr<CheckpointIndex> parseIndex(std::string_view text, const std::string& path);

}  // namespace dtc::checkpoint
