// A file written once, front to back, with as little of the machine's time as the file system
// allows: where it takes O_DIRECT, the bytes skip the page cache, staged through an aligned
// buffer a block-aligned piece at a time (the last block padded, the file then cut to its
// size). Written so, a checkpoint file costs a fraction of the kernel time it costs through the
// page cache (docs/benchmarks.md has the measurement), and kernel time is what a background write
// takes from training. Where O_DIRECT is refused (tmpfs, some network file systems), plain
// writes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "support/status.h"

namespace dtc::io {

class SequentialFile {
 public:
  // Creates (or empties) `path`; errors name `what`.
  static StatusOr<SequentialFile> create(const std::string& path, const std::string& what);
  SequentialFile(SequentialFile&& other) noexcept;
  SequentialFile& operator=(SequentialFile&&) = delete;
  ~SequentialFile();  // closes without syncing (an unfinished file is its owner's to remove)

  Status append(const void* data, size_t bytes);
  // Writes what is staged, syncs and closes the file.
  Status finish();
  bool direct() const { return direct_; }

 private:
  SequentialFile() = default;
  Status flush(bool last);  // writes the staged bytes (whole blocks unless `last`)
  std::string what_;
  int fd_ = -1;
  bool direct_ = false;
  struct Free {
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t, Free> stage_;
  size_t staged_ = 0;
  uint64_t size_ = 0;  // bytes appended
};

}  // namespace dtc::io
