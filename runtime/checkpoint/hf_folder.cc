#include "checkpoint/hf_folder.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>

#include "io/files.h"
#include "io/hf_config_keys.h"
#include "io/json.h"
#include "support/printable.h"

namespace dtc::checkpoint {
namespace {

constexpr const char* kWeights = "model.safetensors";
constexpr const char* kIndex = "model.safetensors.index.json";
constexpr const char* kConfig = "config.json";
// A config or an index of tens of thousands of tensors is well under this; a file over it is
// not one.
constexpr uint64_t kMaxJsonBytes = uint64_t{64} << 20;

StatusOr<io::Json> parseJsonObject(std::string_view text, const std::string& path) {
  auto parsed = io::parseJson(text);
  if (!parsed.ok()) return Status::InvalidInput(path + ": " + parsed.status().message());
  if (!parsed->isObject()) return Status::InvalidInput(path + ": not a JSON object");
  return parsed;
}

StatusOr<std::string> readJsonText(const std::string& path) {
  return io::readSmallFile(path, kMaxJsonBytes);
}

// A value of the file, for a one-line message.
std::string shown(const io::Json& v) { return printable(v.isString() ? v.asString() : v.dump()); }

bool same(const io::Json& a, const io::Json& b) {
  if (a.isNumber() && b.isNumber()) return a.asDouble() == b.asDouble();
  return a == b;
}

// "model-00002-of-00005.safetensors", as hfWeightFileName names a shard.
bool isShardName(const std::string& name) {
  const std::string pattern = "model-#####-of-#####.safetensors";
  if (name.size() != pattern.size()) return false;
  for (size_t i = 0; i < name.size(); ++i)
    if (pattern[i] == '#' ? !std::isdigit(static_cast<unsigned char>(name[i]))
                          : name[i] != pattern[i])
      return false;
  return true;
}

// "model.safetensors.tmp.1234": what a save that died midway left (files are written under
// such a name, then renamed).
bool isLeftover(const std::string& name) {
  const size_t tmp = name.rfind(".tmp.");
  if (tmp == std::string::npos || tmp + 5 == name.size()) return false;
  const std::string file = name.substr(0, tmp);
  if (file != kWeights && file != kIndex && !isShardName(file)) return false;
  for (size_t i = tmp + 5; i < name.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return false;
  return true;
}

}  // namespace

StatusOr<std::vector<WeightFile>> hfWeightFiles(const std::string& dir) {
  const std::string index = dir + "/" + kIndex;
  if (!io::isRegularFile(index)) {
    if (!io::isRegularFile(dir + "/" + kWeights))
      return Status::InvalidInput(dir + ": a Hugging Face model folder holds " + kWeights + " or " +
                                  kIndex + "; this one has neither");
    return std::vector<WeightFile>{{dir + "/" + kWeights, {}}};
  }
  DTC_ASSIGN_OR_RETURN(std::string text, readJsonText(index));
  DTC_ASSIGN_OR_RETURN(auto byFile, parseHfWeightMap(text, index));
  std::vector<WeightFile> files;
  for (auto& [file, names] : byFile) {
    const std::string path = dir + "/" + file;
    if (!io::isRegularFile(path))
      return Status::InvalidInput(path + ": missing (" + index + " maps " +
                                  std::to_string(names.size()) + " tensors to it, e.g. '" +
                                  *names.begin() + "')");
    files.push_back({path, std::move(names)});
  }
  return files;
}

StatusOr<std::map<std::string, std::set<std::string>>> parseHfWeightMap(std::string_view text,
                                                                        const std::string& path) {
  DTC_ASSIGN_OR_RETURN(io::Json json, parseJsonObject(text, path));
  const io::Json* map = json.find("weight_map");
  if (!map || !map->isObject() || map->size() == 0)
    return Status::InvalidInput(path + ": no weight_map naming each tensor's file");
  std::map<std::string, std::set<std::string>> byFile;
  for (const auto& [tensor, file] : map->members()) {
    if (!file.isString() || file.asString().empty() ||
        file.asString().find('/') != std::string::npos || file.asString()[0] == '.')
      return Status::InvalidInput(path + ": tensor '" + printable(tensor) +
                                  "' maps to no file name in the folder");
    byFile[file.asString()].insert(tensor);
  }
  return byFile;
}

Status checkHfConfig(const std::string& modelConfig, const std::string& dir) {
  if (modelConfig.empty()) return Status::Ok();
  const std::string path = dir + "/" + kConfig;
  // dtrun's own --save folders hold the weights alone: their names and shapes are checked.
  if (!io::isRegularFile(path) && !io::isDirectory(path)) return Status::Ok();
  DTC_ASSIGN_OR_RETURN(std::string text, readJsonText(path));
  return compareHfConfig(modelConfig, text, path);
}

Status compareHfConfig(const std::string& modelConfig, std::string_view text,
                       const std::string& path) {
  if (modelConfig.empty()) return Status::Ok();
  DTC_ASSIGN_OR_RETURN(io::Json theirs, parseJsonObject(text, path));
  auto ours = io::parseJson(modelConfig);
  if (!ours.ok() || !ours->isObject())
    return Status::Internal("the plan's Hugging Face config is not a JSON object");
  for (const auto& [key, value] : ours->members()) {
    if (io::hfSettingLeavesTrainingAlone(key)) continue;
    const io::Json* there = theirs.find(key);
    const io::Json defaultTied(true);
    if (!there && key == "tie_word_embeddings") there = &defaultTied;
    if (!there) continue;  // transformers' default for it
    // Rotary positions past the model's window are never read: a folder may have more.
    if (key == "max_position_embeddings" && there->isNumber() && value.isNumber() &&
        there->asDouble() >= value.asDouble())
      continue;
    if (!same(*there, value))
      return Status::InvalidInput(path + ": " + printable(key) + " is " + shown(*there) +
                                  ", the model's " + shown(value) +
                                  " (dtc compile FOLDER builds the model a folder describes)");
  }
  return Status::Ok();
}

namespace {

// A float as Python's repr writes it: the shortest digits that read back, in fixed notation for
// exponents -4 to 15 (500000.0, 0.0001), else scientific with a two-digit exponent (1e-06).
std::string pythonFloat(double value) {
  char buf[40];
  auto r = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
  std::string sci(buf, r.ptr);  // "-1.2345e+05"
  const size_t e = sci.find('e');
  const int exponent = std::stoi(sci.substr(e + 1));
  std::string digits = sci.substr(0, e);
  const bool negative = digits[0] == '-';
  if (negative) digits.erase(0, 1);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  std::string text;
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      text = "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    } else if (static_cast<size_t>(exponent) + 1 >= digits.size()) {
      text = digits + std::string(exponent + 1 - digits.size(), '0') + ".0";
    } else {
      text = digits.substr(0, exponent + 1) + "." + digits.substr(exponent + 1);
    }
  } else {
    text = digits.substr(0, 1) + (digits.size() > 1 ? "." + digits.substr(1) : "") + "e" +
           (exponent < 0 ? "-" : "+") + (std::abs(exponent) < 10 ? "0" : "") +
           std::to_string(std::abs(exponent));
  }
  return (negative ? "-" : "") + text;
}

// `v` as Python's json.dumps(v, indent=2, sort_keys=True) writes it.
void dumpIndented(const io::Json& v, int depth, std::string& out) {
  const std::string pad(static_cast<size_t>(2 * (depth + 1)), ' ');
  const std::string close(static_cast<size_t>(2 * depth), ' ');
  if (v.isObject() && v.size() > 0) {
    std::vector<const std::pair<std::string, io::Json>*> members;
    for (const auto& m : v.members()) members.push_back(&m);
    std::sort(members.begin(), members.end(),
              [](const auto* a, const auto* b) { return a->first < b->first; });
    out += "{\n";
    for (size_t i = 0; i < members.size(); ++i) {
      out += pad + io::jsonQuote(members[i]->first) + ": ";
      dumpIndented(members[i]->second, depth + 1, out);
      out += i + 1 < members.size() ? ",\n" : "\n";
    }
    out += close + "}";
  } else if (v.isArray() && v.size() > 0) {
    out += "[\n";
    for (size_t i = 0; i < v.size(); ++i) {
      out += pad;
      dumpIndented(v.asArray()[i], depth + 1, out);
      out += i + 1 < v.size() ? ",\n" : "\n";
    }
    out += close + "]";
  } else if (v.isNumber() && !v.isInteger() && std::isfinite(v.asDouble())) {
    out += pythonFloat(v.asDouble());
  } else {
    out += v.dump();
  }
}

}  // namespace

std::string hfTorchDtype(const std::string& modelConfig) {
  auto config = io::parseJson(modelConfig);
  if (!config.ok()) return "";
  const io::Json* dtype = config->find("torch_dtype");
  return dtype && dtype->isString() ? dtype->asString() : "";
}

Status writeHfConfig(const std::string& modelConfig, const std::string& generationConfig,
                     const std::string& torchDtype, const std::string& dir) {
  // dtrun refuses --format hf for such a model before it runs.
  if (modelConfig.empty()) return Status::Internal("no Hugging Face config to write");
  auto config = io::parseJson(modelConfig);
  if (!config.ok() || !config->isObject())
    return Status::Internal("the plan's Hugging Face config is not a JSON object");
  if (!torchDtype.empty()) config->set("torch_dtype", torchDtype);
  std::string text;
  dumpIndented(*config, 0, text);
  text += "\n";
  DTC_RETURN_IF_ERROR(io::writeFileAtomically(dir + "/" + kConfig, text.data(), text.size()));
  if (generationConfig.empty()) return Status::Ok();
  return io::writeFileAtomically(dir + "/generation_config.json", generationConfig.data(),
                                 generationConfig.size());
}

std::vector<size_t> assignHfShards(const std::vector<uint64_t>& groupBytes, uint64_t maxBytes) {
  // The open file's groups wait for its number: a file of one oversized group completes, and is
  // numbered, before the file that was open when it came.
  std::vector<size_t> fileOf(groupBytes.size());
  std::vector<size_t> open;
  uint64_t openBytes = 0;
  size_t files = 0;
  auto close = [&] {
    for (size_t g : open) fileOf[g] = files;
    ++files;
    open.clear();
    openBytes = 0;
  };
  for (size_t g = 0; g < groupBytes.size(); ++g) {
    if (groupBytes[g] > maxBytes) {
      fileOf[g] = files++;
      continue;
    }
    if (!open.empty() && openBytes + groupBytes[g] > maxBytes) close();
    open.push_back(g);
    openBytes += groupBytes[g];
  }
  if (!open.empty()) close();
  return fileOf;
}

std::string hfWeightFileName(size_t index, size_t count) {
  if (count <= 1) return kWeights;
  char name[64];
  std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", index + 1, count);
  return name;
}

Status finishHfWeights(const std::string& dir, size_t fileCount, uint64_t totalBytes,
                       const std::map<std::string, std::string>& weightMap) {
  std::set<std::string> written;
  for (size_t f = 0; f < fileCount; ++f) written.insert(hfWeightFileName(f, fileCount));
  if (fileCount > 1) {
    io::Json metadata = io::Json::object();
    metadata.set("total_size", totalBytes);
    io::Json files = io::Json::object();
    for (const auto& [name, file] : weightMap) files.set(name, file);
    io::Json index = io::Json::object();
    index.set("metadata", std::move(metadata));
    index.set("weight_map", std::move(files));
    const std::string text = index.dump() + "\n";
    DTC_RETURN_IF_ERROR(io::writeFileAtomically(dir + "/" + kIndex, text.data(), text.size()));
    written.insert(kIndex);
  }
  DTC_ASSIGN_OR_RETURN(std::vector<std::string> names, io::listDirectory(dir));
  bool removed = false;
  for (const std::string& name : names) {
    const bool weights = name == kWeights || name == kIndex || isShardName(name);
    if (!isLeftover(name) && (!weights || written.count(name))) continue;
    if (::unlink((dir + "/" + name).c_str()) != 0 && errno != ENOENT)
      return Status::Internal("cannot remove " + dir + "/" + name +
                              " (an earlier save's): " + std::strerror(errno));
    removed = true;
  }
  return removed ? io::syncDirectory(dir) : Status::Ok();
}

}  // namespace dtc::checkpoint
