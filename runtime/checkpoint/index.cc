#include "checkpoint/index.h"

#include <algorithm>

#include "io/safetensors.h"
#include "support/printable.h"

namespace dtc::checkpoint {
namespace {

// The most elements of a dimension, and of a tensor, an index may describe (as plans allow).
constexpr int64_t kMaxExtent = int64_t{1} << 40;

io::Json ints(const std::vector<int64_t>& v) {
  io::Json a{io::Json::Array{}};
  for (int64_t x : v) a.push(x);
  return a;
}

// Reading: each accessor checks the type and records the first problem.
class Reader {
 public:
  explicit Reader(std::string path) : path_(std::move(path)) {}
  Status status() const {
    return error_.empty() ? Status::Ok() : Status::InvalidInput(path_ + ": " + error_);
  }
  bool failed() const { return !error_.empty(); }
  void fail(const std::string& what) {
    if (error_.empty()) error_ = what;
  }
  const io::Json* member(const io::Json& obj, const char* key, io::Json::Type type,
                         const std::string& where) {
    const io::Json* v = obj.find(key);
    if (!v || v->type() != type) {
      fail(where + " has no valid \"" + key + "\"");
      return nullptr;
    }
    return v;
  }
  int64_t integer(const io::Json& obj, const char* key, const std::string& where, int64_t min = 0) {
    const io::Json* v = obj.find(key);
    if (!v || !v->isInteger() || v->asInt() < min) {
      fail(where + " has no valid \"" + key + "\"");
      return 0;
    }
    return v->asInt();
  }
  std::string string(const io::Json& obj, const char* key, const std::string& where) {
    const io::Json* v = member(obj, key, io::Json::Type::kString, where);
    return v ? v->asString() : "";
  }
  std::vector<int64_t> dims(const io::Json& obj, const char* key, const std::string& where) {
    std::vector<int64_t> out;
    const io::Json* v = member(obj, key, io::Json::Type::kArray, where);
    if (!v) return out;
    for (const io::Json& d : v->asArray()) {
      if (!d.isInteger() || d.asInt() < 0 || d.asInt() > kMaxExtent) {
        fail(where + " has a malformed \"" + key + "\"");
        return {};
      }
      out.push_back(d.asInt());
    }
    return out;
  }

 private:
  std::string path_, error_;
};

}  // namespace

const TensorRecord* CheckpointIndex::find(const std::string& name) const {
  for (const TensorRecord& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

io::Json indexToJson(const CheckpointIndex& index) {
  io::Json root = io::Json::object();
  root.set("format", kIndexFormat);
  root.set("version", kIndexVersion);
  root.set("plan", index.plan);
  root.set("mesh", index.mesh);
  io::Json progress = io::Json::object();
  progress.set("step", index.progress.step);
  progress.set("seed", static_cast<int64_t>(index.progress.seed));
  progress.set("samples_per_step", index.progress.samplesPerStep);
  progress.set("data", index.progress.data);
  root.set("progress", std::move(progress));
  io::Json files{io::Json::Array{}};
  for (const FileRecord& f : index.files) {
    io::Json e = io::Json::object();
    e.set("name", f.name);
    e.set("rank", f.rank);
    e.set("bytes", f.bytes);
    e.set("crc32", f.crc32);
    files.push(std::move(e));
  }
  root.set("files", std::move(files));
  io::Json tensors = io::Json::object();
  for (const TensorRecord& t : index.tensors) {
    io::Json e = io::Json::object();
    e.set("dtype", io::safetensorsDTypeName(t.dtype));
    e.set("shape", ints(t.shape));
    e.set("role", t.role);
    io::Json slices{io::Json::Array{}};
    for (const SliceRecord& s : t.slices) {
      io::Json r = io::Json::object();
      r.set("file", s.file);
      r.set("key", s.key);
      r.set("offsets", ints(s.box.offsets));
      r.set("shape", ints(s.box.sizes));
      r.set("crc32", s.crc32);
      slices.push(std::move(r));
    }
    e.set("slices", std::move(slices));
    tensors.set(t.name, std::move(e));
  }
  root.set("tensors", std::move(tensors));
  return root;
}

StatusOr<CheckpointIndex> parseIndex(std::string_view text, const std::string& path) {
  auto parsed = io::parseJson(text);
  if (!parsed.ok())
    return Status::InvalidInput(path + " is not valid JSON: " + parsed.status().message());
  const io::Json& root = *parsed;
  Reader r(path);
  if (!root.isObject()) return Status::InvalidInput(path + " is not a JSON object");
  const io::Json* format = root.find("format");
  if (!format || !format->isString() || format->asString() != kIndexFormat)
    return Status::InvalidInput(path + " is not a dtc checkpoint index (no \"format\": \"" +
                                std::string(kIndexFormat) + "\")");
  int64_t version = r.integer(root, "version", "the index");
  if (!r.failed() && version != kIndexVersion)
    return Status::InvalidInput(path + " has index version " + std::to_string(version) +
                                "; this dtrun reads version " + std::to_string(kIndexVersion));
  CheckpointIndex index;
  index.plan = r.string(root, "plan", "the index");
  index.mesh = r.string(root, "mesh", "the index");
  if (const io::Json* p = r.member(root, "progress", io::Json::Type::kObject, "the index")) {
    index.progress.step = r.integer(*p, "step", "\"progress\"");
    index.progress.seed = static_cast<uint64_t>(r.integer(*p, "seed", "\"progress\"", INT64_MIN));
    index.progress.samplesPerStep = r.integer(*p, "samples_per_step", "\"progress\"", 1);
    if (const io::Json* d = r.member(*p, "data", io::Json::Type::kObject, "\"progress\""))
      index.progress.data = *d;
  }
  if (const io::Json* files = r.member(root, "files", io::Json::Type::kArray, "the index"))
    for (const io::Json& f : files->asArray()) {
      std::string where = "file entry " + std::to_string(index.files.size());
      if (!f.isObject()) {
        r.fail(where + " is not an object");
        break;
      }
      FileRecord rec;
      rec.name = r.string(f, "name", where);
      rec.rank = static_cast<int>(r.integer(f, "rank", where));
      rec.bytes = static_cast<uint64_t>(r.integer(f, "bytes", where));
      rec.crc32 = static_cast<uint32_t>(r.integer(f, "crc32", where));
      if (rec.name.empty() || rec.name.find('/') != std::string::npos || rec.name[0] == '.')
        r.fail(where + " names a file outside the checkpoint: '" + printable(rec.name) + "'");
      index.files.push_back(std::move(rec));
    }
  if (const io::Json* tensors = r.member(root, "tensors", io::Json::Type::kObject, "the index"))
    for (const auto& [name, t] : tensors->members()) {
      std::string where = "tensor '" + printable(name) + "'";
      if (!t.isObject()) {
        r.fail(where + " is not an object");
        break;
      }
      TensorRecord rec;
      rec.name = name;
      if (!io::parseSafetensorsDType(r.string(t, "dtype", where), rec.dtype))
        r.fail(where + " has an unknown dtype");
      rec.shape = r.dims(t, "shape", where);
      int64_t elements = 1;
      for (int64_t d : rec.shape)
        if (d > 0 && elements > kMaxExtent / d) {
          r.fail(where + " has more than 2^40 elements");
          break;
        } else {
          elements *= d;
        }
      if (r.failed()) break;
      rec.role = r.string(t, "role", where);
      const io::Json* slices = r.member(t, "slices", io::Json::Type::kArray, where);
      int64_t covered = 0;
      if (slices)
        for (const io::Json& s : slices->asArray()) {
          std::string at = where + " slice " + std::to_string(rec.slices.size());
          if (!s.isObject()) {
            r.fail(at + " is not an object");
            break;
          }
          SliceRecord slice;
          slice.file = static_cast<int>(r.integer(s, "file", at));
          slice.key = r.string(s, "key", at);
          slice.box.offsets = r.dims(s, "offsets", at);
          slice.box.sizes = r.dims(s, "shape", at);
          slice.crc32 = static_cast<uint32_t>(r.integer(s, "crc32", at));
          if (r.failed()) break;
          if (slice.file < 0 || slice.file >= static_cast<int>(index.files.size()))
            r.fail(at + " names no listed file");
          bool inside = slice.box.offsets.size() == rec.shape.size() &&
                        slice.box.sizes.size() == rec.shape.size();
          // Each at most 2^40 (dims): the sums do not overflow.
          for (size_t d = 0; inside && d < rec.shape.size(); ++d)
            inside = slice.box.offsets[d] + slice.box.sizes[d] <= rec.shape[d];
          if (!inside) {
            r.fail(at + " " + boxText(slice.box) + " lies outside the tensor");
            break;
          }
          for (const SliceRecord& other : rec.slices) {
            Box common;
            if (intersect(other.box, slice.box, common))
              r.fail(where + ": slices " + boxText(other.box) + " and " + boxText(slice.box) +
                     " overlap");
          }
          covered += slice.box.elements();
          rec.slices.push_back(std::move(slice));
        }
      // Disjoint boxes inside the tensor whose volumes add up to it cover it exactly.
      if (!r.failed() && covered != wholeBox(rec.shape).elements())
        r.fail(where + ": its slices cover " + std::to_string(covered) + " of " +
               std::to_string(wholeBox(rec.shape).elements()) + " elements");
      index.tensors.push_back(std::move(rec));
      if (r.failed()) break;
    }
  DTC_RETURN_IF_ERROR(r.status());
  return index;
}

}  // namespace dtc::checkpoint
