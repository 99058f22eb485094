#include "checkpoint/reader.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>

#include "exec/shard_layout.h"
#include "io/crc32.h"
#include "io/safetensors.h"
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
    if (!saved) {
      missing.push_back(name);
    } else if (saved->shape != whole || saved->dtype != toDType(s->dtype())) {
      mismatched.push_back(name + " " + dtypeName(saved->dtype) + shapeText(saved->shape) + " (plan: " +
                           dtypeName(toDType(s->dtype())) + shapeText(whole) + ")");
    }
  }
  for (const TensorRecord& t : index.tensors)
    if (!planned.count(t.name)) unexpected.push_back(t.name);
  if (missing.empty() && unexpected.empty() && mismatched.empty()) return Status::Ok();
  std::string message = "checkpoint " + stepDir + " does not match " + plan.name() + ":";
  if (!missing.empty()) message += " missing " + nameList(missing) + ";";
  if (!unexpected.empty()) message += " not in the plan " + nameList(unexpected) + ";";
  if (!mismatched.empty()) message += " different " + nameList(mismatched) + ";";
  message.back() = ' ';
  return Status::InvalidInput(message +
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

Status loadCheckpoint(Executor& ex, const std::string& stepDir, const CheckpointIndex& index) {
  const Plan& plan = ex.plan();
  DTC_RETURN_IF_ERROR(matchTensors(plan, index, stepDir));
  std::vector<Read> reads;
  std::set<std::string> seen;
  for (const plan::StateTensor* s : *plan.root().state()) {
    if (!Plan::onStage(s->stage(), ex.stage()) || !seen.insert(s->name()->str()).second) continue;
    const TensorRecord& saved = *index.find(s->name()->str());
    TensorView local = ex.state(saved.name);
    std::vector<Piece> pieces = piecesOf(saved.shape, cutsOf(s->sharding(), saved.shape.size(), ex.mesh()));
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
      DTC_ASSIGN_OR_RETURN(io::SafetensorsReader opened, io::SafetensorsReader::open(path));
      file = std::make_unique<io::SafetensorsReader>(std::move(opened));
    }
    entries[i] = file->header().find(slice.key);
    if (!entries[i] || entries[i]->shape != slice.box.sizes || entries[i]->dtype != reads[i].tensor->dtype)
      return Status::InvalidInput(path + " is damaged: it holds no " + dtypeName(reads[i].tensor->dtype) +
                                  shapeText(slice.box.sizes) + " '" + slice.key + "' as the index says");
  }
  std::vector<size_t> order(reads.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (reads[a].slice->file != reads[b].slice->file) return reads[a].slice->file < reads[b].slice->file;
    return entries[a]->begin < entries[b]->begin;
  });
  std::vector<uint8_t> buffer;
  for (size_t i : order) {
    const Read& r = reads[i];
    const SliceRecord& slice = *r.slice;
    const io::SafetensorsReader& file = *files[slice.file];
    const size_t elementSize = dtypeSize(r.tensor->dtype);
    // The saved piece is exactly this rank's tensor (the same layout): straight into place.
    const bool direct = r.pieces.size() == 1 && r.pieces[0].global == slice.box;
    uint8_t* into = r.local.data;
    if (!direct) {
      buffer.resize(entries[i]->bytes);
      into = buffer.data();
    }
    DTC_RETURN_IF_ERROR(file.read(*entries[i], into));
    if (io::crc32(0, into, entries[i]->bytes) != slice.crc32)
      return Status::InvalidInput(file.path() + " is corrupted: the bytes of '" + r.tensor->name + "' " +
                                  boxText(slice.box) + " do not match their checksum");
    if (direct) continue;
    for (const Piece& p : r.pieces) {
      Box common;
      if (!intersect(p.global, slice.box, common)) continue;
      Placed dst{r.local.shape, {}};
      for (size_t d = 0; d < p.global.offsets.size(); ++d) dst.origin.push_back(p.global.offsets[d] - p.localOffsets[d]);
      copyRegion(into, Placed{slice.box.sizes, slice.box.offsets}, r.local.data, dst, common, elementSize);
    }
  }
  return ex.pushState();
}

}  // namespace dtc::checkpoint
