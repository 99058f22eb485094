#include "hf/HfFolder.h"

#include "hf/Families.h"
#include "io/files.h"
#include "support/printable.h"

namespace dtc::hf {
namespace {

// A config or a generation config is a few kilobytes; a file over this is not one.
constexpr uint64_t kMaxConfigBytes = uint64_t{16} << 20;

StatusOr<io::Json> readObject(const std::string& path) {
  DTC_ASSIGN_OR_RETURN(std::string text, io::readSmallFile(path, kMaxConfigBytes));
  auto json = io::parseJson(text);
  if (!json.ok()) return Status::InvalidInput(path + ": " + json.status().message());
  if (!json->isObject()) return Status::InvalidInput(path + ": not a JSON object");
  return json;
}

}  // namespace

bool isModelFolder(const std::string& path) {
  return io::isDirectory(path) && io::isRegularFile(path + "/config.json");
}

StatusOr<int64_t> trainingWindow(const ConfigReader& c, int64_t requested, int64_t positions,
                                 const char* positionsKey) {
  if (positions <= 0) return c.error(std::string(positionsKey) + " must be positive");
  if (requested < 0) return c.error("--ctx must be positive");
  if (requested > positions)
    return c.error("--ctx " + std::to_string(requested) + " is longer than the model's " +
                   positionsKey + " " + std::to_string(positions));
  return requested ? requested : positions;
}

Status checkArchitecture(ConfigReader& c, const std::string& architecture) {
  const io::Json* list = c.value("architectures");
  if (!list || list->isNull()) return Status::Ok();
  if (!list->isArray()) return c.error("architectures must be a list of class names");
  for (const io::Json& name : list->asArray())
    if (name.isString() && name.asString() == architecture) return Status::Ok();
  return c.error("architectures is " + printable(list->dump()) + ": dtc builds " + architecture +
                 " for model_type " + c.modelType());
}

StatusOr<FolderModel> buildFolderModel(const std::string& dir, const FolderOptions& folder) {
  if (!io::isDirectory(dir)) return Status::InvalidInput(dir + ": not a folder");
  const std::string path = dir + "/config.json";
  if (!io::isRegularFile(path))
    return Status::InvalidInput(dir + ": no config.json (a Hugging Face model folder holds one)");
  DTC_ASSIGN_OR_RETURN(std::string text, io::readSmallFile(path, kMaxConfigBytes));
  DTC_ASSIGN_OR_RETURN(io::Json json, readObject(path));
  zoo::HfTexts texts{text, ""};
  const std::string generation = dir + "/generation_config.json";
  if (io::isRegularFile(generation)) {
    DTC_ASSIGN_OR_RETURN(texts.generationConfig, io::readSmallFile(generation, kMaxConfigBytes));
    DTC_RETURN_IF_ERROR(readObject(generation).status());
  }
  ConfigReader config(std::move(json), path);
  const std::string& type = config.modelType();
  FolderModel model;
  // Builds the family's model with the folder's texts, and says what it is.
  auto build = [&](auto options, auto builder, std::string shape, int64_t positions) -> Status {
    DTC_RETURN_IF_ERROR(config.finish());
    options.seed = folder.seed;
    options.hf = texts;
    model.bytes = builder(options);
    model.ctx = options.ctx;
    model.summary = type + ", " + std::to_string(options.layers) + " layers, width " +
                    std::to_string(options.embd) + ", " + std::to_string(options.heads) + " heads" +
                    shape + ", a window of " + std::to_string(options.ctx) + " of " +
                    std::to_string(positions) + " positions";
    return Status::Ok();
  };
  if (type == "llama" || type == "mistral" || type == "qwen2" || type == "mixtral") {
    DTC_ASSIGN_OR_RETURN(zoo::LlamaOptions o, readLlamaFamily(config, folder.ctx));
    DTC_RETURN_IF_ERROR(
        build(o, zoo::buildLlama,
              " (" + std::to_string(o.kvHeads) + " key/value)" +
                  (o.moe.enabled() ? ", " + std::to_string(o.moe.experts) + " experts" : "") +
                  (o.rope.type != "default" ? ", rope " + o.rope.type : ""),
              o.maxPositions));
  } else if (type == "gpt2") {
    DTC_ASSIGN_OR_RETURN(zoo::GptOptions o, readGpt2(config, folder.ctx));
    DTC_RETURN_IF_ERROR(build(o, zoo::buildGpt, "", o.positions));
  } else if (type.empty()) {
    return config.error("no model_type: which model family it describes is unknown");
  } else {
    return config.error("model_type '" + printable(type) +
                        "' is not one dtc builds from a folder (llama, mistral, qwen2, mixtral, "
                        "gpt2); its ONNX export may train (docs/onnx.md)");
  }
  return model;
}

}  // namespace dtc::hf
