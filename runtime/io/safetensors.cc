#include "io/safetensors.h"

#include <cstdio>
#include <cstring>
#include <set>

#include "io/npy.h"

namespace dtc::io {
namespace {

const char* safetensorsDType(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
    case DType::kI32: return "I32";
    case DType::kI64: return "I64";
  }
  return "F32";
}

std::string jsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

Status writeSafetensors(const std::string& path, const std::vector<TensorRef>& tensors,
                        const std::map<std::string, std::string>& metadata) {
  std::set<std::string> names;
  std::map<std::string, std::string> entries;  // sorted by name, as the header
  size_t offset = 0;
  for (const TensorRef& t : tensors) {
    if (!names.insert(t.name).second)
      return Status::Internal("duplicate tensor name '" + t.name + "' in " + path);
    std::string shape = "[";
    for (size_t i = 0; i < t.shape.size(); ++i) shape += (i ? "," : "") + std::to_string(t.shape[i]);
    shape += "]";
    entries[t.name] = std::string("{\"dtype\":\"") + safetensorsDType(t.dtype) +
                      "\",\"shape\":" + shape + ",\"data_offsets\":[" + std::to_string(offset) +
                      "," + std::to_string(offset + t.bytes) + "]}";
    offset += t.bytes;
  }
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (auto& [k, v] : metadata) {
      header += (first ? "" : ",") + jsonString(k) + ":" + jsonString(v);
      first = false;
    }
    header += "}";
  }
  for (auto& [name, entry] : entries)
    header += (header.size() > 1 ? "," : "") + jsonString(name) + ":" + entry;
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');  // data starts 8-byte aligned

  std::string file(8, '\0');
  uint64_t len = header.size();
  for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((len >> (8 * i)) & 0xff);
  file += header;
  file.reserve(file.size() + offset);
  for (const TensorRef& t : tensors) file.append(static_cast<const char*>(t.data), t.bytes);
  return writeFileAtomically(path, file.data(), file.size());
}

}  // namespace dtc::io
