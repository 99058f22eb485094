#include "data/tokens.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "data/sampler.h"
#include "io/npy.h"

namespace dtc::data {

constexpr size_t kHeaderBytes = 256 * sizeof(int32_t);

TokenFile::TokenFile(TokenFile&& other) noexcept { *this = std::move(other); }

TokenFile& TokenFile::operator=(TokenFile&& other) noexcept {
  if (this != &other) {
    if (map_) ::munmap(map_, mapBytes_);
    map_ = other.map_;
    mapBytes_ = other.mapBytes_;
    tokens_ = other.tokens_;
    count_ = other.count_;
    maxPlusOne_ = other.maxPlusOne_;
    other.map_ = nullptr;
    other.tokens_ = nullptr;
    other.count_ = other.maxPlusOne_ = 0;
  }
  return *this;
}

TokenFile::~TokenFile() {
  if (map_) ::munmap(map_, mapBytes_);
}

StatusOr<TokenFile> TokenFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return Status::InvalidInput("cannot open " + path + ": " + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::InvalidInput(path + " is not a regular file");
  }
  size_t size = static_cast<size_t>(st.st_size);
  if (size < kHeaderBytes) {
    ::close(fd);
    return Status::InvalidInput(path + " is not an llm.c token file (shorter than its 1024-byte header)");
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return Status::Internal("cannot map " + path + ": " + std::strerror(errno));
  TokenFile file;
  file.map_ = map;
  file.mapBytes_ = size;
  int32_t header[3];
  std::memcpy(header, map, sizeof header);
  if (header[0] != kTokenMagic)
    return Status::InvalidInput(path + " is not an llm.c token file (magic " +
                                std::to_string(header[0]) + ", expected 20240520)");
  if (header[1] != kTokenVersion)
    return Status::InvalidInput(path + " has token format version " + std::to_string(header[1]) +
                                "; expected 1 (uint16 tokens)");
  int64_t count = header[2];
  size_t available = (size - kHeaderBytes) / sizeof(uint16_t);
  if (count < 0 || static_cast<size_t>(count) > available)
    return Status::InvalidInput(path + " is truncated: the header promises " +
                                std::to_string(count) + " tokens, the file holds " +
                                std::to_string(available));
  file.tokens_ = reinterpret_cast<const uint16_t*>(static_cast<const uint8_t*>(map) + kHeaderBytes);
  file.count_ = count;
  for (int64_t i = 0; i < count; ++i)
    file.maxPlusOne_ = std::max<int64_t>(file.maxPlusOne_, file.tokens_[i] + 1);
  return file;
}

std::vector<int64_t> windowOffsets(int64_t size, int64_t batch, int64_t t, uint64_t seed,
                                   int64_t step) {
  uint64_t state = seed ^ (0x9E3779B97F4A7C15ull * static_cast<uint64_t>(step + 1));
  std::vector<int64_t> offsets(batch);
  for (int64_t b = 0; b < batch; ++b)
    offsets[b] = static_cast<int64_t>(splitmix64(state) % static_cast<uint64_t>(size - t));
  return offsets;
}

void fillWindows(const TokenFile& tokens, const std::vector<int64_t>& offsets, int64_t t,
                 int64_t* inputs, int64_t* targets) {
  const uint16_t* data = tokens.data();
  for (size_t b = 0; b < offsets.size(); ++b)
    for (int64_t j = 0; j < t; ++j) {
      inputs[b * t + j] = data[offsets[b] + j];
      targets[b * t + j] = data[offsets[b] + j + 1];
    }
}

Status writeTokenFile(const std::string& path, const std::vector<int32_t>& tokens) {
  std::vector<uint8_t> bytes(kHeaderBytes + tokens.size() * sizeof(uint16_t), 0);
  int32_t header[3] = {kTokenMagic, kTokenVersion, static_cast<int32_t>(tokens.size())};
  std::memcpy(bytes.data(), header, sizeof header);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] > 65535)
      return Status::InvalidInput("token " + std::to_string(tokens[i]) + " does not fit in uint16");
    uint16_t v = static_cast<uint16_t>(tokens[i]);
    std::memcpy(bytes.data() + kHeaderBytes + i * 2, &v, 2);
  }
  return io::writeFileAtomically(path, bytes.data(), bytes.size());
}

}  // namespace dtc::data
