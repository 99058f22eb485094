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
#include "support/half.h"

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

// One entry of a saved tensor: the whole tensor (under its name or a tied name), or one of its
// external tensors (the slice at `index` of its first dimension, transposed where asked).
struct EntryWrite {
  size_t entry;  // into the list of every entry
  int64_t index = -1;
  bool transposed = false;
};

// What the files hold of one state tensor: its entries, all in one file.
struct Saved {
  const checkpoint::PlannedTensor* tensor;
  std::vector<EntryWrite> writes;
  size_t file = 0;
  bool wholeBlock = false;  // an untransposed slice cannot stream by rows: one block of all
};

// `count` float32 values as `dtype` into `out` (round to nearest even for 16 bits).
void narrow(const float* values, int64_t count, DType dtype, std::vector<uint8_t>& out) {
  out.resize(static_cast<size_t>(count) * dtypeSize(dtype));
  if (dtype == DType::kF32) {
    std::memcpy(out.data(), values, out.size());
    return;
  }
  uint16_t* h = reinterpret_cast<uint16_t*>(out.data());
  for (int64_t i = 0; i < count; ++i)
    h[i] = dtype == DType::kBF16 ? f32ToBf16(values[i]) : f32ToF16(values[i]);
}

// [matrices, a, b] -> [matrices, b, a].
void transposeLast(const float* in, int64_t matrices, int64_t a, int64_t b,
                   std::vector<float>& out) {
  out.resize(static_cast<size_t>(matrices * a * b));
  for (int64_t m = 0; m < matrices; ++m)
    for (int64_t i = 0; i < a; ++i)
      for (int64_t j = 0; j < b; ++j) out[m * a * b + j * a + i] = in[m * a * b + i * b + j];
}

// The shape of an external tensor of a tensor shaped `shape`.
std::vector<int64_t> partShape(std::vector<int64_t> shape, int64_t index, bool transposed) {
  if (index >= 0) shape.erase(shape.begin());
  if (transposed) std::swap(shape[shape.size() - 1], shape[shape.size() - 2]);
  return shape;
}

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

StatusOr<DType> saveDtypeFor(const Plan& plan, const std::string& flag, bool hf) {
  std::string name = flag;
  if (name.empty() && hf && plan.root().hf_config())
    name = checkpoint::hfTorchDtype(plan.root().hf_config()->str());
  if (name.empty() || name == "f32" || name == "float32") return DType::kF32;
  if (name == "bf16" || name == "bfloat16") return DType::kBF16;
  if (name == "f16" || name == "float16") return DType::kF16;
  if (!flag.empty())
    return Status::InvalidInput("--save-dtype must be f32, bf16 or f16, got '" + flag + "'");
  return Status::InvalidInput("the model's config.json says torch_dtype '" + name +
                              "', which --save cannot write: give --save-dtype f32, bf16 or f16");
}

std::string torchDtypeName(DType dtype) {
  return dtype == DType::kBF16 ? "bfloat16" : dtype == DType::kF16 ? "float16" : "float32";
}

// Streamed: the files' tensors go out in blocks of whole rows, at most kBlockBytes each. For
// each block, every rank that writes a piece of it (the checkpoint layout's writer: each
// distinct box of the state once) copies its part out of its state and sends it to rank 0,
// which places the parts in the block and writes it where the tensor (and each tied name of
// it) lies in its file. No rank holds more than its own state and a block or two; every rank
// walks the same tensors, blocks and pieces in the same order, so the sends and receives pair
// up, and each block's sends complete before the next begins. A file is opened at its first
// tensor and synced and renamed into place after its last.
Status saveParameters(Executor& ex, const std::string& dir, bool write,
                      const SaveOptions& options) {
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
    // Floats in the dtype asked for; other tensors as they are.
    const bool floating = t.dtype == DType::kF32;
    const DType fileType = floating ? options.dtype : t.dtype;
    const size_t bytes =
        static_cast<size_t>(checkpoint::wholeBox(t.shape).elements()) * dtypeSize(fileType);
    Saved one{&t, {}};
    uint64_t held = 0;
    if (options.external && s && s->external() && s->external()->size() > 0 && floating) {
      for (const plan::ExternalTensor* e : *s->external()) {
        const std::vector<int64_t> shape = partShape(t.shape, e->index(), e->transposed());
        const size_t partBytes =
            static_cast<size_t>(checkpoint::wholeBox(shape).elements()) * dtypeSize(fileType);
        one.writes.push_back({entries.size(), e->index(), e->transposed()});
        if (e->index() < 0 && e->transposed()) one.wholeBlock = true;
        entries.push_back({e->name()->str(), fileType, shape, nullptr, partBytes});
        held += partBytes;
      }
    } else {
      one.writes.push_back({entries.size()});
      entries.push_back({t.name, fileType, t.shape, nullptr, bytes});
      held = bytes;
      // A tied weight's other names hold the same values (a copy each in the file: safetensors
      // entries may not share bytes).
      if (s && s->aliases())
        for (const flatbuffers::String* alias : *s->aliases()) {
          one.writes.push_back({entries.size()});
          entries.push_back({alias->str(), fileType, t.shape, nullptr, bytes});
          held += bytes;
        }
    }
    savedBytes.push_back(held);
    saved.push_back(std::move(one));
  }
  const std::vector<size_t> fileOf = checkpoint::assignHfShards(savedBytes, options.maxShardBytes);
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
    for (const EntryWrite& w : one.writes) {
      indexInFile[w.entry] = file.entries.size();
      file.entries.push_back(entries[w.entry]);
      weightMap[entries[w.entry].name] = file.name;
    }
    // As Hugging Face counts it: a tied weight's storage once, however many names it has; a
    // tensor held as parts, each part.
    if (one.writes.front().index >= 0 || one.writes.front().transposed)
      for (const EntryWrite& w : one.writes) totalBytes += entries[w.entry].bytes;
    else
      totalBytes += entries[one.writes.front().entry].bytes;
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
        one.wholeBlock
            ? std::max<int64_t>(rows, 1)
            : std::max<int64_t>(
                  1, static_cast<int64_t>(kBlockBytes / std::max<uint64_t>(rowBytes, 1)));
    const int64_t rowElements = rows > 0 ? whole.elements() / rows : 0;
    TensorView local = ex.state(t.name);
    std::vector<uint8_t> narrowed;
    std::vector<float> turned;
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
      const int64_t blockRows = t.shape.empty() ? 1 : rowsBox.sizes[0];
      const bool floating = t.dtype == DType::kF32;
      const DType fileType = floating ? options.dtype : t.dtype;
      const float* values = reinterpret_cast<const float*>(block.data());
      for (const EntryWrite& w : one.writes) {
        const uint64_t at = file.layout.prefix.size() + file.layout.offsets[indexInFile[w.entry]];
        if (w.index < 0 && !w.transposed) {  // rows [first, first + blockRows) of the whole
          if (!floating || fileType == DType::kF32) {
            DTC_RETURN_IF_ERROR(file.out->writeAt(block.data(), block.size(),
                                                  at + static_cast<uint64_t>(first) * rowBytes));
            continue;
          }
          narrow(values, blockRows * rowElements, fileType, narrowed);
          DTC_RETURN_IF_ERROR(file.out->writeAt(
              narrowed.data(), narrowed.size(),
              at + static_cast<uint64_t>(first * rowElements) * dtypeSize(fileType)));
          continue;
        }
        // A part: one row of this block (a slice of the first dimension), or the whole tensor
        // (a block of every row), its last two dimensions swapped where asked.
        if (w.index >= 0 && (w.index < first || w.index >= first + blockRows)) continue;
        const float* from = w.index >= 0 ? values + (w.index - first) * rowElements : values;
        const int64_t count = w.index >= 0 ? rowElements : whole.elements();
        if (w.transposed) {
          const size_t r = t.shape.size();
          const int64_t a = t.shape[r - 2], b = t.shape[r - 1];
          transposeLast(from, count / (a * b), a, b, turned);
          from = turned.data();
        }
        narrow(from, count, fileType, narrowed);
        DTC_RETURN_IF_ERROR(file.out->writeAt(narrowed.data(), narrowed.size(), at));
      }
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
