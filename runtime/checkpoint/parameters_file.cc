#include "checkpoint/parameters_file.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "checkpoint/boxes.h"
#include "checkpoint/hf_folder.h"
#include "exec/shard_layout.h"
#include "io/files.h"
#include "io/safetensors.h"
#include "support/half.h"
#include "support/printable.h"

namespace dtc::checkpoint {
namespace {

bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool widensToF32(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }

// Each parameter of the plan (its first entry: a pipeline lists every stage's) by its name.
std::map<std::string, const plan::StateTensor*> parametersOf(const Plan& plan) {
  std::map<std::string, const plan::StateTensor*> params;
  for (const plan::StateTensor* s : *plan.root().state())
    if (s->role() == plan::Role::param && !s->constant()) params.emplace(s->name()->str(), s);
  return params;
}

std::vector<int64_t> wholeShape(const plan::StateTensor& s) {
  const auto* shape = s.global_shape() ? s.global_shape() : s.shape();
  return {shape->begin(), shape->end()};
}

// The file's entries for each parameter of the plan, under its name or its aliases (a tied
// weight may be there under several).
using Entries = std::map<std::string, std::vector<const io::TensorEntry*>>;
StatusOr<Entries> matchFile(const Plan& plan, const std::vector<io::TensorEntry>& entries,
                            const std::string& path) {
  auto params = parametersOf(plan);
  std::map<std::string, std::string> canonical;  // every accepted name -> the parameter
  for (const auto& [name, s] : params) {
    canonical[name] = name;
    if (s->aliases())
      for (const flatbuffers::String* alias : *s->aliases()) canonical[alias->str()] = name;
  }
  Entries found;
  std::vector<std::string> unexpected, misshaped, missing, conflicting;
  std::set<std::string> misshapedParameters;
  for (const io::TensorEntry& e : entries) {
    auto it = canonical.find(e.name);
    if (it == canonical.end()) {
      const std::string stem =
          e.name.substr(0, e.name.size() - std::string("num_batches_tracked").size());
      if (!(endsWith(e.name, ".num_batches_tracked") && params.count(stem + "running_mean")))
        unexpected.push_back(e.name);
      continue;
    }
    const plan::StateTensor& s = *params.at(it->second);
    if (e.shape != wholeShape(s) || !widensToF32(e.dtype) || s.dtype() != plan::DType::f32) {
      misshaped.push_back(e.name + " " + dtypeName(e.dtype) + shapeText(e.shape) + " (plan: " +
                          dtypeName(toDType(s.dtype())) + shapeText(wholeShape(s)) + ")");
      misshapedParameters.insert(it->second);
      continue;
    }
    std::vector<const io::TensorEntry*>& entries = found[it->second];
    if (!entries.empty() && entries.front()->dtype != e.dtype) conflicting.push_back(e.name);
    entries.push_back(&e);
  }
  for (const auto& [name, s] : params)
    if (!found.count(name) && !misshapedParameters.count(name)) missing.push_back(name);
  if (unexpected.empty() && misshaped.empty() && missing.empty() && conflicting.empty())
    return found;
  std::string message = path + " does not match the plan's parameters:";
  if (!missing.empty()) message += " missing " + nameList(missing) + ";";
  if (!unexpected.empty()) message += " unexpected " + nameList(unexpected) + ";";
  if (!misshaped.empty()) message += " mis-shaped " + nameList(misshaped) + ";";
  if (!conflicting.empty())
    message += " tied names of different dtypes " + nameList(conflicting) + ";";
  message.pop_back();
  return Status::InvalidInput(message);
}

// `count` values of `dtype` as float32.
void widen(const uint8_t* src, DType dtype, int64_t count, float* dst) {
  if (dtype == DType::kF32) {
    std::memmove(dst, src, static_cast<size_t>(count) * sizeof(float));
    return;
  }
  const uint16_t* h = reinterpret_cast<const uint16_t*>(src);
  // Backwards, so the buffer can widen in place.
  for (int64_t i = count - 1; i >= 0; --i)
    dst[i] = dtype == DType::kBF16 ? bf16ToF32(h[i]) : f16ToF32(h[i]);
}

// The tensors of a parameters file, or of a Hugging Face folder's weight files, as one list.
struct Source {
  std::vector<io::SafetensorsReader> files;
  std::vector<io::TensorEntry> entries;
  std::vector<size_t> fileOf;  // entries[i] is in files[fileOf[i]]

  // `e`'s bytes, or those of `part` (a copy of `e` narrowed to some of its rows).
  Status read(const io::TensorEntry& e, void* dst, const io::TensorEntry* part = nullptr) const {
    return files[fileOf[&e - entries.data()]].read(part ? *part : e, dst);
  }
};

// `path`: a safetensors file, or a Hugging Face model folder (its config.json checked against
// the plan's model where the plan carries one).
StatusOr<Source> openSource(const Plan& plan, const std::string& path) {
  Source source;
  std::vector<WeightFile> files = {{path, {}}};
  if (io::isDirectory(path)) {
    const flatbuffers::String* config = plan.root().hf_config();
    DTC_RETURN_IF_ERROR(checkHfConfig(config ? config->str() : "", path));
    DTC_ASSIGN_OR_RETURN(files, hfWeightFiles(path));
  }
  for (const WeightFile& f : files) {
    DTC_ASSIGN_OR_RETURN(io::SafetensorsReader reader, io::SafetensorsReader::open(f.path));
    std::set<std::string> held;
    for (const io::TensorEntry& e : reader.header().entries) {
      if (!f.names.empty() && !f.names.count(e.name)) continue;  // the index puts it elsewhere
      held.insert(e.name);
      source.entries.push_back(e);
      source.fileOf.push_back(source.files.size());
    }
    for (const std::string& name : f.names)
      if (!held.count(name))
        return Status::InvalidInput(f.path + ": no tensor '" + name +
                                    "', which the folder's index says it holds");
    source.files.push_back(std::move(reader));
  }
  return source;
}

}  // namespace

Status checkParametersFile(const Plan& plan, const std::string& path) {
  DTC_ASSIGN_OR_RETURN(Source source, openSource(plan, path));
  return matchFile(plan, source.entries, path).status();
}

Status loadParametersFile(Executor& ex, const std::string& path) {
  DTC_ASSIGN_OR_RETURN(Source file, openSource(ex.plan(), path));
  DTC_ASSIGN_OR_RETURN(auto found, matchFile(ex.plan(), file.entries, path));
  std::vector<uint8_t> buffer, other;
  for (const plan::StateTensor* s : *ex.plan().root().state()) {
    if (s->role() != plan::Role::param || s->constant() || !Plan::onStage(s->stage(), ex.stage()))
      continue;
    const std::string name = s->name()->str();
    const std::vector<const io::TensorEntry*>& entries = found.at(name);
    const io::TensorEntry& entry = *entries.front();
    // Tied names both present: their values must agree too.
    for (size_t k = 1; k < entries.size(); ++k) {
      buffer.resize(entry.bytes);
      other.resize(entries[k]->bytes);
      DTC_RETURN_IF_ERROR(file.read(entry, buffer.data()));
      DTC_RETURN_IF_ERROR(file.read(*entries[k], other.data()));
      if (buffer != other)
        return Status::InvalidInput(path + ": '" + entry.name + "' and '" + entries[k]->name +
                                    "' name one tied tensor but hold different values");
    }
    const std::vector<int64_t> whole = wholeShape(*s);
    TensorView local = ex.state(name);
    std::vector<Piece> pieces = piecesOf(whole, cutsOf(s->sharding(), whole.size(), ex.mesh()));
    // Rows [first, last) of the leading dimension cover every piece: read those only.
    int64_t first = whole.empty() ? 0 : whole[0], last = 0;
    for (const Piece& p : pieces)
      if (!whole.empty()) {
        first = std::min(first, p.global.offsets[0]);
        last = std::max(last, p.global.offsets[0] + p.global.sizes[0]);
      }
    if (whole.empty()) first = 0, last = 1;
    const int64_t rowElements =
        whole.empty() ? 1 : wholeBox(whole).elements() / std::max<int64_t>(whole[0], 1);
    const int64_t count = (last - first) * rowElements;
    const size_t fileElement = dtypeSize(entry.dtype);
    buffer.assign(static_cast<size_t>(count) * sizeof(float), 0);
    io::TensorEntry rows = entry;
    rows.begin += static_cast<uint64_t>(first * rowElements) * fileElement;
    rows.bytes = static_cast<uint64_t>(count) * fileElement;
    DTC_RETURN_IF_ERROR(file.read(entry, buffer.data(), &rows));
    widen(buffer.data(), entry.dtype, count, reinterpret_cast<float*>(buffer.data()));
    Placed src{whole, std::vector<int64_t>(whole.size(), 0)};
    if (!whole.empty()) src.shape[0] = last - first, src.origin[0] = first;
    for (const Piece& p : pieces) {
      Placed dst{local.shape, {}};
      for (size_t d = 0; d < whole.size(); ++d)
        dst.origin.push_back(p.global.offsets[d] - p.localOffsets[d]);
      copyRegion(buffer.data(), src, local.data, dst, p.global, sizeof(float));
    }
  }
  return ex.pushState();
}

}  // namespace dtc::checkpoint
