// A file written once, front to back, with as little of the machine's time as the file system
// allows: where it takes O_DIRECT, the bytes skip the page cache, staged through an aligned
// buffer a block-aligned piece at a time (the last block padded, the file then cut to its
// size). On the development VM a 1.5 GB checkpoint file was written and synced at 2.4 GB/s with
// 0.3 s of kernel time this way, against 0.57 GB/s and 2.3 s through the page cache (dd): the
// kernel time is what a background write takes from training. Where O_DIRECT is refused
// (tmpfs, some network file systems), plain writes.
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
