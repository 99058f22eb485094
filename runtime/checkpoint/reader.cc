#include "checkpoint/reader.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>

#include "checkpoint/directory.h"
#include "exec/shard_layout.h"
#include "io/safetensors.h"
#include "support/float8.h"
#include "support/printable.h"

namespace dtc::checkpoint {
namespace {

// The plan's state against the checkpoint's tensors: every problem, in one message.
Status matchTensors(const Plan& plan, const CheckpointIndex& index, const std::string& stepDir) {
  std::vector<std::string> missing, unexpected, mismatched;
  std::set<std::string> planned;
  for (const plan::StateTensor* s : *plan.root().state()) {
    const std::string name = s->name()->str();
    if (!planned.insert(name).second) continue;
    const auto* shape = s->global_shape() ? s->global_shape() : s->shape();
    std::vector<int64_t> whole(shape->begin(), shape->end());
    const TensorRecord* saved = index.find(name);
    if (!saved && isFp8AmaxHistory(name)) continue;  // started anew
    if (!saved) {
      missing.push_back(name);
    } else if (saved->shape != whole || saved->dtype != toDType(s->dtype())) {
      mismatched.push_back(name + " " + dtypeName(saved->dtype) + shapeText(saved->shape) +
                           " (plan: " + dtypeName(toDType(s->dtype())) + shapeText(whole) + ")");
    }
  }
  for (const TensorRecord& t : index.tensors)
    if (!planned.count(t.name) && !isFp8AmaxHistory(t.name)) unexpected.push_back(t.name);
  if (missing.empty() && unexpected.empty() && mismatched.empty()) return Status::Ok();
  std::string message = "checkpoint " + stepDir + " does not match " + plan.name() + ":";
  if (!missing.empty()) message += " missing " + nameList(missing) + ";";
  if (!unexpected.empty()) message += " not in the plan " + nameList(unexpected) + ";";
  if (!mismatched.empty()) message += " different " + nameList(mismatched) + ";";
  message.back() = ' ';
  return Status::InvalidInput(
      message +
      "(a checkpoint resumes the same model, optimizer and precision; --init "
      "starts a new run from a file's parameters)");
}

// One saved slice to read, and the pieces of a local tensor it fills.
struct Read {
  const TensorRecord* tensor;
  const SliceRecord* slice;
  TensorView local;
  std::vector<Piece> pieces;
};

}  // namespace

StatusOr<uint64_t> loadCheckpoint(Executor& ex, const std::string& stepDir,
                                  const CheckpointIndex& index) {
  const Plan& plan = ex.plan();
  DTC_RETURN_IF_ERROR(matchTensors(plan, index, stepDir));
  std::vector<Read> reads;
  std::set<std::string> seen;
  for (const plan::StateTensor* s : *plan.root().state()) {
    if (!Plan::onStage(s->stage(), ex.stage()) || !seen.insert(s->name()->str()).second) continue;
    const TensorRecord* record = index.find(s->name()->str());
    if (!record) continue;  // an FP8 amax history the checkpoint lacks (matchTensors)
    const TensorRecord& saved = *record;
    TensorView local = ex.state(saved.name);
    std::vector<Piece> pieces =
        piecesOf(saved.shape, cutsOf(s->sharding(), saved.shape.size(), ex.mesh()));
    for (const SliceRecord& slice : saved.slices) {
      Box common;
      bool needed = false;
      for (const Piece& p : pieces) needed |= intersect(p.global, slice.box, common);
      if (needed) reads.push_back({&saved, &slice, local, pieces});
    }
  }
  // File by file, in file order: the disk sees sequential reads.
  std::map<int, std::unique_ptr<io::SafetensorsReader>> files;
  std::vector<const io::TensorEntry*> entries(reads.size());
  for (size_t i = 0; i < reads.size(); ++i) {
    const SliceRecord& slice = *reads[i].slice;
    auto& file = files[slice.file];
    const std::string path = stepDir + "/" + index.files[slice.file].name;
    if (!file) {
      DTC_RETURN_IF_ERROR(checkFile(stepDir, index.files[slice.file]));
      DTC_ASSIGN_OR_RETURN(io::SafetensorsReader opened, io::SafetensorsReader::open(path));
      file = std::make_unique<io::SafetensorsReader>(std::move(opened));
    }
    entries[i] = file->header().find(slice.key);
    if (!entries[i] || entries[i]->shape != slice.box.sizes ||
        entries[i]->dtype != reads[i].tensor->dtype)
      return Status::InvalidInput(path + " is damaged: it holds no " +
                                  dtypeName(reads[i].tensor->dtype) + shapeText(slice.box.sizes) +
                                  " '" + slice.key + "' as the index says");
  }
  std::vector<size_t> order(reads.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (reads[a].slice->file != reads[b].slice->file)
      return reads[a].slice->file < reads[b].slice->file;
    return entries[a]->begin < entries[b]->begin;
  });
  uint64_t bytesRead = 0;
  auto checked = [&](size_t i, uint32_t crc) -> Status {
    bytesRead += entries[i]->bytes;
    if (crc == reads[i].slice->crc32) return Status::Ok();
    return Status::InvalidInput(files[reads[i].slice->file]->path() +
                                " is corrupted: the bytes of '" + reads[i].tensor->name + "' " +
                                boxText(reads[i].slice->box) + " do not match their checksum");
  };
  // A saved piece that is exactly this rank's tensor (the same layout) goes straight into
  // place: all of a file's such pieces in one batch, several reads in flight.
  auto direct = [&](size_t i) {
    return reads[i].pieces.size() == 1 && reads[i].pieces[0].global == reads[i].slice->box;
  };
  for (size_t at = 0; at < order.size();) {
    const int file = reads[order[at]].slice->file;
    std::vector<size_t> batch;
    std::vector<const io::TensorEntry*> batchEntries;
    std::vector<void*> into;
    for (; at < order.size() && reads[order[at]].slice->file == file; ++at)
      if (direct(order[at])) {
        batch.push_back(order[at]);
        batchEntries.push_back(entries[order[at]]);
        into.push_back(reads[order[at]].local.data);
      }
    if (batch.empty()) continue;
    DTC_ASSIGN_OR_RETURN(std::vector<uint32_t> crcs, files[file]->readChecked(batchEntries, into));
    for (size_t k = 0; k < batch.size(); ++k) DTC_RETURN_IF_ERROR(checked(batch[k], crcs[k]));
  }
  // The others (another layout) one by one through a buffer, each overlap copied into place.
  std::vector<uint8_t> buffer;
  for (size_t i : order) {
    if (direct(i)) continue;
    const Read& r = reads[i];
    const SliceRecord& slice = *r.slice;
    buffer.resize(entries[i]->bytes);
    DTC_ASSIGN_OR_RETURN(std::vector<uint32_t> crcs,
                         files[slice.file]->readChecked({entries[i]}, {buffer.data()}));
    DTC_RETURN_IF_ERROR(checked(i, crcs[0]));
    for (const Piece& p : r.pieces) {
      Box common;
      if (!intersect(p.global, slice.box, common)) continue;
      Placed dst{r.local.shape, {}};
      for (size_t d = 0; d < p.global.offsets.size(); ++d)
        dst.origin.push_back(p.global.offsets[d] - p.localOffsets[d]);
      copyRegion(buffer.data(), Placed{slice.box.sizes, slice.box.offsets}, r.local.data, dst,
                 common, dtypeSize(r.tensor->dtype));
    }
  }
  DTC_RETURN_IF_ERROR(ex.pushState());
  return bytesRead;
}

}  // namespace dtc::checkpoint
