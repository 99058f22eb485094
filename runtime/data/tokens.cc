#include "data/tokens.h"

#include <algorithm>
#include <climits>
#include <cstring>

#include "data/sampler.h"
#include "io/npy.h"

namespace dtc::data {

constexpr size_t kHeaderBytes = 256 * sizeof(int32_t);

StatusOr<TokenFile> TokenFile::open(const std::string& path) {
  TokenFile file;
  DTC_ASSIGN_OR_RETURN(file.file_, io::MappedFile::open(path));
  const size_t size = file.file_.size();
  if (size < kHeaderBytes)
    return Status::InvalidInput(path +
                                " is not an llm.c token file (shorter than its 1024-byte header)");
  const uint8_t* map = file.file_.data();
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
  file.tokens_ = reinterpret_cast<const uint16_t*>(map + kHeaderBytes);
  file.count_ = count;
  for (int64_t i = 0; i < count; ++i)
    file.maxPlusOne_ = std::max<int64_t>(file.maxPlusOne_, file.tokens_[i] + 1);
  return file;
}

std::vector<int64_t> windowOffsets(int64_t size, int64_t batch, int64_t t, uint64_t seed,
                                   int64_t step) {
  uint64_t state = streamState(seed, static_cast<uint64_t>(step));
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
      if (inputs) inputs[b * t + j] = data[offsets[b] + j];
      if (targets) targets[b * t + j] = data[offsets[b] + j + 1];
    }
}

Status writeTokenFile(const std::string& path, const std::vector<int32_t>& tokens) {
  if (tokens.size() > static_cast<size_t>(INT32_MAX))
    return Status::InvalidInput("cannot write " + path + ": " + std::to_string(tokens.size()) +
                                " tokens do not fit the header's int32 count");
  std::vector<uint8_t> bytes(kHeaderBytes + tokens.size() * sizeof(uint16_t), 0);
  int32_t header[3] = {kTokenMagic, kTokenVersion, static_cast<int32_t>(tokens.size())};
  std::memcpy(bytes.data(), header, sizeof header);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] > 65535)
      return Status::InvalidInput("cannot write " + path + ": token " + std::to_string(tokens[i]) +
                                  " at position " + std::to_string(i) +
                                  " does not fit in uint16 (0..65535)");
    uint16_t v = static_cast<uint16_t>(tokens[i]);
    std::memcpy(bytes.data() + kHeaderBytes + i * 2, &v, 2);
  }
  return io::writeFileAtomically(path, bytes.data(), bytes.size());
}

}  // namespace dtc::data
