#include "data/tokens.h"

#include <algorithm>
#include <climits>
#include <cstring>

#include <glob.h>

#include "data/sampler.h"
#include "io/files.h"
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
  if (header[0] != kTokenMagic && header[0] != kWideTokenMagic)
    return Status::InvalidInput(path + " is not an llm.c token file (magic " +
                                std::to_string(header[0]) + ", expected 20240520)");
  file.wide_ = header[0] == kWideTokenMagic;
  const int32_t version = file.wide_ ? kWideTokenVersion : kTokenVersion;
  if (header[1] != version)
    return Status::InvalidInput(
        path + " has token format version " + std::to_string(header[1]) +
        (file.wide_ ? "; expected 7 (Llama 3's uint32 tokens)" : "; expected 1 (uint16 tokens)"));
  const size_t width = file.wide_ ? sizeof(uint32_t) : sizeof(uint16_t);
  int64_t count = header[2];
  size_t available = (size - kHeaderBytes) / width;
  if (count < 0 || static_cast<size_t>(count) > available)
    return Status::InvalidInput(path + " is truncated: the header promises " +
                                std::to_string(count) + " tokens, the file holds " +
                                std::to_string(available));
  file.tokens_ = map + kHeaderBytes;
  file.count_ = count;
  for (int64_t i = 0; i < count; ++i)
    file.maxPlusOne_ = std::max<int64_t>(file.maxPlusOne_, static_cast<int64_t>(file[i]) + 1);
  return file;
}

void TokenFile::copy(int64_t from, int64_t n, int64_t* out) const {
  auto widen = [&](const auto* src) { std::copy(src + from, src + from + n, out); };
  if (wide_)
    widen(reinterpret_cast<const uint32_t*>(tokens_));
  else
    widen(reinterpret_cast<const uint16_t*>(tokens_));
}

std::vector<int64_t> windowOffsets(int64_t size, int64_t batch, int64_t t, uint64_t seed,
                                   int64_t step) {
  uint64_t state = streamState(seed, static_cast<uint64_t>(step));
  std::vector<int64_t> offsets(batch);
  for (int64_t b = 0; b < batch; ++b)
    offsets[b] = static_cast<int64_t>(splitmix64(state) % static_cast<uint64_t>(size - t));
  return offsets;
}

namespace {

bool hasSuffix(const std::string& name, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return name.size() > n && name.compare(name.size() - n, n, suffix) == 0;
}

}  // namespace

bool isTokenGlob(const std::string& spec) { return spec.find_first_of("*?[") != std::string::npos; }

bool holdsTokenShards(const std::string& dir) {
  auto names = io::listDirectory(dir);
  if (!names.ok()) return false;
  bool shards = false;
  for (const std::string& name : *names) {
    if (hasSuffix(name, ".npy")) return false;
    shards = shards || (hasSuffix(name, ".bin") && io::isRegularFile(dir + "/" + name));
  }
  return shards;
}

StatusOr<std::vector<std::string>> tokenShardPaths(const std::string& spec) {
  std::vector<std::string> paths;
  if (isTokenGlob(spec)) {
    glob_t found{};
    const int rc = ::glob(spec.c_str(), 0, nullptr, &found);
    for (size_t i = 0; rc == 0 && i < found.gl_pathc; ++i)
      if (io::isRegularFile(found.gl_pathv[i])) paths.push_back(found.gl_pathv[i]);
    ::globfree(&found);
    if (paths.empty()) return Status::InvalidInput(spec + " matches no token file");
  } else if (io::isDirectory(spec)) {
    DTC_ASSIGN_OR_RETURN(std::vector<std::string> names, io::listDirectory(spec));
    for (const std::string& name : names)
      if (hasSuffix(name, ".bin") && io::isRegularFile(spec + "/" + name))
        paths.push_back(spec + "/" + name);
    if (paths.empty()) return Status::InvalidInput(spec + " holds no token shards (*.bin)");
  } else {
    paths.push_back(spec);
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

StatusOr<TokenShards> TokenShards::open(const std::string& spec) {
  TokenShards shards;
  DTC_ASSIGN_OR_RETURN(shards.paths_, tokenShardPaths(spec));
  shards.starts_.push_back(0);
  for (const std::string& path : shards.paths_) {
    DTC_ASSIGN_OR_RETURN(TokenFile file, TokenFile::open(path));
    if (file.size() == 0) return Status::InvalidInput(path + " holds no tokens");
    shards.maxPlusOne_ = std::max(shards.maxPlusOne_, file.maxTokenPlusOne());
    shards.starts_.push_back(shards.starts_.back() + file.size());
    shards.files_.push_back(std::move(file));
  }
  return shards;
}

uint32_t TokenShards::operator[](int64_t i) const {
  const size_t k = std::upper_bound(starts_.begin(), starts_.end(), i) - starts_.begin() - 1;
  return files_[k][i - starts_[k]];
}

void TokenShards::copy(int64_t from, int64_t n, int64_t* out) const {
  size_t k = std::upper_bound(starts_.begin(), starts_.end(), from) - starts_.begin() - 1;
  for (int64_t done = 0; done < n; ++k) {
    const int64_t at = from + done - starts_[k];
    const int64_t take = std::min(n - done, files_[k].size() - at);
    files_[k].copy(at, take, out + done);
    done += take;
  }
}

void fillWindows(const TokenShards& tokens, const std::vector<int64_t>& offsets, int64_t t,
                 int64_t* inputs, int64_t* targets) {
  std::vector<int64_t> window(static_cast<size_t>(t + 1));
  for (size_t b = 0; b < offsets.size(); ++b) {
    tokens.copy(offsets[b], t + 1, window.data());
    if (inputs) std::copy(window.begin(), window.end() - 1, inputs + b * t);
    if (targets) std::copy(window.begin() + 1, window.end(), targets + b * t);
  }
}

void fillWindowRuns(const TokenShards& tokens, const std::vector<int64_t>& offsets,
                    const std::vector<SequenceRun>& runs, int64_t* inputs, int64_t* targets) {
  int64_t local = 0;
  for (const SequenceRun& r : runs) local += r.count;
  std::vector<int64_t> run;
  for (size_t b = 0; b < offsets.size(); ++b) {
    int64_t at = static_cast<int64_t>(b) * local;
    for (const SequenceRun& r : runs) {
      run.resize(static_cast<size_t>(r.count + 1));
      tokens.copy(offsets[b] + r.from, r.count + 1, run.data());
      if (inputs) std::copy(run.begin(), run.end() - 1, inputs + at);
      if (targets) std::copy(run.begin() + 1, run.end(), targets + at);
      at += r.count;
    }
  }
}

Status writeTokenFile(const std::string& path, const std::vector<int32_t>& tokens) {
  if (tokens.size() > static_cast<size_t>(INT32_MAX))
    return Status::InvalidInput("cannot write " + path + ": " + std::to_string(tokens.size()) +
                                " tokens do not fit the header's int32 count");
  bool wide = false;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0)
      return Status::InvalidInput("cannot write " + path + ": token " + std::to_string(tokens[i]) +
                                  " at position " + std::to_string(i) + " is negative");
    wide = wide || tokens[i] > 65535;
  }
  const size_t width = wide ? sizeof(uint32_t) : sizeof(uint16_t);
  std::vector<uint8_t> bytes(kHeaderBytes + tokens.size() * width, 0);
  int32_t header[3] = {wide ? kWideTokenMagic : kTokenMagic,
                       wide ? kWideTokenVersion : kTokenVersion,
                       static_cast<int32_t>(tokens.size())};
  std::memcpy(bytes.data(), header, sizeof header);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (wide) {
      const uint32_t v = static_cast<uint32_t>(tokens[i]);
      std::memcpy(bytes.data() + kHeaderBytes + i * 4, &v, 4);
    } else {
      const uint16_t v = static_cast<uint16_t>(tokens[i]);
      std::memcpy(bytes.data() + kHeaderBytes + i * 2, &v, 2);
    }
  }
  return io::writeFileAtomically(path, bytes.data(), bytes.size());
}

}  // namespace dtc::data
