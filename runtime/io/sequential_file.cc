#include "io/sequential_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace dtc::io {
namespace {

// O_DIRECT's alignment (of memory, file offsets and lengths): the largest logical block size
// in use, and the page size.
constexpr size_t kBlock = 4096;
// The staging buffer: large enough that each write moves many megabytes.
constexpr size_t kStage = size_t{16} << 20;
// Below this, bytes that could be written from where they are go through the stage anyway.
constexpr size_t kDirectMinimum = size_t{1} << 20;

std::string why() { return std::strerror(errno); }

// `error`: the failed write's errno.
Status writeFully(int fd, const uint8_t* p, size_t size, const std::string& what, int& error) {
  error = 0;
  while (size > 0) {
    const ssize_t n = ::write(fd, p, std::min<size_t>(size, size_t{1} << 30));
    if (n < 0) {
      if (errno == EINTR) continue;
      error = errno;
      return Status::Internal("cannot write " + what + ": " + why());
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

void SequentialFile::Free::operator()(uint8_t* p) const { std::free(p); }

StatusOr<SequentialFile> SequentialFile::create(const std::string& path, const std::string& what) {
  SequentialFile f;
  f.what_ = what;
  const int flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC;
  f.fd_ = ::open(path.c_str(), flags | O_DIRECT, 0644);
  f.direct_ = f.fd_ >= 0;
  if (f.fd_ < 0) f.fd_ = ::open(path.c_str(), flags, 0644);
  if (f.fd_ < 0) return Status::InvalidInput("cannot write " + what + ": " + why());
  void* stage = nullptr;
  if (::posix_memalign(&stage, kBlock, kStage) != 0)
    return Status::Internal("cannot write " + what + ": no memory for a staging buffer");
  f.stage_.reset(static_cast<uint8_t*>(stage));
  return f;
}

SequentialFile::SequentialFile(SequentialFile&& o) noexcept
    : what_(std::move(o.what_)),
      fd_(o.fd_),
      direct_(o.direct_),
      stage_(std::move(o.stage_)),
      staged_(o.staged_),
      size_(o.size_) {
  o.fd_ = -1;
}

SequentialFile::~SequentialFile() {
  if (fd_ >= 0) ::close(fd_);
}

Status SequentialFile::append(const void* data, size_t bytes) {
  if (fd_ < 0) return Status::Internal("writing " + what_ + ": the file is closed");
  const uint8_t* p = static_cast<const uint8_t*>(data);
  // Bytes whose addresses agree with their file offsets modulo the block size (a snapshot laid
  // out as the file's image) go to the disk from where they are: the stage takes the bytes up
  // to the next block boundary, is written out, and then the whole blocks follow directly.
  const size_t head = (kBlock - size_ % kBlock) % kBlock;
  if (direct_ && bytes >= head + kDirectMinimum &&
      reinterpret_cast<uintptr_t>(p) % kBlock == size_ % kBlock) {
    std::memcpy(stage_.get() + staged_, p, head);  // the stage has room: it holds < kStage
    staged_ += head;
    size_ += head;
    p += head;
    bytes -= head;
    DTC_RETURN_IF_ERROR(flush(false));  // all of it: it ends on a block boundary now
    const size_t whole = bytes / kBlock * kBlock;
    int error = 0;
    DTC_RETURN_IF_ERROR(writeFully(fd_, p, whole, what_, error));
    size_ += whole;
    p += whole;
    bytes -= whole;
  }
  while (bytes > 0) {
    const size_t take = std::min(bytes, kStage - staged_);
    std::memcpy(stage_.get() + staged_, p, take);
    staged_ += take;
    size_ += take;
    p += take;
    bytes -= take;
    if (staged_ == kStage) DTC_RETURN_IF_ERROR(flush(false));
  }
  return Status::Ok();
}

Status SequentialFile::flush(bool last) {
  size_t whole = direct_ ? staged_ / kBlock * kBlock : staged_;
  if (last && direct_ && whole < staged_) {
    // The last block, padded: the file is cut back to its size below.
    std::memset(stage_.get() + staged_, 0, kBlock - staged_ % kBlock);
    whole += kBlock;
  }
  int error = 0;
  Status written = writeFully(fd_, stage_.get(), whole, what_, error);
  if (!written.ok() && direct_ && error == EINVAL && size_ == staged_) {
    // The file system refused direct writes after opening: plain ones from the start.
    const int flags = ::fcntl(fd_, F_GETFL);
    if (flags < 0 || ::fcntl(fd_, F_SETFL, flags & ~O_DIRECT) != 0 ||
        ::lseek(fd_, 0, SEEK_SET) != 0)
      return written;
    direct_ = false;
    whole = staged_;
    written = writeFully(fd_, stage_.get(), whole, what_, error);
  }
  DTC_RETURN_IF_ERROR(written);
  if (whole >= staged_) {
    staged_ = 0;
  } else {
    std::memmove(stage_.get(), stage_.get() + whole, staged_ - whole);
    staged_ -= whole;
  }
  return Status::Ok();
}

Status SequentialFile::finish() {
  if (fd_ < 0) return Status::Internal("writing " + what_ + ": the file is closed");
  Status s = flush(true);
  if (s.ok() && direct_ && ::ftruncate(fd_, static_cast<off_t>(size_)) != 0)
    s = Status::Internal("cannot write " + what_ + ": " + why());
  if (s.ok() && ::fsync(fd_) != 0) s = Status::Internal("cannot sync " + what_ + ": " + why());
  if (::close(fd_) != 0 && s.ok()) s = Status::Internal("cannot write " + what_ + ": " + why());
  fd_ = -1;
  return s;
}

}  // namespace dtc::io
