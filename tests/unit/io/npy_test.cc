#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "io/npy.h"

namespace dtc::io {
namespace {

std::string tempPath(const std::string& name) {
  return ::testing::TempDir() + "/npy_test_" + std::to_string(::getpid()) + "_" + name;
}

void writeRaw(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// A header as numpy.lib.format writes it: padded with spaces to 64 bytes, newline-terminated.
std::string header(const std::string& dict, int major = 1) {
  std::string h = dict;
  size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + h.size() + 1) % 64) h += ' ';
  h += '\n';
  std::string file = std::string("\x93NUMPY", 6) + static_cast<char>(major) + '\0';
  file += static_cast<char>(h.size() & 0xff);
  file += static_cast<char>(h.size() >> 8);
  if (major != 1) file += std::string(2, '\0');
  return file + h;
}

TEST(Npy, RoundTripsEveryDTypeAndRank) {
  std::vector<std::vector<int64_t>> shapes = {{}, {5}, {3, 4}, {2, 3, 4}, {0, 7}};
  for (DType dtype : {DType::kF32, DType::kF16, DType::kI32, DType::kI64}) {
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
      if (!data.empty()) {
        EXPECT_EQ(0, std::memcmp(array->data(), data.data(), data.size()));
      }
      std::remove(path.c_str());
    }
  }
}

TEST(Npy, DataIsAlignedAndRowsAreSamples) {
  std::vector<float> data(12);
  std::string path = tempPath("rows.npy");
  ASSERT_TRUE(writeNpy(path, DType::kF32, {3, 4}, data.data()).ok());
  auto array = openNpy(path);
  ASSERT_TRUE(array.ok());
  EXPECT_EQ(array->rows(), 3);
  EXPECT_EQ(array->rowBytes(), 16u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(array->data()) % 64, 0u);
  std::remove(path.c_str());
}

TEST(Npy, MovingKeepsTheMapping) {
  std::vector<int64_t> data = {4, 5, 6};
  std::string path = tempPath("move.npy");
  ASSERT_TRUE(writeNpy(path, DType::kI64, {3}, data.data()).ok());
  auto opened = openNpy(path);
  ASSERT_TRUE(opened.ok());
  NpyArray moved = std::move(opened).value();
  std::remove(path.c_str());  // the mapping outlives the name
  ASSERT_EQ(moved.bytes(), 24u);
  EXPECT_EQ(0, std::memcmp(moved.data(), data.data(), 24));
}

TEST(Npy, ReadsVersions2And3AndNumpysSpellings) {
  std::string body(24, '\x01');
  struct Case {
    std::string bytes;
    std::vector<int64_t> shape;
  };
  std::vector<Case> cases = {
      {header("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }", 2) + body, {2, 3}},
      {header("{'descr': '<i4', 'fortran_order': False, 'shape': (6,), }", 3) + body, {6}},
      {header("{'shape': (3, 2,), 'fortran_order': False, 'descr': '<i4'}") + body, {3, 2}},
      {header("{\"descr\": \"<i4\", \"fortran_order\": False, \"shape\": (1, 2, 3)}") + body,
       {1, 2, 3}},
      // A 1-d array of 6 with extra trailing data is still fine: numpy ignores the excess too.
      {header("{'descr': '<i4', 'fortran_order': False, 'shape': (5,), }") + body, {5}},
  };
  for (const Case& c : cases) {
    std::string path = tempPath("v.npy");
    writeRaw(path, c.bytes);
    auto array = openNpy(path);
    ASSERT_TRUE(array.ok()) << array.status().message();
    EXPECT_EQ(array->dtype(), DType::kI32);
    EXPECT_EQ(array->shape(), c.shape);
    std::remove(path.c_str());
  }
}

TEST(Npy, RejectsBadFilesWithAReason) {
  struct Case {
    std::string bytes, expected;
  };
  auto dict = [](const std::string& descr, const std::string& fortran, const std::string& shape) {
    return header("{'descr': " + descr + ", 'fortran_order': " + fortran + ", 'shape': " + shape +
                  ", }");
  };
  std::string x16(16, 'x');
  std::vector<Case> cases = {
      {"", "too short"},
      {"not an npy file at all", "missing the \\x93NUMPY magic"},
      {dict("'<f8'", "False", "(2,)") + x16,
       ": dtype float64 ('<f8') is not supported; expected one of float32, float16, int32, int64"},
      {dict("'|u1'", "False", "(2,)") + x16, "dtype uint8 ('|u1') is not supported"},
      {dict("'>f4'", "False", "(2,)") + x16, "dtype big-endian float32 ('>f4') is not supported"},
      {dict("'|b1'", "False", "(2,)") + x16, "dtype bool ('|b1') is not supported"},
      {dict("'<U8'", "False", "(2,)") + x16, "dtype <U8 ('<U8') is not supported"},
      {dict("[('a', '<f4'), ('b', '<i4')]", "False", "(2,)") + x16,
       "structured dtypes are not supported"},
      {dict("'<f4'", "True", "(2, 2)") + x16, "Fortran-order arrays are not supported"},
      {dict("'<f4'", "Maybe", "(2, 2)") + x16, "fortran_order is neither True nor False"},
      {dict("'<f4'", "False", "(4,)") + std::string(8, 'x'),
       "is truncated: the header promises 16 data bytes, the file has 8"},
      {dict("'<f4'", "False", "(a,)"), "malformed shape"},
      {dict("'<f4'", "False", "(4)"), "malformed shape"},
      {dict("'<f4'", "False", "(,)"), "malformed shape"},
      {dict("'<f4'", "False", "(-4,)"), "malformed shape"},
      {dict("'<f4'", "False", "(99999999999999999999,)"), "malformed shape"},
      {dict("'<f4'", "False", "(999999999999999999, 999999999999999999)"), "shape too large"},
      {header("{'descr': '<f4', 'shape': (2,), }") + x16, "lacks 'descr', 'fortran_order'"},
      {header("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}"),
       "unexpected header key 'x'"},
      {header("['descr', '<f4']"), "the header is not a dict"},
      {header("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} junk"),
       "text after the header dict"},
      {std::string("\x93NUMPY\x01\x00\xff\x7f", 10) + "{}", "truncated header"},
      {std::string("\x93NUMPY\x02\x00\xff\xff\xff\xff", 12) + "{}", "truncated header"},
      {std::string("\x93NUMPY\x02\x00\x10\x00\x00", 11), "too short"},
      {std::string("\x93NUMPY\x09\x00\x10\x00", 10) + std::string(16, ' '),
       "unsupported format version 9.0"},
      {std::string("\x93NUMPY\x01\x01\x10\x00", 10) + std::string(16, ' '),
       "unsupported format version 1.1"},
  };
  for (const Case& c : cases) {
    std::string path = tempPath("bad.npy");
    writeRaw(path, c.bytes);
    auto array = openNpy(path);
    ASSERT_FALSE(array.ok()) << c.expected;
    EXPECT_EQ(array.status().code(), StatusCode::kInvalidInput);
    EXPECT_NE(array.status().message().find(c.expected), std::string::npos)
        << array.status().message();
    EXPECT_EQ(array.status().message().rfind(path, 0), 0u) << "names the file first";
    std::remove(path.c_str());
  }
}

TEST(Npy, MissingFilesAndDirectoriesAreInvalidInput) {
  std::string path = tempPath("does-not-exist.npy");
  auto missing = openNpy(path);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidInput);
  EXPECT_EQ(missing.status().message(), "cannot open " + path + ": No such file or directory");
  auto dir = openNpy(::testing::TempDir());
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.status().code(), StatusCode::kInvalidInput);
}

TEST(Npy, GarbageNeverCrashes) {
  std::string path = tempPath("random.npy");
  std::mt19937 rng(7);
  auto byte = [&] { return static_cast<char>(rng() & 0xff); };
  for (int trial = 0; trial < 300; ++trial) {
    std::string bytes =
        header("{'descr': '<f4', 'fortran_order': False, 'shape': (8,), }", 1 + trial % 3);
    bytes += std::string(32, 'x');
    if (trial % 5 == 0) {
      for (char& c : bytes) c = byte();  // pure noise
      if (trial % 10 == 0) std::memcpy(&bytes[0], "\x93NUMPY\x01\x00", 8);
    } else {
      for (int i = 0; i < 1 + trial % 8; ++i) bytes[rng() % bytes.size()] = byte();
    }
    bytes.resize(rng() % (bytes.size() + 1));
    writeRaw(path, bytes);
    auto array = openNpy(path);
    if (array.ok()) {
      EXPECT_LE(array->bytes(), bytes.size());
    } else {
      EXPECT_EQ(array.status().code(), StatusCode::kInvalidInput);
    }
  }
  std::remove(path.c_str());
}

TEST(Npy, WriteLeavesNoTemporaryBehindAndReplaces) {
  std::string path = tempPath("atomic.npy");
  float v = 1.0f, w = 2.0f;
  ASSERT_TRUE(writeNpy(path, DType::kF32, {1}, &v).ok());
  ASSERT_TRUE(writeNpy(path, DType::kF32, {1}, &w).ok());
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  EXPECT_EQ(::access(tmp.c_str(), F_OK), -1);
  auto array = openNpy(path);
  ASSERT_TRUE(array.ok());
  EXPECT_EQ(*reinterpret_cast<const float*>(array->data()), 2.0f);
  std::remove(path.c_str());
}

TEST(Npy, WriteErrors) {
  float v = 0;
  Status s = writeNpy(tempPath("no-such-dir/x.npy"), DType::kF32, {1}, &v);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no-such-dir/x.npy"), std::string::npos) << s.message();
  EXPECT_FALSE(writeNpy(tempPath("bf16.npy"), DType::kBF16, {1}, &v).ok());
  EXPECT_FALSE(writeNpy(tempPath("neg.npy"), DType::kF32, {-1}, &v).ok());
}

}  // namespace
}  // namespace dtc::io
