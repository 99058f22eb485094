#include "checkpoint/async_writer.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "plan/communication.h"

namespace dtc::checkpoint {
namespace {

constexpr int64_t kCopyGrain = int64_t{4} << 20;  // bytes a thread copies at least
// MADV_POPULATE_WRITE (Linux 5.14), spelled out for older headers; older kernels refuse it.
constexpr int kPopulateWrite = 23;

}  // namespace

StatusOr<std::unique_ptr<AsyncCheckpointWriter>> AsyncCheckpointWriter::create(
    const CheckpointLayout& layout, int rank) {
  std::unique_ptr<AsyncCheckpointWriter> w(new AsyncCheckpointWriter(layout));
  w->pieces_ = piecesOf(layout, rank);
  if (w->pieces_.empty()) return w;
  // Each piece where the file holds it (after the header's bytes, left unused): the mapping is
  // page-aligned, so every byte's address agrees with its file offset modulo the block size,
  // and O_DIRECT writes the pieces from here without copying them through a staging buffer.
  DTC_ASSIGN_OR_RETURN(io::SafetensorsLayout file, rankFileLayout(w->pieces_, rank));
  for (uint64_t offset : file.offsets) w->offsets_.push_back(file.prefix.size() + offset);
  w->bytes_ = file.prefix.size() + file.dataBytes;
  // In huge pages where the kernel gives them (fewer pages for O_DIRECT to pin, fewer TLB misses
  // for the copy), populated now: faulting 1.5 GB in page by page took 1.9 s of the first
  // snapshot here.
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
  return w;
}

AsyncCheckpointWriter::~AsyncCheckpointWriter() {
  cancel_ = true;
  if (thread_.joinable()) thread_.join();
  if (snapshot_) ::munmap(snapshot_, bytes_);
}

StatusOr<double> AsyncCheckpointWriter::start(Executor& ex, comm::Communicator& world,
                                              const CheckpointRequest& request) {
  if (inFlight()) return Status::Internal("checkpoint: a write is already in flight");
  started_ = std::chrono::steady_clock::now();
  request_ = request;
  planName_ = ex.plan().name();
  mesh_ = meshText(ex.plan());
  DTC_RETURN_IF_ERROR(prepareStep(world, request_));
  // The copy is the stall training sees: the pool's threads share each piece.
  std::vector<uint8_t> scratch;
  for (size_t i = 0; i < pieces_.size(); ++i) {
    DTC_ASSIGN_OR_RETURN(const uint8_t* bytes, pieceBytes(ex, pieces_[i], scratch));
    uint8_t* to = snapshot_ + offsets_[i];
    ex.pool().parallelFor(
        static_cast<int64_t>(pieces_[i].bytes), kCopyGrain, [&](int64_t begin, int64_t end) {
          std::memcpy(to + begin, bytes + begin, static_cast<size_t>(end - begin));
        });
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  done_ = false;
  cancel_ = false;
  thread_ = std::thread([this, rank = world.rank()] {
    // The lowest priority: the write (and the kernel's work for it, done on this thread) runs
    // in the time training's threads leave, rather than taking a core from them.
    ::setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), 19);
    report_ = writeRankFile(
        pieces_, stepTmpDirectory(request_), rank,
        [this](size_t i) -> StatusOr<const uint8_t*> { return snapshot_ + offsets_[i]; }, &cancel_);
    done_ = true;
  });
  return seconds;
}

StatusOr<WrittenCheckpoint> AsyncCheckpointWriter::finish(comm::Communicator& world) {
  if (!inFlight()) return Status::Internal("checkpoint: no write is in flight");
  thread_.join();
  return publishStep(world, layout_, request_, planName_, mesh_, std::move(report_), started_);
}

}  // namespace dtc::checkpoint
