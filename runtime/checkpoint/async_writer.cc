#include "checkpoint/async_writer.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "planfile/communication.h"
#include "support/fault_points.h"
#include "support/finite_copy.h"
#include "support/printable.h"

namespace dtc::checkpoint {
namespace {

// MADV_POPULATE_WRITE (Linux 5.14), spelled out for older headers; older kernels refuse it.
constexpr int kPopulateWrite = 23;
constexpr uint64_t kChunkBytes = uint64_t{4} << 20;  // what one thread copies at a time

}  // namespace

StatusOr<std::unique_ptr<AsyncCheckpointWriter>> AsyncCheckpointWriter::create(
    const CheckpointLayout& layout, Executor& ex, int rank, bool besideStep) {
  std::unique_ptr<AsyncCheckpointWriter> w(new AsyncCheckpointWriter(layout, ex, besideStep));
  w->pieces_ = piecesOf(layout, rank);
  if (w->pieces_.empty()) return w;
  // Where each piece lies in this rank's state (on a device backend: the shape; the bytes are
  // read from the device), and the chunks a copy beside the step claims: fixed for the run.
  for (size_t i = 0; i < w->pieces_.size(); ++i) {
    const WritePiece& piece = w->pieces_[i];
    w->locals_.push_back(ex.state(piece.tensor->name));
    if (!w->locals_.back().data)
      return Status::Internal("checkpoint: this rank holds no state '" + piece.tensor->name + "'");
    w->rows_.push_back(pieceRowsInLocal(piece, w->locals_.back().shape));
    if (!besideStep || !ex.backend().hostMemory()) continue;
    if (!w->rangeOf(i)) {
      w->chunks_.push_back({i, 0, piece.bytes});
      continue;
    }
    for (uint64_t begin = 0; begin < piece.bytes; begin += kChunkBytes)
      w->chunks_.push_back({i, begin, std::min<uint64_t>(kChunkBytes, piece.bytes - begin)});
  }
  // Each piece where the file holds it (after the header's bytes, left unused): the mapping is
  // page-aligned, so every byte's address agrees with its file offset modulo the block size,
  // and O_DIRECT writes the pieces from here without copying them through a staging buffer.
  DTC_ASSIGN_OR_RETURN(io::SafetensorsLayout file, rankFileLayout(w->pieces_, rank));
  for (uint64_t offset : file.offsets) w->offsets_.push_back(file.prefix.size() + offset);
  w->bytes_ = file.prefix.size() + file.dataBytes;
  // In huge pages where the kernel gives them (fewer pages for O_DIRECT to pin, fewer TLB misses
  // for the copy), populated now rather than faulted in page by page during the first snapshot,
  // which training waits for.
  void* m = ::mmap(nullptr, w->bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED)
    return Status::InvalidInput("--checkpoint-async: cannot reserve " + std::to_string(w->bytes_) +
                                " bytes of host memory for the snapshot: " + std::strerror(errno));
  w->snapshot_ = static_cast<uint8_t*>(m);
  (void)::madvise(m, w->bytes_, MADV_HUGEPAGE);  // a hint: may be refused
  if (::madvise(m, w->bytes_, kPopulateWrite) != 0) {
    if (errno == ENOMEM)
      return Status::InvalidInput(
          "--checkpoint-async: cannot populate " + std::to_string(w->bytes_) +
          " bytes of host memory for the snapshot: " + std::strerror(errno));
    const long page = ::sysconf(_SC_PAGESIZE);
    for (uint64_t at = 0; at < w->bytes_; at += static_cast<uint64_t>(page)) w->snapshot_[at] = 0;
  }
  if (!ex.backend().hostMemory()) {
    Status pinned = ex.pinHostMemory(w->snapshot_, w->bytes_);
    if (!pinned.ok())
      return Status::InvalidInput("--checkpoint-async: the snapshot: " + pinned.message());
    w->pinned_ = true;
  }
  return w;
}

AsyncCheckpointWriter::~AsyncCheckpointWriter() {
  cancel_ = true;
  {
    std::lock_guard<std::mutex> lock(copyMutex_);
    copied_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  if (!chunks_.empty()) ex_.deferStateRead(nullptr);
  if (pinned_) ex_.unpinHostMemory(snapshot_);
  if (snapshot_) ::munmap(snapshot_, bytes_);
}

Status AsyncCheckpointWriter::downloadPiece(size_t i, std::vector<uint8_t>& scratch) {
  const WritePiece& piece = pieces_[i];
  const std::string& name = piece.tensor->name;
  const TensorView& local = locals_[i];
  uint8_t* to = snapshot_ + offsets_[i];
  if (const std::optional<PieceRows>& r = rows_[i])
    return ex_.readStateRows(name, r->offset, r->rowBytes, r->pitch, r->rows, to);
  // The piece lies in no even rows of its tensor: copied out of the whole of it.
  scratch.resize(static_cast<size_t>(local.numElements()) * dtypeSize(piece.tensor->dtype));
  DTC_RETURN_IF_ERROR(ex_.readState(name, 0, scratch.size(), scratch.data()));
  copyPieceOut(piece, local.shape, scratch.data(), to);
  return Status::Ok();
}

bool AsyncCheckpointWriter::hostPieceFinite(size_t i) {
  const TensorView& local = locals_[i];
  const auto pieceElements = static_cast<int64_t>(pieces_[i].bytes / dtypeSize(local.dtype));
  uint8_t* to = snapshot_ + offsets_[i];
  if (const std::optional<uint64_t> at = rangeOf(i))
    return copyCheckingFinite(ex_.pool(), local.data + *at, to, pieceElements, local.dtype);
  copyPieceOut(pieces_[i], local.shape, local.data, to);
  return copyCheckingFinite(ex_.pool(), nullptr, to, pieceElements, local.dtype);
}

void AsyncCheckpointWriter::copyChunks() {
  for (size_t k; !cancel_ && (k = nextChunk_.fetch_add(1)) < chunks_.size();) {
    const Chunk& c = chunks_[k];
    uint8_t* to = snapshot_ + offsets_[c.piece];
    const TensorView& local = locals_[c.piece];
    const auto elements = static_cast<int64_t>(c.bytes / dtypeSize(local.dtype));
    bool finite;
    if (const std::optional<uint64_t> at = rangeOf(c.piece)) {
      finite = copyCheckingFinite(local.data + *at + c.begin, to + c.begin, elements, local.dtype);
    } else {
      copyPieceOut(pieces_[c.piece], local.shape, local.data, to);
      finite = copyCheckingFinite(nullptr, to, elements, local.dtype);
    }
    if (!finite) noteNonFinite(c.piece);
    if (chunksCopied_.fetch_add(1) + 1 == chunks_.size()) {
      std::lock_guard<std::mutex> lock(copyMutex_);
      copied_.notify_all();
    }
  }
}

void AsyncCheckpointWriter::waitCopied() {
  std::unique_lock<std::mutex> lock(copyMutex_);
  copied_.wait(lock, [&] { return cancel_ || chunksCopied_.load() == chunks_.size(); });
}

void AsyncCheckpointWriter::noteNonFinite(size_t i) {
  size_t first = nonFinite_.load();
  while (i < first && !nonFinite_.compare_exchange_weak(first, i)) {
  }
}

Status AsyncCheckpointWriter::nonFiniteError(size_t i) const {
  return Status::NonFinite("'" + printable(pieces_[i].tensor->name) + "' holds inf or NaN: " +
                           what_ + " is not written (the last one written holds finite values)");
}

StatusOr<double> AsyncCheckpointWriter::takeSnapshot(const std::string& what) {
  if (inFlight()) return Status::Internal("checkpoint: a write is already in flight");
  started_ = std::chrono::steady_clock::now();
  what_ = what;
  nonFinite_ = kAllFinite;
  nextChunk_ = 0;
  chunksCopied_ = 0;
  if (!ex_.backend().hostMemory()) {
    std::vector<uint8_t> scratch;
    for (size_t i = 0; i < pieces_.size(); ++i) DTC_RETURN_IF_ERROR(downloadPiece(i, scratch));
  } else if (chunks_.empty()) {
    for (size_t i = 0; i < pieces_.size(); ++i)
      if (!hostPieceFinite(i)) return nonFiniteError(i);
  } else {
    ex_.deferStateRead([this]() -> Status {
      ex_.pool().parallelFor(ex_.pool().size(), 1, [this](int64_t, int64_t) { copyChunks(); });
      waitCopied();
      return Status::Ok();
    });
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
}

Status AsyncCheckpointWriter::startWrite(comm::Communicator& world,
                                         const CheckpointRequest& request) {
  if (inFlight()) return Status::Internal("checkpoint: a write is already in flight");
  request_ = request;
  planName_ = ex_.plan().name();
  mesh_ = meshText(ex_.plan());
  DTC_RETURN_IF_ERROR(prepareStep(world, request_));
  done_ = false;
  cancel_ = false;
  thread_ = std::thread([this, rank = world.rank()] {
    // The lowest priority, the copy included: on a core training leaves free it runs at once;
    // on busy cores it takes only what they leave idle, and the first step that writes the
    // state has the training threads copy what is left (preempting one of them instead would
    // stall the others at its next barrier, which costs the step more than the copy it saves).
    ::setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), 19);
    faultPoint("snapshot-copy", rank);
    copyChunks();
    waitCopied();                     // the chunks training's threads took
    if (!ex_.backend().hostMemory())  // downloaded at the step boundary, checked here
      for (size_t i = 0; i < pieces_.size() && nonFinite_ == kAllFinite && !cancel_; ++i)
        if (!copyCheckingFinite(
                nullptr, snapshot_ + offsets_[i],
                static_cast<int64_t>(pieces_[i].bytes / dtypeSize(pieces_[i].tensor->dtype)),
                pieces_[i].tensor->dtype))
          noteNonFinite(i);
    if (const size_t bad = nonFinite_.load(); bad != kAllFinite) {
      report_ = RankReport{};
      report_.status = nonFiniteError(bad);
      done_ = true;
      return;
    }
    // The write (and the kernel's work for it, done on this thread) runs in the time training's
    // threads leave, rather than taking a core from them.
    report_ = writeRankFile(
        pieces_, stepTmpDirectory(request_), rank,
        [this](size_t i) -> StatusOr<const uint8_t*> { return snapshot_ + offsets_[i]; }, &cancel_);
    done_ = true;
  });
  return Status::Ok();
}

StatusOr<WrittenCheckpoint> AsyncCheckpointWriter::finish(comm::Communicator& world) {
  if (!inFlight()) return Status::Internal("checkpoint: no write is in flight");
  thread_.join();
  return publishStep(world, layout_, request_, planName_, mesh_, std::move(report_), started_);
}

}  // namespace dtc::checkpoint
