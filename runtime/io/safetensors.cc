#include "io/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

#include "io/checked_read.h"
#include "io/crc32.h"
#include "io/files.h"
#include "io/json.h"
#include "support/printable.h"

namespace dtc::io {
namespace {

// The reference implementation refuses larger headers; so do we, before allocating anything.
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

constexpr DType kAllDTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kI32, DType::kI64};

// product(shape) * elementSize, or false on a negative dimension or overflow.
bool byteSize(const std::vector<int64_t>& shape, size_t elementSize, size_t& out) {
  size_t n = elementSize;
  for (int64_t d : shape) {
    if (d < 0) return false;
    if (d > 0 && n > SIZE_MAX / static_cast<size_t>(d)) return false;
    n *= static_cast<size_t>(d);
  }
  out = n;
  return true;
}

// Fills `t` from one header entry, or returns an error message.
std::string parseEntry(const std::string& name, const Json& entry, TensorEntry& t) {
  std::string where = "tensor '" + printable(name) + "'";
  if (!entry.isObject()) return where + " is not a JSON object";
  const Json* dtype = entry.find("dtype");
  const Json* shape = entry.find("shape");
  const Json* offsets = entry.find("data_offsets");
  if (!dtype || !dtype->isString()) return where + " has no \"dtype\" string";
  if (!shape || !shape->isArray()) return where + " has no \"shape\" array";
  if (!offsets || !offsets->isArray() || offsets->size() != 2)
    return where + " has no \"data_offsets\" pair";
  t.name = name;
  if (!parseSafetensorsDType(dtype->asString(), t.dtype))
    return where + " has dtype " + printable(dtype->asString()) +
           ", which is not supported; expected one of F32, F16, BF16, I32, I64";
  for (const Json& d : shape->asArray()) {
    if (!d.isInteger() || d.asInt() < 0) return where + " has a malformed shape " + shape->dump();
    t.shape.push_back(d.asInt());
  }
  const Json& b = offsets->asArray()[0];
  const Json& e = offsets->asArray()[1];
  if (!b.isInteger() || !e.isInteger() || b.asInt() < 0 || e.asInt() < b.asInt())
    return where + " has malformed data_offsets " + offsets->dump();
  t.begin = static_cast<uint64_t>(b.asInt());
  const uint64_t end = static_cast<uint64_t>(e.asInt());
  size_t bytes;
  if (!byteSize(t.shape, dtypeSize(t.dtype), bytes))
    return where + " has a shape too large to address: " + shapeText(t.shape);
  t.bytes = bytes;
  if (t.bytes != end - t.begin)
    return where + ": shape " + shapeText(t.shape) + " of " + dtype->asString() + " needs " +
           std::to_string(t.bytes) + " bytes, its data_offsets span " +
           std::to_string(end - t.begin);
  return "";
}

// The element called `name` of a list sorted by name (TensorEntry, TensorRef), or nullptr.
template <typename T>
const T* findByName(const std::vector<T>& sorted, const std::string& name) {
  auto it = std::lower_bound(sorted.begin(), sorted.end(), name,
                             [](const T& t, const std::string& n) { return t.name < n; });
  return it != sorted.end() && it->name == name ? &*it : nullptr;
}

Status badFile(const std::string& path, const std::string& what) {
  return Status::InvalidInput(path + " is not a valid safetensors file: " + what);
}

// The header length of a file whose first 8 bytes are `prefix`, checked against its size.
StatusOr<uint64_t> headerLength(const uint8_t* prefix, uint64_t size, const std::string& path) {
  if (size < 8) return badFile(path, "shorter than its 8-byte header length");
  uint64_t headerLen = 0;
  for (int i = 0; i < 8; ++i) headerLen |= static_cast<uint64_t>(prefix[i]) << (8 * i);
  if (headerLen > kMaxHeaderBytes)
    return badFile(path, "header length " + std::to_string(headerLen) + " is implausibly large");
  if (headerLen > size - 8)
    return badFile(path, "truncated: the header length is " + std::to_string(headerLen) +
                             " bytes, the file has " + std::to_string(size - 8) + " after it");
  return headerLen;
}

}  // namespace

const char* safetensorsDTypeName(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
    case DType::kI32: return "I32";
    case DType::kI64: return "I64";
    case DType::kF8E4M3: return "F8_E4M3";
    case DType::kF8E5M2: return "F8_E5M2";
  }
  return "?";
}

bool parseSafetensorsDType(const std::string& name, DType& out) {
  for (DType t : kAllDTypes) {
    if (name == safetensorsDTypeName(t)) {
      out = t;
      return true;
    }
  }
  return false;
}

// --- writing ---

StatusOr<SafetensorsLayout> layoutSafetensors(const std::string& path,
                                              const std::vector<TensorRef>& tensors,
                                              const std::map<std::string, std::string>& metadata) {
  std::map<std::string, Json> entries;  // sorted by name, as the header lists them
  SafetensorsLayout layout;
  uint64_t offset = 0;
  for (const TensorRef& t : tensors) {
    if (t.name == "__metadata__")
      return Status::Internal("writing " + path + ": '__metadata__' cannot name a tensor");
    size_t expected;
    if (!byteSize(t.shape, dtypeSize(t.dtype), expected) || expected != t.bytes)
      return Status::Internal("writing " + path + ": tensor '" + t.name + "' has shape " +
                              shapeText(t.shape) + " but " + std::to_string(t.bytes) + " bytes");
    Json entry = Json::object();
    entry.set("dtype", safetensorsDTypeName(t.dtype));
    Json shape{Json::Array{}};
    for (int64_t d : t.shape) shape.push(d);
    entry.set("shape", std::move(shape));
    entry.set("data_offsets", Json::Array{Json(offset), Json(offset + t.bytes)});
    if (!entries.emplace(t.name, std::move(entry)).second)
      return Status::Internal("writing " + path + ": duplicate tensor name '" + t.name + "'");
    layout.offsets.push_back(offset);
    offset += t.bytes;
  }
  layout.dataBytes = offset;
  Json header = Json::object();
  if (!metadata.empty()) {
    Json meta = Json::object();
    for (const auto& [k, v] : metadata) meta.set(k, v);
    header.set("__metadata__", std::move(meta));
  }
  for (auto& [name, entry] : entries) header.set(name, std::move(entry));
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data starts 8-byte aligned
  layout.prefix.assign(8, '\0');
  const uint64_t len = text.size();
  for (int i = 0; i < 8; ++i) layout.prefix[i] = static_cast<char>((len >> (8 * i)) & 0xff);
  layout.prefix += text;
  return layout;
}

StatusOr<SafetensorsWriter> SafetensorsWriter::create(
    const std::string& path, const std::vector<TensorRef>& tensors,
    const std::map<std::string, std::string>& metadata) {
  DTC_ASSIGN_OR_RETURN(SafetensorsLayout layout, layoutSafetensors(path, tensors, metadata));
  SafetensorsWriter w;
  for (const TensorRef& t : tensors) w.sizes_.push_back(t.bytes);
  const std::string& prefix = layout.prefix;
  w.path_ = path;
  w.tmp_ = path + ".tmp." + std::to_string(::getpid());
  DTC_ASSIGN_OR_RETURN(SequentialFile file, SequentialFile::create(w.tmp_, path));
  w.file_ = std::make_unique<SequentialFile>(std::move(file));
  DTC_RETURN_IF_ERROR(w.file_->append(prefix.data(), prefix.size()));
  w.result_.bytes = prefix.size();
  w.result_.crc32 = crc32(0, prefix.data(), prefix.size());
  return w;
}

SafetensorsWriter::SafetensorsWriter(SafetensorsWriter&& o) noexcept
    : path_(std::move(o.path_)),
      tmp_(std::move(o.tmp_)),
      file_(std::move(o.file_)),
      sizes_(std::move(o.sizes_)),
      current_(o.current_),
      writtenOfCurrent_(o.writtenOfCurrent_),
      tensorCrc_(o.tensorCrc_),
      result_(std::move(o.result_)) {}

SafetensorsWriter::~SafetensorsWriter() {
  if (file_) {
    file_.reset();
    ::unlink(tmp_.c_str());
  }
}

Status SafetensorsWriter::write(const void* data, size_t bytes) {
  if (!file_) return Status::Internal("writing " + path_ + ": the file is closed");
  // Large pieces are checksummed on a second thread while they are written: the checksum
  // costs no time of its own as long as a core is free.
  constexpr uint64_t kPiece = uint64_t{64} << 20, kOverlap = uint64_t{1} << 20;
  const uint8_t* p = static_cast<const uint8_t*>(data);
  while (bytes > 0 || (current_ < sizes_.size() && sizes_[current_] == 0)) {
    if (current_ >= sizes_.size())
      return Status::Internal("writing " + path_ + ": more bytes than the tensors declared");
    uint64_t take = std::min<uint64_t>({bytes, sizes_[current_] - writtenOfCurrent_, kPiece});
    if (take >= kOverlap) {
      uint32_t pieceCrc = 0;
      std::thread checksum([&] { pieceCrc = crc32(0, p, take); });
      Status written = file_->append(p, take);
      checksum.join();
      DTC_RETURN_IF_ERROR(written);
      tensorCrc_ = crc32Combine(tensorCrc_, pieceCrc, take);
    } else {
      tensorCrc_ = crc32(tensorCrc_, p, take);
      DTC_RETURN_IF_ERROR(file_->append(p, take));
    }
    writtenOfCurrent_ += take;
    p += take;
    bytes -= take;
    if (writtenOfCurrent_ == sizes_[current_]) {
      result_.crc32 = crc32Combine(result_.crc32, tensorCrc_, sizes_[current_]);
      result_.bytes += sizes_[current_];
      result_.tensorCrc32.push_back(tensorCrc_);
      tensorCrc_ = 0;
      writtenOfCurrent_ = 0;
      ++current_;
    }
  }
  return Status::Ok();
}

StatusOr<WrittenSafetensors> SafetensorsWriter::commit() {
  if (!file_) return Status::Internal("writing " + path_ + ": the file is closed");
  // Zero-byte tensors at the end complete without a write.
  DTC_RETURN_IF_ERROR(write(nullptr, 0));
  if (current_ != sizes_.size())
    return Status::Internal("writing " + path_ + ": tensor " + std::to_string(current_) + " of " +
                            std::to_string(sizes_.size()) + " was not written");
  Status s = file_->finish();
  file_.reset();
  if (s.ok() && std::rename(tmp_.c_str(), path_.c_str()) != 0)
    s = Status::Internal("cannot rename " + tmp_ + " to " + path_ + ": " + std::strerror(errno));
  if (!s.ok()) {
    ::unlink(tmp_.c_str());
    return s;
  }
  return result_;
}

Status writeSafetensors(const std::string& path, const std::vector<TensorRef>& tensors,
                        const std::map<std::string, std::string>& metadata,
                        WrittenSafetensors* written) {
  DTC_ASSIGN_OR_RETURN(SafetensorsWriter writer,
                       SafetensorsWriter::create(path, tensors, metadata));
  for (const TensorRef& t : tensors) DTC_RETURN_IF_ERROR(writer.write(t.data, t.bytes));
  DTC_ASSIGN_OR_RETURN(WrittenSafetensors result, writer.commit());
  if (written) *written = std::move(result);
  return Status::Ok();
}

// --- reading ---

StatusOr<SafetensorsHeader> parseSafetensorsHeader(std::string_view text, uint64_t fileSize,
                                                   const std::string& path) {
  auto parsed = parseJson(text);
  if (!parsed.ok()) return badFile(path, "header " + parsed.status().message());
  const Json& header = parsed.value();
  if (!header.isObject()) return badFile(path, "the header is not a JSON object");
  SafetensorsHeader out;
  out.dataStart = 8 + text.size();
  const uint64_t dataBytes = fileSize - out.dataStart;
  for (const auto& [name, entry] : header.members()) {
    if (name == "__metadata__") {
      if (!entry.isObject()) return badFile(path, "__metadata__ is not a JSON object");
      for (const auto& [k, v] : entry.members()) {
        if (!v.isString())
          return badFile(path, "__metadata__ value for '" + printable(k) + "' is not a string");
        out.metadata[k] = v.asString();
      }
      continue;
    }
    TensorEntry t;
    std::string error = parseEntry(name, entry, t);
    if (!error.empty()) return badFile(path, error);
    if (t.begin + t.bytes > dataBytes)
      return badFile(path, "tensor '" + printable(name) + "' ends at byte " +
                               std::to_string(t.begin + t.bytes) + " of a data section of " +
                               std::to_string(dataBytes) + " (truncated?)");
    out.entries.push_back(std::move(t));
  }
  // As the reference reader does: the tensors must cover the data section with no holes or
  // overlaps, so no byte is shared or silently ignored.
  std::vector<const TensorEntry*> spans;
  for (const TensorEntry& t : out.entries) spans.push_back(&t);
  std::sort(spans.begin(), spans.end(), [](const TensorEntry* a, const TensorEntry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->bytes < b->bytes;
  });
  uint64_t covered = 0;
  for (const TensorEntry* s : spans) {
    if (s->begin != covered)
      return badFile(path, "tensor '" + printable(s->name) + "' starts at byte " +
                               std::to_string(s->begin) + ", expected " + std::to_string(covered) +
                               " (tensors overlap or leave a gap)");
    covered = s->begin + s->bytes;
  }
  if (covered != dataBytes)
    return badFile(path, "the tensors cover " + std::to_string(covered) +
                             " bytes of a data section of " + std::to_string(dataBytes));
  std::sort(out.entries.begin(), out.entries.end(),
            [](const TensorEntry& a, const TensorEntry& b) { return a.name < b.name; });
  return out;
}

const TensorEntry* SafetensorsHeader::find(const std::string& name) const {
  return findByName(entries, name);
}

StatusOr<SafetensorsFile> SafetensorsFile::read(const std::string& path) {
  SafetensorsFile out;
  DTC_ASSIGN_OR_RETURN(out.file_, MappedFile::open(path));
  const uint8_t* p = out.file_.data();
  DTC_ASSIGN_OR_RETURN(uint64_t headerLen, headerLength(p, out.file_.size(), path));
  DTC_ASSIGN_OR_RETURN(
      SafetensorsHeader header,
      parseSafetensorsHeader(std::string_view(reinterpret_cast<const char*>(p + 8), headerLen),
                             out.file_.size(), path));
  for (TensorEntry& e : header.entries)
    out.tensors_.push_back({e.name, e.dtype, std::move(e.shape), p + header.dataStart + e.begin,
                            static_cast<size_t>(e.bytes)});
  out.metadata_ = std::move(header.metadata);
  return out;
}

const TensorRef* SafetensorsFile::find(const std::string& name) const {
  return findByName(tensors_, name);
}

StatusOr<SafetensorsReader> SafetensorsReader::open(const std::string& path) {
  DTC_ASSIGN_OR_RETURN(uint64_t size, io::fileSize(path));
  SafetensorsReader r;
  r.path_ = path;
  r.fileSize_ = size;
  r.fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);  // a FIFO must not block
  if (r.fd_ < 0) return Status::InvalidInput("cannot open " + path + ": " + std::strerror(errno));
  uint8_t prefix[8] = {};
  if (size >= 8) DTC_RETURN_IF_ERROR(readAt(r.fd_, prefix, 8, 0, path));
  DTC_ASSIGN_OR_RETURN(uint64_t headerLen, headerLength(prefix, size, path));
  std::string text(headerLen, '\0');
  DTC_RETURN_IF_ERROR(readAt(r.fd_, text.data(), headerLen, 8, path));
  DTC_ASSIGN_OR_RETURN(r.header_, parseSafetensorsHeader(text, size, path));
  return r;
}

SafetensorsReader::SafetensorsReader(SafetensorsReader&& o) noexcept
    : path_(std::move(o.path_)), fd_(o.fd_), fileSize_(o.fileSize_), header_(std::move(o.header_)) {
  o.fd_ = -1;
}

SafetensorsReader::~SafetensorsReader() {
  if (fd_ >= 0) ::close(fd_);
}

Status SafetensorsReader::read(const TensorEntry& entry, void* dst) const {
  return readAt(fd_, dst, entry.bytes, header_.dataStart + entry.begin, path_);
}

StatusOr<std::vector<uint32_t>> SafetensorsReader::readChecked(
    const std::vector<const TensorEntry*>& entries, const std::vector<void*>& dsts) const {
  std::vector<CheckedRead> reads;
  for (size_t i = 0; i < entries.size(); ++i)
    reads.push_back({header_.dataStart + entries[i]->begin, static_cast<size_t>(entries[i]->bytes),
                     dsts[i], 0});
  DTC_RETURN_IF_ERROR(io::readChecked(path_, reads));
  std::vector<uint32_t> crcs;
  for (const CheckedRead& r : reads) crcs.push_back(r.crc32);
  return crcs;
}

}  // namespace dtc::io
