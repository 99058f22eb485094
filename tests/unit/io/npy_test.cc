#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "io/npy.h"

namespace dtc::io {
namespace {

std::string tempPath(const std::string& name) {
  return ::testing::TempDir() + "/npy_test_" + std::to_string(::getpid()) + "_" + name;
}

TEST(Npy, RoundTripsEveryDTypeAndRank) {
  std::vector<std::vector<int64_t>> shapes = {{}, {5}, {3, 4}, {2, 3, 4}};
  for (DType dtype : {DType::kF32, DType::kI64, DType::kI32}) {
    for (const auto& shape : shapes) {
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      std::vector<uint8_t> data(n * dtypeSize(dtype));
      for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + 3);
      std::string path = tempPath("rt.npy");
      ASSERT_TRUE(writeNpy(path, dtype, shape, data.data()).ok());
      auto array = openNpy(path);
      ASSERT_TRUE(array.ok()) << array.status().message();
      EXPECT_EQ(array->dtype(), dtype);
      EXPECT_EQ(array->shape(), shape);
      ASSERT_EQ(array->bytes(), data.size());
      EXPECT_EQ(0, std::memcmp(array->data(), data.data(), data.size()));
      std::remove(path.c_str());
    }
  }
}

TEST(Npy, RowsAndRowBytes) {
  std::vector<float> data(12);
  std::string path = tempPath("rows.npy");
  ASSERT_TRUE(writeNpy(path, DType::kF32, {3, 4}, data.data()).ok());
  auto array = openNpy(path);
  ASSERT_TRUE(array.ok());
  EXPECT_EQ(array->rows(), 3);
  EXPECT_EQ(array->rowBytes(), 16u);
  std::remove(path.c_str());
}

void writeRaw(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string header(const std::string& dict) {
  std::string h = dict;
  while ((10 + h.size() + 1) % 64) h += ' ';
  h += '\n';
  std::string file = std::string("\x93NUMPY\x01\x00", 8);
  file += static_cast<char>(h.size() & 0xff);
  file += static_cast<char>(h.size() >> 8);
  return file + h;
}

TEST(Npy, RejectsBadFilesWithAReason) {
  struct Case {
    std::string bytes, expected;
  };
  std::vector<Case> cases = {
      {"", "too short"},
      {"not an npy file at all", "missing the \\x93NUMPY magic"},
      {header("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }") + std::string(16, 'x'),
       "dtype float64 ('<f8') is not supported"},
      {header("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }") + std::string(16, 'x'),
       "Fortran-order arrays are not supported"},
      {header("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }") + std::string(8, 'x'),
       "is truncated: the header promises 16 data bytes, the file has 8"},
      {header("{'descr': '<f4', 'fortran_order': False, 'shape': (a,), }"), "malformed shape"},
      {std::string("\x93NUMPY\x01\x00\xff\x7f", 10) + "{}", "truncated header"},
      {std::string("\x93NUMPY\x09\x00\x10\x00", 10) + std::string(16, ' '),
       "unsupported format version 9"},
  };
  for (const Case& c : cases) {
    std::string path = tempPath("bad.npy");
    writeRaw(path, c.bytes);
    auto array = openNpy(path);
    ASSERT_FALSE(array.ok()) << c.expected;
    EXPECT_EQ(array.status().code(), StatusCode::kInvalidInput);
    EXPECT_NE(array.status().message().find(c.expected), std::string::npos)
        << array.status().message();
    std::remove(path.c_str());
  }
  auto missing = openNpy(tempPath("does-not-exist.npy"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("No such file or directory"), std::string::npos);
}

TEST(Npy, RandomBytesNeverCrash) {
  std::string path = tempPath("random.npy");
  std::srand(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::string bytes = header("{'descr': '<f4', 'fortran_order': False, 'shape': (8,), }");
    for (int i = 0; i < 40; ++i) bytes[std::rand() % bytes.size()] = static_cast<char>(std::rand());
    bytes.resize(std::rand() % (bytes.size() + 40));
    writeRaw(path, bytes);
    auto array = openNpy(path);
    if (array.ok()) EXPECT_LE(array->bytes() + 10, bytes.size() + 64);
  }
  std::remove(path.c_str());
}

TEST(Npy, WriteLeavesNoTemporaryBehind) {
  std::string dir = ::testing::TempDir();
  std::string path = tempPath("atomic.npy");
  float v = 1.0f;
  ASSERT_TRUE(writeNpy(path, DType::kF32, {1}, &v).ok());
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  EXPECT_EQ(::access(tmp.c_str(), F_OK), -1);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace dtc::io
