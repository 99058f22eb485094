#include "io/safetensors.h"

#include <algorithm>

#include "io/json.h"
#include "io/npy.h"

namespace dtc::io {
namespace {

// The reference implementation refuses larger headers; so do we, before allocating anything.
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

constexpr DType kAllDTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kI32, DType::kI64};

bool parseDType(const std::string& name, DType& out) {
  for (DType t : kAllDTypes) {
    if (name == safetensorsDTypeName(t)) {
      out = t;
      return true;
    }
  }
  return false;
}

// product(shape) * elementSize, or false on a negative dimension or overflow.
bool byteSize(const std::vector<int64_t>& shape, size_t elementSize, size_t& out) {
  size_t n = elementSize;
  for (int64_t d : shape) {
    if (d < 0) return false;
    if (d > 0 && n > SIZE_MAX / static_cast<size_t>(d)) return false;
    n *= static_cast<size_t>(d);
  }
  out = n;
  return true;
}

std::string shapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

// Fills `t` (all but data) from one header entry and returns its [begin, end), or an error
// message.
std::string parseEntry(const std::string& name, const Json& entry, TensorRef& t, uint64_t& begin,
                       uint64_t& end) {
  std::string where = "tensor '" + name + "'";
  if (!entry.isObject()) return where + " is not a JSON object";
  const Json* dtype = entry.find("dtype");
  const Json* shape = entry.find("shape");
  const Json* offsets = entry.find("data_offsets");
  if (!dtype || !dtype->isString()) return where + " has no \"dtype\" string";
  if (!shape || !shape->isArray()) return where + " has no \"shape\" array";
  if (!offsets || !offsets->isArray() || offsets->size() != 2)
    return where + " has no \"data_offsets\" pair";
  t.name = name;
  if (!parseDType(dtype->asString(), t.dtype))
    return where + " has dtype " + dtype->asString() +
           ", which is not supported; expected one of F32, F16, BF16, I32, I64";
  for (const Json& d : shape->asArray()) {
    if (!d.isInteger() || d.asInt() < 0) return where + " has a malformed shape " + shape->dump();
    t.shape.push_back(d.asInt());
  }
  const Json& b = offsets->asArray()[0];
  const Json& e = offsets->asArray()[1];
  if (!b.isInteger() || !e.isInteger() || b.asInt() < 0 || e.asInt() < b.asInt())
    return where + " has malformed data_offsets " + offsets->dump();
  begin = static_cast<uint64_t>(b.asInt());
  end = static_cast<uint64_t>(e.asInt());
  if (!byteSize(t.shape, dtypeSize(t.dtype), t.bytes))
    return where + " has a shape too large to address: " + shapeText(t.shape);
  if (t.bytes != end - begin)
    return where + ": shape " + shapeText(t.shape) + " of " + dtype->asString() + " needs " +
           std::to_string(t.bytes) + " bytes, its data_offsets span " +
           std::to_string(end - begin);
  return "";
}

}  // namespace

const char* safetensorsDTypeName(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
    case DType::kI32: return "I32";
    case DType::kI64: return "I64";
  }
  return "?";
}

Status writeSafetensors(const std::string& path, const std::vector<TensorRef>& tensors,
                        const std::map<std::string, std::string>& metadata) {
  std::map<std::string, Json> entries;  // sorted by name, as the header lists them
  size_t offset = 0;
  for (const TensorRef& t : tensors) {
    if (t.name == "__metadata__")
      return Status::Internal("writing " + path + ": '__metadata__' cannot name a tensor");
    size_t expected;
    if (!byteSize(t.shape, dtypeSize(t.dtype), expected) || expected != t.bytes)
      return Status::Internal("writing " + path + ": tensor '" + t.name + "' has shape " +
                              shapeText(t.shape) + " but " + std::to_string(t.bytes) + " bytes");
    Json entry = Json::object();
    entry.set("dtype", safetensorsDTypeName(t.dtype));
    Json shape{Json::Array{}};
    for (int64_t d : t.shape) shape.push(d);
    entry.set("shape", std::move(shape));
    entry.set("data_offsets", Json::Array{Json(offset), Json(offset + t.bytes)});
    if (!entries.emplace(t.name, std::move(entry)).second)
      return Status::Internal("writing " + path + ": duplicate tensor name '" + t.name + "'");
    offset += t.bytes;
  }
  Json header = Json::object();
  if (!metadata.empty()) {
    Json meta = Json::object();
    for (const auto& [k, v] : metadata) meta.set(k, v);
    header.set("__metadata__", std::move(meta));
  }
  for (auto& [name, entry] : entries) header.set(name, std::move(entry));

  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data starts 8-byte aligned
  std::string file(8, '\0');
  const uint64_t len = text.size();
  for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((len >> (8 * i)) & 0xff);
  file.reserve(8 + text.size() + offset);
  file += text;
  for (const TensorRef& t : tensors)
    if (t.bytes) file.append(static_cast<const char*>(t.data), t.bytes);
  return writeFileAtomically(path, file.data(), file.size());
}

StatusOr<SafetensorsFile> SafetensorsFile::read(const std::string& path) {
  SafetensorsFile out;
  DTC_ASSIGN_OR_RETURN(out.file_, MappedFile::open(path));
  auto bad = [&](const std::string& what) {
    return Status::InvalidInput(path + " is not a valid safetensors file: " + what);
  };
  const size_t size = out.file_.size();
  const uint8_t* p = out.file_.data();
  if (size < 8) return bad("shorter than its 8-byte header length");
  uint64_t headerLen = 0;
  for (int i = 0; i < 8; ++i) headerLen |= static_cast<uint64_t>(p[i]) << (8 * i);
  if (headerLen > kMaxHeaderBytes)
    return bad("header length " + std::to_string(headerLen) + " is implausibly large");
  if (headerLen > size - 8)
    return bad("truncated: the header length is " + std::to_string(headerLen) +
               " bytes, the file has " + std::to_string(size - 8) + " after it");
  auto parsed = parseJson(std::string_view(reinterpret_cast<const char*>(p + 8), headerLen));
  if (!parsed.ok()) return bad("header " + parsed.status().message());
  const Json& header = parsed.value();
  if (!header.isObject()) return bad("the header is not a JSON object");

  const uint8_t* dataStart = p + 8 + headerLen;
  const uint64_t dataBytes = size - 8 - headerLen;
  struct Span {
    uint64_t begin, end;
    size_t index;
  };
  std::vector<Span> spans;
  for (const auto& [name, entry] : header.members()) {
    if (name == "__metadata__") {
      if (!entry.isObject()) return bad("__metadata__ is not a JSON object");
      for (const auto& [k, v] : entry.members()) {
        if (!v.isString()) return bad("__metadata__ value for '" + k + "' is not a string");
        out.metadata_[k] = v.asString();
      }
      continue;
    }
    TensorRef t{};
    uint64_t begin, end;
    std::string error = parseEntry(name, entry, t, begin, end);
    if (!error.empty()) return bad(error);
    if (end > dataBytes)
      return bad("tensor '" + name + "' ends at byte " + std::to_string(end) +
                 " of a data section of " + std::to_string(dataBytes) + " (truncated?)");
    t.data = dataStart + begin;
    spans.push_back({begin, end, out.tensors_.size()});
    out.tensors_.push_back(std::move(t));
  }
  // As the reference reader does: the tensors must cover the data section with no holes or
  // overlaps, so no byte is shared or silently ignored.
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t covered = 0;
  for (const Span& s : spans) {
    if (s.begin != covered)
      return bad("tensor '" + out.tensors_[s.index].name + "' starts at byte " +
                 std::to_string(s.begin) + ", expected " + std::to_string(covered) +
                 " (tensors overlap or leave a gap)");
    covered = s.end;
  }
  if (covered != dataBytes)
    return bad("the tensors cover " + std::to_string(covered) + " bytes of a data section of " +
               std::to_string(dataBytes));
  std::sort(out.tensors_.begin(), out.tensors_.end(),
            [](const TensorRef& a, const TensorRef& b) { return a.name < b.name; });
  return out;
}

const TensorRef* SafetensorsFile::find(const std::string& name) const {
  auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                             [](const TensorRef& t, const std::string& n) { return t.name < n; });
  return it != tensors_.end() && it->name == name ? &*it : nullptr;
}

}  // namespace dtc::io
