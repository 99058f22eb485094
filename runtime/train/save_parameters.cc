#include "train/save_parameters.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>

#include "checkpoint/layout.h"
#include "io/files.h"
#include "io/safetensors.h"

namespace dtc {
namespace {

constexpr int kSaveTag = 1;  // parameters on their way to rank 0 (world communicator)
// The most bytes of one tensor rank 0 assembles at a time, and any rank sends at a time.
constexpr uint64_t kBlockBytes = uint64_t{64} << 20;

std::string why() { return std::strerror(errno); }

// The file rank 0 writes, at positions: blocks of each tensor as they are assembled.
class OutputFile {
 public:
  ~OutputFile() {
    if (fd_ >= 0) {
      ::close(fd_);
      ::unlink(tmp_.c_str());
    }
  }
  Status open(const std::string& path) {
    path_ = path;
    tmp_ = path + ".tmp." + std::to_string(::getpid());
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) return Status::InvalidInput("cannot write " + path + ": " + why());
    return Status::Ok();
  }
  Status writeAt(const void* data, uint64_t bytes, uint64_t offset) {
    const uint8_t* p = static_cast<const uint8_t*>(data);
    while (bytes > 0) {
      const ssize_t n = ::pwrite(fd_, p, std::min<uint64_t>(bytes, uint64_t{1} << 30),
                                 static_cast<off_t>(offset));
      if (n < 0) {
        if (errno == EINTR) continue;
        return Status::Internal("cannot write " + path_ + ": " + why());
      }
      p += n;
      offset += static_cast<uint64_t>(n);
      bytes -= static_cast<uint64_t>(n);
    }
    return Status::Ok();
  }
  // Synced, then renamed into place.
  Status commit() {
    Status s =
        ::fsync(fd_) == 0 ? Status::Ok() : Status::Internal("cannot sync " + path_ + ": " + why());
    if (::close(fd_) != 0 && s.ok()) s = Status::Internal("cannot write " + path_ + ": " + why());
    fd_ = -1;
    if (s.ok() && std::rename(tmp_.c_str(), path_.c_str()) != 0)
      s = Status::Internal("cannot rename " + tmp_ + " to " + path_ + ": " + why());
    if (!s.ok()) ::unlink(tmp_.c_str());
    return s;
  }

 private:
  std::string path_, tmp_;
  int fd_ = -1;
};

// What the file holds of one state tensor: its entries (its name and its tied names), each
// whole.
struct Saved {
  const checkpoint::PlannedTensor* tensor;
  std::vector<size_t> entries;  // into the file's tensor list
};

}  // namespace

// Streamed: the file's tensors go out in blocks of whole rows, at most kBlockBytes each. For
// each block, every rank that writes a piece of it (the checkpoint layout's writer: each
// distinct box of the state once) copies its part out of its state and sends it to rank 0,
// which places the parts in the block and writes it where the tensor (and each tied name of
// it) lies in the file. No rank holds more than its own state and a block or two; every rank
// walks the same tensors, blocks and pieces in the same order, so the sends and receives pair
// up, and each block's sends complete before the next begins.
Status saveParameters(Executor& ex, const std::string& dir, bool write) {
  if (write) DTC_RETURN_IF_ERROR(io::prepareOutputDirectory(dir, "--save"));
  const Plan& plan = ex.plan();
  comm::DeviceMesh* mesh = ex.mesh();
  const int rank = mesh ? mesh->rank() : 0;
  DTC_ASSIGN_OR_RETURN(checkpoint::CheckpointLayout layout, checkpoint::planCheckpointLayout(plan));
  std::map<std::string, const plan::StateTensor*> states;
  for (const plan::StateTensor* s : *plan.root().state()) states.emplace(s->name()->str(), s);
  std::vector<io::TensorRef> entries;
  std::vector<Saved> saved;
  for (const checkpoint::PlannedTensor& t : layout.tensors) {
    const plan::StateTensor* s = states.count(t.name) ? states.at(t.name) : nullptr;
    if (t.role != plan::Role::param || (s && s->constant())) continue;
    const size_t bytes =
        static_cast<size_t>(checkpoint::wholeBox(t.shape).elements()) * dtypeSize(t.dtype);
    Saved one{&t, {entries.size()}};
    entries.push_back({t.name, t.dtype, t.shape, nullptr, bytes});
    // A tied weight's other names hold the same values (a copy each in the file: safetensors
    // entries may not share bytes).
    if (s && s->aliases())
      for (const flatbuffers::String* alias : *s->aliases()) {
        one.entries.push_back(entries.size());
        entries.push_back({alias->str(), t.dtype, t.shape, nullptr, bytes});
      }
    saved.push_back(std::move(one));
  }
  const std::string path = dir + "/model.safetensors";
  DTC_ASSIGN_OR_RETURN(io::SafetensorsLayout file,
                       io::layoutSafetensors(path, entries, {{"format", "pt"}}));
  OutputFile out;
  if (write) {
    DTC_RETURN_IF_ERROR(out.open(path));
    DTC_RETURN_IF_ERROR(out.writeAt(file.prefix.data(), file.prefix.size(), 0));
  }
  std::vector<uint8_t> block, part;
  for (const Saved& one : saved) {
    const checkpoint::PlannedTensor& t = *one.tensor;
    const size_t element = dtypeSize(t.dtype);
    const checkpoint::Box whole = checkpoint::wholeBox(t.shape);
    const int64_t rows = t.shape.empty() ? 1 : t.shape[0];
    const uint64_t rowBytes =
        rows > 0 ? static_cast<uint64_t>(whole.elements()) * element / static_cast<uint64_t>(rows)
                 : 0;
    const int64_t perBlock =
        std::max<int64_t>(1, static_cast<int64_t>(kBlockBytes / std::max<uint64_t>(rowBytes, 1)));
    TensorView local = ex.state(t.name);
    for (int64_t first = 0; first < rows; first += perBlock) {
      checkpoint::Box rowsBox = whole;
      if (!t.shape.empty()) {
        rowsBox.offsets[0] = first;
        rowsBox.sizes[0] = std::min(perBlock, rows - first);
      }
      const checkpoint::Placed blockPlace{rowsBox.sizes, rowsBox.offsets};
      if (write) block.assign(static_cast<size_t>(rowsBox.elements()) * element, 0);
      for (const checkpoint::PlannedSlice& s : t.slices) {
        checkpoint::Box common;
        if (!checkpoint::intersect(s.box, rowsBox, common)) continue;
        const size_t bytes = static_cast<size_t>(common.elements()) * element;
        const checkpoint::Placed commonPlace{common.sizes, common.offsets};
        if (s.rank == rank) {
          if (!local.data)
            return Status::Internal("--save: this rank holds no state '" + t.name + "'");
          checkpoint::Placed src{local.shape, {}};
          for (size_t d = 0; d < local.shape.size(); ++d)
            src.origin.push_back(s.box.offsets[d] - s.localOffsets[d]);
          if (write) {
            checkpoint::copyRegion(local.data, src, block.data(), blockPlace, common, element);
            continue;
          }
          part.resize(bytes);
          checkpoint::copyRegion(local.data, src, part.data(), commonPlace, common, element);
          DTC_RETURN_IF_ERROR(
              mesh->world().send(part.data(), static_cast<int64_t>(bytes), 0, kSaveTag));
        } else if (write) {
          part.resize(bytes);
          DTC_RETURN_IF_ERROR(
              mesh->world().recv(part.data(), static_cast<int64_t>(bytes), s.rank, kSaveTag));
          checkpoint::copyRegion(part.data(), commonPlace, block.data(), blockPlace, common,
                                 element);
        }
      }
      if (mesh) DTC_RETURN_IF_ERROR(mesh->completeSends());
      if (!write) continue;
      for (size_t e : one.entries)
        DTC_RETURN_IF_ERROR(out.writeAt(
            block.data(), block.size(),
            file.prefix.size() + file.offsets[e] + static_cast<uint64_t>(first) * rowBytes));
    }
  }
  if (!write) return Status::Ok();
  return out.commit();
}

}  // namespace dtc
