#include "train/run_agreement.h"

#include <fcntl.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <utility>
#include <vector>

#include "comm/watchdog.h"
#include "data/tokens.h"
#include "io/crc32.h"
#include "io/files.h"

namespace dtc {
namespace {

constexpr int kAgreeTag = comm::Communicator::kMaxTag - 1;
constexpr int kFieldsTag = comm::Communicator::kMaxTag - 2;
constexpr int kBlocks = 16;  // blocks a file's fingerprint reads
constexpr size_t kBlockBytes = 64 << 10;

std::string fileFingerprint(const std::string& path) {
  auto size = io::fileSize(path);
  if (!size.ok()) return "unreadable";
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);  // a FIFO must not block
  if (fd < 0) return "unreadable";
  std::vector<uint8_t> block(kBlockBytes);
  uint32_t crc = 0;
  const uint64_t stride = *size / kBlocks;
  for (int i = 0; i < kBlocks; ++i) {
    const uint64_t at = static_cast<uint64_t>(i) * stride;
    const ssize_t got = ::pread(fd, block.data(), block.size(), static_cast<off_t>(at));
    if (got > 0) crc = io::crc32(crc, block.data(), static_cast<size_t>(got));
    if (stride == 0) break;  // a small file: read once
  }
  ::close(fd);
  char text[64];
  std::snprintf(text, sizeof text, "%llu bytes, crc32 %08x", static_cast<unsigned long long>(*size),
                crc);
  return text;
}

std::string serialize(const std::vector<RunField>& fields) {
  std::string out;
  for (const RunField& f : fields) out += f.name + '\t' + f.value + '\n';
  return out;
}

std::vector<RunField> parse(const std::string& text) {
  std::vector<RunField> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const size_t tab = line.find('\t');
    if (tab != std::string::npos) out.push_back({line.substr(0, tab), line.substr(tab + 1)});
  }
  return out;
}

// Rank 0: the first field on which the ranks differ, or "".
std::string firstDisagreement(const std::vector<std::vector<RunField>>& byRank) {
  const std::vector<RunField>& mine = byRank[0];
  std::string first;
  int differing = 0;
  for (size_t i = 0; i < mine.size(); ++i) {
    std::map<std::string, std::vector<int>> ranksByValue;
    for (size_t r = 0; r < byRank.size(); ++r) {
      const bool has = i < byRank[r].size() && byRank[r][i].name == mine[i].name;
      ranksByValue[has ? byRank[r][i].value : "(another build of dtrun)"].push_back(
          static_cast<int>(r));
    }
    if (ranksByValue.size() == 1) continue;
    if (++differing > 1) continue;
    first = "the ranks disagree on " + mine[i].name + ": ";
    bool firstValue = true;
    for (const auto& [value, ranks] : ranksByValue) {
      first += (firstValue ? "" : "; ") + comm::rankList(ranks) + ": " +
               (value.empty() ? "(none)" : value);
      firstValue = false;
    }
  }
  if (differing > 1) first += " (and " + std::to_string(differing - 1) + " more)";
  return first;
}

}  // namespace

Status agree(comm::Communicator& world, const Status& local, AgreedFailure& outcome) {
  if (world.size() == 1) {
    outcome.agreed = !local.ok();
    return local;
  }
  // One maximum finds the lowest failing rank and its code: -16·rank + code (codes < 16).
  constexpr float kNone = -1e9f;
  const int code = static_cast<int>(local.code());
  float lowest =
      local.ok() ? kNone : -16.0f * static_cast<float>(world.rank()) + static_cast<float>(code);
  DTC_RETURN_IF_ERROR(world.allReduceMax(&lowest, 1));
  if (lowest == kNone) return Status::Ok();
  outcome.agreed = true;
  const int failed = static_cast<int>(std::ceil(-lowest / 16.0f));
  const auto failedCode = static_cast<StatusCode>(static_cast<int>(lowest) + 16 * failed);
  if (world.rank() == failed && failed == 0) return local;
  if (world.rank() == failed) {
    DTC_RETURN_IF_ERROR(comm::sendText(world, local.message(), 0, kAgreeTag));
    return local;
  }
  if (world.rank() != 0)
    return Status::WithCode(failedCode, "rank " + std::to_string(failed) + " failed");
  DTC_ASSIGN_OR_RETURN(std::string text, comm::recvText(world, failed, kAgreeTag));
  return Status::WithCode(failedCode, "rank " + std::to_string(failed) + ": " + text);
}

Status agreeToStart(comm::Communicator& world, const Status& local,
                    const std::vector<RunField>& fields) {
  AgreedFailure ignored;
  DTC_RETURN_IF_ERROR(agree(world, local, ignored));
  if (world.size() == 1) return Status::Ok();
  Status verdict = Status::Ok();
  if (world.rank() != 0) {
    DTC_RETURN_IF_ERROR(comm::sendText(world, serialize(fields), 0, kFieldsTag));
  } else {
    std::vector<std::vector<RunField>> byRank{fields};
    for (int r = 1; r < world.size(); ++r) {
      DTC_ASSIGN_OR_RETURN(std::string text, comm::recvText(world, r, kFieldsTag));
      byRank.push_back(parse(text));
    }
    const std::string disagreement = firstDisagreement(byRank);
    if (!disagreement.empty()) verdict = Status::InvalidInput(disagreement);
  }
  Status agreed = agree(world, verdict, ignored);
  if (!agreed.ok() && world.rank() == 0) return verdict;  // without agree()'s "rank 0: "
  return agreed;
}

std::string contentFingerprint(const std::string& path) {
  std::vector<std::pair<std::string, std::string>> files;  // (as named, path)
  if (data::isTokenGlob(path)) {
    auto paths = data::tokenShardPaths(path);
    if (!paths.ok()) return "no match";
    for (const std::string& p : *paths) files.emplace_back(p, p);
  } else if (!io::isDirectory(path)) {
    return fileFingerprint(path);
  } else {
    auto names = io::listDirectory(path);
    if (!names.ok()) return "unreadable";
    for (const std::string& name : *names)
      if (io::isRegularFile(path + "/" + name)) files.emplace_back(name, path + "/" + name);
    if (files.empty()) return "an empty directory";
  }
  std::string out;
  for (const auto& [name, file] : files)
    out += (out.empty() ? "" : "; ") + name + " " + fileFingerprint(file);
  return out;
}

}  // namespace dtc
