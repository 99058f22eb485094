// safetensors files (https://github.com/huggingface/safetensors): an 8-byte little-endian header
// length N, N bytes of JSON naming each tensor's dtype, shape and byte range within the data
// section, then the data section. dtypes: "F32", "F16", "BF16", "I32", "I64".
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "io/mapped_file.h"
#include "io/sequential_file.h"
#include "support/dtype.h"
#include "support/status.h"

namespace dtc::io {

struct TensorRef {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const void* data;
  size_t bytes;  // must equal product(shape) * dtypeSize(dtype)
};

// What a writer reports: the file's size and CRC-32 (io/crc32.h), and each tensor's CRC-32 in
// the order the tensors were given.
struct WrittenSafetensors {
  uint64_t bytes = 0;
  uint32_t crc32 = 0;
  std::vector<uint32_t> tensorCrc32;
};

// Where a file holding `tensors` (their data pointers unused) puts them: the bytes before the
// data section (the length and the header, as SafetensorsWriter writes them) and each tensor's
// first byte in the data section, in the order given. Duplicate names or inconsistent sizes
// are Internal errors naming `path`.
struct SafetensorsLayout {
  std::string prefix;
  std::vector<uint64_t> offsets;
  uint64_t dataBytes = 0;
};
StatusOr<SafetensorsLayout> layoutSafetensors(const std::string& path,
                                              const std::vector<TensorRef>& tensors,
                                              const std::map<std::string, std::string>& metadata);

// Writes a safetensors file tensor by tensor, without holding the file in memory: the header
// first (keys sorted by name after "__metadata__", which is omitted when empty; padded with
// spaces so the data starts 8-byte aligned), then each tensor's bytes in the order declared.
// Everything goes to "<path>.tmp.<pid>"; commit() fsyncs it and renames it to `path`, so a crash
// never leaves a half-written `path`. Destroying an uncommitted writer removes the temporary.
class SafetensorsWriter {
 public:
  // `tensors` declares names, dtypes and shapes (their data pointers are not used).
  static StatusOr<SafetensorsWriter> create(const std::string& path,
                                            const std::vector<TensorRef>& tensors,
                                            const std::map<std::string, std::string>& metadata);
  SafetensorsWriter(SafetensorsWriter&& other) noexcept;
  SafetensorsWriter& operator=(SafetensorsWriter&&) = delete;
  ~SafetensorsWriter();

  // The bytes of the next declared tensor, in one or several pieces.
  Status write(const void* data, size_t bytes);
  // Every declared byte must have been written.
  StatusOr<WrittenSafetensors> commit();

 private:
  SafetensorsWriter() = default;
  std::string path_, tmp_;
  std::unique_ptr<SequentialFile> file_;  // null once committed
  std::vector<uint64_t> sizes_;           // of each declared tensor, in order
  size_t current_ = 0;                    // the tensor being written
  uint64_t writtenOfCurrent_ = 0;
  uint32_t tensorCrc_ = 0;
  WrittenSafetensors result_;
};

// The whole file at once (SafetensorsWriter over `tensors`, data in the given order).
// Duplicate names or inconsistent sizes are Internal errors.
Status writeSafetensors(const std::string& path, const std::vector<TensorRef>& tensors,
                        const std::map<std::string, std::string>& metadata,
                        WrittenSafetensors* written = nullptr);

// One tensor of a parsed header: its bytes are [begin, begin + bytes) of the data section.
struct TensorEntry {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, bytes = 0;
};

// A validated header: length within the file (and at most 100 MB, as the reference
// implementation allows), well-formed JSON, known dtypes, shapes of non-negative integers, and
// data_offsets that match shape × dtype and tile the data section exactly (no gaps, no
// overlaps). Anything else is an InvalidInput error naming the file.
struct SafetensorsHeader {
  uint64_t dataStart = 0;            // file offset of the data section
  std::vector<TensorEntry> entries;  // sorted by name
  std::map<std::string, std::string> metadata;
  const TensorEntry* find(const std::string& name) const;
};

// Parses the JSON `header` of a file of `fileSize` bytes whose header is `header.size()` long.
StatusOr<SafetensorsHeader> parseSafetensorsHeader(std::string_view header, uint64_t fileSize,
                                                   const std::string& path);

// A safetensors file, memory-mapped and validated (SafetensorsHeader). Move-only; the
// TensorRefs point into the mapping and stay valid as long as this object (moves keep the
// mapping where it is).
class SafetensorsFile {
 public:
  static StatusOr<SafetensorsFile> read(const std::string& path);

  // Sorted by name.
  const std::vector<TensorRef>& tensors() const { return tensors_; }
  const TensorRef* find(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  MappedFile file_;
  std::vector<TensorRef> tensors_;
  std::map<std::string, std::string> metadata_;
};

// A safetensors file read with pread(2) rather than mapped: only the bytes asked for are read,
// and a file that shrinks under the reader is an error, not a SIGBUS. Move-only.
class SafetensorsReader {
 public:
  static StatusOr<SafetensorsReader> open(const std::string& path);
  SafetensorsReader(SafetensorsReader&& other) noexcept;
  SafetensorsReader& operator=(SafetensorsReader&&) = delete;
  ~SafetensorsReader();

  const SafetensorsHeader& header() const { return header_; }
  const std::string& path() const { return path_; }
  uint64_t fileSize() const { return fileSize_; }
  // Reads `entry`'s bytes (an entry of header()) into `dst`.
  Status read(const TensorEntry& entry, void* dst) const;
  // The same for several entries, with several reads in flight, returning the CRC-32 of each
  // one's bytes (io/checked_read.h).
  StatusOr<std::vector<uint32_t>> readChecked(const std::vector<const TensorEntry*>& entries,
                                              const std::vector<void*>& dsts) const;

 private:
  SafetensorsReader() = default;
  std::string path_;
  int fd_ = -1;
  uint64_t fileSize_ = 0;
  SafetensorsHeader header_;
};

// The safetensors name of a dtype ("F32").
const char* safetensorsDTypeName(DType t);
// The dtype of a safetensors name, or false.
bool parseSafetensorsDType(const std::string& name, DType& out);

}  // namespace dtc::io
