// A read-only memory mapping of a whole file, unmapped on destruction. Move-only.
//
// A mapped file that changes under the process is the user's mistake, not a crash: a read past
// the end of a truncated file (SIGBUS) ends the process with a one-line error naming the file
// (exit code 2), and checkMappedFiles() finds a changed size or modification time between
// steps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "support/status.h"

namespace dtc::io {

class MappedFile {
 public:
  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  // Maps `path`: a missing file or a directory is an InvalidInput error naming it.
  static StatusOr<MappedFile> open(const std::string& path);

  const uint8_t* data() const { return static_cast<const uint8_t*>(map_); }
  size_t size() const { return size_; }

  struct Watched;  // what checkMappedFiles() and the SIGBUS handler know of a mapping

 private:
  void* map_ = nullptr;
  size_t size_ = 0;
  Watched* watched_ = nullptr;
};

// Every file mapped now still has the size and modification time it had when it was mapped;
// otherwise an InvalidInput error naming the first that changed.
Status checkMappedFiles();

}  // namespace dtc::io
