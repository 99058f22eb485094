// A mapped input file that changes under the process: a clear error, never a bare SIGBUS.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "io/mapped_file.h"

namespace dtc::io {
namespace {

std::string writeFile(const std::string& name, size_t bytes) {
  std::string path = ::testing::TempDir() + name;
  std::vector<char> data(bytes, 7);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  std::fwrite(data.data(), 1, data.size(), f);
  std::fclose(f);
  return path;
}

TEST(MappedFile, ChangedSizeIsReportedBetweenReads) {
  const std::string path = writeFile("mapped_changed.bin", 1 << 16);
  StatusOr<MappedFile> file = MappedFile::open(path);
  ASSERT_TRUE(file.ok());
  EXPECT_TRUE(checkMappedFiles().ok());
  ASSERT_EQ(::truncate(path.c_str(), 100), 0);
  Status changed = checkMappedFiles();
  ASSERT_FALSE(changed.ok());
  EXPECT_EQ(changed.code(), StatusCode::kInvalidInput);
  EXPECT_NE(changed.message().find("mapped_changed.bin changed while the job read it"),
            std::string::npos)
      << changed.message();
}

TEST(MappedFile, ClosedFilesAreNotWatched) {
  const std::string path = writeFile("mapped_closed.bin", 4096);
  {
    StatusOr<MappedFile> file = MappedFile::open(path);
    ASSERT_TRUE(file.ok());
  }
  ASSERT_EQ(::truncate(path.c_str(), 10), 0);
  EXPECT_TRUE(checkMappedFiles().ok());
}

TEST(MappedFileDeathTest, ReadingPastATruncatedEndNamesTheFile) {
  const std::string path = writeFile("mapped_cut.bin", 1 << 16);
  EXPECT_EXIT(
      {
        StatusOr<MappedFile> file = MappedFile::open(path);
        if (!file.ok() || ::truncate(path.c_str(), 0) != 0) std::_Exit(9);
        volatile uint8_t byte = file->data()[(1 << 16) - 1];  // the kernel raises SIGBUS here
        (void)byte;
        std::_Exit(8);
      },
      ::testing::ExitedWithCode(2), "mapped_cut.bin changed under the running job");
}

}  // namespace
}  // namespace dtc::io
