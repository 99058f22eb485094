#include "io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <mutex>
#include <vector>

namespace dtc::io {

struct MappedFile::Watched {
  std::string path;
  std::string message;  // the SIGBUS report, formatted in advance (a handler cannot format)
  int fd = -1;          // kept open: fstat sees what happens to the file
  const uint8_t* begin = nullptr;
  size_t size = 0;
  struct timespec modified = {};
};

namespace {

std::mutex watchedMutex;
// Read by the SIGBUS handler without the lock: entries are only freed after they leave the
// list, and the list's storage is reserved so that it never moves.
constexpr size_t kMaxWatched = 4096;
MappedFile::Watched* watchedList[kMaxWatched];
size_t watchedCount = 0;

void onBusError(int, siginfo_t* info, void*) {
  const uint8_t* at = static_cast<const uint8_t*>(info->si_addr);
  const char* message =
      "dtrun: error: a memory-mapped input file changed under the running job (SIGBUS)\n";
  size_t length = std::strlen(message);
  for (size_t i = 0; i < watchedCount; ++i) {
    const MappedFile::Watched* w = watchedList[i];
    if (w && at >= w->begin && at < w->begin + w->size) {
      message = w->message.c_str();
      length = w->message.size();
      break;
    }
  }
  ssize_t ignored = ::write(2, message, length);
  (void)ignored;
  _exit(2);
}

void watch(MappedFile::Watched* w) {
  std::lock_guard<std::mutex> lock(watchedMutex);
  static bool installed = false;
  if (!installed) {
    struct sigaction action = {};
    action.sa_sigaction = onBusError;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    sigaction(SIGBUS, &action, nullptr);
    installed = true;
  }
  if (watchedCount < kMaxWatched) watchedList[watchedCount++] = w;
}

void unwatch(MappedFile::Watched* w) {
  if (!w) return;
  {
    std::lock_guard<std::mutex> lock(watchedMutex);
    for (size_t i = 0; i < watchedCount; ++i)
      if (watchedList[i] == w) {
        watchedList[i] = watchedList[--watchedCount];
        watchedList[watchedCount] = nullptr;
        break;
      }
  }
  if (w->fd >= 0) ::close(w->fd);
  delete w;
}

}  // namespace

MappedFile::MappedFile(MappedFile&& other) noexcept { *this = std::move(other); }

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (map_) ::munmap(map_, size_);
    unwatch(watched_);
    map_ = other.map_;
    size_ = other.size_;
    watched_ = other.watched_;
    other.map_ = nullptr;
    other.size_ = 0;
    other.watched_ = nullptr;
  }
  return *this;
}

MappedFile::~MappedFile() {
  unwatch(watched_);
  if (map_) ::munmap(map_, size_);
}

Status checkMappedFiles() {
  std::lock_guard<std::mutex> lock(watchedMutex);
  for (size_t i = 0; i < watchedCount; ++i) {
    const MappedFile::Watched& w = *watchedList[i];
    struct stat st;
    if (::fstat(w.fd, &st) != 0 || static_cast<size_t>(st.st_size) != w.size ||
        st.st_mtim.tv_sec != w.modified.tv_sec || st.st_mtim.tv_nsec != w.modified.tv_nsec)
      return Status::InvalidInput(w.path + " changed while the job read it (now " +
                                  std::to_string(st.st_size) + " bytes, " + std::to_string(w.size) +
                                  " when it was opened): input files must not change during a run");
  }
  return Status::Ok();
}

StatusOr<MappedFile> MappedFile::open(const std::string& path) {
  // Without O_NONBLOCK, opening a FIFO would wait for a writer, deaf to signals.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return Status::InvalidInput("cannot open " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::InvalidInput(path + " is not a regular file" +
                                (S_ISFIFO(st.st_mode) ? " but a FIFO" : "") +
                                ": dtrun maps the files it reads");
  }
  MappedFile file;
  file.size_ = static_cast<size_t>(st.st_size);
  if (file.size_ > 0) {
    void* map = ::mmap(nullptr, file.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      ::close(fd);
      return Status::Internal("cannot map " + path + ": " + std::strerror(errno));
    }
    file.map_ = map;
    auto* w = new MappedFile::Watched;
    w->path = path;
    w->message = "dtrun: error: " + path +
                 " changed under the running job (read past its end: truncated?); " +
                 "input files must not change during a run\n";
    w->fd = fd;
    w->begin = static_cast<const uint8_t*>(map);
    w->size = file.size_;
    w->modified = st.st_mtim;
    file.watched_ = w;
    watch(w);
    return file;
  }
  ::close(fd);
  return file;
}

}  // namespace dtc::io
