#include "io/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>

namespace dtc::io {
namespace {

std::string why() { return std::strerror(errno); }

}  // namespace

Status writeAll(int fd, const void* data, size_t size, const std::string& what) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    // Linux moves at most 0x7ffff000 bytes per call.
    ssize_t n = ::write(fd, p, std::min<size_t>(size, size_t{1} << 30));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::Internal("cannot write " + what + ": " + why());
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status readAt(int fd, void* data, size_t size, uint64_t offset, const std::string& what) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    ssize_t n = ::pread(fd, p, std::min<size_t>(size, size_t{1} << 30), static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::InvalidInput("cannot read " + what + ": " + why());
    }
    if (n == 0)
      return Status::InvalidInput(what + " is truncated: it ends at byte " +
                                  std::to_string(offset));
    p += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return Status::Ok();
}

Status writeFileAtomically(const std::string& path, const void* data, size_t size) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::InvalidInput("cannot write " + path + ": " + why());
  Status written = writeAll(fd, data, size, path);
  if (written.ok() && ::fsync(fd) != 0)
    written = Status::Internal("cannot sync " + path + ": " + why());
  if (::close(fd) != 0 && written.ok())
    written = Status::Internal("cannot write " + path + ": " + why());
  if (written.ok() && std::rename(tmp.c_str(), path.c_str()) != 0)
    written = Status::Internal("cannot rename " + tmp + " to " + path + ": " + why());
  if (!written.ok()) std::remove(tmp.c_str());
  return written;
}

Status syncDirectory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::Internal("cannot open directory " + dir + ": " + why());
  // Some file systems cannot sync a directory (EINVAL): their entries are as durable as they get.
  bool ok = ::fsync(fd) == 0 || errno == EINVAL;
  std::string error = ok ? "" : why();
  ::close(fd);
  if (!ok) return Status::Internal("cannot sync directory " + dir + ": " + error);
  return Status::Ok();
}

Status makeDirectories(const std::string& dir) {
  if (dir.empty()) return Status::InvalidInput("empty directory name");
  for (size_t at = 1; at <= dir.size(); ++at) {
    if (at < dir.size() && dir[at] != '/') continue;
    std::string prefix = dir.substr(0, at);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST)
      return Status::InvalidInput("cannot create directory " + prefix + ": " + why());
  }
  if (!isDirectory(dir)) return Status::InvalidInput(dir + " exists and is not a directory");
  return Status::Ok();
}

Status removeTree(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return Status::Ok();
  if (S_ISDIR(st.st_mode)) {
    DTC_ASSIGN_OR_RETURN(std::vector<std::string> names, listDirectory(path));
    for (const std::string& name : names) DTC_RETURN_IF_ERROR(removeTree(path + "/" + name));
    if (::rmdir(path.c_str()) != 0 && errno != ENOENT)
      return Status::Internal("cannot remove " + path + ": " + why());
  } else if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return Status::Internal("cannot remove " + path + ": " + why());
  }
  return Status::Ok();
}

StatusOr<std::vector<std::string>> listDirectory(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return Status::InvalidInput("cannot read directory " + dir + ": " + why());
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

bool pathExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

bool isDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool isRegularFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

StatusOr<uint64_t> fileSize(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return Status::InvalidInput("cannot open " + path + ": " + why());
  if (!S_ISREG(st.st_mode)) return Status::InvalidInput(path + " is not a regular file");
  return static_cast<uint64_t>(st.st_size);
}

StatusOr<std::string> readSmallFile(const std::string& path, uint64_t maxBytes) {
  DTC_ASSIGN_OR_RETURN(uint64_t size, fileSize(path));
  if (size > maxBytes) return Status::InvalidInput(path + " is implausibly large");
  std::string text(size, '\0');
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return Status::InvalidInput("cannot open " + path);
  const size_t got = std::fread(text.data(), 1, size, f);
  std::fclose(f);
  if (got != size) return Status::InvalidInput("cannot read " + path);
  return text;
}

std::string parentDirectory(const std::string& path) {
  size_t end = path.find_last_not_of('/');
  if (end == std::string::npos) return "/";
  size_t slash = path.rfind('/', end);
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string besideExecutable(const std::string& relative) {
  StatusOr<std::string> exe = readSymlink("/proc/self/exe");
  return exe.ok() ? parentDirectory(*exe) + "/" + relative : relative;
}

Status replaceSymlink(const std::string& target, const std::string& link) {
  std::string tmp = link + ".tmp." + std::to_string(::getpid());
  ::unlink(tmp.c_str());
  if (::symlink(target.c_str(), tmp.c_str()) != 0)
    return Status::Internal("cannot create link " + tmp + ": " + why());
  if (std::rename(tmp.c_str(), link.c_str()) != 0) {
    std::string error = why();
    ::unlink(tmp.c_str());
    return Status::Internal("cannot rename " + tmp + " to " + link + ": " + error);
  }
  return syncDirectory(parentDirectory(link));
}

StatusOr<std::string> readSymlink(const std::string& link) {
  std::vector<char> buffer(4096);
  ssize_t n = ::readlink(link.c_str(), buffer.data(), buffer.size());
  if (n < 0 || static_cast<size_t>(n) == buffer.size())
    return Status::InvalidInput("cannot read link " + link + ": " + why());
  return std::string(buffer.data(), static_cast<size_t>(n));
}

Status checkOutputFile(const std::string& path, const std::string& flag) {
  if (path.empty()) return Status::InvalidInput(flag + " needs a file name");
  if (isDirectory(path)) return Status::InvalidInput(flag + " " + path + " is a directory");
  std::string dir = parentDirectory(path);
  if (!isDirectory(dir))
    return Status::InvalidInput(flag + " " + path + ": directory " + dir + " does not exist");
  if (::access(dir.c_str(), W_OK) != 0 || (pathExists(path) && ::access(path.c_str(), W_OK) != 0))
    return Status::InvalidInput(flag + " " + path + " is not writable");
  return Status::Ok();
}

namespace {
std::mutex createdMutex;
std::vector<std::string> createdDirectories;  // by prepareOutputDirectory, in creation order
}  // namespace

Status prepareOutputDirectory(const std::string& dir, const std::string& flag) {
  if (dir.empty()) return Status::InvalidInput(flag + " needs a directory name");
  if (pathExists(dir) && !isDirectory(dir))
    return Status::InvalidInput(flag + " " + dir + " exists and is not a directory");
  {
    std::lock_guard<std::mutex> lock(createdMutex);
    for (size_t at = 1; at <= dir.size(); ++at)
      if ((at == dir.size() || dir[at] == '/') && !pathExists(dir.substr(0, at)))
        createdDirectories.push_back(dir.substr(0, at));
  }
  Status made = makeDirectories(dir);
  if (!made.ok()) return Status::InvalidInput(flag + ": " + made.message());
  if (::access(dir.c_str(), W_OK) != 0)
    return Status::InvalidInput(flag + " " + dir + " is not writable");
  return Status::Ok();
}

void removeEmptyOutputDirectories() {
  std::lock_guard<std::mutex> lock(createdMutex);
  for (auto it = createdDirectories.rbegin(); it != createdDirectories.rend(); ++it)
    ::rmdir(it->c_str());  // fails, and keeps it, where anything was written
  createdDirectories.clear();
}

}  // namespace dtc::io
