// TensorBoard scalars (dtrun --tensorboard DIR): an event file TensorBoard reads as the run
// writes it, DIR/events.out.tfevents.<seconds>.<host>.<pid>, as PyTorch's SummaryWriter names
// them. A resumed run adds a file beside the earlier ones; TensorBoard joins them by step.
//
// The format is TFRecord framing around protobuf-encoded Event messages (tensorflow's
// core/util/event.proto: wall_time 1, step 2, file_version 3, summary 5; Summary.value 1;
// Summary.Value tag 1, simple_value 2), encoded here directly: a handful of fields does not
// need the protobuf runtime in dtrun.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "support/status.h"

namespace dtc {

class TensorBoardWriter {
 public:
  // Creates the event file in `dir` (which must exist) and writes its version record.
  static StatusOr<std::unique_ptr<TensorBoardWriter>> open(const std::string& dir);
  ~TensorBoardWriter();
  // One scalar; written at once (flush() makes it visible).
  Status scalar(const std::string& tag, int64_t step, double value);
  Status flush();
  const std::string& path() const { return path_; }

 private:
  Status record(const std::string& event);
  std::string path_;
  FILE* file_ = nullptr;
};

// CRC-32C (Castagnoli), which TFRecord frames carry, and its masked form.
uint32_t crc32c(const uint8_t* data, size_t size);
uint32_t maskedCrc32c(const uint8_t* data, size_t size);

}  // namespace dtc
