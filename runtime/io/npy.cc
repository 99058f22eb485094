#include "io/npy.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace dtc::io {

namespace {

constexpr char kMagic[] = "\x93NUMPY";

// The value text after `'key':` in the header dict, or "" if absent.
std::string headerValue(const std::string& header, const std::string& key) {
  size_t k = header.find("'" + key + "'");
  if (k == std::string::npos) return "";
  size_t colon = header.find(':', k);
  if (colon == std::string::npos) return "";
  size_t start = header.find_first_not_of(' ', colon + 1);
  if (start == std::string::npos) return "";
  size_t end;
  if (header[start] == '(') end = header.find(')', start) + 1;
  else if (header[start] == '\'') end = header.find('\'', start + 1) + 1;
  else end = header.find_first_of(",}", start);
  if (end == std::string::npos || end == 0) return "";
  return header.substr(start, end - start);
}

bool parseDType(const std::string& descr, DType& out) {
  if (descr == "'<f4'") out = DType::kF32;
  else if (descr == "'<f2'") out = DType::kF16;
  else if (descr == "'<i4'") out = DType::kI32;
  else if (descr == "'<i8'") out = DType::kI64;
  else return false;
  return true;
}

std::string numpyName(const std::string& descr) {
  if (descr == "'<f8'") return "float64";
  if (descr == "'|u1'") return "uint8";
  if (descr == "'|i1'") return "int8";
  if (descr == "'<u2'") return "uint16";
  if (descr == "'<i2'") return "int16";
  if (descr == "'|b1'") return "bool";
  return descr;
}

bool parseShape(const std::string& text, std::vector<int64_t>& shape) {
  if (text.size() < 2 || text.front() != '(' || text.back() != ')') return false;
  std::string inner = text.substr(1, text.size() - 2);
  size_t pos = 0;
  while (pos < inner.size()) {
    while (pos < inner.size() && (inner[pos] == ' ' || inner[pos] == ',')) ++pos;
    if (pos >= inner.size()) break;
    size_t end = pos;
    while (end < inner.size() && inner[end] >= '0' && inner[end] <= '9') ++end;
    if (end == pos || end - pos > 15) return false;
    shape.push_back(std::stoll(inner.substr(pos, end - pos)));
    pos = end;
    while (pos < inner.size() && inner[pos] == ' ') ++pos;
    if (pos < inner.size() && inner[pos] != ',') return false;
  }
  return true;
}

}  // namespace

StatusOr<NpyArray> openNpy(const std::string& path) {
  NpyArray array;
  DTC_ASSIGN_OR_RETURN(array.file_, MappedFile::open(path));
  const size_t size = array.file_.size();
  const uint8_t* p = array.file_.data();
  auto bad = [&](const std::string& what) {
    return Status::InvalidInput(path + " is not a valid .npy file: " + what);
  };
  if (size < 10) return bad("too short");
  if (std::memcmp(p, kMagic, 6) != 0) return bad("missing the \\x93NUMPY magic");
  uint8_t major = p[6];
  size_t headerLen, headerStart;
  if (major == 1) {
    headerLen = p[8] | (p[9] << 8);
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) return bad("too short");
    headerLen = p[8] | (p[9] << 8) | (size_t(p[10]) << 16) | (size_t(p[11]) << 24);
    headerStart = 12;
  } else {
    return bad("unsupported format version " + std::to_string(major));
  }
  if (headerLen > size - headerStart) return bad("truncated header");
  std::string header(reinterpret_cast<const char*>(p + headerStart), headerLen);
  std::string descr = headerValue(header, "descr");
  std::string fortran = headerValue(header, "fortran_order");
  std::string shapeText = headerValue(header, "shape");
  if (descr.empty() || fortran.empty() || shapeText.empty()) return bad("malformed header");
  if (!parseDType(descr, array.dtype_))
    return Status::InvalidInput(path + ": dtype " + numpyName(descr) + " (" + descr +
                                ") is not supported; expected one of float32, float16, int32, "
                                "int64");
  if (fortran != "False") return Status::InvalidInput(path + ": Fortran-order arrays are not supported; save a C-order array");
  if (!parseShape(shapeText, array.shape_)) return bad("malformed shape " + shapeText);
  size_t count = 1;
  for (int64_t d : array.shape_) {
    if (d < 0 || (d > 0 && count > (SIZE_MAX / 16) / static_cast<size_t>(d))) return bad("shape too large");
    count *= static_cast<size_t>(d);
  }
  size_t dataStart = headerStart + headerLen;
  array.bytes_ = count * dtypeSize(array.dtype_);
  if (array.bytes_ > size - dataStart)
    return Status::InvalidInput(path + " is truncated: the header promises " +
                                std::to_string(array.bytes_) + " data bytes, the file has " +
                                std::to_string(size - dataStart));
  array.data_ = p + dataStart;
  return array;
}

Status writeFileAtomically(const std::string& path, const void* data, size_t size) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return Status::InvalidInput("cannot write " + path + ": " + std::strerror(errno));
  bool ok = std::fwrite(data, 1, size, f) == size;
  ok = (std::fflush(f) == 0) && ok;
  ok = (::fsync(fileno(f)) == 0) && ok;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return Status::Internal("failed writing " + path + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

Status writeNpy(const std::string& path, DType dtype, const std::vector<int64_t>& shape,
                const void* data) {
  const char* descr = dtype == DType::kF32   ? "<f4"
                      : dtype == DType::kF16 ? "<f2"
                      : dtype == DType::kI32 ? "<i4"
                      : dtype == DType::kI64 ? "<i8"
                                             : nullptr;
  if (!descr) return Status::InvalidInput("bfloat16 has no .npy encoding");
  std::string shapeText = "(";
  size_t count = 1;
  for (int64_t d : shape) {
    shapeText += std::to_string(d) + ",";
    count *= static_cast<size_t>(d);
  }
  if (shape.size() > 1) shapeText.pop_back();
  shapeText += ")";
  std::string header = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " +
                       shapeText + ", }";
  // Pad so the data starts on a 64-byte boundary, newline-terminated, as NumPy does.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string file(kMagic, 6);
  file += '\x01';
  file += '\x00';
  file += static_cast<char>(header.size() & 0xff);
  file += static_cast<char>((header.size() >> 8) & 0xff);
  file += header;
  file.append(static_cast<const char*>(data), count * dtypeSize(dtype));
  return writeFileAtomically(path, file.data(), file.size());
}

}  // namespace dtc::io
