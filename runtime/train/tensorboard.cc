#include "train/tensorboard.h"

#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>

namespace dtc {
namespace {

// Protobuf's wire format: a key is (field << 3 | wire type); 0 varint, 1 fixed64, 2 bytes,
// 5 fixed32.
void varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

void key(std::string& out, int field, int wireType) { varint(out, (field << 3) | wireType); }

template <typename T>
void fixed(std::string& out, T v) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));  // little-endian, as the wire format and x86/arm64
  out.append(bytes, sizeof(T));
}

void bytesField(std::string& out, int field, const std::string& bytes) {
  key(out, field, 2);
  varint(out, bytes.size());
  out += bytes;
}

double wallTime() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

// Event{wall_time, step} with its payload field appended by the caller.
std::string eventHeader(int64_t step) {
  std::string e;
  key(e, 1, 1);
  fixed(e, wallTime());
  key(e, 2, 0);
  varint(e, static_cast<uint64_t>(step));
  return e;
}

const std::array<uint32_t, 256>& crcTable() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0x82f63b78u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table;
}

}  // namespace

uint32_t crc32c(const uint8_t* data, size_t size) {
  const auto& table = crcTable();
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < size; ++i) c = table[(c ^ data[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

uint32_t maskedCrc32c(const uint8_t* data, size_t size) {
  const uint32_t c = crc32c(data, size);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

StatusOr<std::unique_ptr<TensorBoardWriter>> TensorBoardWriter::open(const std::string& dir) {
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  auto writer = std::unique_ptr<TensorBoardWriter>(new TensorBoardWriter());
  writer->path_ = dir + "/events.out.tfevents." + std::to_string(static_cast<int64_t>(wallTime())) +
                  "." + host + "." + std::to_string(static_cast<long>(::getpid()));
  writer->file_ = std::fopen(writer->path_.c_str(), "wb");
  if (!writer->file_)
    return Status::InvalidInput("--tensorboard: cannot create " + writer->path_ + ": " +
                                std::strerror(errno));
  std::string version = eventHeader(0);
  bytesField(version, 3, "brain.Event:2");
  DTC_RETURN_IF_ERROR(writer->record(version));
  DTC_RETURN_IF_ERROR(writer->flush());
  return writer;
}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_) std::fclose(file_);
}

Status TensorBoardWriter::scalar(const std::string& tag, int64_t step, double value) {
  if (!std::isfinite(value)) return Status::Ok();  // TensorBoard draws no point for inf or NaN
  std::string item;
  bytesField(item, 1, tag);
  key(item, 2, 5);
  fixed(item, static_cast<float>(value));
  std::string summary;
  bytesField(summary, 1, item);
  std::string event = eventHeader(step);
  bytesField(event, 5, summary);
  return record(event);
}

// A TFRecord: length (u64), its masked CRC (u32), the bytes, their masked CRC (u32).
Status TensorBoardWriter::record(const std::string& event) {
  std::string frame;
  const uint64_t length = event.size();
  fixed(frame, length);
  fixed(frame, maskedCrc32c(reinterpret_cast<const uint8_t*>(frame.data()), sizeof length));
  frame += event;
  fixed(frame, maskedCrc32c(reinterpret_cast<const uint8_t*>(event.data()), event.size()));
  if (std::fwrite(frame.data(), 1, frame.size(), file_) != frame.size())
    return Status::Internal("--tensorboard: cannot write " + path_ + ": " + std::strerror(errno));
  return Status::Ok();
}

Status TensorBoardWriter::flush() {
  if (std::fflush(file_) != 0)
    return Status::Internal("--tensorboard: cannot write " + path_ + ": " + std::strerror(errno));
  return Status::Ok();
}

}  // namespace dtc
