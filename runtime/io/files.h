// Files and directories the runtime writes durably: atomic replacement, fsync of files and of
// the directories that name them, and the checks that an output path can be written before
// any work goes into filling it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "support/status.h"

namespace dtc::io {

// Writes `size` bytes to `path` through "<path>.tmp.<pid>", fsync and rename(2), so a reader
// never sees a partial file and a failure leaves the old file in place.
Status writeFileAtomically(const std::string& path, const void* data, size_t size);

// Writes all of `data` to `fd` (retrying short writes and EINTR); `what` names the file in the
// error.
Status writeAll(int fd, const void* data, size_t size, const std::string& what);
// Reads exactly `size` bytes at `offset` of `fd`; fewer is an InvalidInput error naming `what`.
Status readAt(int fd, void* data, size_t size, uint64_t offset, const std::string& what);

// fsync(2) of a directory, so that the entries created or renamed in it survive a crash.
Status syncDirectory(const std::string& dir);
// mkdir -p.
Status makeDirectories(const std::string& dir);
// rm -r; a missing path is not an error.
Status removeTree(const std::string& path);
// The names in `dir` (not "." or ".."), sorted.
StatusOr<std::vector<std::string>> listDirectory(const std::string& dir);

bool pathExists(const std::string& path);
bool isDirectory(const std::string& path);
bool isRegularFile(const std::string& path);
// The size of a regular file, or an error naming it.
StatusOr<uint64_t> fileSize(const std::string& path);
// The whole of a small file that anyone may have written (an index, a config): a missing file,
// one that is not a regular file or is larger than `maxBytes`, is an error naming it.
StatusOr<std::string> readSmallFile(const std::string& path, uint64_t maxBytes);
// The parent directory of `path` ("." for a bare name).
std::string parentDirectory(const std::string& path);
// `relative` resolved against the folder of the running executable (the build and the bundles
// keep dtrun, its plugin and the tests in fixed places relative to each other); `relative` as
// it is where the executable's path cannot be read.
std::string besideExecutable(const std::string& relative);

// Makes `link` a symbolic link to `target` atomically (a new link renamed over the old one),
// then syncs the directory holding it.
Status replaceSymlink(const std::string& target, const std::string& link);
// Where symbolic link `link` points, or an error.
StatusOr<std::string> readSymlink(const std::string& link);

// Output checks, made before a run starts so that no work is lost to an unwritable path. `flag`
// names the option in the messages ("--log").
// A file to be written: not a directory, its directory exists and is writable.
Status checkOutputFile(const std::string& path, const std::string& flag);
// A directory to be filled: created if missing (with its parents), writable.
Status prepareOutputDirectory(const std::string& dir, const std::string& flag);
// Removes the directories prepareOutputDirectory created in this process that are still empty
// (deepest first): a run that fails leaves no empty output folders behind.
void removeEmptyOutputDirectories();

}  // namespace dtc::io
