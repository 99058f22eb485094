#include "train/save_parameters.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>

#include "checkpoint/hf_folder.h"
#include "checkpoint/layout.h"
#include "io/files.h"
#include "io/safetensors.h"
#include "support/fault_points.h"

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

// What the files hold of one state tensor: its entries (its name and its tied names), each
// whole, all in one file.
struct Saved {
  const checkpoint::PlannedTensor* tensor;
  std::vector<size_t> entries;  // into the list of every entry
  size_t file = 0;
};

// One of the output files: its entries in order, where each lies, and, on rank 0 while it is
// being filled, the file itself.
struct ShardFile {
  std::string name;
  std::vector<io::TensorRef> entries;
  io::SafetensorsLayout layout;
  size_t tensorsLeft = 0;  // Saved tensors still to write into it
  std::unique_ptr<OutputFile> out;
};

}  // namespace

// Streamed: the files' tensors go out in blocks of whole rows, at most kBlockBytes each. For
// each block, every rank that writes a piece of it (the checkpoint layout's writer: each
// distinct box of the state once) copies its part out of its state and sends it to rank 0,
// which places the parts in the block and writes it where the tensor (and each tied name of
// it) lies in its file. No rank holds more than its own state and a block or two; every rank
// walks the same tensors, blocks and pieces in the same order, so the sends and receives pair
// up, and each block's sends complete before the next begins. A file is opened at its first
// tensor and synced and renamed into place after its last.
Status saveParameters(Executor& ex, const std::string& dir, bool write, uint64_t maxShardBytes) {
  if (write) DTC_RETURN_IF_ERROR(io::prepareOutputDirectory(dir, "--save"));
  const Plan& plan = ex.plan();
  comm::DeviceMesh* mesh = ex.mesh();
  const int rank = mesh ? mesh->rank() : 0;
  DTC_ASSIGN_OR_RETURN(checkpoint::CheckpointLayout layout, checkpoint::planCheckpointLayout(plan));
  std::map<std::string, const plan::StateTensor*> states;
  for (const plan::StateTensor* s : *plan.root().state()) states.emplace(s->name()->str(), s);
  std::vector<io::TensorRef> entries;
  std::vector<Saved> saved;
  std::vector<uint64_t> savedBytes;
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
    savedBytes.push_back(static_cast<uint64_t>(bytes) * one.entries.size());
    saved.push_back(std::move(one));
  }
  const std::vector<size_t> fileOf = checkpoint::assignHfShards(savedBytes, maxShardBytes);
  size_t fileCount = 1;
  for (size_t f : fileOf) fileCount = std::max(fileCount, f + 1);
  std::vector<ShardFile> files(fileCount);
  for (size_t f = 0; f < fileCount; ++f) files[f].name = checkpoint::hfWeightFileName(f, fileCount);
  std::vector<size_t> indexInFile(entries.size());  // each entry's place in its file's entries
  std::map<std::string, std::string> weightMap;
  uint64_t totalBytes = 0;
  for (size_t i = 0; i < saved.size(); ++i) {
    Saved& one = saved[i];
    one.file = fileOf[i];
    ShardFile& file = files[one.file];
    ++file.tensorsLeft;
    for (size_t e : one.entries) {
      indexInFile[e] = file.entries.size();
      file.entries.push_back(entries[e]);
      weightMap[entries[e].name] = file.name;
    }
    // As Hugging Face counts it: a tied weight's storage once, however many names it has.
    totalBytes += entries[one.entries.front()].bytes;
  }
  for (size_t f = 0; f < fileCount; ++f) {
    DTC_ASSIGN_OR_RETURN(
        files[f].layout,
        io::layoutSafetensors(dir + "/" + files[f].name, files[f].entries, {{"format", "pt"}}));
  }
  auto openFile = [&](ShardFile& file) -> Status {
    file.out = std::make_unique<OutputFile>();
    DTC_RETURN_IF_ERROR(file.out->open(dir + "/" + file.name));
    return file.out->writeAt(file.layout.prefix.data(), file.layout.prefix.size(), 0);
  };
  // A model without parameters still gets its (empty) file.
  if (write && saved.empty()) {
    DTC_RETURN_IF_ERROR(openFile(files[0]));
    DTC_RETURN_IF_ERROR(files[0].out->commit());
  }
  std::vector<uint8_t> block, part;
  for (const Saved& one : saved) {
    ShardFile& file = files[one.file];
    if (write && !file.out) DTC_RETURN_IF_ERROR(openFile(file));
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
      faultPoint("save-block", rank);
      if (!write) continue;
      for (size_t e : one.entries)
        DTC_RETURN_IF_ERROR(file.out->writeAt(block.data(), block.size(),
                                              file.layout.prefix.size() +
                                                  file.layout.offsets[indexInFile[e]] +
                                                  static_cast<uint64_t>(first) * rowBytes));
    }
    if (write && --file.tensorsLeft == 0) {
      DTC_RETURN_IF_ERROR(file.out->commit());
      file.out.reset();
    }
  }
  if (!write) return Status::Ok();
  return checkpoint::finishHfWeights(dir, fileCount, totalBytes, weightMap);
}

}  // namespace dtc
