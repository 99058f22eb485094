#include "io/npy.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace dtc::io {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr char kSupported[] = "expected one of float32, float16, int32, int64";

struct Header {
  std::string descr;        // e.g. "<f4"
  bool structured = false;  // descr is a list of fields
  bool fortranOrder = false;
  std::vector<int64_t> shape;
};

// The header is a Python dict literal. We accept what numpy.lib.format writes, e.g.
// {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }, and nothing looser: every read
// is bounds-checked because the text may be arbitrary bytes.
class HeaderParser {
 public:
  explicit HeaderParser(const std::string& text) : s_(text) {}

  // Returns "" on success, else what is wrong.
  std::string parse(Header& h) {
    bool haveDescr = false, haveFortran = false, haveShape = false;
    skipSpace();
    if (!eat('{')) return "the header is not a dict";
    while (true) {
      skipSpace();
      if (eat('}')) break;
      std::string key;
      if (!parseString(key)) return "malformed header key";
      skipSpace();
      if (!eat(':')) return "expected ':' after '" + key + "'";
      skipSpace();
      if (key == "descr") {
        if (peek() == '\'' || peek() == '"') {
          if (!parseString(h.descr)) return "malformed descr";
        } else if (skipNested()) {
          h.structured = true;
        } else {
          return "malformed descr";
        }
        haveDescr = true;
      } else if (key == "fortran_order") {
        if (word("True"))
          h.fortranOrder = true;
        else if (word("False"))
          h.fortranOrder = false;
        else
          return "fortran_order is neither True nor False";
        haveFortran = true;
      } else if (key == "shape") {
        if (!parseShape(h.shape)) return "malformed shape";
        haveShape = true;
      } else {
        return "unexpected header key '" + key + "'";
      }
      skipSpace();
      if (eat(',')) continue;
      skipSpace();
      if (eat('}')) break;
      return "expected ',' or '}' in the header";
    }
    skipSpace();
    if (pos_ != s_.size()) return "text after the header dict";
    if (!haveDescr || !haveFortran || !haveShape)
      return "the header lacks 'descr', 'fortran_order' or 'shape'";
    return "";
  }

 private:
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  bool eat(char c) {
    if (peek() != c) return false;
    ++pos_;
    return true;
  }
  bool word(const char* w) {
    size_t n = std::strlen(w);
    if (s_.compare(pos_, n, w) != 0) return false;
    pos_ += n;
    return true;
  }
  void skipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n')) ++pos_;
  }
  // A quoted literal without escapes: numpy's keys and simple descrs never need them.
  bool parseString(std::string& out) {
    char quote = peek();
    if (quote != '\'' && quote != '"') return false;
    size_t close = s_.find(quote, pos_ + 1);
    if (close == std::string::npos) return false;
    out = s_.substr(pos_ + 1, close - pos_ - 1);
    if (out.find('\\') != std::string::npos) return false;
    pos_ = close + 1;
    return true;
  }
  // Skips a bracketed value (a structured descr) so we can report it rather than misparse it.
  bool skipNested() {
    int depth = 0;
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (c == '\'' || c == '"') {
        std::string ignored;
        if (!parseString(ignored)) return false;
        continue;
      }
      if (c == '[' || c == '(') ++depth;
      if (c == ']' || c == ')') {
        if (--depth < 0) return false;
        if (depth == 0) return ++pos_, true;
      }
      if (depth == 0) return false;
      ++pos_;
    }
    return false;
  }
  // "()", "(5,)", "(2, 3)" and "(2, 3,)"; at most 18 digits a dimension, so no overflow.
  bool parseShape(std::vector<int64_t>& shape) {
    if (!eat('(')) return false;
    skipSpace();
    if (eat(')')) return true;
    while (true) {
      skipSpace();
      size_t start = pos_;
      int64_t d = 0;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9' && pos_ - start < 18)
        d = d * 10 + (s_[pos_++] - '0');
      if (pos_ == start || (peek() >= '0' && peek() <= '9')) return false;
      shape.push_back(d);
      skipSpace();
      bool comma = eat(',');
      skipSpace();
      if (eat(')')) return shape.size() > 1 || comma;  // "(5)" is an int, not a tuple
      if (!comma) return false;
    }
  }

  const std::string& s_;
  size_t pos_ = 0;
};

bool parseDType(const std::string& descr, DType& out) {
  if (descr == "<f4")
    out = DType::kF32;
  else if (descr == "<f2")
    out = DType::kF16;
  else if (descr == "<i4")
    out = DType::kI32;
  else if (descr == "<i8")
    out = DType::kI64;
  else
    return false;
  return true;
}

// numpy's name for a simple descr: "<f8" -> "float64", ">i4" -> "big-endian int32".
std::string numpyName(const std::string& descr) {
  if (descr.size() < 3 || std::string("<>|=").find(descr[0]) == std::string::npos) return descr;
  for (size_t i = 2; i < descr.size(); ++i)
    if (descr[i] < '0' || descr[i] > '9' || i > 4) return descr;
  int bits = std::stoi(descr.substr(2)) * 8;
  std::string kind;
  switch (descr[1]) {
    case 'f': kind = "float"; break;
    case 'i': kind = "int"; break;
    case 'u': kind = "uint"; break;
    case 'c': kind = "complex"; break;
    case 'b': return bits == 8 ? "bool" : descr;
    default: return descr;
  }
  return (descr[0] == '>' && bits > 8 ? "big-endian " : "") + kind + std::to_string(bits);
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
  const uint8_t major = p[6], minor = p[7];
  size_t headerLen, headerStart;
  if (major == 1 && minor == 0) {
    headerLen = p[8] | (p[9] << 8);
    headerStart = 10;
  } else if ((major == 2 || major == 3) && minor == 0) {
    if (size < 12) return bad("too short");
    headerLen = p[8] | (p[9] << 8) | (size_t(p[10]) << 16) | (size_t(p[11]) << 24);
    headerStart = 12;
  } else {
    return bad("unsupported format version " + std::to_string(major) + "." + std::to_string(minor));
  }
  if (headerLen > size - headerStart) return bad("truncated header");
  std::string text(reinterpret_cast<const char*>(p + headerStart), headerLen);
  Header header;
  std::string error = HeaderParser(text).parse(header);
  if (!error.empty()) return bad(error);
  if (header.structured)
    return Status::InvalidInput(path + ": structured dtypes are not supported; " + kSupported);
  if (!parseDType(header.descr, array.dtype_))
    return Status::InvalidInput(path + ": dtype " + numpyName(header.descr) + " ('" + header.descr +
                                "') is not supported; " + kSupported);
  if (header.fortranOrder)
    return Status::InvalidInput(path +
                                ": Fortran-order arrays are not supported; save a C-order array");
  array.shape_ = std::move(header.shape);
  size_t count = 1;
  for (int64_t d : array.shape_) {
    if (d > 0 && count > (SIZE_MAX / 16) / static_cast<size_t>(d)) return bad("shape too large");
    count *= static_cast<size_t>(d);
  }
  const size_t dataStart = headerStart + headerLen;
  array.bytes_ = count * dtypeSize(array.dtype_);
  if (array.bytes_ > size - dataStart)
    return Status::InvalidInput(path + " is truncated: the header promises " +
                                std::to_string(array.bytes_) + " data bytes, the file has " +
                                std::to_string(size - dataStart));
  array.data_ = p + dataStart;
  return array;
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
    if (d < 0) return Status::Internal("writing " + path + ": negative dimension in shape");
    shapeText += std::to_string(d) + ",";
    count *= static_cast<size_t>(d);
  }
  if (shape.size() > 1) shapeText.pop_back();
  shapeText += ")";
  std::string header = std::string("{'descr': '") + descr +
                       "', 'fortran_order': False, 'shape': " + shapeText + ", }";
  // Pad so the data starts on a 64-byte boundary, newline-terminated, as NumPy does.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  if (header.size() > 0xffff)  // version 1.0 stores the length in 16 bits
    return Status::Internal("writing " + path + ": rank " + std::to_string(shape.size()) +
                            " is too high for a .npy header");
  std::string file(kMagic, 6);
  file += '\x01';
  file += '\x00';
  file += static_cast<char>(header.size() & 0xff);
  file += static_cast<char>((header.size() >> 8) & 0xff);
  file += header;
  if (count) file.append(static_cast<const char*>(data), count * dtypeSize(dtype));
  return writeFileAtomically(path, file.data(), file.size());
}

}  // namespace dtc::io
