// A sequentially written file holds exactly the bytes appended, whatever their sizes and
// alignment, written directly (O_DIRECT) where the file system allows it and plainly where not.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "io/sequential_file.h"

namespace dtc::io {
namespace {

std::vector<uint8_t> readAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// One byte-span appended.
struct Span {
  const uint8_t* data;
  size_t size;
};

// Appends `spans` to a new file `path` and checks that it holds exactly `expected`.
void expectFileHolds(const std::string& path, const std::vector<Span>& spans,
                     const std::vector<uint8_t>& expected) {
  StatusOr<SequentialFile> file = SequentialFile::create(path, path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  for (const Span& s : spans) ASSERT_TRUE(file->append(s.data, s.size).ok());
  ASSERT_TRUE(file->finish().ok());
  EXPECT_EQ(readAll(path), expected) << expected.size() << " bytes in " << path;
  std::remove(path.c_str());
}

// Appends `total` random bytes in pieces of the given sizes (cycled) and reads them back.
void roundTrip(const std::string& dir, size_t total, const std::vector<size_t>& pieces) {
  std::mt19937 rng(static_cast<unsigned>(total));
  std::vector<uint8_t> bytes(total);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  std::vector<Span> spans;
  for (size_t k = 0, done = 0; done < total; ++k) {
    const size_t n = std::min(pieces[k % pieces.size()], total - done);
    spans.push_back({bytes.data() + done, n});
    done += n;
  }
  expectFileHolds(dir + "/sequential_" + std::to_string(total) + ".bin", spans, bytes);
}

TEST(SequentialFile, HoldsExactlyTheBytesAppended) {
  const std::string dir = ::testing::TempDir();
  for (size_t total : {size_t{0}, size_t{1}, size_t{4095}, size_t{4096}, size_t{4097},
                       size_t{(16 << 20) + 3}, size_t{(33 << 20) + 4096 * 3 + 17}})
    roundTrip(dir, total, {1, 4096, 8, (5 << 20) + 1, 3});
}

// A file's image in page-aligned memory, appended from where each byte lies (so that its
// address agrees with its file offset, as an asynchronous checkpoint's snapshot is laid out):
// the header from elsewhere, then pieces of the rest, which go to the disk without the stage.
void imageRoundTrip(const std::string& dir, size_t header, const std::vector<size_t>& pieces) {
  size_t total = header;
  for (size_t n : pieces) total += n;
  void* memory = nullptr;
  ASSERT_EQ(::posix_memalign(&memory, 4096, total + 1), 0);
  std::unique_ptr<uint8_t, decltype(&std::free)> image(static_cast<uint8_t*>(memory), &std::free);
  std::mt19937 rng(static_cast<unsigned>(total));
  for (size_t i = 0; i < total; ++i) image.get()[i] = static_cast<uint8_t>(rng());
  const std::vector<uint8_t> expected(image.get(), image.get() + total);
  const std::vector<uint8_t> copy(expected.begin(), expected.begin() + header);
  std::vector<Span> spans{{copy.data(), copy.size()}};
  size_t done = header;
  for (size_t n : pieces) {
    spans.push_back({image.get() + done, n});
    done += n;
  }
  expectFileHolds(dir + "/sequential_image_" + std::to_string(total) + ".bin", spans, expected);
}

TEST(SequentialFile, WritesAnImageFromWhereItLies) {
  const std::string dir = ::testing::TempDir();
  imageRoundTrip(dir, 72, {(3 << 20) + 17, 1, (5 << 20) + 4096, 100, (1 << 20) - 5, 4096 * 300});
  imageRoundTrip(dir, 4096, {16 << 20, (16 << 20) + 1});
  imageRoundTrip(dir, 0, {(2 << 20) + 9});
  std::ifstream shm("/dev/shm");
  if (shm.good()) imageRoundTrip("/dev/shm", 136, {(4 << 20) + 3, 77});
}

// tmpfs (before Linux 6.6) refuses O_DIRECT: the file is written plainly, and holds the same
// bytes.
TEST(SequentialFile, FallsBackWhereDirectWritesAreRefused) {
  std::ifstream shm("/dev/shm");
  if (!shm.good()) GTEST_SKIP() << "no /dev/shm";
  roundTrip("/dev/shm", (16 << 20) + 5, {7, 1 << 20});
}

TEST(SequentialFile, ClosedFileRefusesMoreBytes) {
  const std::string path = ::testing::TempDir() + "/sequential_closed.bin";
  StatusOr<SequentialFile> file = SequentialFile::create(path, path);
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE(file->finish().ok());
  EXPECT_FALSE(file->append("x", 1).ok());
  std::remove(path.c_str());
}

TEST(SequentialFile, UnwritablePathIsAnError) {
  StatusOr<SequentialFile> file = SequentialFile::create("/no/such/dir/x.bin", "x.bin");
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.status().message().find("cannot write x.bin"), std::string::npos);
}

}  // namespace
}  // namespace dtc::io
