#include "io/checked_read.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include "io/crc32.h"
#include "io/files.h"

namespace dtc::io {
namespace {

constexpr size_t kPiece = size_t{32} << 20;
constexpr int kThreads =
    4;  // requests in flight: enough for an NVMe drive's queue, cheap on a disk

struct Piece {
  size_t read;          // index of its request
  size_t begin, bytes;  // within the request
};

}  // namespace

Status readChecked(const std::string& path, std::vector<CheckedRead>& reads) {
  std::vector<Piece> pieces;
  for (size_t r = 0; r < reads.size(); ++r)
    for (size_t begin = 0; begin == 0 || begin < reads[r].size; begin += kPiece)
      pieces.push_back({r, begin, std::min(kPiece, reads[r].size - begin)});
  std::vector<uint32_t> crcs(pieces.size());
  const int count = static_cast<int>(std::min<size_t>(kThreads, pieces.size()));
  std::vector<Status> failures(count);
  std::atomic<size_t> next{0};
  auto work = [&](int worker) {
    // A descriptor of its own per thread: each keeps its own read-ahead state, so the kernel
    // sees several sequential streams rather than one that jumps about.
    int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);  // a FIFO must not block
    if (fd < 0) {
      failures[worker] = Status::InvalidInput("cannot open " + path + ": " + std::strerror(errno));
      return;
    }
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    for (size_t p = next++; p < pieces.size(); p = next++) {
      const Piece& piece = pieces[p];
      uint8_t* out = static_cast<uint8_t*>(reads[piece.read].dst) + piece.begin;
      Status s = readAt(fd, out, piece.bytes, reads[piece.read].offset + piece.begin, path);
      if (!s.ok()) {
        failures[worker] = s;
        break;
      }
      crcs[p] = crc32(0, out, piece.bytes);
    }
    ::close(fd);
  };
  std::vector<std::thread> threads;
  for (int t = 1; t < count; ++t) threads.emplace_back(work, t);
  if (count > 0) work(0);
  for (std::thread& t : threads) t.join();
  for (const Status& s : failures) DTC_RETURN_IF_ERROR(s);
  for (CheckedRead& r : reads) r.crc32 = 0;
  for (size_t p = 0; p < pieces.size(); ++p) {
    CheckedRead& r = reads[pieces[p].read];
    r.crc32 = crc32Combine(r.crc32, crcs[p], pieces[p].bytes);
  }
  return Status::Ok();
}

}  // namespace dtc::io
