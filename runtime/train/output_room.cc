#include "train/output_room.h"

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <vector>

#include "checkpoint/layout.h"

namespace dtc {
namespace {

// Each file's header and the index beside a checkpoint's pieces: generous for any plan.
constexpr uint64_t kPerTensorSlack = 512;
constexpr uint64_t kPerFileSlack = uint64_t{64} << 10;

uint64_t elements(const flatbuffers::Vector<int64_t>* shape) {
  uint64_t n = 1;
  if (shape)
    for (int64_t d : *shape) n *= static_cast<uint64_t>(std::max<int64_t>(d, 0));
  return n;
}

std::string bytesText(uint64_t bytes) {
  char text[32];
  const double b = static_cast<double>(bytes);
  if (b >= 1e9)
    std::snprintf(text, sizeof text, "%.2f GB", b / 1e9);
  else if (b >= 1e6)
    std::snprintf(text, sizeof text, "%.1f MB", b / 1e6);
  else
    std::snprintf(text, sizeof text, "%.0f KB", std::max(1.0, b / 1e3));
  return text;
}

struct Output {
  std::string flag;    // "--save DIR"
  std::string detail;  // "3 checkpoints of 2.9 MB", or ""
  uint64_t bytes = 0;
};

struct Need {
  std::vector<Output> outputs;
  uint64_t bytes = 0;
  std::string path;
};

}  // namespace

uint64_t savedBytes(const Plan& plan, DType dtype) {
  uint64_t total = kPerFileSlack;
  std::set<std::string> seen;
  for (const plan::StateTensor* s : *plan.root().state()) {
    if (s->role() != plan::Role::param || s->constant() || !seen.insert(s->name()->str()).second)
      continue;
    const DType stored = toDType(s->dtype());
    const size_t element = stored == DType::kF32 ? dtypeSize(dtype) : dtypeSize(stored);
    const uint64_t names = 1 + (s->aliases() ? s->aliases()->size() : 0);
    total += names * (elements(s->global_shape() ? s->global_shape() : s->shape()) * element +
                      kPerTensorSlack);
  }
  return total;
}

uint64_t checkpointBytes(const Plan& plan) {
  auto layout = checkpoint::planCheckpointLayout(plan);
  uint64_t total = kPerFileSlack;
  if (!layout.ok()) return total;
  total += static_cast<uint64_t>(layout->ranks) * kPerFileSlack;
  for (const checkpoint::PlannedTensor& t : layout->tensors)
    total += static_cast<uint64_t>(checkpoint::wholeBox(t.shape).elements()) * dtypeSize(t.dtype) +
             kPerTensorSlack;
  return total;
}

int64_t checkpointsWritten(int64_t done, int64_t steps, int64_t every) {
  int64_t n = every > 0 && steps > done ? steps / every - done / every : 0;
  if (every <= 0 || steps % every != 0 || steps <= done) ++n;
  return std::max<int64_t>(n, 1);
}

Status checkOutputRoom(const Plan& plan, const OutputRoom& room) {
  // The outputs by file system, in the order they are named.
  std::map<dev_t, Need> needs;
  std::vector<dev_t> order;
  auto add = [&](const std::string& dir, Output output) -> Status {
    struct stat info;
    if (::stat(dir.c_str(), &info) != 0)
      return Status::InvalidInput(dir + ": " + std::strerror(errno));
    if (!needs.count(info.st_dev)) order.push_back(info.st_dev);
    Need& need = needs[info.st_dev];
    need.bytes += output.bytes;
    need.outputs.push_back(std::move(output));
    if (need.path.empty()) need.path = dir;
    return Status::Ok();
  };
  if (!room.saveDir.empty())
    DTC_RETURN_IF_ERROR(
        add(room.saveDir, {"--save " + room.saveDir, "", savedBytes(plan, room.saveDtype)}));
  if (!room.checkpointDir.empty()) {
    const int64_t atOnce =
        room.keep > 0 ? std::min<int64_t>(room.checkpoints, room.keep + 1) : room.checkpoints;
    const uint64_t one = checkpointBytes(plan);
    std::string detail = atOnce == 1 ? "1 checkpoint" : std::to_string(atOnce) + " checkpoints";
    detail += " of " + bytesText(one);
    if (room.keep > 0 && atOnce > room.keep)
      detail += ": --keep " + std::to_string(room.keep) + " and the one being written";
    DTC_RETURN_IF_ERROR(add(room.checkpointDir, {"--checkpoint " + room.checkpointDir, detail,
                                                 one * static_cast<uint64_t>(atOnce)}));
  }
  for (dev_t device : order) {
    const Need& need = needs[device];
    struct statvfs fs;
    if (::statvfs(need.path.c_str(), &fs) != 0) continue;  // a file system that does not say
    const uint64_t available = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
    if (available >= need.bytes) continue;
    std::string what;
    if (need.outputs.size() == 1) {
      const Output& o = need.outputs[0];
      what =
          o.flag + " needs " + bytesText(o.bytes) + (o.detail.empty() ? "" : " (" + o.detail + ")");
    } else {
      for (const Output& o : need.outputs)
        what += (what.empty() ? "" : " and ") + o.flag + " (" +
                (o.detail.empty() ? bytesText(o.bytes) : o.detail) + ")";
      what += " need " + bytesText(need.bytes) + " together";
    }
    return Status::InvalidInput(what + " on a file system with " + bytesText(available) + " free");
  }
  return Status::Ok();
}

}  // namespace dtc
