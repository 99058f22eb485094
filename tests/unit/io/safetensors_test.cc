#include "io/safetensors.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

namespace dtc::io {
namespace {

std::string tempPath(const std::string& name) {
  return ::testing::TempDir() + "/st_test_" + std::to_string(::getpid()) + "_" + name;
}

std::string readAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void writeRaw(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// A file with the given header text (padded to 8) and data section.
std::string fileWith(std::string header, const std::string& data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string file(8, '\0');
  uint64_t len = header.size();
  for (int i = 0; i < 8; ++i) file[i] = static_cast<char>(len >> (8 * i));
  return file + header + data;
}

TEST(Safetensors, WritesTheDocumentedLayout) {
  std::string path = tempPath("layout.safetensors");
  std::vector<float> w = {1, 2, 3, 4, 5, 6};
  std::vector<int64_t> n = {7};
  ASSERT_TRUE(writeSafetensors(path,
                               {{"b.weight", DType::kF32, {2, 3}, w.data(), 24},
                                {"a.count", DType::kI64, {1}, n.data(), 8}},
                               {{"format", "pt"}})
                  .ok());
  std::string file = readAll(path);
  uint64_t len = 0;
  std::memcpy(&len, file.data(), 8);
  ASSERT_EQ(len % 8, 0u);
  std::string header = file.substr(8, len);
  // Sorted by name, __metadata__ first, data in the order given.
  EXPECT_EQ(header.substr(0, header.find_last_not_of(' ') + 1),
            "{\"__metadata__\":{\"format\":\"pt\"},"
            "\"a.count\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[24,32]},"
            "\"b.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}");
  ASSERT_EQ(file.size(), 8 + len + 32);
  EXPECT_EQ(0, std::memcmp(file.data() + 8 + len, w.data(), 24));
  EXPECT_EQ(0, std::memcmp(file.data() + 8 + len + 24, n.data(), 8));
  std::remove(path.c_str());
}

TEST(Safetensors, RoundTripsEveryDType) {
  std::string path = tempPath("rt.safetensors");
  std::vector<float> f32 = {1.5f, -2.0f, 3.25f};
  std::vector<uint16_t> f16 = {0x3c00, 0xc000}, bf16 = {0x3f80, 0x4000, 0x4040, 0x4080};
  std::vector<int32_t> i32 = {-7, 8, 9, 10, 11, 12};
  std::vector<int64_t> i64 = {1LL << 40};
  std::vector<TensorRef> tensors = {
      {"z.f32", DType::kF32, {3}, f32.data(), 12},
      {"y.f16", DType::kF16, {2, 1}, f16.data(), 4},
      {"x.bf16", DType::kBF16, {2, 2}, bf16.data(), 8},
      {"w.i32", DType::kI32, {2, 3}, i32.data(), 24},
      {"v.i64", DType::kI64, {}, i64.data(), 8},
      {"u.empty", DType::kF32, {0, 4}, nullptr, 0},
      {"t \"quoted\\name\"\n", DType::kF32, {1}, f32.data(), 4},
  };
  std::map<std::string, std::string> metadata = {{"format", "pt"}, {"step", "12"}};
  ASSERT_TRUE(writeSafetensors(path, tensors, metadata).ok());
  auto file = SafetensorsFile::read(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ(file->metadata(), metadata);
  ASSERT_EQ(file->tensors().size(), tensors.size());
  for (size_t i = 1; i < file->tensors().size(); ++i)
    EXPECT_LT(file->tensors()[i - 1].name, file->tensors()[i].name);
  for (const TensorRef& t : tensors) {
    const TensorRef* got = file->find(t.name);
    ASSERT_NE(got, nullptr) << t.name;
    EXPECT_EQ(got->dtype, t.dtype) << t.name;
    EXPECT_EQ(got->shape, t.shape) << t.name;
    ASSERT_EQ(got->bytes, t.bytes) << t.name;
    if (t.bytes) {
      EXPECT_EQ(0, std::memcmp(got->data, t.data, t.bytes)) << t.name;
    }
  }
  EXPECT_EQ(file->find("nope"), nullptr);
  // The refs point into the file's own mapping and survive moving it.
  SafetensorsFile moved = std::move(file).value();
  std::remove(path.c_str());
  EXPECT_EQ(0, std::memcmp(moved.find("w.i32")->data, i32.data(), 24));
}

TEST(Safetensors, EmptyFileWithoutMetadata) {
  std::string path = tempPath("empty.safetensors");
  ASSERT_TRUE(writeSafetensors(path, {}, {}).ok());
  EXPECT_EQ(readAll(path), fileWith("{}", ""));
  auto file = SafetensorsFile::read(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_TRUE(file->tensors().empty());
  EXPECT_TRUE(file->metadata().empty());
  std::remove(path.c_str());
}

// The directory's entries, "." and ".." aside.
std::vector<std::string> listDir(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") out.push_back(name);
  }
  ::closedir(d);
  return out;
}

TEST(Safetensors, WriteIsAtomicAndCreatesNothingElse) {
  std::string dir = tempPath("atomic_dir");
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  std::string path = dir + "/model.safetensors";
  float a = 1, b = 2;
  ASSERT_TRUE(writeSafetensors(path, {{"w", DType::kF32, {1}, &a, 4}}, {}).ok());
  ASSERT_TRUE(writeSafetensors(path, {{"w", DType::kF32, {1}, &b, 4}}, {}).ok());
  EXPECT_EQ(listDir(dir), std::vector<std::string>{"model.safetensors"});
  auto file = SafetensorsFile::read(path);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(*static_cast<const float*>(file->find("w")->data), 2.0f);
  // A failed write (the directory is gone) leaves nothing behind either.
  std::remove(path.c_str());
  ASSERT_EQ(::rmdir(dir.c_str()), 0);
  Status s = writeSafetensors(path, {{"w", DType::kF32, {1}, &a, 4}}, {});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
}

TEST(Safetensors, WriterRejectsInconsistentTensors) {
  float v[4] = {};
  std::string path = tempPath("bad_write.safetensors");
  EXPECT_FALSE(writeSafetensors(path, {{"w", DType::kF32, {2}, v, 4}}, {}).ok());
  EXPECT_FALSE(
      writeSafetensors(path, {{"w", DType::kF32, {1}, v, 4}, {"w", DType::kF32, {1}, v, 4}}, {})
          .ok());
  EXPECT_FALSE(writeSafetensors(path, {{"__metadata__", DType::kF32, {1}, v, 4}}, {}).ok());
  EXPECT_EQ(::access(path.c_str(), F_OK), -1);
}

TEST(Safetensors, ReaderRejectsBadFilesWithAReason) {
  std::string d8(8, 'x');
  auto entry = [](const std::string& name, const std::string& dtype, const std::string& shape,
                  const std::string& offsets) {
    return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
           ",\"data_offsets\":" + offsets + "}";
  };
  struct Case {
    std::string bytes, expected;
  };
  std::string huge(8, '\0');
  huge[5] = 1;  // 2^40
  std::vector<Case> cases = {
      {"", "shorter than its 8-byte header length"},
      {std::string("\x10\0\0\0", 4), "shorter than its 8-byte header length"},
      {huge + "{}", "implausibly large"},
      {std::string("\x40\0\0\0\0\0\0\0", 8) + "{}", "truncated: the header length is 64"},
      {fileWith("{\"a\":", ""), "header JSON error"},
      {fileWith("[1,2]", ""), "the header is not a JSON object"},
      {fileWith("{" + entry("a", "F64", "[1]", "[0,8]") + "}", d8),
       "tensor 'a' has dtype F64, which is not supported"},
      {fileWith("{" + entry("a", "F32", "[3]", "[0,8]") + "}", d8),
       "shape [3] of F32 needs 12 bytes, its data_offsets span 8"},
      {fileWith("{" + entry("a", "F32", "[-2]", "[0,8]") + "}", d8), "malformed shape"},
      {fileWith("{" + entry("a", "F32", "[2.5]", "[0,8]") + "}", d8), "malformed shape"},
      {fileWith("{" + entry("a", "F32", "[2]", "[8,0]") + "}", d8), "malformed data_offsets"},
      {fileWith("{" + entry("a", "F32", "[2]", "[0]") + "}", d8), "no \"data_offsets\" pair"},
      {fileWith("{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", d8), "no \"dtype\" string"},
      {fileWith("{\"a\":[]}", d8), "tensor 'a' is not a JSON object"},
      {fileWith("{" + entry("a", "F32", "[4]", "[0,16]") + "}", d8),
       "tensor 'a' ends at byte 16 of a data section of 8"},
      {fileWith(
           "{" + entry("a", "F32", "[2]", "[0,8]") + "," + entry("b", "F32", "[1]", "[4,8]") + "}",
           d8),
       "tensor 'b' starts at byte 4, expected 8"},
      {fileWith("{" + entry("a", "F32", "[1]", "[4,8]") + "}", d8),
       "tensor 'a' starts at byte 4, expected 0"},
      {fileWith("{" + entry("a", "F32", "[1]", "[0,4]") + "}", d8),
       "the tensors cover 4 bytes of a data section of 8"},
      {fileWith(
           "{" + entry("a", "F32", "[2]", "[0,8]") + "," + entry("a", "F32", "[2]", "[0,8]") + "}",
           d8),
       "duplicate key \"a\""},
      {fileWith("{\"__metadata__\":{\"k\":1}}", ""), "__metadata__ value for 'k' is not a string"},
      {fileWith("{\"__metadata__\":[]}", ""), "__metadata__ is not a JSON object"},
  };
  for (const Case& c : cases) {
    std::string path = tempPath("bad.safetensors");
    writeRaw(path, c.bytes);
    auto file = SafetensorsFile::read(path);
    ASSERT_FALSE(file.ok()) << c.expected;
    EXPECT_EQ(file.status().code(), StatusCode::kInvalidInput);
    EXPECT_NE(file.status().message().find(c.expected), std::string::npos)
        << file.status().message();
    EXPECT_EQ(file.status().message().rfind(path + " is not a valid safetensors file", 0), 0u);
    std::remove(path.c_str());
  }
  auto missing = SafetensorsFile::read(tempPath("missing.safetensors"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("No such file or directory"), std::string::npos);
}

TEST(Safetensors, GarbageNeverCrashes) {
  std::string path = tempPath("garbage.safetensors");
  float w[6] = {1, 2, 3, 4, 5, 6};
  int64_t n = 3;
  ASSERT_TRUE(writeSafetensors(path,
                               {{"w", DType::kF32, {2, 3}, w, 24}, {"n", DType::kI64, {}, &n, 8}},
                               {{"format", "pt"}})
                  .ok());
  const std::string good = readAll(path);
  std::mt19937 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    std::string bytes = good;
    for (int i = 0; i < 1 + trial % 6; ++i) bytes[rng() % bytes.size()] = static_cast<char>(rng());
    if (trial % 3 == 0) bytes.resize(rng() % (bytes.size() + 1));
    writeRaw(path, bytes);
    auto file = SafetensorsFile::read(path);
    if (!file.ok()) {
      EXPECT_EQ(file.status().code(), StatusCode::kInvalidInput);
      continue;
    }
    // Whatever survived validation must lie within the file.
    size_t total = 0;
    for (const TensorRef& t : file->tensors()) total += t.bytes;
    EXPECT_LE(total, bytes.size());
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace dtc::io
