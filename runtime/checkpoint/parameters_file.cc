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

// The shape a parameter's external tensor has in a file: the parameter's, less its first
// dimension for a slice, the last two swapped where transposed.
std::vector<int64_t> externalShape(const std::vector<int64_t>& whole,
                                   const plan::ExternalTensor& e) {
  std::vector<int64_t> shape = whole;
  if (e.index() >= 0 && !shape.empty()) shape.erase(shape.begin());
  if (e.transposed() && shape.size() >= 2)
    std::swap(shape[shape.size() - 1], shape[shape.size() - 2]);
  return shape;
}

// What the file holds of one parameter: its entries under its name or its aliases (a tied
// weight may be there under several), or else one entry for each of its external tensors.
struct Match {
  std::vector<const io::TensorEntry*> named;
  std::vector<const io::TensorEntry*> external;  // by the plan's order of its external tensors
};
using Entries = std::map<std::string, Match>;

// Entries a loader leaves alone: BatchNorm's num_batches_tracked beside a running_mean the
// plan has (dtc does not keep it), and the rotary frequencies older transformers saved.
bool ignored(const std::string& name,
             const std::map<std::string, const plan::StateTensor*>& params) {
  const std::string tracked = ".num_batches_tracked";
  if (endsWith(name, tracked) &&
      params.count(name.substr(0, name.size() - tracked.size()) + ".running_mean"))
    return true;
  return endsWith(name, ".rotary_emb.inv_freq");
}

StatusOr<Entries> matchFile(const Plan& plan, const std::vector<io::TensorEntry>& entries,
                            const std::string& path) {
  auto params = parametersOf(plan);
  std::map<std::string, std::string> canonical;  // every accepted name -> the parameter
  std::map<std::string, std::pair<std::string, size_t>> externalOf;  // -> (parameter, part)
  for (const auto& [name, s] : params) {
    canonical[name] = name;
    if (s->aliases())
      for (const flatbuffers::String* alias : *s->aliases()) canonical[alias->str()] = name;
    if (s->external())
      for (size_t k = 0; k < s->external()->size(); ++k)
        externalOf[s->external()->Get(k)->name()->str()] = {name, k};
  }
  Entries found;
  std::vector<std::string> unexpected, misshaped, missing, conflicting;
  std::set<std::string> misshapedParameters;
  auto usable = [&](const io::TensorEntry& e, const plan::StateTensor& s,
                    const std::vector<int64_t>& shape, const std::string& parameter) {
    if (e.shape == shape && widensToF32(e.dtype) && s.dtype() == plan::DType::f32) return true;
    misshaped.push_back(e.name + " " + dtypeName(e.dtype) + shapeText(e.shape) +
                        " (plan: " + dtypeName(toDType(s.dtype())) + shapeText(shape) + ")");
    misshapedParameters.insert(parameter);
    return false;
  };
  for (const io::TensorEntry& e : entries) {
    if (auto it = externalOf.find(e.name); it != externalOf.end()) {
      const auto& [parameter, part] = it->second;
      const plan::StateTensor& s = *params.at(parameter);
      if (!usable(e, s, externalShape(wholeShape(s), *s.external()->Get(part)), parameter))
        continue;
      Match& match = found[parameter];
      match.external.resize(s.external()->size(), nullptr);
      match.external[part] = &e;
      continue;
    }
    auto it = canonical.find(e.name);
    if (it == canonical.end()) {
      if (!ignored(e.name, params)) unexpected.push_back(e.name);
      continue;
    }
    const plan::StateTensor& s = *params.at(it->second);
    if (!usable(e, s, wholeShape(s), it->second)) continue;
    std::vector<const io::TensorEntry*>& named = found[it->second].named;
    if (!named.empty() && named.front()->dtype != e.dtype) conflicting.push_back(e.name);
    named.push_back(&e);
  }
  for (const auto& [name, s] : params) {
    if (misshapedParameters.count(name)) continue;
    auto it = found.find(name);
    Match* match = it == found.end() ? nullptr : &it->second;
    if (match && !match->named.empty()) {
      match->external.clear();  // its own name wins over its parts
      continue;
    }
    const size_t parts = s->external() ? s->external()->size() : 0;
    if (parts == 0 || !match) {
      missing.push_back(parts ? name + " (or " + s->external()->Get(0)->name()->str() + " ...)"
                              : name);
      continue;
    }
    for (size_t k = 0; k < parts; ++k)
      if (!match->external[k]) missing.push_back(s->external()->Get(k)->name()->str());
  }
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

namespace {

// Rows [first, last) of parameter `s`'s first dimension (all of a scalar) as float32, into
// `out`: from its own entry, or assembled from its external tensors.
Status readRows(const Source& file, const plan::StateTensor& s, const Match& match, int64_t first,
                int64_t last, std::vector<uint8_t>& out) {
  const std::vector<int64_t> whole = wholeShape(s);
  const int64_t rowElements =
      whole.empty() ? 1 : wholeBox(whole).elements() / std::max<int64_t>(whole[0], 1);
  const int64_t count = (last - first) * rowElements;
  out.assign(static_cast<size_t>(count) * sizeof(float), 0);
  float* rows = reinterpret_cast<float*>(out.data());
  if (!match.named.empty()) {
    const io::TensorEntry& entry = *match.named.front();
    const size_t fileElement = dtypeSize(entry.dtype);
    io::TensorEntry part = entry;
    part.begin += static_cast<uint64_t>(first * rowElements) * fileElement;
    part.bytes = static_cast<uint64_t>(count) * fileElement;
    DTC_RETURN_IF_ERROR(file.read(entry, out.data(), &part));
    widen(out.data(), entry.dtype, count, rows);
    return Status::Ok();
  }
  // External tensors: each read whole, widened, and put in place (transposed back where the
  // file holds its last two dimensions swapped).
  std::vector<uint8_t> buffer;
  for (size_t k = 0; k < match.external.size(); ++k) {
    const plan::ExternalTensor& e = *s.external()->Get(k);
    const int64_t index = e.index();
    if (index >= 0 && (index < first || index >= last)) continue;
    const io::TensorEntry& entry = *match.external[k];
    const int64_t n = wholeBox(entry.shape).elements();
    buffer.resize(static_cast<size_t>(n) * sizeof(float));
    DTC_RETURN_IF_ERROR(file.read(entry, buffer.data()));
    float* values = reinterpret_cast<float*>(buffer.data());
    widen(buffer.data(), entry.dtype, n, values);
    // Where its values go: row index - first, or (unsliced) the rows asked for of the whole.
    const int64_t offset = index >= 0 ? (index - first) * rowElements : 0;
    const int64_t skip = index >= 0 ? 0 : first * rowElements;
    const size_t rank = entry.shape.size();
    const int64_t a = e.transposed() ? entry.shape[rank - 2] : 1;
    const int64_t b = e.transposed() ? entry.shape[rank - 1] : n;
    const int64_t matrices = n / std::max<int64_t>(a * b, 1);
    for (int64_t m = 0; m < matrices; ++m)
      for (int64_t i = 0; i < a; ++i)
        for (int64_t j = 0; j < b; ++j) {
          // File element [m, i, j] is the parameter's [m, j, i] (or itself, untransposed).
          const int64_t at = m * a * b + (e.transposed() ? j * a + i : i * b + j);
          const int64_t dst = offset + at - skip;
          if (dst >= 0 && dst < count) rows[dst] = values[m * a * b + i * b + j];
        }
  }
  return Status::Ok();
}

}  // namespace

Status loadParametersFile(Executor& ex, const std::string& path) {
  DTC_ASSIGN_OR_RETURN(Source file, openSource(ex.plan(), path));
  DTC_ASSIGN_OR_RETURN(auto found, matchFile(ex.plan(), file.entries, path));
  std::vector<uint8_t> buffer, other;
  for (const plan::StateTensor* s : *ex.plan().root().state()) {
    if (s->role() != plan::Role::param || s->constant() || !Plan::onStage(s->stage(), ex.stage()))
      continue;
    const std::string name = s->name()->str();
    const Match& match = found.at(name);
    // Tied names both present: their values must agree too.
    for (size_t k = 1; k < match.named.size(); ++k) {
      const io::TensorEntry& entry = *match.named.front();
      buffer.resize(entry.bytes);
      other.resize(match.named[k]->bytes);
      DTC_RETURN_IF_ERROR(file.read(entry, buffer.data()));
      DTC_RETURN_IF_ERROR(file.read(*match.named[k], other.data()));
      if (buffer != other)
        return Status::InvalidInput(path + ": '" + entry.name + "' and '" + match.named[k]->name +
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
    DTC_RETURN_IF_ERROR(readRows(file, *s, match, first, last, buffer));
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
