#include "checkpoint/rank_file.h"

#include <cstdio>
#include <map>

#include "checkpoint/directory.h"
#include "io/files.h"
#include "io/json.h"
#include "planfile/communication.h"
#include "support/fault_points.h"

namespace dtc::checkpoint {
namespace {

constexpr int kReportTag = comm::Communicator::kMaxTag;

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string encode(const RankReport& r) {
  io::Json j = io::Json::object();
  j.set("ok", r.status.ok());
  j.set("code", static_cast<int64_t>(r.status.code()));
  j.set("error", r.status.message());
  j.set("file", r.wroteFile);
  j.set("bytes", r.file.bytes);
  j.set("crc32", r.file.crc32);
  j.set("seconds", r.seconds);
  io::Json crcs{io::Json::Array{}};
  for (uint32_t c : r.file.tensorCrc32) crcs.push(c);
  j.set("slices", std::move(crcs));
  return j.dump();
}

RankReport decode(const std::string& text, int rank) {
  RankReport r;
  auto parsed = io::parseJson(text);
  if (!parsed.ok() || !parsed->isObject()) {
    r.status =
        Status::Internal("rank " + std::to_string(rank) + " sent a malformed checkpoint report");
    return r;
  }
  const io::Json& j = *parsed;
  auto get = [&](const char* key) { return j.find(key) ? *j.find(key) : io::Json(); };
  if (!get("ok").asBool()) {
    // The failure's kind travels with it: a snapshot holding inf or NaN ends the job as such.
    const int64_t code = get("code").asInt();
    r.status = Status::WithCode(code > 0 && code < static_cast<int64_t>(StatusCode::kStopped)
                                    ? static_cast<StatusCode>(code)
                                    : StatusCode::kInternal,
                                "rank " + std::to_string(rank) + ": " + get("error").asString());
    return r;
  }
  r.wroteFile = get("file").asBool();
  r.file.bytes = static_cast<uint64_t>(get("bytes").asInt());
  r.file.crc32 = static_cast<uint32_t>(get("crc32").asInt());
  r.seconds = get("seconds").asDouble();
  const io::Json slices = get("slices");
  for (const io::Json& c : slices.asArray())
    r.file.tensorCrc32.push_back(static_cast<uint32_t>(c.asInt()));
  return r;
}

std::string what(const CheckpointRequest& request) {
  return "checkpoint of step " + std::to_string(request.progress.step);
}

// Rank 0's status (its kind, on the other ranks), as every rank learns it.
Status agree(comm::Communicator& world, const Status& rootStatus, const std::string& what) {
  float code = static_cast<float>(rootStatus.code());
  DTC_RETURN_IF_ERROR(world.broadcast(&code, 1, 0));
  if (world.rank() == 0) return rootStatus;
  const auto rootCode = static_cast<StatusCode>(static_cast<int>(code));
  return rootCode == StatusCode::kOk
             ? Status::Ok()
             : Status::WithCode(rootCode, what + " failed (rank 0 reports why)");
}

// Rank 0, once every rank's file is synced: the index, the rename, `latest`, retention.
Status publish(const CheckpointLayout& layout, const CheckpointRequest& request,
               const std::string& planName, const std::string& mesh,
               const std::vector<RankReport>& reports, const std::string& stepTmp) {
  CheckpointIndex index;
  index.progress = request.progress;
  index.plan = planName;
  index.mesh = mesh;
  std::vector<int> fileOf(reports.size(), -1);
  for (size_t r = 0; r < reports.size(); ++r)
    if (reports[r].wroteFile) {
      fileOf[r] = static_cast<int>(index.files.size());
      index.files.push_back({rankFileName(static_cast<int>(r)), static_cast<int>(r),
                             reports[r].file.bytes, reports[r].file.crc32});
    }
  std::vector<size_t> next(reports.size(), 0);  // each rank's next slice checksum
  for (const PlannedTensor& t : layout.tensors) {
    TensorRecord rec{
        t.name, t.dtype, t.shape, t.role == plan::Role::param ? "param" : "optim_state", {}};
    for (const PlannedSlice& s : t.slices) {
      const RankReport& from = reports[s.rank];
      if (fileOf[s.rank] < 0 || next[s.rank] >= from.file.tensorCrc32.size())
        return Status::Internal("checkpoint: rank " + std::to_string(s.rank) +
                                " reported fewer pieces than it holds");
      rec.slices.push_back({fileOf[s.rank], s.key, s.box, from.file.tensorCrc32[next[s.rank]++]});
    }
    index.tensors.push_back(std::move(rec));
  }
  const std::string text = indexToJson(index).dump() + "\n";
  faultPoint("checkpoint-index", 0);
  DTC_RETURN_IF_ERROR(
      io::writeFileAtomically(stepTmp + "/" + kIndexFile, text.data(), text.size()));
  DTC_RETURN_IF_ERROR(io::syncDirectory(stepTmp));
  const std::string name = stepDirectoryName(request.progress.step);
  const std::string final = request.dir + "/" + name, old = final + ".old";
  // Writing a step again (a run resumed from an earlier one): the old copy moves aside first.
  if (io::pathExists(final) && std::rename(final.c_str(), old.c_str()) != 0)
    return Status::Internal("cannot move " + final + " aside");
  if (std::rename(stepTmp.c_str(), final.c_str()) != 0)
    return Status::Internal("cannot rename " + stepTmp + " to " + final);
  DTC_RETURN_IF_ERROR(io::syncDirectory(request.dir));
  DTC_RETURN_IF_ERROR(io::removeTree(old));
  faultPoint("checkpoint-latest", 0);
  DTC_RETURN_IF_ERROR(io::replaceSymlink(name, request.dir + "/" + kLatest));
  return removeOldSteps(request.dir, request.keep);
}

}  // namespace

std::vector<WritePiece> piecesOf(const CheckpointLayout& layout, int rank) {
  std::vector<WritePiece> pieces;
  for (const PlannedTensor& t : layout.tensors)
    for (const PlannedSlice& s : t.slices)
      if (s.rank == rank)
        pieces.push_back({&t, &s, static_cast<size_t>(s.box.elements()) * dtypeSize(t.dtype)});
  return pieces;
}

std::optional<uint64_t> pieceRangeInLocal(const WritePiece& piece,
                                          const std::vector<int64_t>& local) {
  const PlannedSlice& s = *piece.slice;
  const size_t rank = local.size();
  // Row-major: the box is one range when it covers every dimension after some dimension k
  // whole and holds a single index of every dimension before k.
  size_t k = 0;
  for (size_t d = 0; d < rank; ++d)
    if (s.box.sizes[d] != local[d]) k = d;
  for (size_t d = 0; d < k; ++d)
    if (s.box.sizes[d] != 1) return std::nullopt;
  uint64_t offset = 0, stride = dtypeSize(piece.tensor->dtype);
  for (size_t d = rank; d-- > 0;) {
    offset += static_cast<uint64_t>(s.localOffsets[d]) * stride;
    stride *= static_cast<uint64_t>(local[d]);
  }
  return offset;
}

std::optional<PieceRows> pieceRowsInLocal(const WritePiece& piece,
                                          const std::vector<int64_t>& local) {
  if (std::optional<uint64_t> at = pieceRangeInLocal(piece, local))
    return PieceRows{*at, piece.bytes, piece.bytes, 1};
  const PlannedSlice& s = *piece.slice;
  const size_t rank = local.size();
  std::vector<uint64_t> stride(rank);
  uint64_t next = dtypeSize(piece.tensor->dtype);
  for (size_t d = rank; d-- > 0;) {
    stride[d] = next;
    next *= static_cast<uint64_t>(local[d]);
  }
  // The run: the innermost dimension the box cuts, with the whole dimensions inside it.
  size_t cut = rank;
  while (cut-- > 0 && s.box.sizes[cut] == local[cut]) {
  }
  PieceRows rows;
  rows.rowBytes = static_cast<uint64_t>(s.box.sizes[cut]) * stride[cut];
  for (size_t d = 0; d < rank; ++d)
    rows.offset += static_cast<uint64_t>(s.localOffsets[d]) * stride[d];
  // The rows: the dimensions outside the cut that the box spans more than one index of. They
  // step evenly when each one inside another is whole, with only dimensions of size 1 between.
  std::optional<size_t> inner;  // the innermost of them so far
  for (size_t d = cut; d-- > 0;) {
    if (s.box.sizes[d] == 1) continue;
    if (!inner) rows.pitch = stride[d];
    if (inner && s.box.sizes[*inner] != local[*inner]) return std::nullopt;
    for (size_t between = d + 1; inner && between < *inner; ++between)
      if (local[between] != 1) return std::nullopt;
    inner = d;
    rows.rows *= static_cast<uint64_t>(s.box.sizes[d]);
  }
  return rows;
}

void copyPieceOut(const WritePiece& piece, const std::vector<int64_t>& local, const uint8_t* whole,
                  uint8_t* to) {
  const PlannedSlice& s = *piece.slice;
  Placed src{local, {}};
  for (size_t d = 0; d < local.size(); ++d)
    src.origin.push_back(s.box.offsets[d] - s.localOffsets[d]);
  copyRegion(whole, src, to, Placed{s.box.sizes, s.box.offsets}, s.box,
             dtypeSize(piece.tensor->dtype));
}

StatusOr<const uint8_t*> pieceBytes(Executor& ex, const WritePiece& piece,
                                    std::vector<uint8_t>& scratch) {
  const PlannedTensor& t = *piece.tensor;
  TensorView local = ex.state(t.name);
  if (!local.data) return Status::Internal("checkpoint: this rank holds no state '" + t.name + "'");
  const auto* whole = static_cast<const uint8_t*>(local.data);
  if (std::optional<uint64_t> at = pieceRangeInLocal(piece, local.shape)) return whole + *at;
  scratch.resize(piece.bytes);
  copyPieceOut(piece, local.shape, whole, scratch.data());
  return static_cast<const uint8_t*>(scratch.data());
}

namespace {

std::vector<io::TensorRef> declaredTensors(const std::vector<WritePiece>& pieces) {
  std::vector<io::TensorRef> declared;
  for (const WritePiece& p : pieces)
    declared.push_back({p.slice->key, p.tensor->dtype, p.slice->box.sizes, nullptr, p.bytes});
  return declared;
}

const std::map<std::string, std::string> kRankFileMetadata = {{"format", "dtc-checkpoint"}};

}  // namespace

StatusOr<io::SafetensorsLayout> rankFileLayout(const std::vector<WritePiece>& pieces, int rank) {
  return io::layoutSafetensors(rankFileName(rank), declaredTensors(pieces), kRankFileMetadata);
}

RankReport writeRankFile(const std::vector<WritePiece>& pieces, const std::string& stepTmp,
                         int rank, const std::function<StatusOr<const uint8_t*>(size_t)>& bytesOf,
                         const std::atomic<bool>* cancel) {
  const auto start = std::chrono::steady_clock::now();
  RankReport report;
  if (pieces.empty()) return report;
  const std::string path = stepTmp + "/" + rankFileName(rank);
  StatusOr<io::SafetensorsWriter> writer =
      io::SafetensorsWriter::create(path, declaredTensors(pieces), kRankFileMetadata);
  if (!writer.ok()) {
    report.status = writer.status();
    return report;
  }
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (cancel && cancel->load()) {
      report.status = Status::Internal("checkpoint: the write was abandoned");
      return report;
    }
    StatusOr<const uint8_t*> data = bytesOf(i);
    if (!data.ok()) {
      report.status = data.status();
      return report;
    }
    if (Status st = writer->write(*data, pieces[i].bytes); !st.ok()) {
      report.status = st;
      return report;
    }
    faultPoint("checkpoint-file", rank);
  }
  StatusOr<io::WrittenSafetensors> written = writer->commit();
  if (!written.ok()) {
    report.status = written.status();
    return report;
  }
  report.wroteFile = true;
  report.file = std::move(written).value();
  report.seconds = secondsSince(start);
  return report;
}

std::string stepTmpDirectory(const CheckpointRequest& request) {
  return request.dir + "/" + stepDirectoryName(request.progress.step) + ".tmp";
}

Status prepareStep(comm::Communicator& world, const CheckpointRequest& request) {
  const std::string stepTmp = stepTmpDirectory(request);
  Status prepared = Status::Ok();
  if (world.rank() == 0) {
    prepared = io::removeTree(stepTmp);
    if (prepared.ok()) prepared = io::makeDirectories(stepTmp);
    if (prepared.ok()) prepared = io::syncDirectory(request.dir);
  }
  return agree(world, prepared, what(request));
}

StatusOr<WrittenCheckpoint> publishStep(comm::Communicator& world, const CheckpointLayout& layout,
                                        const CheckpointRequest& request,
                                        const std::string& planName, const std::string& mesh,
                                        RankReport mine,
                                        std::chrono::steady_clock::time_point start) {
  const int rank = world.rank();
  const std::string stepTmp = stepTmpDirectory(request);
  std::vector<RankReport> reports;
  if (rank == 0) {
    reports.push_back(std::move(mine));
    for (int r = 1; r < world.size(); ++r) {
      DTC_ASSIGN_OR_RETURN(std::string text, comm::recvText(world, r, kReportTag));
      reports.push_back(decode(text, r));
    }
  } else {
    DTC_RETURN_IF_ERROR(comm::sendText(world, encode(mine), 0, kReportTag));
  }
  Status published = Status::Ok();
  if (rank == 0) {
    for (const RankReport& r : reports)
      if (!r.status.ok() && published.ok()) published = r.status.withContext(what(request));
    if (published.ok())
      published =
          publish(layout, request, planName, mesh, reports, stepTmp).withContext(what(request));
    if (!published.ok()) (void)io::removeTree(stepTmp);
  }
  DTC_RETURN_IF_ERROR(agree(world, published, what(request)));
  WrittenCheckpoint written;
  written.dir = request.dir + "/" + stepDirectoryName(request.progress.step);
  written.seconds = secondsSince(start);
  for (const RankReport& r : reports) {
    if (!r.wroteFile) continue;
    written.bytes += r.file.bytes;
    ++written.files;
    if (r.seconds >= written.slowestSeconds) {
      written.slowestSeconds = r.seconds;
      written.slowestBytes = r.file.bytes;
    }
  }
  return written;
}

}  // namespace dtc::checkpoint
